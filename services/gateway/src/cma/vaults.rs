//! CMA vaults and credentials (api.md §17.10). A CMA vault holds
//! credentials; a ConnectionVault holds none (§16.3), credentials live on
//! Connections (§16.2). So a vault is a ConnectionVault that grants nothing
//! (`grantees: []`), and each credential a principal-owned `mcp` Connection
//! of the caller, listed in the vault's `connection_ids`. No secret is ever
//! read back: the native Connection never shows one.

use super::cx::{Cx, encode};
use super::wire::{self, CmaResult, refuse};
use crate::reach_wire::{Connection, ConnectionVault};
use axum::Json;
use axum::extract::{Path, RawQuery};
use checkfu_core::{Code, Error};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// `POST /v1/vaults`: a ConnectionVault of the workspace (needs `manage`).
pub async fn create(cx: Cx, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let name = body["display_name"].as_str().ok_or_else(|| Error::invalid_field("display_name", "display_name is required"))?;
    let native = json!({"environment_id": cx.env_id, "name": name, "connection_ids": [], "grantees": [],
        "metadata": wire::metadata(&body["metadata"])?});
    Ok(Json(vault(&cx.native.post("/v1/connection-vaults", &native).await?)))
}

pub async fn retrieve(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    Ok(Json(vault(&read(&cx, &id).await?)))
}

/// `GET /v1/vaults`: archived ones only with `include_archived=true`.
pub async fn list(cx: Cx, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let q = wire::query_pairs(raw.as_deref())?;
    let include_archived = wire::param(&q, "include_archived") == Some("true");
    let live = |v: &ConnectionVault| if include_archived || v.status != "archived" { vault(v) } else { Value::Null };
    Ok(Json(cx.native.page_where(&format!("/v1/connection-vaults?environment_id={}", cx.env_id), &q, live, |v| !v.is_null()).await?))
}

/// `POST /v1/vaults/{id}`: `display_name` renames, `metadata` patches.
pub async fn update(cx: Cx, Path(id): Path<String>, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let current = read(&cx, &id).await?;
    let mut change = json!({"expected_version": current.version});
    if let Some(n) = body["display_name"].as_str() {
        change["name"] = json!(n);
    }
    if let Some(m) = body.get("metadata") {
        change["metadata"] = wire::patch_metadata(&json!(current.metadata), m)?;
    }
    Ok(Json(vault(&cx.native.post(&format!("/v1/connection-vaults/{}", current.id), &change).await?)))
}

/// `POST /v1/vaults/{id}/archive`: its credentials are revoked, then the
/// vault archived (its record stays).
pub async fn archive(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let v = read(&cx, &id).await?;
    revoke_all(&cx, &v).await?;
    Ok(Json(vault(&cx.native.post(&format!("/v1/connection-vaults/{id}/archive"), &json!({})).await?)))
}

/// `DELETE /v1/vaults/{id}`: its credentials are revoked, then the vault
/// deleted.
pub async fn delete(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let v = read(&cx, &id).await?;
    revoke_all(&cx, &v).await?;
    cx.native.delete(&format!("/v1/connection-vaults/{id}")).await?;
    Ok(Json(json!({"id": id, "type": "vault_deleted"})))
}

/// `POST /v1/vaults/{id}/credentials`: a principal-owned `mcp` Connection
/// of the caller at `mcp_server_url`, added to the vault.
pub async fn create_credential(cx: Cx, Path(id): Path<String>, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let v = read(&cx, &id).await?;
    if v.status == "archived" {
        return Err(refuse("vault_archived", format!("vault {id} is archived: it takes no credentials")));
    }
    let auth = &body["auth"];
    let url = auth["mcp_server_url"].as_str();
    let credential = native_credential(auth)?;
    let url = url.ok_or_else(|| Error::invalid_field("auth.mcp_server_url", "mcp_server_url is required"))?;
    let mut native = json!({
        "environment_id": cx.env_id,
        // Connection names are unique in the Environment; CMA display
        // names are not, so the name is minted and the display name kept
        // as the description.
        "name": format!("cma credential {}", checkfu_core::id::new_id("vcrd")),
        "kind": "mcp",
        "endpoint": {"url": url},
        "owner": {"kind": "principal", "id": cx.caller.principal_id},
        "credential": credential,
        "metadata": labels(&body["metadata"])?,
    });
    if let Some(d) = display_name(&body)? {
        native["description"] = json!(d);
    }
    let c: Connection = cx.native.post("/v1/connections", &native).await?;
    let mut ids = v.connection_ids.clone();
    ids.push(c.id.clone());
    let joined = cx
        .native
        .post::<ConnectionVault>(&format!("/v1/connection-vaults/{id}"), &json!({"connection_ids": ids, "expected_version": v.version}))
        .await;
    if let Err(e) = joined {
        // Never leave a live credential outside its vault.
        let _ = cx.native.post::<Connection>(&format!("/v1/connections/{}/revoke", c.id), &json!({})).await;
        return Err(e);
    }
    Ok(Json(credential_view(&id, &c)))
}

pub async fn retrieve_credential(cx: Cx, Path((id, cid)): Path<(String, String)>) -> CmaResult<Json<Value>> {
    let (_, c) = member(&cx, &id, &cid).await?;
    Ok(Json(credential_view(&id, &c)))
}

/// `GET /v1/vaults/{id}/credentials`: the vault's Connections in its
/// order, `page` an offset token; revoked ones only with
/// `include_archived=true`.
pub async fn list_credentials(cx: Cx, Path(id): Path<String>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let q = wire::query_pairs(raw.as_deref())?;
    let limit = wire::limit(&q, 20, 100)? as usize;
    let include_archived = wire::param(&q, "include_archived") == Some("true");
    let start = wire::number_token::<usize>(&q)?.unwrap_or(0);
    let v = read(&cx, &id).await?;
    let ids = &v.connection_ids;
    let mut data = vec![];
    let mut next = start;
    for cid in ids.iter().skip(start) {
        if data.len() == limit {
            break;
        }
        next += 1;
        let c: Connection = cx.native.get(&format!("/v1/connections/{}", encode(cid))).await?;
        if include_archived || c.status != "revoked" {
            data.push(credential_view(&id, &c));
        }
    }
    Ok(Json(wire::page(data, (next < ids.len()).then(|| next.to_string()))))
}

/// `POST …/credentials/{cid}`: `auth` rotates the secret (same type, same
/// URL), `display_name` and `metadata` relabel.
pub async fn update_credential(cx: Cx, Path((id, cid)): Path<(String, String)>, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let (_, c) = member(&cx, &id, &cid).await?;
    if let Some(auth) = body.get("auth").filter(|a| !a.is_null()) {
        let current = auth_view(&c); // the CMA form, compared with the CMA body
        if auth["type"] != current["type"] {
            return Err(Error::invalid_field("auth.type", "a credential's type cannot change").into());
        }
        if auth.get("mcp_server_url").is_some_and(|u| !u.is_null() && *u != current["mcp_server_url"]) {
            return Err(Error::invalid_field("auth.mcp_server_url", "a credential's mcp_server_url cannot change").into());
        }
        if let Some(secret) = rotation(auth)? {
            cx.native.post::<Connection>(&format!("/v1/connections/{cid}/credential"), &secret).await?;
        }
    }
    let mut change = json!({});
    if let Some(d) = display_name(&body)? {
        change["description"] = json!(d);
    }
    if let Some(m) = body.get("metadata") {
        change["metadata"] = labels(&wire::patch_metadata(&c.metadata, m)?)?;
    }
    let c: Connection = if change.as_object().is_some_and(|o| !o.is_empty()) {
        cx.native.post(&format!("/v1/connections/{cid}"), &change).await?
    } else {
        cx.native.get(&format!("/v1/connections/{cid}")).await?
    };
    Ok(Json(credential_view(&id, &c)))
}

/// `POST …/credentials/{cid}/archive`: the Connection is revoked (its
/// secret destroyed); it stays listed with `archived_at`.
pub async fn archive_credential(cx: Cx, Path((id, cid)): Path<(String, String)>) -> CmaResult<Json<Value>> {
    let (_, c) = member(&cx, &id, &cid).await?;
    Ok(Json(credential_view(&id, &revoke(&cx, c).await?)))
}

/// `DELETE …/credentials/{cid}`: revoked, then out of the vault; later
/// reads are 404.
pub async fn delete_credential(cx: Cx, Path((id, cid)): Path<(String, String)>) -> CmaResult<Json<Value>> {
    let (v, c) = member(&cx, &id, &cid).await?;
    revoke(&cx, c).await?;
    let ids: Vec<&String> = v.connection_ids.iter().filter(|x| **x != cid).collect();
    cx.native
        .post::<ConnectionVault>(&format!("/v1/connection-vaults/{id}"), &json!({"connection_ids": ids, "expected_version": v.version}))
        .await?;
    Ok(Json(json!({"id": cid, "type": "vault_credential_deleted"})))
}

/// `POST …/mcp_oauth_validate`: Checkfu probes credentials when a
/// ToolSource syncs (`POST /v1/tool-sources/{id}/sync`), not here.
pub async fn validate_credential(_cx: Cx, Path(_ids): Path<(String, String)>) -> CmaResult<Json<Value>> {
    Err(refuse("unsupported", "mcp_oauth_validate is not served: a ToolSource's sync probes its Connection (docs/cma.md)"))
}

/// The vault `id` as the caller may see it: anything else is not found.
pub(super) async fn read(cx: &Cx, id: &str) -> CmaResult<ConnectionVault> {
    if checkfu_core::id::VaultId::check("id", id).is_err() {
        return Err(Error::not_found("vault", id).into());
    }
    match cx.native.get(&format!("/v1/connection-vaults/{id}")).await {
        Err(e) if e.0.code == Code::PermissionDenied => Err(Error::not_found("vault", id).into()),
        other => other,
    }
}

/// The vault and its member Connection `cid` (404 unless a member).
async fn member(cx: &Cx, id: &str, cid: &str) -> CmaResult<(ConnectionVault, Connection)> {
    let v = read(cx, id).await?;
    if !v.connection_ids.iter().any(|c| c == cid) {
        return Err(Error::not_found("vault_credential", cid).into());
    }
    let c = cx.native.get(&format!("/v1/connections/{cid}")).await?;
    Ok((v, c))
}

/// Revokes a Connection unless it is already.
async fn revoke(cx: &Cx, c: Connection) -> CmaResult<Connection> {
    if c.status == "revoked" {
        return Ok(c);
    }
    cx.native.post(&format!("/v1/connections/{}/revoke", c.id), &json!({})).await
}

async fn revoke_all(cx: &Cx, v: &ConnectionVault) -> CmaResult<()> {
    for cid in &v.connection_ids {
        match cx.native.get(&format!("/v1/connections/{cid}")).await {
            Ok(c) => {
                revoke(cx, c).await?;
            }
            Err(e) if e.0.code == Code::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// CMA `auth` → the native credential it becomes (§17.10):
/// `static_bearer` as is; `mcp_oauth` → `oauth2_refresh` when it carries a
/// refresh, else a `static_bearer` of its access token;
/// `environment_variable` → 400 (the egress proxy injects nothing).
fn native_credential(auth: &Value) -> CmaResult<Value> {
    let text = |field: &str| {
        auth[field]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| Error::invalid_field(&format!("auth.{field}"), format!("{field} is required")))
    };
    match auth["type"].as_str() {
        Some("static_bearer") => Ok(json!({"type": "static_bearer", "token": text("token")?})),
        Some("mcp_oauth") if auth["refresh"].is_object() => {
            let r = &auth["refresh"];
            let field = |f: &str| {
                r[f].as_str()
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| Error::invalid_field(&format!("auth.refresh.{f}"), format!("{f} is required")))
            };
            let (method, secret) = match r["token_endpoint_auth"]["type"].as_str() {
                Some("client_secret_basic") => ("client_secret_basic", r["token_endpoint_auth"]["client_secret"].as_str()),
                Some("client_secret_post") => ("client_secret_post", r["token_endpoint_auth"]["client_secret"].as_str()),
                _ => ("none", None),
            };
            let mut c = json!({"type": "oauth2_refresh", "token_endpoint": field("token_endpoint")?, "client_id": field("client_id")?,
                "token_endpoint_auth": method, "refresh_token": field("refresh_token")?});
            if let Some(s) = secret {
                c["client_secret"] = json!(s);
            }
            if let Some(s) = r["scope"].as_str() {
                c["scope"] = json!(s);
            }
            Ok(c)
        }
        Some("mcp_oauth") => Ok(json!({"type": "static_bearer", "token": text("access_token")?})),
        Some("environment_variable") => Err(refuse(
            "credential_type_unsupported",
            "environment_variable credentials are not served: Checkfu's egress proxy injects no secret into the sandbox (docs/cma.md)",
        )),
        other => Err(Error::invalid_field("auth.type", format!("unknown credential type {other:?}")).into()),
    }
}

/// The native credential an `auth` update rotates to, if it names a secret.
fn rotation(auth: &Value) -> CmaResult<Option<Value>> {
    let has = |f: &str| auth[f].as_str().is_some_and(|s| !s.is_empty());
    if has("token") || has("access_token") || auth["refresh"]["refresh_token"].as_str().is_some_and(|s| !s.is_empty()) {
        return native_credential(auth).map(Some);
    }
    Ok(None)
}

fn display_name(body: &Value) -> CmaResult<Option<String>> {
    match &body["display_name"] {
        Value::String(s) if s.chars().count() > 255 => {
            Err(Error::invalid_field("display_name", "display_name is at most 255 characters").into())
        }
        Value::String(s) => Ok(Some(s.clone())),
        _ => Ok(None),
    }
}

/// CMA metadata with CMA's limits (a Connection's own are looser).
fn labels(v: &Value) -> CmaResult<Value> {
    let m = wire::metadata(v)?;
    let pairs: BTreeMap<String, String> = serde_json::from_value(m.clone()).unwrap_or_default();
    checkfu_core::metadata::check("metadata", &pairs)?;
    Ok(m)
}

/// A native ConnectionVault as a CMA vault.
fn vault(v: &ConnectionVault) -> Value {
    json!({
        "type": "vault",
        "id": v.id,
        "display_name": v.name,
        "metadata": v.metadata,
        "created_at": v.created_at,
        "updated_at": v.updated_at,
        "archived_at": v.archived_at,
    })
}

/// A credential's `auth` read back from its Connection: the type and URL,
/// never a secret.
fn auth_view(c: &Connection) -> Value {
    match &c.credential {
        Some(cred) if cred.kind == "oauth2_refresh" => json!({
            "type": "mcp_oauth",
            "mcp_server_url": c.endpoint.url,
            "expires_at": null,
            "refresh": {"client_id": cred.client_id, "token_endpoint": cred.token_endpoint, "scope": cred.scope,
                "token_endpoint_auth": {"type": cred.token_endpoint_auth.as_deref().unwrap_or("none")}},
        }),
        _ => json!({"type": "static_bearer", "mcp_server_url": c.endpoint.url}),
    }
}

/// A native Connection as a credential of vault `vault_id`.
fn credential_view(vault_id: &str, c: &Connection) -> Value {
    json!({
        "type": "vault_credential",
        "id": c.id,
        "vault_id": vault_id,
        "display_name": Some(c.description.as_str()).filter(|d| !d.is_empty()),
        "metadata": Some(&c.metadata).filter(|m| m.is_object()).cloned().unwrap_or(json!({})),
        "auth": auth_view(c),
        "created_at": c.created_at,
        "updated_at": c.updated_at,
        "archived_at": c.revoked_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_maps_to_native_credentials() {
        let bearer = native_credential(&json!({"type": "static_bearer", "token": "t", "mcp_server_url": "https://m"})).expect("bearer");
        assert_eq!(bearer, json!({"type": "static_bearer", "token": "t"}));
        let plain = native_credential(&json!({"type": "mcp_oauth", "access_token": "a", "mcp_server_url": "https://m"})).expect("oauth");
        assert_eq!(plain["type"], "static_bearer", "no refresh: its access token as a bearer");
        let refreshing = native_credential(&json!({"type": "mcp_oauth", "access_token": "a", "mcp_server_url": "https://m",
            "refresh": {"client_id": "c", "refresh_token": "r", "token_endpoint": "https://m/token",
                "token_endpoint_auth": {"type": "client_secret_post", "client_secret": "s"}}}))
        .expect("refresh");
        assert_eq!(refreshing["type"], "oauth2_refresh");
        assert_eq!(
            (refreshing["token_endpoint_auth"].as_str(), refreshing["client_secret"].as_str()),
            (Some("client_secret_post"), Some("s"))
        );
        let env = native_credential(&json!({"type": "environment_variable", "secret_name": "X", "secret_value": "v"}));
        assert_eq!(env.expect_err("refused").0.details["reason"], "credential_type_unsupported");
        assert!(native_credential(&json!({"type": "static_bearer"})).is_err(), "a token is required");
    }

    #[test]
    fn no_secret_is_read_back() {
        let c = super::super::cx::view_of(json!({"id": "conn_1", "environment_id": "env_1", "name": "n", "description": "gh",
            "metadata": {}, "kind": "mcp", "endpoint": {"url": "https://m"}, "owner": {"kind": "principal", "id": "prn_1"},
            "credential": {"type": "static_bearer", "state": "ok", "created_at": "2026-01-01T00:00:00Z", "rotated_at": null,
                "last_used_at": null},
            "status": "active", "created_by": "prn_1", "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "revoked_at": null, "version": 1}))
        .expect("a native Connection");
        let v = credential_view("cvlt_1", &c);
        assert_eq!(v["auth"], json!({"type": "static_bearer", "mcp_server_url": "https://m"}));
        assert_eq!((v["display_name"].as_str(), v["vault_id"].as_str()), (Some("gh"), Some("cvlt_1")));
        assert!(rotation(&json!({"type": "static_bearer"})).expect("none").is_none(), "no secret named: nothing rotates");
    }
}
