//! Connections and their credentials through the public API (api.md
//! §16.1–16.2, §16.8): written once and never readable, sealed at rest
//! under the credential key file, visible only to those who may use or
//! manage them, and rewrapped after a key rotation.
#![cfg(test)]

use base64::Engine;
use checkfu_e2e::*;
use serde_json::{Value, json};
use std::path::Path;

const SECRET: &str = "s3cret-XYZ-0f9a8b7c";

/// A service principal with these grants, and its API client.
async fn principal(p: &Platform, name: &str, grants: &[(&str, &str, &str)]) -> (Api, String) {
    let a = &p.admin;
    let prin = a.post("/v1/principals", json!({"kind": "service", "name": name})).await;
    let pid = id(&prin.1);
    let key = a.post(&format!("/v1/principals/{pid}/api-keys"), json!({"name": "k"})).await;
    for (perm, kind, rid) in grants {
        let g = json!({"subject": {"kind": "principal", "id": pid}, "permission": perm, "resource": {"kind": kind, "id": rid}});
        expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    }
    (Api::new(&p.base, key.1["secret"].as_str().unwrap()), pid)
}

fn mcp_connection(env: &str, name: &str) -> Value {
    json!({"environment_id": env, "name": name, "kind": "mcp", "endpoint": {"url": "http://127.0.0.1:9/mcp"},
        "credential": {"type": "static_bearer", "token": SECRET}, "metadata": {"team": "platform"}})
}

/// Every form of the secret a leak could take.
fn forms(secret: &str) -> Vec<String> {
    let b = base64::engine::general_purpose::STANDARD;
    let u = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    vec![secret.to_string(), b.encode(secret), u.encode(secret), secret.replace('-', "%2D"), hex::encode(secret)]
}

#[track_caller]
fn assert_absent(what: &str, haystack: &[u8], secret: &str) {
    for f in forms(secret) {
        assert!(!haystack.windows(f.len()).any(|w| w == f.as_bytes()), "{what} holds the credential (as {f:?})");
    }
}

/// Every file under `dir` (the SQLite stores, their write-ahead logs,
/// blobs, keys) is free of the secret.
fn assert_no_file_holds(dir: &Path, secret: &str) {
    for entry in walk(dir) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        assert_absent(&entry.display().to_string(), &bytes, secret);
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn capabilities_report_what_is_offered_and_a_disabled_feature_answers_503() {
    let dir = tempfile::tempdir().unwrap();
    let tuning = Tuning {
        allow_private_targets: true,
        features_disabled: vec!["connections".into(), "provider_triggers".into()],
        ..Default::default()
    };
    let p = Platform::start_timed(dir.path(), tuning).await;
    let caps = p.admin.get("/v1/capabilities").await;
    expect(&caps, 200, None);
    let by_name = |n: &str| caps.1["data"].as_array().unwrap().iter().find(|c| c["name"] == n).cloned().unwrap();
    assert_eq!(caps.1["next_page"], Value::Null);
    let names: Vec<&str> = caps.1["data"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "connections",
            "credentials",
            "tool_sources",
            "sandbox_egress",
            "skills",
            "files",
            "http_connections",
            "memory",
            "cma_projection",
            "managed_tools",
            "provider_triggers"
        ]
    );
    assert_eq!(by_name("connections")["reason"], "feature_disabled");
    assert_eq!(by_name("connections")["available"], false);
    assert_eq!(by_name("credentials")["available"], true, "{}", caps.1);
    assert_eq!(by_name("credentials")["limits"]["max_secret_bytes"], 8192);
    assert_eq!(by_name("http_connections")["available"], false);
    assert_eq!(by_name("http_connections")["reason"], "not_built");
    // Acceptance 1: six available (connections is switched off here), http_connections not.
    for n in ["credentials", "tool_sources", "sandbox_egress", "skills", "files", "memory", "cma_projection"] {
        assert_eq!((by_name(n)["available"].clone(), by_name(n)["reason"].clone()), (json!(true), Value::Null), "{n}: {}", caps.1);
    }
    assert_eq!(by_name("files")["limits"]["max_bytes"], 64 << 20);
    assert_eq!(by_name("skills")["limits"]["max_files"], 512);

    for r in [p.admin.post("/v1/connections", mcp_connection(&p.env_id, "c")).await, p.admin.get("/v1/connections").await] {
        expect(&r, 503, Some("unavailable"));
        assert_eq!(r.1["error"]["details"], json!({"capability": "connections", "reason": "feature_disabled"}));
    }
    // Provider triggers switched off: their ingest answers so before anything else.
    assert_eq!(by_name("provider_triggers")["reason"], "feature_disabled");
    let ingest = reqwest::Client::new()
        .post(format!("{}/v1/ingest/providers/github/whsrc_01jx0000000000000000000001", p.base))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(ingest.status().as_u16(), 503);
    let body: Value = ingest.json().await.unwrap();
    assert_eq!(body["error"]["details"], json!({"capability": "provider_triggers", "reason": "feature_disabled"}));
    // Any key may ask.
    let (nobody, _) = principal(&p, "nobody", &[]).await;
    expect(&nobody.get("/v1/capabilities").await, 200, None);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_credential_is_written_once_sealed_and_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let a = &p.admin;
    let mut replies: Vec<Value> = vec![];

    let c = a.post("/v1/connections", mcp_connection(&p.env_id, "github")).await;
    expect(&c, 201, None);
    let cid = id(&c.1);
    assert!(cid.starts_with("conn_"));
    assert_eq!(c.1["status"], "active");
    assert_eq!(c.1["kind"], "mcp");
    assert_eq!(c.1["endpoint"], json!({"url": "http://127.0.0.1:9/mcp"}));
    assert_eq!(c.1["owner"], json!({"kind": "environment"}));
    assert_eq!(c.1["metadata"], json!({"team": "platform"}));
    assert_eq!(c.1["version"], 1);
    let k = &c.1["credential"];
    assert_eq!(k["type"], "static_bearer");
    assert_eq!(k["state"], "ok");
    assert!(k["created_at"].is_string() && k["rotated_at"].is_null() && k["last_used_at"].is_null(), "{k}");
    assert!(k.get("token").is_none());
    replies.push(c.1.clone());

    // The rules of a Connection.
    let taken = a.post("/v1/connections", mcp_connection(&p.env_id, "github")).await;
    expect(&taken, 409, Some("validation.conflict"));
    assert_eq!(taken.1["error"]["details"]["reason"], "name_taken");
    let mut userinfo = mcp_connection(&p.env_id, "u");
    userinfo["endpoint"]["url"] = json!(format!("https://me:{SECRET}@mcp.example.com/mcp"));
    let r = a.post("/v1/connections", userinfo).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "credential_in_url");
    replies.push(r.1.clone());
    let mut bad = mcp_connection(&p.env_id, "b");
    bad["credential"] = json!({"type": "api_key", "header": "content-type", "value": SECRET});
    let r = a.post("/v1/connections", bad).await;
    expect(&r, 400, Some("validation.invalid"));
    replies.push(r.1.clone());
    let mut bad = mcp_connection(&p.env_id, "b");
    bad["credential"] = json!({"type": SECRET});
    let r = a.post("/v1/connections", bad).await;
    expect(&r, 400, Some("validation.invalid"));
    replies.push(r.1.clone());
    let mut bad = mcp_connection(&p.env_id, "b");
    bad["credential"]["token"] = json!("x".repeat(8193));
    expect(&a.post("/v1/connections", bad).await, 400, Some("validation.invalid"));
    let mut bad = mcp_connection(&p.env_id, "b");
    bad["kind"] = json!("ftp");
    expect(&a.post("/v1/connections", bad).await, 400, Some("validation.invalid"));

    // Rotation: a replacement; the read form says when.
    let rotated =
        a.post(&format!("/v1/connections/{cid}/credential"), json!({"type": "static_bearer", "token": "an0ther-S3CRET-value"})).await;
    expect(&rotated, 200, None);
    assert!(rotated.1["credential"]["rotated_at"].is_string(), "{}", rotated.1);
    assert_eq!(rotated.1["credential"]["created_at"], c.1["credential"]["created_at"]);
    let api_key =
        a.post(&format!("/v1/connections/{cid}/credential"), json!({"type": "api_key", "header": "X-Api-Key", "value": SECRET})).await;
    expect(&api_key, 200, None);
    assert_eq!(api_key.1["credential"]["header"], "x-api-key");
    replies.push(api_key.1.clone());
    let oauth = json!({"type": "oauth2_refresh", "token_endpoint": "http://127.0.0.1:9/token", "client_id": "checkfu",
        "client_secret": SECRET, "refresh_token": format!("r-{SECRET}"), "scope": "tools"});
    let o = a.post(&format!("/v1/connections/{cid}/credential"), oauth).await;
    expect(&o, 200, None);
    assert_eq!(o.1["credential"]["token_endpoint_auth"], "client_secret_basic");
    assert_eq!(o.1["credential"]["client_id"], "checkfu");
    assert_eq!(o.1["credential"]["scope"], "tools");
    replies.push(o.1.clone());

    // Optimistic concurrency, disabling, and its audit trail.
    let stale = a.post(&format!("/v1/connections/{cid}"), json!({"disabled": true, "expected_version": 1})).await;
    expect(&stale, 409, Some("validation.conflict"));
    let current = o.1["version"].as_i64().unwrap();
    let off = a.post(&format!("/v1/connections/{cid}"), json!({"disabled": true, "expected_version": current})).await;
    expect(&off, 200, None);
    assert_eq!(off.1["status"], "disabled");
    let on = a.post(&format!("/v1/connections/{cid}"), json!({"disabled": false, "description": "GitHub's MCP server"})).await;
    assert_eq!(on.1["status"], "active");
    assert_eq!(on.1["description"], "GitHub's MCP server");

    let got = a.get(&format!("/v1/connections/{cid}")).await;
    expect(&got, 200, None);
    replies.push(got.1.clone());
    let listed = a.get(&format!("/v1/connections?environment_id={}&kind=mcp&status=active", p.env_id)).await;
    expect(&listed, 200, None);
    assert_eq!(listed.1["data"].as_array().unwrap().len(), 1);
    replies.push(listed.1.clone());

    // Revoke is terminal: the credential is destroyed at once.
    let revoked = a.post(&format!("/v1/connections/{cid}/revoke"), json!({})).await;
    expect(&revoked, 200, None);
    assert_eq!(revoked.1["status"], "revoked");
    assert_eq!(revoked.1["credential"], Value::Null);
    assert!(revoked.1["revoked_at"].is_string());
    for r in [
        a.post(&format!("/v1/connections/{cid}/credential"), json!({"type": "static_bearer", "token": SECRET})).await,
        a.post(&format!("/v1/connections/{cid}"), json!({"name": "again"})).await,
        a.post(&format!("/v1/connections/{cid}/revoke"), json!({})).await,
    ] {
        expect(&r, 409, Some("validation.conflict"));
        assert_eq!(r.1["error"]["details"]["reason"], "connection_revoked");
    }
    expect(&a.get(&format!("/v1/connections/{cid}")).await, 200, None);
    // Its name is free again.
    expect(&a.post("/v1/connections", mcp_connection(&p.env_id, "github")).await, 201, None);

    let audit = a.get(&format!("/v1/audit-events?resource_id={cid}&limit=100")).await;
    expect(&audit, 200, None);
    let actions: Vec<&str> = audit.1["data"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    for wanted in ["connection.created", "connection.credential_rotated", "connection.updated", "connection.revoked"] {
        assert!(actions.contains(&wanted), "{wanted} audited: {actions:?}");
    }
    replies.push(audit.1.clone());

    for r in &replies {
        assert_absent("a response", r.to_string().as_bytes(), SECRET);
        assert_absent("a response", r.to_string().as_bytes(), "an0ther-S3CRET-value");
    }
    p.stop().await;
    assert_no_file_holds(dir.path(), SECRET);
    assert_no_file_holds(dir.path(), "an0ther-S3CRET-value");
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_are_seen_by_owners_managers_and_users_only() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let a = &p.admin;
    let env = p.env_id.clone();
    let c = a.post("/v1/connections", mcp_connection(&env, "shared")).await;
    let cid = id(&c.1);
    let (reader, reader_id) = principal(&p, "reader", &[("read", "environment", &env)]).await;

    // Read alone sees nothing, and cannot make an Environment's Connection.
    expect(&reader.get(&format!("/v1/connections/{cid}")).await, 404, Some("not_found"));
    let listed = reader.get(&format!("/v1/connections?environment_id={env}")).await;
    assert_eq!(listed.1["data"], json!([]), "{}", listed.1);
    expect(&reader.post("/v1/connections", mcp_connection(&env, "mine")).await, 403, Some("permission.denied"));

    // A personal Connection needs only read, and its owner may use it.
    let mut mine = mcp_connection(&env, "mine");
    mine["owner"] = json!({"kind": "principal", "id": p.admin_id});
    expect(&reader.post("/v1/connections", mine.clone()).await, 400, Some("validation.invalid"));
    mine["owner"] = json!({"kind": "principal", "id": reader_id});
    let personal = reader.post("/v1/connections", mine).await;
    expect(&personal, 201, None);
    let pcid = id(&personal.1);
    assert_eq!(personal.1["owner"], json!({"kind": "principal", "id": reader_id}));
    let rows = a.get(&format!("/v1/permission-assignments?resource_id={pcid}")).await;
    let rows = rows.1["data"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["permission"], "use_connection");
    assert_eq!(rows[0]["subject"]["id"], reader_id.as_str());
    expect(&reader.post(&format!("/v1/connections/{pcid}"), json!({"description": "mine"})).await, 200, None);
    expect(&a.get(&format!("/v1/connections/{pcid}")).await, 200, None);

    // use_connection shows it, but writing needs manage (or owning it).
    let g = json!({"subject": {"kind": "principal", "id": reader_id}, "permission": "use_connection", "resource": {"kind": "connection", "id": cid}});
    expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    expect(&reader.get(&format!("/v1/connections/{cid}")).await, 200, None);
    let listed = reader.get(&format!("/v1/connections?environment_id={env}")).await;
    assert_eq!(listed.1["data"].as_array().unwrap().len(), 2, "{}", listed.1);
    expect(&reader.post(&format!("/v1/connections/{cid}/revoke"), json!({})).await, 403, Some("permission.denied"));
    expect(
        &reader.post(&format!("/v1/connections/{cid}/credential"), json!({"type": "static_bearer", "token": "abcdef"})).await,
        403,
        None,
    );
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn credentials_survive_a_restart_and_a_key_rotation_with_rewrap() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("credential.keys");
    let old = format!("old:{}", base64::engine::general_purpose::STANDARD.encode([7u8; 32]));
    let new = format!("new:{}", base64::engine::general_purpose::STANDARD.encode([9u8; 32]));
    std::fs::write(&keys, format!("{old}\n")).unwrap();
    let tuning = || Tuning { allow_private_targets: true, credential_key_file: Some(keys.clone()), ..Default::default() };

    let p = Platform::start_timed(dir.path(), tuning()).await;
    let c = p.admin.post("/v1/connections", mcp_connection(&p.env_id, "c")).await;
    expect(&c, 201, None);
    let cid = id(&c.1);
    p.stop().await;

    // Restarted: the same key opens it.
    let p = Platform::start_timed(dir.path(), tuning()).await;
    assert_eq!(p.admin.get(&format!("/v1/connections/{cid}")).await.1["credential"]["state"], "ok");
    p.stop().await;

    // A new key first; the old one still unwraps until the rewrap.
    std::fs::write(&keys, format!("{new}\n{old}\n")).unwrap();
    let p = Platform::start_timed(dir.path(), tuning()).await;
    assert_eq!(p.admin.get(&format!("/v1/connections/{cid}")).await.1["credential"]["state"], "ok");
    p.stop().await;
    let location = checkfu_store::Location::SqliteDir(dir.path().to_path_buf());
    let ring = checkfu_store::envelope::KeyRing::load(&keys).unwrap();
    let done = checkfu_capability_gateway::rewrap(&location, &ring).await.unwrap();
    assert_eq!((done.rewrapped, done.current, done.unreadable), (1, 0, 0));
    let again = checkfu_capability_gateway::rewrap(&location, &ring).await.unwrap();
    assert_eq!((again.rewrapped, again.current), (0, 1), "idempotent");

    // The old line dropped: still readable.
    std::fs::write(&keys, format!("{new}\n")).unwrap();
    let p = Platform::start_timed(dir.path(), tuning()).await;
    assert_eq!(p.admin.get(&format!("/v1/connections/{cid}")).await.1["credential"]["state"], "ok");
    p.stop().await;

    // A key file without the wrapping key: the credential reads unreadable.
    let other = format!("other:{}", base64::engine::general_purpose::STANDARD.encode([3u8; 32]));
    std::fs::write(&keys, format!("{other}\n")).unwrap();
    let p = Platform::start_timed(dir.path(), tuning()).await;
    assert_eq!(p.admin.get(&format!("/v1/connections/{cid}")).await.1["credential"]["state"], "unreadable");
    p.stop().await;

    // No key file at all: credentials are unavailable, Connections are not.
    std::fs::remove_file(&keys).unwrap();
    let p = Platform::start_timed(dir.path(), tuning()).await;
    let caps = p.admin.get("/v1/capabilities").await;
    let creds = caps.1["data"].as_array().unwrap().iter().find(|c| c["name"] == "credentials").cloned().unwrap();
    assert_eq!(creds["reason"], "dependency_missing");
    let r = p.admin.post("/v1/connections", mcp_connection(&p.env_id, "d")).await;
    expect(&r, 503, Some("unavailable"));
    assert_eq!(r.1["error"]["details"]["capability"], "credentials");
    let mut bare = mcp_connection(&p.env_id, "d");
    bare.as_object_mut().unwrap().remove("credential");
    expect(&p.admin.post("/v1/connections", bare).await, 201, None);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn connection_lifecycle_events_reach_webhooks_without_a_secret() {
    let (seen, url) = hook_receiver().await;

    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let a = &p.admin;
    let hook = json!({"url": url, "event_types": ["connection.*"], "environment_id": p.env_id});
    expect(&a.post("/v1/webhook-endpoints", hook).await, 201, None);
    let cid = id(&a.post("/v1/connections", mcp_connection(&p.env_id, "c")).await.1);
    expect(&a.post(&format!("/v1/connections/{cid}/revoke"), json!({})).await, 200, None);
    let mut got = vec![];
    for _ in 0..200 {
        got = seen.lock().unwrap().clone();
        if got.len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let types: Vec<String> =
        got.iter().map(|b| serde_json::from_str::<Value>(b).unwrap()["type"].as_str().unwrap_or_default().to_string()).collect();
    assert_eq!(types, ["connection.created", "connection.revoked"]);
    for b in &got {
        assert!(b.contains(&cid), "{b}");
        assert_absent("a webhook delivery", b.as_bytes(), SECRET);
    }
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_vault_compiles_use_connection_rows_and_owns_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let a = &p.admin;
    let env = p.env_id.clone();
    let c1 = id(&a.post("/v1/connections", mcp_connection(&env, "one")).await.1);
    let c2 = id(&a.post("/v1/connections", mcp_connection(&env, "two")).await.1);
    let (r, rid) = principal(&p, "r", &[("read", "environment", &env)]).await;
    let other_env = id(&a.post("/v1/environments", json!({"name": "other"})).await.1);
    let foreign = id(&a.post("/v1/connections", mcp_connection(&other_env, "foreign")).await.1);

    let body = json!({"environment_id": env, "name": "platform", "connection_ids": [c1], "grantees": [{"kind": "principal", "id": rid}]});
    let v = a.post("/v1/connection-vaults", body).await;
    expect(&v, 201, None);
    let vid = id(&v.1);
    assert!(vid.starts_with("cvlt_"));
    assert_eq!(v.1["version"], 1);
    expect(&r.get(&format!("/v1/connections/{c1}")).await, 200, None);
    expect(&r.get(&format!("/v1/connection-vaults/{vid}")).await, 403, Some("permission.denied"));

    // The compiled row names its vault and cannot be deleted directly.
    let rows = a.get(&format!("/v1/permission-assignments?resource_id={c1}")).await.1["data"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["via"], json!({"kind": "connection_vault", "id": vid}));
    assert_eq!(rows[0]["subject"]["id"], rid.as_str());
    let row = id(&rows[0]);
    let del = a.delete(&format!("/v1/permission-assignments/{row}")).await;
    expect(&del, 409, Some("validation.conflict"));
    assert_eq!(del.1["error"]["details"]["reason"], "managed_by_vault");

    // A direct row on the same tuple stands beside it, untouched by the vault.
    let direct =
        json!({"subject": {"kind": "principal", "id": rid}, "permission": "use_connection", "resource": {"kind": "connection", "id": c2}});
    let direct = id(&a.post("/v1/permission-assignments", direct).await.1);

    // An edit adds and deletes exactly the difference.
    let edit = json!({"connection_ids": [c1, c2], "expected_version": 1});
    let v2 = a.post(&format!("/v1/connection-vaults/{vid}"), edit).await;
    expect(&v2, 200, None);
    assert_eq!(v2.1["version"], 2);
    let rows = a.get(&format!("/v1/permission-assignments?resource_id={c1}")).await.1["data"].as_array().unwrap().clone();
    assert_eq!(id(&rows[0]), row, "a row that stays keeps its id");
    let on_c2 = a.get(&format!("/v1/permission-assignments?resource_id={c2}")).await.1["data"].as_array().unwrap().clone();
    assert_eq!(on_c2.len(), 2, "the direct row and the vault's: {on_c2:?}");

    // Dropping the grantee removes its rows, audited; the direct row stays.
    let drop = a.post(&format!("/v1/connection-vaults/{vid}"), json!({"grantees": []})).await;
    expect(&drop, 200, None);
    expect(&r.get(&format!("/v1/connections/{c1}")).await, 404, Some("not_found"));
    expect(&r.get(&format!("/v1/connections/{c2}")).await, 200, None);
    let audit = a.get(&format!("/v1/audit-events?resource_id={row}")).await.1["data"].as_array().unwrap().clone();
    let actions: Vec<&str> = audit.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert!(actions.contains(&"permission_assignment.created") && actions.contains(&"permission_assignment.deleted"), "{actions:?}");
    assert_eq!(audit.iter().find(|e| e["action"] == "permission_assignment.deleted").unwrap()["details"]["via"]["id"], vid.as_str());

    // Members must be of the vault's Environment; stale versions conflict.
    let bad = a.post(&format!("/v1/connection-vaults/{vid}"), json!({"connection_ids": [foreign]})).await;
    expect(&bad, 400, Some("validation.invalid"));
    let d = deploy(a, &other_env, json!({})).await;
    let bad = a.post(&format!("/v1/connection-vaults/{vid}"), json!({"grantees": [{"kind": "agent_definition", "id": d.agent_id}]})).await;
    expect(&bad, 400, Some("validation.invalid"));
    let nobody = a
        .post(
            &format!("/v1/connection-vaults/{vid}"),
            json!({"grantees": [{"kind": "principal", "id": "prin_01m8n5w2381sjtydkyxnv11e90"}]}),
        )
        .await;
    expect(&nobody, 400, Some("validation.invalid"));
    expect(
        &a.post(&format!("/v1/connection-vaults/{vid}"), json!({"name": "x", "expected_version": 1})).await,
        409,
        Some("validation.conflict"),
    );
    let too_many: Vec<String> = (0..101).map(|_| c1.clone()).collect();
    expect(&a.post(&format!("/v1/connection-vaults/{vid}"), json!({"connection_ids": too_many})).await, 400, Some("validation.invalid"));

    // Deleting the vault removes its rows only.
    expect(&a.post(&format!("/v1/connection-vaults/{vid}"), json!({"grantees": [{"kind": "principal", "id": rid}]})).await, 200, None);
    expect(&a.delete(&format!("/v1/connection-vaults/{vid}")).await, 200, None);
    expect(&a.get(&format!("/v1/connection-vaults/{vid}")).await, 404, Some("not_found"));
    let left = a.get(&format!("/v1/permission-assignments?subject_id={rid}&permission=use_connection")).await.1["data"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(left.iter().map(id).collect::<Vec<_>>(), [direct]);
    let listed = a.get(&format!("/v1/connection-vaults?environment_id={env}")).await;
    assert_eq!(listed.1["data"], json!([]));
    p.stop().await;
}

/// A vault carries metadata (CMA's limits) and can be archived: the record
/// stays readable, its compiled rows go (audited) and it takes no edits.
#[tokio::test(flavor = "multi_thread")]
async fn an_archived_vault_keeps_its_record_and_drops_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let a = &p.admin;
    let env = p.env_id.clone();
    let c1 = id(&a.post("/v1/connections", mcp_connection(&env, "one")).await.1);
    let (r, rid) = principal(&p, "r", &[("read", "environment", &env)]).await;
    let body = json!({"environment_id": env, "name": "platform", "connection_ids": [c1], "grantees": [{"kind": "principal", "id": rid}],
        "metadata": {"team": "core"}});
    let v = a.post("/v1/connection-vaults", body).await;
    expect(&v, 201, None);
    let vid = id(&v.1);
    assert_eq!(
        (v.1["metadata"].clone(), v.1["status"].as_str(), v.1["archived_at"].clone()),
        (json!({"team": "core"}), Some("active"), json!(null))
    );
    let many: serde_json::Map<String, serde_json::Value> = (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
    let bad = a.post(&format!("/v1/connection-vaults/{vid}"), json!({"metadata": many})).await;
    expect(&bad, 400, Some("validation.invalid"));
    assert_eq!(bad.1["error"]["details"]["reason"], "invalid_metadata");
    let relabel = a.post(&format!("/v1/connection-vaults/{vid}"), json!({"metadata": {"team": "infra"}})).await;
    expect(&relabel, 200, None);
    assert_eq!(relabel.1["metadata"], json!({"team": "infra"}));
    expect(&r.get(&format!("/v1/connections/{c1}")).await, 200, None);

    // A Session records the vaults it was created with; only readable,
    // live vaults of its Environment are accepted.
    let d = deploy(a, &env, json!({})).await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "connection_vault_ids": [vid]})).await;
    expect(&s, 201, None);
    assert_eq!(s.1["connection_vault_ids"], json!([vid]));
    assert_eq!(a.get(&format!("/v1/sessions/{}", id(&s.1))).await.1["connection_vault_ids"], json!([vid]));
    let unknown = json!({"agent_deployment_id": d.deployment_id, "connection_vault_ids": ["cvlt_01m8n5w2381sjtydkyxnv11e90"]});
    expect(&a.post("/v1/sessions", unknown).await, 404, Some("not_found"));

    let archived = a.post(&format!("/v1/connection-vaults/{vid}/archive"), json!({})).await;
    expect(&archived, 200, None);
    assert_eq!(archived.1["status"], "archived");
    assert!(archived.1["archived_at"].is_string());
    expect(&r.get(&format!("/v1/connections/{c1}")).await, 404, Some("not_found"));
    let rows = a.get(&format!("/v1/permission-assignments?resource_id={c1}")).await.1["data"].as_array().unwrap().clone();
    assert!(rows.iter().all(|r| r["via"].is_null()), "the vault's rows are gone: {rows:?}");
    let again = a.post(&format!("/v1/connection-vaults/{vid}/archive"), json!({})).await;
    expect(&again, 200, None);
    assert_eq!(again.1["version"], archived.1["version"], "archiving again changes nothing");
    let edit = a.post(&format!("/v1/connection-vaults/{vid}"), json!({"name": "renamed"})).await;
    expect(&edit, 409, Some("validation.conflict"));
    assert_eq!(edit.1["error"]["details"]["reason"], "vault_archived");
    let late = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "connection_vault_ids": [vid]})).await;
    expect(&late, 400, Some("validation.invalid"));
    assert_eq!(late.1["error"]["details"]["reason"], "vault_archived");
    let got = a.get(&format!("/v1/connection-vaults/{vid}")).await;
    assert_eq!((got.1["name"].as_str(), got.1["metadata"]["team"].as_str()), (Some("platform"), Some("infra")));
    let audit = a.get(&format!("/v1/audit-events?resource_id={vid}")).await.1["data"].as_array().unwrap().clone();
    assert!(audit.iter().any(|e| e["action"] == "connection_vault.archived"), "{audit:?}");
    p.stop().await;
}
