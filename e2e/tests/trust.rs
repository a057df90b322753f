//! Trust boundaries seen from the public API: secrets are shown once,
//! attribution cannot be forged, revocation reaches open streams, abuse is
//! bounded.
#![cfg(test)]

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
    // Nor the signing secret: the webhooks store seals it under the
    // installation's secrets key, which lives apart from the databases.
    let hits = stored_anywhere(&p.data_dir, &whsec);
    assert!(hits.is_empty(), "the signing secret is stored in plaintext in {hits:?}");
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
    let mut bad = embedded_options(dir.path(), &Tuning::default());
    bad.governance.bootstrap_key_file = Some(dir.path().join("blocked").join("admin.key"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let failed = checkfu_node::Node::start(listener, bad).await;
    assert!(failed.is_err(), "start must fail when the admin key cannot be written");

    // Nothing was committed: the next start bootstraps (and writes a key).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let node = checkfu_node::Node::start(listener, embedded_options(dir.path(), &Tuning::default())).await.unwrap();
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
    assert!(checkfu_node::Node::start(listener, embedded_options(fresh.path(), &Tuning::default())).await.is_err());
    assert!(!victim.exists(), "the key was written through a planted symlink");
}

/// A service principal with `invoke` on the agent and its own key, and a
/// Session it owns.
async fn bot_session(p: &Platform) -> (String, String, String, Api) {
    let a = &p.admin;
    let d = deploy(a, &p.env_id, json!({})).await;
    let bot = id(&a.post("/v1/principals", json!({"kind": "service", "name": "streamer"})).await.1);
    let grant =
        json!({"subject": {"kind": "principal", "id": bot}, "permission": "invoke", "resource": {"kind": "agent", "id": d.agent_id}});
    expect(&a.post("/v1/permission-assignments", grant).await, 201, None);
    let k = a.post(&format!("/v1/principals/{bot}/api-keys"), json!({"name": "s"})).await.1;
    let api = Api::new(&p.base, k["secret"].as_str().unwrap());
    let s = api.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    expect(&s, 201, None);
    (bot, id(&k), id(&s.1), api)
}

#[tokio::test(flavor = "multi_thread")]
async fn revocation_ends_open_streams_within_five_seconds() {
    use checkfu_e2e::sse::Stream;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let path = |sid: &str| format!("/v1/sessions/{sid}/events/stream");

    // 1. The key is revoked.
    let (_, key_id, sid, bot) = bot_session(&p).await;
    let mut s = Stream::open(&p.base, &bot.key, &path(&sid), None).await;
    assert!(!s.ends_within(Duration::from_millis(2500)).await, "an authorized stream stays open");
    expect(&a.delete(&format!("/v1/api-keys/{key_id}")).await, 200, None);
    let t = Instant::now();
    assert!(s.ends_within(Duration::from_secs(5)).await, "the stream outlived its revoked key");
    eprintln!("ended {:?} after the key was revoked", t.elapsed());

    // 2. The principal is disabled.
    let (bot_id, _, sid, bot) = bot_session(&p).await;
    let mut s = Stream::open(&p.base, &bot.key, &path(&sid), None).await;
    expect(&a.post(&format!("/v1/principals/{bot_id}"), json!({"disabled": true})).await, 200, None);
    assert!(s.ends_within(Duration::from_secs(5)).await, "the stream outlived its disabled principal");

    // 3. A reader loses its `read` grant on the Environment.
    let reader = id(&a.post("/v1/principals", json!({"kind": "human", "name": "auditor"})).await.1);
    let grant =
        json!({"subject": {"kind": "principal", "id": reader}, "permission": "read", "resource": {"kind": "environment", "id": p.env_id}});
    let pa = a.post("/v1/permission-assignments", grant).await;
    expect(&pa, 201, None);
    let rk = a.post(&format!("/v1/principals/{reader}/api-keys"), json!({"name": "r"})).await.1["secret"].as_str().unwrap().to_string();
    let mut s = Stream::open(&p.base, &rk, &path(&sid), None).await;
    assert!(!s.ends_within(Duration::from_millis(2500)).await, "a reader's stream stays open");
    expect(&a.delete(&format!("/v1/permission-assignments/{}", id(&pa.1))).await, 200, None);
    assert!(s.ends_within(Duration::from_secs(5)).await, "the stream outlived its read grant");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn open_streams_per_principal_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { max_streams_per_principal: 2, ..Default::default() }).await;
    let (_, _, sid, bot) = bot_session(&p).await;
    let url = format!("{}/v1/sessions/{sid}/events/stream", p.base);
    let open = || bot.client.get(&url).bearer_auth(&bot.key).send();
    let (one, two) = (open().await.unwrap(), open().await.unwrap());
    assert_eq!((one.status().as_u16(), two.status().as_u16()), (200, 200));
    let third = open().await.unwrap();
    assert_eq!(third.status().as_u16(), 429);
    assert!(third.headers().contains_key("retry-after"));
    let body: serde_json::Value = third.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limited");
    drop(one);
    // The slot frees when a stream closes.
    let mut reopened = 0;
    for _ in 0..50 {
        let r = open().await.unwrap();
        if r.status() == 200 {
            reopened += 1;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(reopened, 1, "a closed stream gives its slot back");
    drop(two);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn abuse_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;

    // A flood of invalid keys from one address (127.0.0.2) is throttled
    // before auth; other addresses are not.
    let from = reqwest::Client::builder().local_address(Some("127.0.0.2".parse().unwrap())).build().unwrap();
    let bogus = Api { base: p.base.clone(), key: "ck_not_a_key".into(), client: from.clone() };
    let mut statuses = vec![];
    for _ in 0..30 {
        statuses.push(bogus.get("/v1/principals").await.0.as_u16());
    }
    assert_eq!(statuses[0], 401);
    let throttled = bogus.get("/v1/principals").await;
    expect(&throttled, 429, Some("rate_limited"));
    assert!(throttled.2.contains_key("retry-after"));
    assert!(statuses.iter().filter(|s| **s == 401).count() <= checkfu_gateway::auth::AUTH_FAILURES_PER_WINDOW as usize + 1);
    // A key that authenticated before still passes from that address (its
    // holder may share the address with the flood); a new one does not.
    expect(&Api { client: from.clone(), ..a.clone() }.get("/v1/principals").await, 200, None);
    let fresh = a.post(&format!("/v1/principals/{}/api-keys", p.admin_id), json!({"name": "fresh"})).await.1["secret"]
        .as_str()
        .unwrap()
        .to_string();
    expect(&Api { client: from, key: fresh, base: p.base.clone() }.get("/v1/principals").await, 429, Some("rate_limited"));
    expect(&a.get("/v1/principals").await, 200, None);

    // Active API keys per principal are capped; revoking one frees a place.
    let bot = id(&a.post("/v1/principals", json!({"kind": "service", "name": "many-keys"})).await.1);
    let path = format!("/v1/principals/{bot}/api-keys");
    let mut last = String::new();
    for i in 0..100 {
        let k = a.post(&path, json!({"name": format!("k{i}")})).await;
        expect(&k, 201, None);
        last = id(&k.1);
    }
    let over = a.post(&path, json!({"name": "one-too-many"})).await;
    expect(&over, 409, Some("validation.conflict"));
    expect(&a.delete(&format!("/v1/api-keys/{last}")).await, 200, None);
    expect(&a.post(&path, json!({"name": "after-revoke"})).await, 201, None);

    // The types[] filter is bounded: no server error for thousands of types.
    let d = deploy(a, &p.env_id, json!({})).await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    let sid = id(&s.1);
    let many: String = (0..6_000).map(|i| format!("t{i}")).collect::<Vec<_>>().join(",");
    let r = a.get(&format!("/v1/sessions/{sid}/events?types[]={many}")).await;
    expect(&r, 400, Some("validation.invalid"));
    let repeated: String = (0..2_000).map(|i| format!("types[]=t{i}")).collect::<Vec<_>>().join("&");
    expect(&a.get(&format!("/v1/sessions/{sid}/events?{repeated}")).await, 400, Some("validation.invalid"));
    let few = a.get(&format!("/v1/sessions/{sid}/events?types[]=session.created&types[]=session.created")).await;
    expect(&few, 200, None);
    assert_eq!(few.1["data"].as_array().unwrap().len(), 1);

    // No Session starts in a disabled Environment.
    let env = a.get(&format!("/v1/environments/{}", p.env_id)).await.1;
    let off = a.post(&format!("/v1/environments/{}", p.env_id), json!({"disabled": true, "expected_version": env["version"]})).await;
    expect(&off, 200, None);
    let refused = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    expect(&refused, 409, Some("validation.conflict"));
    p.stop().await;
}
