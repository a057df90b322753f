//! The sandbox of a claimed Run — its snapshot, expiry, profile, mounts and
//! skills — as the runner reads it: the typed `WorkSandbox`, or the JSON
//! text a 0.1.0 sessions service sends in its place (docs/architecture.md,
//! "JSON on the mesh").

use checkfu_proto::runner::v1 as pb;
use checkfu_proto::sessions::v1 as ss;
use serde::Deserialize;
use serde_json::Value;

/// The Run's sandbox; empty when the claim described none.
pub fn of(work: &pb::WorkItem) -> pb::WorkSandbox {
    if let Some(s) = &work.sandbox {
        return s.clone();
    }
    #[allow(deprecated)] // a 0.1.0 service's text
    let text = &work.sandbox_json;
    from_json(&serde_json::from_str(text).unwrap_or(Value::Null))
}

/// A mount as the 0.1.0 text lists it.
#[derive(Deserialize)]
struct TextMount {
    path: String,
    sha256: String,
    size_bytes: u64,
    source: String,
    #[serde(default)]
    file_id: String,
    #[serde(default)]
    media_type: String,
}

fn from_json(v: &Value) -> pb::WorkSandbox {
    let text = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let texts = |v: &Value| v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()).unwrap_or_default();
    let p = &v["profile"];
    let profile = p.is_object().then(|| ss::SandboxSpec {
        image: text(p, "image"),
        packages: texts(&p["packages"]),
        network: Some(ss::SandboxNetwork {
            allowed_hosts: texts(&p["network"]["allowed_hosts"]),
            allow_package_managers: p["network"]["allow_package_managers"].as_bool().unwrap_or(false),
            allow_mcp_servers: p["network"]["allow_mcp_servers"].as_bool().unwrap_or(false),
        }),
        resources: Some(ss::SandboxResources {
            cpu_millis: p["resources"]["cpu_millis"].as_i64(),
            memory_mib: p["resources"]["memory_mib"].as_i64(),
            disk_mib: p["resources"]["disk_mib"].as_i64(),
        }),
        retention_days: p["retention_days"].as_i64(),
        execution: text(p, "execution"),
        ..Default::default()
    });
    let list = |k: &str| v[k].as_array().cloned().unwrap_or_default();
    pb::WorkSandbox {
        snapshot_sha256: text(v, "snapshot_sha256"),
        fresh: v["fresh"].as_bool() == Some(true),
        expires_at_ms: v["expires_at_ms"].as_i64().unwrap_or_default(),
        unenforced: list("unenforced")
            .iter()
            .filter_map(|u| Some(ss::UnenforcedField { field: u["field"].as_str()?.into(), reason: u["reason"].as_str()?.into() }))
            .collect(),
        profile,
        mounts: list("mounts")
            .into_iter()
            .filter_map(|m| serde_json::from_value::<TextMount>(m).ok())
            .map(|m| pb::WorkMount {
                path: m.path,
                sha256: m.sha256,
                size_bytes: m.size_bytes,
                source: m.source,
                file_id: m.file_id,
                media_type: m.media_type,
            })
            .collect(),
        writable_mounts: texts(&v["writable_mounts"]),
        skills: list("skills")
            .iter()
            .map(|s| pb::WorkSkill { name: text(s, "name"), description: text(s, "description"), path: text(s, "path") })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    #[allow(deprecated)]
    fn a_0_1_0_services_text_reads_as_the_typed_sandbox() {
        let text = json!({
            "snapshot_sha256": "abc", "fresh": false, "expires_at_ms": 99,
            "unenforced": [{"field": "packages", "reason": "no"}],
            "profile": {"image": "debian:12", "packages": ["jq"], "resources": {"cpu_millis": 500, "memory_mib": 256, "disk_mib": 1024},
                "network": {"allowed_hosts": ["example.com"], "allow_package_managers": false, "allow_mcp_servers": false},
                "retention_days": 7},
            "mounts": [{"path": "uploads/file_1/a.txt", "sha256": "s", "size_bytes": 3, "source": "uploads", "file_id": "file_1", "media_type": "text/plain"},
                {"path": "skills/x/SKILL.md", "sha256": "t", "size_bytes": 4, "source": "skills"}],
            "writable_mounts": ["memory/notes"],
            "skills": [{"name": "x", "description": "d", "path": "skills/x/SKILL.md"}],
        });
        let w = of(&pb::WorkItem { sandbox_json: text.to_string(), ..Default::default() });
        assert_eq!((w.snapshot_sha256.as_str(), w.fresh, w.expires_at_ms), ("abc", false, 99));
        assert_eq!(w.unenforced[0].field, "packages");
        let p = w.profile.clone().expect("profile");
        assert_eq!((p.image.as_str(), p.packages.len(), p.resources.and_then(|r| r.memory_mib)), ("debian:12", 1, Some(256)));
        assert_eq!((w.mounts.len(), w.mounts[0].file_id.as_str(), w.mounts[1].file_id.as_str()), (2, "file_1", ""));
        assert_eq!((w.writable_mounts.as_slice(), w.skills[0].path.as_str()), (&["memory/notes".to_string()][..], "skills/x/SKILL.md"));
        let typed = of(&pb::WorkItem { sandbox: Some(w.clone()), sandbox_json: "{}".into(), ..Default::default() });
        assert_eq!(typed, w, "the typed sandbox comes first");
        assert_eq!(of(&pb::WorkItem::default()), pb::WorkSandbox::default(), "none described");
    }
}
