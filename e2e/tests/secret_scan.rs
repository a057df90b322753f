//! A credential appears nowhere (api.md §16.2, §16.10 "nowhere"): a whole
//! run of `checkfu up --allow-private-targets` with `RUST_LOG=trace` — a
//! Connection holding the secret, a ToolSource on a real MCP server, calls
//! allowed, approved, echoing the secret back, `bash` looking for it — and
//! then every response, event (listed and streamed), webhook delivery,
//! audit record, approval, log line, `/metrics` and file of the data
//! directory is searched for the secret, also base64-, URL- and hex-encoded.
#![cfg(test)]

use base64::Engine;
use checkfu_e2e::mcp::McpFixture;
use checkfu_e2e::*;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};

const S: &str = "s3cret-XYZ-scan-4f1e";

fn forms() -> Vec<String> {
    let b = base64::engine::general_purpose::STANDARD;
    let u = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    vec![S.to_string(), b.encode(S), b.encode(format!("Bearer {S}")), u.encode(S), S.replace('-', "%2D"), hex::encode(S)]
}

#[track_caller]
fn absent(what: &str, bytes: &[u8]) {
    for f in forms() {
        assert!(!bytes.windows(f.len()).any(|w| w == f.as_bytes()), "{what} holds the credential (as {f:?})");
    }
}

fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(files(&p)) } else { out.push(p) }
    }
    out
}

/// Every body the API answered, kept for the scan.
#[derive(Clone)]
struct Recorder {
    api: Api,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    async fn post(&self, path: &str, body: Value) -> Reply {
        let r = self.api.post(path, body).await;
        self.seen.lock().unwrap().push(r.1.to_string());
        r
    }
    async fn get(&self, path: &str) -> Reply {
        let r = self.api.get(path).await;
        self.seen.lock().unwrap().push(r.1.to_string());
        r
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_credential_is_nowhere_after_a_whole_run() {
    let Some(mcp) = McpFixture::start("the credential scan", S, &[]).await else { return };
    let dir = tempfile::tempdir().unwrap();
    let (mut proc, base) = procs::up_with(dir.path(), &["--allow-private-targets"], &[("RUST_LOG", "trace,rmcp=trace")]);
    wait_ready(&base).await;
    let key = std::fs::read_to_string(dir.path().join("admin.key")).unwrap().trim().to_string();
    let Installation { admin, admin_id, env_id } = Installation::discover(&base, &key).await;
    let a = Recorder { api: admin, seen: Arc::default() };

    // Deliveries of everything a webhook may carry.
    let (deliveries, hook) = hook_receiver().await;
    let all: Vec<&str> = checkfu_core::events::SUBSCRIBABLE.to_vec();
    expect(&a.post("/v1/webhook-endpoints", json!({"url": hook, "event_types": all, "environment_id": env_id})).await, 201, None);

    let c = a
        .post(
            "/v1/connections",
            json!({"environment_id": env_id, "name": "C", "kind": "mcp", "endpoint": {"url": mcp.url},
            "credential": {"type": "static_bearer", "token": S}}),
        )
        .await;
    expect(&c, 201, None);
    let conn = id(&c.1);
    // A rotation to the same secret, and an idempotent replay of a creation.
    expect(&a.post(&format!("/v1/connections/{conn}/credential"), json!({"type": "static_bearer", "token": S})).await, 200, None);
    let body = json!({"environment_id": env_id, "name": "C2", "kind": "mcp", "endpoint": {"url": mcp.url}, "credential": {"type": "api_key", "header": "x-key", "value": S}});
    for _ in 0..2 {
        let r = a.api.post_with("/v1/connections", body.clone(), &[("Idempotency-Key", "scan-1")]).await;
        a.seen.lock().unwrap().push(r.1.to_string());
        assert!(r.0.is_success(), "{}", r.1);
    }
    let t = a
        .post(
            "/v1/tool-sources",
            json!({"environment_id": env_id, "name": "T", "connection_id": conn, "default_config": {"enabled": true}}),
        )
        .await;
    expect(&t, 201, None);
    let source = id(&t.1);
    let d = deploy(
        &a.api,
        &env_id,
        json!({"tools": [{"type": "tool_source", "tool_source_id": source, "tools": ["add", "whoami", "leak"]},
        {"type": "builtin", "name": "bash"}]}),
    )
    .await;
    let g = json!({"subject": {"kind": "agent_definition", "id": d.agent_id}, "permission": "use_connection", "resource": {"kind": "connection", "id": conn}});
    expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    let rules = json!({"environment_id": env_id, "name": "scan", "rules": [
        {"subject": {"kind": "*"}, "resource": {"kind": "tool", "id_glob": "leak"}, "disposition": "allow"},
        {"subject": {"kind": "*"}, "resource": {"kind": "tool", "id_glob": "whoami"}, "disposition": "allow"},
        {"subject": {"kind": "*"}, "resource": {"kind": "tool", "id_glob": "bash"}, "disposition": "allow"}]});
    expect(&a.post("/v1/action-policies", rules).await, 201, None);

    let text = format!(
        "call whoami {{}}\ncall leak {{}}\ncall bash {}\ncall add {{\"a\":2,\"b\":3}}",
        json!({"command": "env; grep -rs s3cret /workspace /tmp /etc /run 2>/dev/null; echo scanned"})
    );
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&admin_id, &text)]})).await;
    let sid = id(&s.1);
    settle(&a.api, &sid).await;
    // `add` waits for approval: approve it (the approval and its response are scanned too).
    let pending = a.get(&format!("/v1/action-approvals?status=pending&session_id={sid}")).await.1["data"][0].clone();
    let token = pending["response_token"].as_str().unwrap();
    expect(
        &a.post(&format!("/v1/action-approvals/{}/responses", id(&pending)), json!({"decision": "approve", "response_token": token})).await,
        200,
        None,
    );
    settle(&a.api, &sid).await;
    let evs = events(&a.api, &sid).await;
    let results: Vec<String> =
        evs.iter().filter(|e| e["type"] == "agent.tool_result").map(|e| e["payload"]["content"].to_string()).collect();
    assert_eq!(results.len(), 4, "{evs:?}");
    assert!(results[1].contains("Bearer [redacted]"), "{results:?}");
    assert!(results[2].contains("scanned"), "{results:?}");
    assert!(results[3].contains('5'), "{results:?}");

    // The stream, as a client reads it.
    let mut stream = reqwest::Client::new().get(format!("{base}/v1/sessions/{sid}/events/stream")).bearer_auth(&key).send().await.unwrap();
    // The stream stays open: read what arrives within two seconds.
    let mut streamed = String::new();
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout(std::time::Duration::from_secs(2), stream.chunk()).await {
        streamed.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(streamed.contains("agent.tool_result"), "the stream replayed the log: {streamed}");
    for path in [
        format!("/v1/connections/{conn}"),
        "/v1/connections".to_string(),
        format!("/v1/tool-sources/{source}"),
        format!("/v1/audit-events?resource_id={conn}&limit=100"),
        format!("/v1/audit-events?resource_id={sid}&limit=100"),
        format!("/v1/audit-events?actor_id={admin_id}&limit=100"),
        format!("/v1/action-approvals?session_id={sid}&status=approved"),
        format!("/v1/sessions/{sid}"),
        format!("/v1/sessions/{sid}/runs"),
    ] {
        a.get(&path).await;
    }
    let metrics = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    proc.signal("TERM");
    let _ = proc.0.wait();

    absent("the event log", serde_json::to_string(&evs).unwrap().as_bytes());
    absent("the event stream", streamed.as_bytes());
    absent("/metrics", metrics.as_bytes());
    for (i, r) in a.seen.lock().unwrap().iter().enumerate() {
        absent(&format!("response {i}"), r.as_bytes());
    }
    let hooks = deliveries.lock().unwrap().join("\n");
    assert!(hooks.contains("connection.created"), "webhooks were delivered: {hooks}");
    absent("a webhook delivery", hooks.as_bytes());
    let log = std::fs::read(dir.path().join("up.log")).unwrap();
    if let Ok(keep) = std::env::var("CHECKFU_KEEP_SCAN_LOG") {
        std::fs::write(keep, &log).unwrap();
    }
    assert!(log.len() > 10_000 && String::from_utf8_lossy(&log).contains("TRACE"), "the log is at trace level");
    absent("the log (RUST_LOG=trace)", &log);
    for f in files(dir.path()) {
        absent(&f.display().to_string(), &std::fs::read(&f).unwrap_or_default());
    }
}
