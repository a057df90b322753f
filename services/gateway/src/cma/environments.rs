//! CMA environments (api.md §17.6) ↔ SandboxProfiles: a CMA environment
//! is where tools run, so its id is the profile's `sbp_…`; an update is
//! the profile's next revision (running Sessions keep theirs).

use super::cx::Cx;
use super::deployments::self_hosted;
use super::wire::{self, CmaResult, refuse};
use crate::views::SandboxProfile;
use axum::Json;
use axum::extract::{Path, RawQuery};
use checkfu_core::Error;
use serde_json::{Value, json};

/// The image a CMA cloud environment runs (CMA names none).
const IMAGE: &str = "debian:12";
/// What a self_hosted environment's revisions name as their image: none
/// runs here.
const SELF_HOSTED_IMAGE: &str = "self-hosted";
/// CMA's package managers, in its order; native keeps `mgr:name` (apt bare).
const MANAGERS: &[&str] = &["apt", "cargo", "gem", "go", "npm", "pip"];

/// `POST /v1/environments`.
pub async fn create(cx: Cx, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let name = body["name"].as_str().ok_or_else(|| Error::invalid_field("name", "name is required"))?;
    if body.get("scope").is_some_and(|s| !s.is_null()) {
        return Err(refuse("scope_unsupported", "scope is not served: an environment belongs to its workspace"));
    }
    let mut spec = compile(&body["config"])?;
    spec["environment_id"] = json!(cx.env_id);
    spec["name"] = json!(name);
    describe(&mut spec, &body, &json!({}))?;
    let p: SandboxProfile = cx.native.post("/v1/sandbox-profiles", &spec).await?;
    Ok(Json(render(&p)))
}

/// `GET /v1/environments/{id}`.
pub async fn retrieve(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    Ok(Json(render(&cx.native.get(&format!("/v1/sandbox-profiles/{}", checked(&id)?)).await?)))
}

/// `GET /v1/environments`.
pub async fn list(cx: Cx, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let q = wire::query_pairs(raw.as_deref())?;
    let include_archived = wire::param(&q, "include_archived") == Some("true");
    let keep = |e: &Value| include_archived || e["archived_at"].is_null(); // the CMA item's own field
    Ok(Json(cx.native.page_where(&format!("/v1/sandbox-profiles?environment_id={}", cx.env_id), &q, render, keep).await?))
}

/// `POST /v1/environments/{id}`: the profile's next revision.
pub async fn update(cx: Cx, Path(id): Path<String>, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    let current: SandboxProfile = cx.native.get(&format!("/v1/sandbox-profiles/{id}")).await?;
    let latest = current.latest.as_ref().ok_or_else(|| Error::internal("a native profile answer lacks its latest revision"))?;
    let config = match body.get("config").filter(|c| !c.is_null()) {
        Some(c) => {
            let now = if self_hosted(&current) { "self_hosted" } else { "cloud" };
            if c["type"].as_str().unwrap_or("cloud") != now {
                return Err(refuse("invalid_config_type_change", "an environment's config type (cloud or self_hosted) cannot change"));
            }
            c.clone()
        }
        None => render(&current)["config"].clone(),
    };
    let mut spec = compile(&config)?;
    spec["resources"] = json!(latest.resources);
    spec["retention_days"] = json!(latest.retention_days);
    let mut merged = json!({"description": latest.description, "metadata": latest.metadata});
    if let Some(d) = body.get("description") {
        merged["description"] = d.clone();
    }
    describe(&mut spec, &merged, &body["metadata"])?;
    cx.native.post::<crate::views::SandboxRevision>(&format!("/v1/sandbox-profiles/{id}/revisions"), &spec).await?;
    let p: SandboxProfile = cx.native.get(&format!("/v1/sandbox-profiles/{id}")).await?;
    super::deployments::advance_environment(&cx, &id).await?;
    Ok(Json(render(&p)))
}

/// `POST /v1/environments/{id}/archive`: the profile natively; Sessions
/// then cannot start in it (400 `environment_archived`).
pub async fn archive(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    Ok(Json(render(&cx.native.post(&format!("/v1/sandbox-profiles/{id}/archive"), &json!({})).await?)))
}

/// `DELETE /v1/environments/{id}`: a SandboxProfile's revisions are the
/// record of what Sessions ran in, so it is archived, never deleted.
pub async fn delete(_cx: Cx, Path(_id): Path<String>) -> CmaResult<Json<Value>> {
    Err(refuse("environment_delete_unsupported", "environments are not deleted (their revisions record what Sessions ran in); archive it"))
}

/// An id of the kind a path names, else not found (§17.1).
pub fn checked(id: &str) -> CmaResult<String> {
    super::wire::path_id::<checkfu_core::id::SandboxProfileId>("environment", id)
}

/// Sets `description` and `metadata` (patched onto `body["metadata"]`
/// with `patch`) on a native revision body.
fn describe(spec: &mut Value, body: &Value, patch: &Value) -> CmaResult<()> {
    if let Some(d) = body["description"].as_str() {
        spec["description"] = json!(d);
    }
    let mut m = wire::metadata(&body["metadata"])?;
    if !patch.is_null() {
        m = wire::patch_metadata(&m, patch)?;
    }
    if m.as_object().is_some_and(|o| !o.is_empty()) {
        spec["metadata"] = m;
    }
    Ok(())
}

/// A CMA `config` → a native revision body (image, packages, network).
fn compile(config: &Value) -> CmaResult<Value> {
    match config["type"].as_str() {
        None | Some("cloud") => {}
        // Tools run at the worker holding each Session's work item
        // (§17.13); the worker's machine is its own, egress included.
        Some("self_hosted") => {
            if config.as_object().is_some_and(|c| c.keys().any(|k| k != "type")) {
                return Err(Error::invalid_field(
                    "config",
                    "a self_hosted environment takes only type: its tools run on the worker's machine",
                )
                .into());
            }
            return Ok(json!({"image": SELF_HOSTED_IMAGE, "execution": "external_tools", "network": {"allowed_hosts": []}}));
        }
        Some(other) => return Err(Error::invalid_field("config.type", format!("unknown config type {other:?}")).into()),
    }
    let mut packages = vec![];
    if let Some(p) = config["packages"].as_object() {
        for (mgr, names) in p {
            if mgr == "type" {
                continue;
            }
            if !MANAGERS.contains(&mgr.as_str()) {
                return Err(Error::invalid_field("config.packages", format!("unknown package manager {mgr:?}")).into());
            }
            for n in names.as_array().into_iter().flatten() {
                let n = n.as_str().ok_or_else(|| Error::invalid_field("config.packages", "package names are strings"))?;
                packages.push(if mgr == "apt" { n.to_string() } else { format!("{mgr}:{n}") });
            }
        }
    }
    let net = &config["networking"];
    let network = match net["type"].as_str() {
        // Checkfu's default: no host until one is allowed.
        None => json!({"allowed_hosts": []}),
        Some("unrestricted") => json!({"allowed_hosts": ["*"]}),
        Some("limited") => json!({
            "allowed_hosts": net["allowed_hosts"].as_array().cloned().unwrap_or_default(),
            "allow_package_managers": net["allow_package_managers"].as_bool().unwrap_or(false),
            "allow_mcp_servers": net["allow_mcp_servers"].as_bool().unwrap_or(false),
        }),
        Some(other) => return Err(Error::invalid_field("config.networking.type", format!("unknown networking type {other:?}")).into()),
    };
    Ok(json!({"image": IMAGE, "packages": packages, "network": network}))
}

/// A native SandboxProfile as a CMA environment.
pub fn render(p: &SandboxProfile) -> Value {
    let latest = p.latest.as_ref();
    let mut packages = json!({"type": "packages"});
    for m in MANAGERS {
        packages[*m] = json!([]);
    }
    for pkg in latest.map(|l| l.packages.as_slice()).unwrap_or_default() {
        let (mgr, name) = match pkg.split_once(':') {
            Some((m, n)) if MANAGERS.contains(&m) => (m, n),
            _ => ("apt", pkg.as_str()),
        };
        if let Some(a) = packages[mgr].as_array_mut() {
            a.push(json!(name));
        }
    }
    let networking = match latest.map(|l| &l.network) {
        Some(net) if net.allowed_hosts.len() == 1 && net.allowed_hosts[0] == "*" => json!({"type": "unrestricted"}),
        Some(net) => json!({"type": "limited", "allowed_hosts": net.allowed_hosts,
            "allow_package_managers": net.allow_package_managers, "allow_mcp_servers": net.allow_mcp_servers}),
        None => json!({"type": "limited", "allowed_hosts": [], "allow_package_managers": null, "allow_mcp_servers": null}),
    };
    let config = if self_hosted(p) {
        json!({"type": "self_hosted"})
    } else {
        json!({"type": "cloud", "packages": packages, "networking": networking})
    };
    json!({
        "type": "environment",
        "id": p.id,
        "name": p.name,
        "description": latest.and_then(|l| l.description.as_deref()),
        "metadata": latest.map(|l| json!(l.metadata)).unwrap_or(json!({})),
        "config": config,
        "created_at": p.created_at,
        "updated_at": latest.map(|l| l.created_at.as_str()),
        "archived_at": p.archived_at,
        "scope": Value::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A native profile answer, whole, read as the native view.
    fn profile(latest: Value) -> SandboxProfile {
        let mut revision = json!({"profile_id": "sbp_1", "revision": 1, "image": "debian:12", "packages": [],
            "network": {"allowed_hosts": []}, "resources": {}, "retention_days": 30, "execution": "managed",
            "created_at": "2026-01-01T00:00:00Z"});
        for (k, v) in latest.as_object().into_iter().flatten() {
            revision[k] = v.clone();
        }
        super::super::cx::view_of(json!({"id": "sbp_1", "environment_id": "env_1", "name": "e", "latest_revision": 1,
            "created_at": "2026-01-01T00:00:00Z", "archived_at": null, "latest": revision}))
        .expect("a native profile")
    }

    #[test]
    fn configs_round_trip_through_native_revisions() {
        let config = json!({"type": "cloud", "packages": {"apt": ["curl"], "pip": ["requests"]},
            "networking": {"type": "limited", "allowed_hosts": ["example.com"], "allow_package_managers": true}});
        let spec = compile(&config).expect("compiles");
        assert_eq!(spec["packages"], json!(["curl", "pip:requests"]));
        let p = profile(json!({"packages": spec["packages"], "description": "for tests", "metadata": {"team": "a"},
            "network": {"allowed_hosts": ["example.com", "pypi.org"], "allow_package_managers": true, "allow_mcp_servers": false}}));
        let v = render(&p);
        assert_eq!(v["config"]["packages"]["pip"], json!(["requests"]));
        assert_eq!(v["config"]["packages"]["apt"], json!(["curl"]));
        assert_eq!(v["config"]["networking"]["allowed_hosts"], json!(["example.com", "pypi.org"]), "compiled hosts read back");
        assert_eq!(v["description"], "for tests", "the revision's description");
        assert_eq!(v["metadata"], json!({"team": "a"}));
        assert_eq!(v["updated_at"], "2026-01-01T00:00:00Z", "the latest revision's time");
        let open = compile(&json!({"type": "cloud", "networking": {"type": "unrestricted"}})).expect("compiles");
        assert_eq!(open["network"]["allowed_hosts"], json!(["*"]));
        assert_eq!(render(&profile(json!({"network": open["network"]})))["config"]["networking"], json!({"type": "unrestricted"}));
    }

    #[test]
    fn a_self_hosted_environment_is_an_external_tools_profile() {
        let spec = compile(&json!({"type": "self_hosted"})).expect("compiles");
        assert_eq!(spec["execution"], "external_tools");
        assert_eq!(spec["network"]["allowed_hosts"], json!([]), "the platform's sandbox reaches nothing; no sandbox runs here");
        assert!(compile(&json!({"type": "self_hosted", "packages": {"pip": ["x"]}})).is_err(), "packages are the worker's");
        let p = profile(json!({"image": "", "network": spec["network"], "execution": "external_tools"}));
        assert_eq!(render(&p)["config"], json!({"type": "self_hosted"}));
        assert_eq!(render(&profile(json!({"execution": "managed"})))["config"]["type"], "cloud");
    }
}
