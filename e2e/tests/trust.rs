//! Trust boundaries seen from the public API: secrets are shown once,
//! attribution cannot be forged, revocation reaches open streams, abuse is
//! bounded.
#![allow(clippy::unwrap_used)]

use checkfu_e2e::*;
use serde_json::json;

/// Whether `needle` occurs anywhere in the files under `dir`.
fn stored_anywhere(dir: &std::path::Path, needle: &str) -> Vec<std::path::PathBuf> {
    let mut hits = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p)
                && memchr::memmem::find(&bytes, needle.as_bytes()).is_some()
            {
                hits.push(p);
            }
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_are_shown_once_even_to_an_idempotent_replay() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let a = &p.admin;
    let path = format!("/v1/principals/{}/api-keys", p.admin_id);
    let hdr = [("idempotency-key", "key-once")];
    let first = a.post_with(&path, json!({"name": "ci"}), &hdr).await;
    expect(&first, 201, None);
    let secret = first.1["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("ck_"));
    let again = a.post_with(&path, json!({"name": "ci"}), &hdr).await;
    expect(&again, 201, None);
    assert_eq!(again.2.get("idempotent-replayed").unwrap(), "true");
    assert_eq!(again.2.get("checkfu-secret-redacted").unwrap(), "true", "the replay says the secret was removed");
    assert_eq!(again.1["id"], first.1["id"], "the same key, not a new one");
    assert!(again.1["secret"].is_null() && again.1["secret_redacted"] == true, "{}", again.1);

    let hook = json!({"url": "http://127.0.0.1:9/hook", "event_types": ["session.status_idle"]});
    let hdr = [("idempotency-key", "hook-once")];
    let first = a.post_with("/v1/webhook-endpoints", hook.clone(), &hdr).await;
    expect(&first, 201, None);
    let whsec = first.1["secret"].as_str().unwrap().to_string();
    assert!(whsec.starts_with("whsec_"));
    let again = a.post_with("/v1/webhook-endpoints", hook, &hdr).await;
    assert!(again.1["secret"].is_null() && again.1["secret_redacted"] == true, "{}", again.1);

    // The API key's secret is kept nowhere in plaintext: not in the
    // idempotency records, the governance store or its write-ahead log.
    let hits = stored_anywhere(&p.data_dir, &secret);
    assert!(hits.is_empty(), "the API key secret is stored in {hits:?}");
    let gateway_hits: Vec<_> =
        stored_anywhere(&p.data_dir, &whsec).into_iter().filter(|h| h.to_string_lossy().contains("gateway")).collect();
    assert!(gateway_hits.is_empty(), "the idempotency store keeps the signing secret: {gateway_hits:?}");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn attribution_names_only_principals_the_caller_speaks_for() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let d = deploy(a, &p.env_id, json!({})).await;
    // A service principal with its own key and invoke on the agent.
    let bot = id(&a.post("/v1/principals", json!({"kind": "service", "name": "bot"})).await.1);
    let grant =
        json!({"subject": {"kind": "principal", "id": bot}, "permission": "invoke", "resource": {"kind": "agent", "id": d.agent_id}});
    expect(&a.post("/v1/permission-assignments", grant).await, 201, None);
    let key = a.post(&format!("/v1/principals/{bot}/api-keys"), json!({"name": "bot"})).await.1["secret"].as_str().unwrap().to_string();
    let b = Api::new(&p.base, &key);
    let s = b.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    expect(&s, 201, None);
    let sid = id(&s.1);
    let said = |cause: serde_json::Value| json!({"type": "user.message", "payload": {"content": [{"type": "text", "text": "hi"}]}, "authored_by": bot, "caused_by": cause});
    // Blaming the admin is refused; so is a platform-only kind.
    let forged = b.post(&format!("/v1/sessions/{sid}/events"), said(json!({"kind": "principal", "id": p.admin_id}))).await;
    expect(&forged, 403, Some("permission.denied"));
    let platform = b.post(&format!("/v1/sessions/{sid}/events"), said(json!({"kind": "automation_firing", "id": "afire_x"}))).await;
    expect(&platform, 400, Some("validation.invalid"));
    let nameless = b.post(&format!("/v1/sessions/{sid}/events"), said(json!({"kind": "surface", "id": ""}))).await;
    expect(&nameless, 400, Some("validation.invalid"));
    // Itself, or the surface it speaks through, is fine.
    expect(&b.post(&format!("/v1/sessions/{sid}/events"), said(json!({"kind": "principal", "id": bot}))).await, 201, None);
    settle(&b, &sid).await;
    expect(&b.post(&format!("/v1/sessions/{sid}/events"), said(json!({"kind": "surface", "id": "cli"}))).await, 201, None);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_installation_is_committed_without_its_admin_key() {
    let dir = tempfile::tempdir().unwrap();
    // The key's directory is a file: the key cannot be written.
    std::fs::write(dir.path().join("blocked"), "not a directory").unwrap();
    let bad = checkfu::NodeOptions {
        bootstrap_key_file: Some(dir.path().join("blocked").join("admin.key")),
        ..embedded_options(dir.path(), &Tuning::default())
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let failed = checkfu::Node::start(listener, bad).await;
    assert!(failed.is_err(), "start must fail when the admin key cannot be written");

    // Nothing was committed: the next start bootstraps (and writes a key).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let node = checkfu::Node::start(listener, embedded_options(dir.path(), &Tuning::default())).await.unwrap();
    assert!(node.bootstrap.is_some(), "the failed start left an installation behind");
    let key = std::fs::read_to_string(dir.path().join("admin.key")).unwrap();
    let api = Api::new(&format!("http://{}", node.addr), key.trim());
    wait_ready(&api.base).await;
    expect(&api.get("/v1/principals").await, 200, None);
    node.stop().await;

    // A symlink planted where a new installation's key goes is not followed.
    let fresh = tempfile::tempdir().unwrap();
    let victim = fresh.path().join("victim");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&victim, fresh.path().join("admin.key")).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    assert!(checkfu::Node::start(listener, embedded_options(fresh.path(), &Tuning::default())).await.is_err());
    assert!(!victim.exists(), "the key was written through a planted symlink");
}
