//! `web_fetch` runs in the capability gateway: only hosts on the Session's
//! pinned SandboxProfile allowlist, every redirect checked again, and
//! private, loopback and link-local targets refused unless the installation
//! explicitly allows them.
#![cfg(test)]

use axum::Router;
use axum::response::Redirect;
use axum::routing::get;
use checkfu_e2e::*;
use serde_json::{Value, json};

/// A local site: `/page` answers, `/away` redirects to `localhost` (a host
/// that is not on the allowlist), `/stay` redirects to `/page`.
async fn site() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = Router::new()
        .route("/page", get(|| async { "hello from the allowlist" }))
        .route("/stay", get(|| async { Redirect::temporary("/page") }))
        .route("/away", get(move || async move { Redirect::temporary(&format!("http://localhost:{port}/page")) }));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

async fn fetch_results(p: &Platform, urls: &[String]) -> Vec<Value> {
    let a = &p.admin;
    let d = deploy_with_network(
        a,
        &p.env_id,
        json!({"tools": [{"type": "builtin", "name": "web_fetch"}]}),
        json!({"allowed_hosts": ["127.0.0.1"]}),
    )
    .await;
    let text: Vec<String> = urls.iter().map(|u| format!("call web_fetch {}", json!({"url": u}))).collect();
    let s = a
        .post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&p.admin_id, &text.join("\n"))]}))
        .await;
    let sid = id(&s.1);
    assert_eq!(settle(a, &sid).await["stop_reason"]["type"], "end_turn");
    let evs = events(a, &sid).await;
    let uses: Vec<&Value> = evs.iter().filter(|e| e["type"] == "agent.tool_use").collect();
    assert!(uses.iter().all(|u| u["payload"]["evaluated_permission"] == "allow"), "web_fetch is read-only: allowed by default");
    uses.iter()
        .map(|u| evs.iter().find(|e| e["type"] == "agent.tool_result" && e["payload"]["tool_use_id"] == u["payload"]["tool_use_id"]).unwrap()["payload"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn web_fetch_reaches_only_allowlisted_hosts() {
    let port = site().await;
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let urls = [
        format!("http://127.0.0.1:{port}/page"),
        format!("http://127.0.0.1:{port}/stay"),
        format!("http://localhost:{port}/page"),
        format!("http://127.0.0.1:{port}/away"),
        "https://example.com/".to_string(),
        "file:///etc/passwd".to_string(),
        format!("http://user:pw@127.0.0.1:{port}/page"),
    ];
    let r = fetch_results(&p, &urls).await;
    let text = |i: usize| r[i]["content"].as_str().unwrap().to_string();
    assert_eq!((r[0]["is_error"].clone(), text(0).contains("hello from the allowlist")), (json!(false), true), "{}", r[0]);
    assert!(text(0).starts_with("HTTP 200"));
    assert!(text(1).contains("hello from the allowlist"), "a redirect within the allowlist is followed: {}", r[1]);
    for (i, why) in [(2, "allowlist"), (3, "allowlist"), (4, "allowlist"), (5, "http and https"), (6, "credentials")] {
        assert_eq!(r[i]["is_error"], true, "{i}: {}", r[i]);
        assert!(text(i).contains("refused") && text(i).contains(why), "{i}: {}", text(i));
    }
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn web_fetch_never_reaches_private_addresses_by_default() {
    let port = site().await;
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let r = fetch_results(&p, &[format!("http://127.0.0.1:{port}/page")]).await;
    assert_eq!(r[0]["is_error"], true);
    assert!(r[0]["content"].as_str().unwrap().contains("private, loopback or link-local"), "{}", r[0]);
    p.stop().await;
}
