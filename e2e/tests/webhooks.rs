//! Outbound webhooks through the public API: platform events reach a
//! receiver as thin, signed deliveries, and every attempt is listed.
#![cfg(test)]

use axum::Router;
use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing::post;
use checkfu_e2e::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Seen = Arc<Mutex<Vec<(String, String)>>>;

async fn receiver() -> (Seen, String) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let app = Router::new().route(
        "/hook",
        post(move |headers: HeaderMap, body: Bytes| {
            let s = s.clone();
            async move {
                let sig = headers.get("checkfu-signature").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                s.lock().unwrap().push((sig, String::from_utf8_lossy(&body).into_owned()));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}/hook", listener.local_addr().unwrap().port());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (seen, url)
}

/// Waits until the receiver has seen an event of each type.
async fn wait_for(seen: &Seen, types: &[&str]) -> Vec<Value> {
    for _ in 0..200 {
        let got: Vec<Value> = seen.lock().unwrap().iter().map(|(_, b)| serde_json::from_str(b).unwrap()).collect();
        if types.iter().all(|t| got.iter().any(|v| v["type"] == *t)) {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the receiver never saw all of {types:?}: {:?}", seen.lock().unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn platform_events_reach_a_receiver_signed_and_thin() {
    let (seen, url) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let a = &p.admin;
    let body = json!({"url": url, "event_types": ["session.status_*", "run.completed", "agent.created"], "environment_id": p.env_id});
    let ep = a.post("/v1/webhook-endpoints", body).await;
    expect(&ep, 201, None);
    let secret = ep.1["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"));
    let eid = id(&ep.1);
    let got = a.get(&format!("/v1/webhook-endpoints/{eid}")).await;
    expect(&got, 200, None);
    assert!(got.1.get("secret").is_none(), "the secret is shown once");
    expect(&a.post("/v1/webhook-endpoints", json!({"url": url, "event_types": ["agent.message"]})).await, 400, Some("validation.invalid"));

    let d = deploy(a, &p.env_id, json!({})).await;
    let s =
        a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&p.admin_id, "hello")]})).await;
    let sid = id(&s.1);
    settle(a, &sid).await;
    let got = wait_for(&seen, &["agent.created", "session.status_running", "session.status_idle", "run.completed"]).await;
    let now = checkfu_core::time::now_ms() / 1000;
    for (sig, body) in seen.lock().unwrap().iter() {
        assert!(checkfu_core::signature::verify(&secret, sig, body.as_bytes(), now), "every delivery verifies: {sig}");
    }
    let idle = got.iter().find(|v| v["type"] == "session.status_idle").unwrap();
    assert!(idle["id"].as_str().unwrap().starts_with("wevt_"));
    assert_eq!(idle["data"], json!({"environment_id": p.env_id, "session_id": sid}), "thin: ids only");
    let agent = got.iter().find(|v| v["type"] == "agent.created").unwrap();
    assert_eq!(agent["data"]["resource_id"], d.agent_id.as_str());
    assert!(!got.iter().any(|v| v["type"] == "agent.message" || v["type"] == "run.created"), "only subscribed types");

    let deliveries = a.get(&format!("/v1/webhook-endpoints/{eid}/deliveries")).await;
    expect(&deliveries, 200, None);
    let rows = deliveries.1["data"].as_array().unwrap();
    assert!(rows.len() >= 4);
    assert!(rows.iter().all(|r| r["status"] == "delivered" && r["last_response_code"] == 200 && r["history"][0]["response_code"] == 200));

    let rotated = a.post(&format!("/v1/webhook-endpoints/{eid}/secret"), json!({})).await;
    expect(&rotated, 200, None);
    assert_ne!(rotated.1["secret"], json!(secret));
    expect(&a.delete(&format!("/v1/webhook-endpoints/{eid}")).await, 200, None);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn private_targets_are_refused_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let r = p.admin.post("/v1/webhook-endpoints", json!({"url": "http://127.0.0.1:9/hook", "event_types": ["run.*"]})).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["field"], "url");
    p.stop().await;
}
