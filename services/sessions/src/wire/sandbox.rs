//! A SandboxProfile revision's spec on the mesh, typed (`SandboxSpec`).
//! Until the release after 0.1.0 the JSON text field it replaces is written
//! too, and a 0.1.0 caller's JSON is still read (docs/architecture.md, "JSON
//! on the mesh").

use crate::model::{Network, Resources, SandboxExecution, SandboxSpec, WorkSandbox};
use checkfu_core::{Error, Result};
use checkfu_proto::runner::v1 as rpb;
use checkfu_proto::sessions::v1 as pb;

/// A stored revision's spec: every field set.
pub fn spec(s: &SandboxSpec) -> pb::SandboxSpec {
    pb::SandboxSpec {
        image: s.image.clone(),
        description: s.description.clone(),
        metadata: s.metadata.clone().into_iter().collect(),
        packages: s.packages.clone(),
        network: Some(pb::SandboxNetwork {
            allowed_hosts: s.network.allowed_hosts.clone(),
            allow_package_managers: s.network.allow_package_managers,
            allow_mcp_servers: s.network.allow_mcp_servers,
        }),
        resources: Some(pb::SandboxResources {
            cpu_millis: Some(s.resources.cpu_millis),
            memory_mib: Some(s.resources.memory_mib),
            disk_mib: Some(s.resources.disk_mib),
        }),
        retention_days: Some(s.retention_days),
        execution: match s.execution {
            SandboxExecution::Managed => "managed",
            SandboxExecution::ExternalTools => "external_tools",
        }
        .into(),
    }
}

/// A claimed Run's sandbox as its runner is told it.
pub fn work_sandbox(w: &WorkSandbox) -> rpb::WorkSandbox {
    rpb::WorkSandbox {
        snapshot_sha256: w.snapshot_sha256.clone(),
        fresh: w.fresh,
        expires_at_ms: w.expires_at_ms,
        unenforced: w.unenforced.iter().map(|u| pb::UnenforcedField { field: u.field.clone(), reason: u.reason.clone() }).collect(),
        profile: Some(spec(&w.profile)),
        mounts: w
            .mounts
            .iter()
            .map(|m| rpb::WorkMount {
                path: m.path.clone(),
                sha256: m.sha256.clone(),
                size_bytes: u64::try_from(m.size_bytes).unwrap_or_default(),
                source: m.source.into(),
                file_id: m.file_id.clone().unwrap_or_default(),
                media_type: m.media_type.clone().unwrap_or_default(),
            })
            .collect(),
        writable_mounts: w.writable_mounts.clone(),
        skills: w
            .skills
            .iter()
            .map(|s| rpb::WorkSkill { name: s.name.clone(), description: s.description.clone(), path: s.path.clone() })
            .collect(),
    }
}

/// A requested spec, its absent fields defaulted but not yet checked
/// ([`SandboxSpec::checked`]): the typed one, else a 0.1.0 caller's JSON.
pub fn spec_input(typed: Option<pb::SandboxSpec>, json: &str) -> Result<SandboxSpec> {
    let Some(t) = typed else {
        let v = if json.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(json).map_err(|e| Error::invalid_field("spec", format!("spec is not valid JSON: {e}")))?
        };
        return SandboxSpec::requested(v);
    };
    let defaults = Resources::default();
    let resources = t.resources.unwrap_or_default();
    let network = t.network.unwrap_or_default();
    Ok(SandboxSpec {
        image: t.image,
        description: t.description,
        metadata: t.metadata.into_iter().collect(),
        packages: t.packages,
        network: Network {
            allowed_hosts: network.allowed_hosts,
            allow_package_managers: network.allow_package_managers,
            allow_mcp_servers: network.allow_mcp_servers,
        },
        resources: Resources {
            cpu_millis: resources.cpu_millis.unwrap_or(defaults.cpu_millis),
            memory_mib: resources.memory_mib.unwrap_or(defaults.memory_mib),
            disk_mib: resources.disk_mib.unwrap_or(defaults.disk_mib),
        },
        retention_days: t.retention_days.unwrap_or(crate::model::DEFAULT_RETENTION_DAYS),
        execution: match t.execution.as_str() {
            "" | "managed" => SandboxExecution::Managed,
            "external_tools" => SandboxExecution::ExternalTools,
            other => return Err(Error::invalid_field("execution", format!("execution must be managed or external_tools, not {other:?}"))),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_spec_reads_back_typed_or_from_a_0_1_0_callers_json() {
        let stored = SandboxSpec::compile(json!({
            "image": "debian:12", "description": "ci", "metadata": {"team": "a"}, "packages": ["git"],
            "network": {"allowed_hosts": ["example.com"], "allow_package_managers": true},
            "resources": {"cpu_millis": 2000}, "retention_days": 7, "execution": "external_tools",
        }))
        .expect("valid");
        assert_eq!(spec_input(Some(spec(&stored)), "").expect("typed"), stored);
        let text = serde_json::to_string(&stored).expect("serialises");
        assert_eq!(spec_input(None, &text).expect("json"), stored);
    }

    #[test]
    fn absent_fields_take_the_same_defaults_typed_or_as_json() {
        let typed = spec_input(Some(pb::SandboxSpec { image: "debian:12".into(), ..Default::default() }), "").expect("typed");
        assert_eq!(typed, spec_input(None, r#"{"image":"debian:12"}"#).expect("json"));
        assert_eq!(typed.retention_days, 30);
        assert_eq!(typed.resources, Resources::default());
        let bad = pb::SandboxSpec { image: "debian:12".into(), execution: "cloud".into(), ..Default::default() };
        assert_eq!(spec_input(Some(bad), "").expect_err("no such plane").details["field"], "execution");
        assert!(spec_input(None, r#"{"image":"x","nope":1}"#).is_err(), "a 0.1.0 caller's unknown field");
    }
}
