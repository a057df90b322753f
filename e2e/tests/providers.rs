//! A real provider adapter through the whole mesh: an OpenAI-compatible
//! server that is overloaded once, then answers. The Session shows the
//! retry (`session.error` retrying, `rescheduled`, `running`) and settles.
#![cfg(test)]

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use checkfu_e2e::*;
use checkfu_model_gateway::endpoints::Endpoint;
use checkfu_model_gateway::model::Provider;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Serves `app` on a loopback port of its own.
async fn serve(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// An OpenAI-compatible streamed answer of `text`, with its token usage.
fn completion(text: &str, prompt_tokens: u32, completion_tokens: u32) -> axum::response::Response {
    let delta = json!({"choices": [{"index": 0, "delta": {"content": text}}]});
    let stop = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}});
    let body = format!("data: {delta}\n\ndata: {stop}\n\ndata: [DONE]\n\n");
    ([("content-type", "text/event-stream")], Body::from(body)).into_response()
}

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
                completion("from the provider", 10, 3)
            }
        }),
    );
    let addr = serve(app).await;
    (format!("http://{addr}/v1"), calls)
}

/// An embedded installation whose configuration names the provider at
/// `base` as the endpoint `flaky` (on loopback, so allowed explicitly).
async fn platform_with(dir: &std::path::Path, endpoints: Vec<Endpoint>) -> Platform {
    Platform::start_timed(dir, Tuning { model_endpoints: endpoints, ..Default::default() }).await
}

fn endpoint(name: &str, base: &str, key: Option<&str>, allow_private: bool) -> Endpoint {
    Endpoint::new(name, Provider::OpenAi, base, key.map(str::to_string), allow_private).unwrap()
}

/// A deployment whose only model candidate is the endpoint `name`.
async fn route_through(a: &Api, env: &str, name: &str) -> Deployed {
    let d = deploy(a, env, json!({})).await;
    let mrp = a
        .post(
            "/v1/model-routing-profiles",
            json!({"environment_id": env, "name": name, "candidates": [{"provider": "openai", "model": "gpt-4.1-mini", "endpoint": name}]}),
        )
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
    let (base, calls) = flaky_provider(1).await;
    let p = platform_with(dir.path(), vec![endpoint("flaky", &base, None, true)]).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let d = route_through(a, &p.env_id, "flaky").await;
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
    let (base, calls) = flaky_provider(usize::MAX).await;
    let p = platform_with(dir.path(), vec![endpoint("flaky", &base, None, true)]).await;
    let me = p.admin_id.clone();
    let d = route_through(&p.admin, &p.env_id, "flaky").await;
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

/// Records the credentials each request carried.
async fn recorder() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let s = seen.clone();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let s = s.clone();
        async move {
            let auth = ["authorization", "x-api-key"].iter().filter_map(|h| headers.get(*h)).map(|v| v.to_str().unwrap_or("").to_string());
            s.lock().unwrap().push(auth.collect::<Vec<_>>().join(" "));
            (StatusCode::OK, "{}")
        }
    });
    let addr = serve(app).await;
    (format!("http://{addr}"), seen)
}

/// Answers every request with a redirect to `to`.
async fn redirector(to: String) -> String {
    let app = axum::Router::new().fallback(move || {
        let to = to.clone();
        async move { (StatusCode::TEMPORARY_REDIRECT, [("location", format!("{to}/steal"))]) }
    });
    let addr = serve(app).await;
    format!("http://{addr}/v1")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_credential_goes_only_where_the_installation_sends_it() {
    let dir = tempfile::tempdir().unwrap();
    let (thief, stolen) = recorder().await;
    let hop = redirector(thief.clone()).await;
    let (private_base, private_calls) = flaky_provider(0).await;
    let p = platform_with(
        dir.path(),
        vec![endpoint("hop", &hop, Some("sk-installation"), true), endpoint("internal", &private_base, Some("sk-installation"), false)],
    )
    .await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let env = p.env_id.clone();

    // The API takes no base URL, only a configured endpoint's name.
    let mk = |c: serde_json::Value| json!({"environment_id": env, "name": format!("p{}", c.to_string().len()), "candidates": [c]});
    let own_host = a.post("/v1/model-routing-profiles", mk(json!({"provider": "openai", "model": "m", "base_url": thief}))).await;
    expect(&own_host, 400, Some("validation.invalid"));
    let unknown = a.post("/v1/model-routing-profiles", mk(json!({"provider": "openai", "model": "m", "endpoint": "mine"}))).await;
    expect(&unknown, 400, Some("validation.invalid"));
    let mismatch = a.post("/v1/model-routing-profiles", mk(json!({"provider": "anthropic", "model": "m", "endpoint": "hop"}))).await;
    expect(&mismatch, 400, Some("validation.invalid"));

    // The endpoints are listed, never with their keys.
    let listed = a.get("/v1/model-endpoints").await;
    expect(&listed, 200, None);
    let names: Vec<&str> = listed.1["data"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["anthropic", "hop", "internal", "openai"]);
    assert!(!listed.1.to_string().contains("sk-installation"));
    assert_eq!(listed.1["data"][1]["key_configured"], true);

    // A redirect is not followed: the key never reaches the other host.
    let d = route_through(a, &p.env_id, "hop").await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "hi")]})).await;
    let sid = id(&s.1);
    settle(a, &sid).await;
    assert!(stolen.lock().unwrap().is_empty(), "the redirect target was called: {:?}", stolen.lock().unwrap());
    let evs = events(a, &sid).await;
    assert!(evs.iter().any(|e| e["type"] == "session.error"), "the turn failed");
    assert!(!serde_json::to_string(&evs).unwrap().contains("sk-installation"), "the key reached the log");

    // A private endpoint the installation did not allow is never called.
    let d = route_through(a, &p.env_id, "internal").await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "hi")]})).await;
    settle(a, &id(&s.1)).await;
    assert_eq!(private_calls.load(Ordering::SeqCst), 0, "a private endpoint was called without permission");
    p.stop().await;
}

/// Answers after `hold`, as a slow model does.
async fn slow_provider(hold: std::time::Duration) -> String {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || async move {
            tokio::time::sleep(hold).await;
            completion("took a while", 4, 3)
        }),
    );
    let addr = serve(app).await;
    format!("http://{addr}/v1")
}

/// A call that takes its time shows its start span while it works; a call
/// that answers at once writes the span with its output, in one commit.
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_model_call_shows_its_start_while_it_works() {
    let dir = tempfile::tempdir().unwrap();
    let base = slow_provider(std::time::Duration::from_millis(1500)).await;
    let p = platform_with(dir.path(), vec![endpoint("slow", &base, None, true)]).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let d = route_through(a, &p.env_id, "slow").await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "hi")]})).await;
    let sid = id(&s.1);
    let mut seen_while_working = false;
    for _ in 0..100 {
        let kinds = types(&events(a, &sid).await);
        if kinds.iter().any(|k| k == "span.model_request_end") {
            break;
        }
        if kinds.iter().any(|k| k == "span.model_request_start") {
            seen_while_working = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(seen_while_working, "the start span is in the log before the call ends");
    assert_eq!(settle(a, &sid).await["stop_reason"]["type"], "end_turn");
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    let kinds = types(&evs);
    let at = |t: &str| kinds.iter().position(|k| k == t).unwrap_or_else(|| panic!("no {t} in {kinds:?}"));
    assert!(at("span.model_request_start") < at("agent.message") && at("agent.message") < at("span.model_request_end"));

    // The scripted model answers at once: start, output and end share a commit.
    let quick = deploy(a, &p.env_id, json!({})).await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": quick.deployment_id, "initial_events": [message(&me, "hi")]})).await;
    let sid = id(&s.1);
    settle(a, &sid).await;
    let evs = events(a, &sid).await;
    let kinds = types(&evs);
    let (start, end) = (at_of(&kinds, "span.model_request_start"), at_of(&kinds, "span.model_request_end"));
    assert_eq!((end, kinds[start + 1].as_str()), (start + 2, "agent.message"), "{kinds:?}");
    assert_eq!(evs[start]["created_at"], evs[end]["created_at"], "one commit stamps both");
    p.stop().await;
}

fn at_of(kinds: &[String], t: &str) -> usize {
    kinds.iter().position(|k| k == t).unwrap_or_else(|| panic!("no {t} in {kinds:?}"))
}

/// An Automation step's authored retry (api.md §18.6): a child whose
/// provider stayed down fails `child_failed`, having left no tool call
/// unanswered, so the step waits its backoff and admits a new child, which
/// answers.
#[tokio::test(flavor = "multi_thread")]
async fn an_automation_step_retries_a_child_whose_provider_stayed_down() {
    let dir = tempfile::tempdir().unwrap();
    let (base, calls) = flaky_provider(3).await;
    let p = platform_with(dir.path(), vec![endpoint("flaky", &base, None, true)]).await;
    let a = &p.admin;
    let d = route_through(a, &p.env_id, "flaky").await;
    let svc = id(&a.post("/v1/principals", json!({"kind": "service", "name": "svc"})).await.1);
    let g = json!({"subject": {"kind": "principal", "id": svc}, "permission": "invoke", "resource": {"kind": "agent", "id": d.agent_id}});
    expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    let doc = json!({"name": "retried", "environment_id": p.env_id, "service_principal_id": svc,
        "nodes": [{"kind": "trigger", "id": "hook", "trigger": {"kind": "webhook", "dedupe_key": "/id"}},
            {"kind": "step_agent", "id": "a", "agent": d.deployment_id, "prompt": "hi", "retry": {"maxAttempts": 2, "backoffSeconds": 1}},
            {"kind": "step_wait", "id": "w", "durationSeconds": 1}],
        "edges": [{"kind": "starts", "from": "hook", "to": "a"}, {"kind": "then", "from": "a", "to": "w"}]});
    let gid = id(&a.post("/v1/automation-graphs", json!({"created_by_principal_id": p.admin_id, "document": doc})).await.1);
    let plan = a.post(&format!("/v1/automation-graphs/{gid}/plan"), json!({"revision": 1})).await.1;
    let r = a.post(&format!("/v1/automation-graphs/{gid}/apply"), json!({"revision": 1, "plan_sha256": plan["plan_sha256"]})).await;
    expect(&r, 200, None);
    let auto = r.1["automation_id"].as_str().unwrap().to_string();
    let fired = a.post(&format!("/v1/automations/{auto}/fire"), json!({})).await;
    expect(&fired, 201, None);
    let done = checkfu_e2e::automation::settled(a, &id(&fired.1)).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let step = done["program"]["steps"].as_array().unwrap().iter().find(|s| s["id"] == "a").unwrap().clone();
    assert_eq!(step["attempt"], 2, "{step}");
    assert_eq!(
        step["attempts"],
        json!([{"n": 1, "outcome": "failed", "reason": "child_failed"}, {"n": 2, "outcome": "completed", "reason": null}])
    );
    let children = done["child_session_ids"].as_array().unwrap();
    assert_eq!(children.len(), 2, "a new child for the second attempt: {done}");
    assert_eq!(step["child_session_id"], children[1]);
    assert_eq!(calls.load(Ordering::SeqCst), 4, "three calls of the first child, one of the second");
    p.stop().await;
}
