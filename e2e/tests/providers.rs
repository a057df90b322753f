//! A real provider adapter through the whole mesh: an OpenAI-compatible
//! server that is overloaded once, then answers. The Session shows the
//! retry (`session.error` retrying, `rescheduled`, `running`) and settles.
#![allow(clippy::unwrap_used)]

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use checkfu_e2e::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Fails the first `failures` requests with 503, then answers.
async fn flaky_provider(failures: usize) -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let c = c.clone();
            async move {
                if c.fetch_add(1, Ordering::SeqCst) < failures {
                    return (StatusCode::SERVICE_UNAVAILABLE, "overloaded").into_response();
                }
                let body = concat!(
                    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"from the provider\"}}]}\n\n",
                    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3}}\n\n",
                    "data: [DONE]\n\n"
                );
                ([("content-type", "text/event-stream")], Body::from(body)).into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), calls)
}

/// A deployment whose only model candidate is the provider at `base`.
async fn route_through(a: &Api, env: &str, base: &str) -> Deployed {
    let d = deploy(a, env, json!({})).await;
    let mrp = a
        .post("/v1/model-routing-profiles", json!({"environment_id": env, "name": "flaky", "candidates": [{"provider": "openai", "model": "gpt-4.1-mini", "base_url": base}]}))
        .await;
    expect(&mrp, 201, None);
    let rev = a
        .post(
            &format!("/v1/agent-deployments/{}/revisions", d.deployment_id),
            json!({"agent_version": 1, "model_routing_profile_id": id(&mrp.1), "sandbox_profile_id": d.sandbox_profile_id}),
        )
        .await;
    expect(&rev, 201, None);
    d
}

#[tokio::test(flavor = "multi_thread")]
async fn an_overloaded_provider_is_retried_and_the_session_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let (base, calls) = flaky_provider(1).await;
    let d = route_through(a, &p.env_id, &base).await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "hi")]})).await;
    let sid = id(&s.1);
    let done = settle(a, &sid).await;
    assert_eq!(done["stop_reason"]["type"], "end_turn");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one failure, one retry");
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    let kinds = types(&evs);
    let at = |t: &str| kinds.iter().position(|k| k == t).unwrap_or_else(|| panic!("no {t} in {kinds:?}"));
    let error = &evs[at("session.error")];
    assert_eq!(error["payload"]["error"]["retry_status"], "retrying");
    assert_eq!(error["payload"]["error"]["type"], "unavailable");
    assert!(at("session.error") < at("session.status_rescheduled"));
    let back = kinds.iter().rposition(|k| k == "session.status_running").unwrap();
    assert!(at("session.status_rescheduled") < back && back < at("agent.message"), "{kinds:?}");
    assert_eq!(evs[at("agent.message")]["payload"]["content"][0]["text"], "from the provider");
    let usage = &a.get(&format!("/v1/sessions/{sid}")).await.1["usage"];
    assert_eq!((usage["input_tokens"].clone(), usage["output_tokens"].clone()), (json!(10), json!(3)));
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_that_stays_down_settles_with_retries_exhausted() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let me = p.admin_id.clone();
    let (base, calls) = flaky_provider(usize::MAX).await;
    let d = route_through(&p.admin, &p.env_id, &base).await;
    let s = p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "hi")]})).await;
    let sid = id(&s.1);
    let done = settle(&p.admin, &sid).await;
    assert_eq!(done["status"], "idle", "never terminated for a provider outage");
    assert_eq!(done["stop_reason"]["type"], "retries_exhausted");
    assert_eq!(calls.load(Ordering::SeqCst), 3, "three attempts in all");
    let evs = events(&p.admin, &sid).await;
    assert_gapless(&evs);
    let statuses: Vec<String> = evs
        .iter()
        .filter(|e| e["type"] == "session.error")
        .map(|e| e["payload"]["error"]["retry_status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(statuses, vec!["retrying", "retrying", "exhausted"]);
    assert_eq!(evs.last().unwrap()["type"], "session.status_idle");
    // The Session takes messages again (and the provider is still down).
    expect(&p.admin.post(&format!("/v1/sessions/{sid}/events"), message(&me, "again")).await, 201, None);
    p.stop().await;
}
