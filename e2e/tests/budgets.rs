//! Budgets through the public API: a session budget compiles into a real
//! Budget; at the cap the in-flight call is billed, then `session.usage` and
//! an idle `budget_reached`; raising strictly above `consumed` restarts the
//! queued work without a new message; pause and resume; detaching; a
//! Session's title and metadata.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::{Value, json};

async fn budget_of(a: &Api, session: &Value) -> Value {
    let r = a.get(&format!("/v1/budgets/{}", session["budget_id"].as_str().unwrap())).await;
    expect(&r, 200, None);
    r.1
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_pauses_at_its_cap_and_resumes_when_raised() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let d = deploy(a, &p.env_id, json!({"tools": [{"type": "builtin", "name": "read"}]})).await;
    // Bad budgets are refused with the field named.
    let bad = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "budget": {"limit": 10, "metric": "dollars"}})).await;
    expect(&bad, 400, Some("validation.invalid"));
    assert_eq!(bad.1["error"]["details"]["field"], "budget.metric");
    expect(
        &a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "budget": {"limit": 0}})).await,
        400,
        Some("validation.invalid"),
    );

    let s = a
        .post(
            "/v1/sessions",
            json!({"agent_deployment_id": d.deployment_id, "budget": {"limit": 1, "metric": "model_spend"},
                   "initial_events": [message(&me, "call read {\"path\": \"nothing.txt\"}")]}),
        )
        .await;
    expect(&s, 201, None);
    let sid = id(&s.1);
    let b = budget_of(a, &s.1).await;
    assert_eq!(
        (b["scope"].clone(), b["limit"].clone(), b["metric"].clone()),
        (json!({"kind": "session", "id": sid}), json!(1), json!("model_spend"))
    );

    let paused = settle(a, &sid).await;
    assert_eq!(paused["stop_reason"]["type"], "budget_reached", "{paused}");
    assert_eq!(paused["status"], "idle", "never terminated for this");
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    let t = types(&evs);
    // The one in-flight call completed and was billed; its tool ran; no
    // second model call was admitted.
    assert_eq!(t.iter().filter(|x| *x == "span.model_request_end").count(), 1);
    assert!(t.contains(&"agent.tool_result".to_string()));
    let usage_at = t.iter().rposition(|x| x == "session.usage").unwrap();
    assert_eq!(t[usage_at + 1..], ["run.completed", "session.status_idle"].map(String::from));
    let usage = &evs[usage_at]["payload"];
    let b = budget_of(a, &s.1).await;
    let consumed = b["consumed"].as_i64().unwrap();
    assert!(consumed >= 1);
    assert_eq!(usage["budget"]["consumed"], consumed);
    assert_eq!(usage["usage"]["model_spend_micro_usd"], consumed);
    let listed = a.get(&format!("/v1/budgets?environment_id={}", p.env_id)).await;
    assert!(listed.1["data"].as_array().unwrap().iter().any(|x| x["id"] == b["id"]));

    // Settle-only while paused: a message is refused; an interrupt is accepted and ignored.
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "more")).await, 409, Some("validation.conflict"));
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), interrupt(&me)).await, 201, None);
    assert_eq!(a.get(&format!("/v1/sessions/{sid}")).await.1["stop_reason"]["type"], "budget_reached");

    // Raising to exactly what was consumed keeps it paused.
    let bid = b["id"].as_str().unwrap().to_string();
    let same = a.post(&format!("/v1/budgets/{bid}"), json!({"limit": consumed})).await;
    expect(&same, 200, None);
    assert_eq!(a.get(&format!("/v1/sessions/{sid}")).await.1["stop_reason"]["type"], "budget_reached");
    assert_eq!(types(&events(a, &sid).await).iter().filter(|x| *x == "run.created").count(), 1);
    // A stale expected_version is a conflict.
    expect(
        &a.post(&format!("/v1/budgets/{bid}"), json!({"limit": consumed + 5, "expected_version": 1})).await,
        409,
        Some("validation.conflict"),
    );

    // Strictly above: the queued work restarts with no new message.
    let raised = a.post(&format!("/v1/budgets/{bid}"), json!({"limit": consumed + 1_000_000})).await;
    expect(&raised, 200, None);
    let done = settle(a, &sid).await;
    assert_eq!(done["stop_reason"]["type"], "end_turn", "{done}");
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    assert_eq!(evs.iter().filter(|e| e["type"] == "user.message").count(), 1, "no new message was needed");
    let last = evs.iter().rev().find(|e| e["type"] == "agent.message").unwrap();
    assert!(last["payload"]["content"][0]["text"].as_str().unwrap().starts_with("tool read returned:"), "{last}");
    let b2 = budget_of(a, &s.1).await;
    assert!(b2["consumed"].as_i64().unwrap() > consumed, "the resumed call was billed");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn budgets_attach_later_pause_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let d = deploy(a, &p.env_id, json!({})).await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    let sid = id(&s.1);
    assert!(s.1["budget_id"].is_null());

    let scope = json!({"kind": "session", "id": sid});
    expect(
        &a.post("/v1/budgets", json!({"scope": {"kind": "environment", "id": p.env_id}, "limit": 5})).await,
        400,
        Some("validation.invalid"),
    );
    let b = a.post("/v1/budgets", json!({"scope": scope, "limit": 1_000_000, "metric": "model_tokens"})).await;
    expect(&b, 201, None);
    let bid = id(&b.1);
    assert_eq!((b.1["consumed"].clone(), b.1["status"].clone()), (json!(0), json!("active")));
    expect(&a.post("/v1/budgets", json!({"scope": scope, "limit": 5})).await, 409, Some("validation.conflict"));
    assert_eq!(a.get(&format!("/v1/sessions/{sid}")).await.1["budget_id"], bid.as_str());

    // A reader sees the Budget but may not change it.
    let prin = a.post("/v1/principals", json!({"kind": "service", "name": "watcher"})).await;
    let pid = id(&prin.1);
    let key = a.post(&format!("/v1/principals/{pid}/api-keys"), json!({"name": "k"})).await;
    let g = json!({"subject": {"kind": "principal", "id": pid}, "permission": "read", "resource": {"kind": "environment", "id": p.env_id}});
    expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    let r = Api::new(&p.base, key.1["secret"].as_str().unwrap());
    expect(&r.get(&format!("/v1/budgets/{bid}")).await, 200, None);
    expect(&r.post(&format!("/v1/budgets/{bid}/pause"), json!({})).await, 403, Some("permission.denied"));
    expect(&r.post(&format!("/v1/budgets/{bid}"), json!({"limit": 10_000_000})).await, 403, Some("permission.denied"));

    // Paused: a message is kept, and the Session idles at once.
    let paused = a.post(&format!("/v1/budgets/{bid}/pause"), json!({})).await;
    expect(&paused, 200, None);
    assert_eq!(paused.1["status"], "paused");
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "later")).await, 201, None);
    let idle = settle(a, &sid).await;
    assert_eq!(idle["stop_reason"]["type"], "budget_reached");
    assert!(!types(&events(a, &sid).await).contains(&"run.created".to_string()), "nothing ran while paused");

    // Resumed: the kept message runs.
    let resumed = a.post(&format!("/v1/budgets/{bid}/resume"), json!({})).await;
    assert_eq!(resumed.1["status"], "active");
    let done = settle(a, &sid).await;
    assert_eq!(done["stop_reason"]["type"], "end_turn", "{done}");
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    let reply = evs.iter().rev().find(|e| e["type"] == "agent.message").unwrap();
    assert_eq!(reply["payload"]["content"][0]["text"], "echo: later");
    // model_tokens counts input + output tokens.
    let s = a.get(&format!("/v1/sessions/{sid}")).await.1;
    let b = a.get(&format!("/v1/budgets/{bid}")).await.1;
    assert_eq!(b["consumed"].as_i64(), Some(s["usage"]["input_tokens"].as_i64().unwrap() + s["usage"]["output_tokens"].as_i64().unwrap()));
    p.stop().await;
}

/// `DELETE /v1/budgets/{id}` detaches the Budget: the Session is no longer
/// capped, the work stopped at the cap restarts, the detachment is audited
/// and recorded as `session.updated {budget: null}`; the Budget is gone.
#[tokio::test(flavor = "multi_thread")]
async fn a_detached_budget_stops_capping_and_restarts_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let d = deploy(a, &p.env_id, json!({})).await;
    let s = a
        .post(
            "/v1/sessions",
            json!({"agent_deployment_id": d.deployment_id, "budget": {"limit": 1, "metric": "model_spend"},
            "initial_events": [message(&me, "hi")]}),
        )
        .await;
    expect(&s, 201, None);
    let sid = id(&s.1);
    let budget = s.1["budget_id"].as_str().unwrap().to_string();
    assert_eq!(settle(a, &sid).await["stop_reason"]["type"], "budget_reached");
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "more")).await, 409, Some("validation.conflict"));

    let gone = a.delete(&format!("/v1/budgets/{budget}")).await;
    expect(&gone, 200, None);
    assert_eq!((gone.1["id"].as_str(), gone.1["status"].as_str()), (Some(budget.as_str()), Some("detached")));
    let after = settle(a, &sid).await;
    assert_eq!((after["stop_reason"]["type"].as_str(), after["budget_id"].clone()), (Some("end_turn"), Value::Null), "{after}");
    expect(&a.get(&format!("/v1/budgets/{budget}")).await, 404, Some("not_found"));
    expect(&a.delete(&format!("/v1/budgets/{budget}")).await, 404, Some("not_found"));
    let evs = events(a, &sid).await;
    let updated: Vec<&Value> = evs.iter().filter(|e| e["type"] == "session.updated").collect();
    assert_eq!(updated.last().map(|e| e["payload"]["budget"].clone()), Some(Value::Null), "{updated:?}");
    // Uncapped: the next message runs.
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "more")).await, 201, None);
    assert_eq!(settle(a, &sid).await["stop_reason"]["type"], "end_turn");
    let audit = a.get(&format!("/v1/audit-events?resource_id={budget}")).await;
    expect(&audit, 200, None);
    assert_eq!(audit.1["data"][0]["action"], "budget.detached", "{}", audit.1);
    p.stop().await;
}

/// `POST /v1/sessions/{id}` changes the title and metadata (each kept when
/// omitted), recorded as `session.updated`; bad input is refused, and so is
/// a terminated Session or someone who may not write to it.
#[tokio::test(flavor = "multi_thread")]
async fn a_sessions_title_and_metadata_change() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let d = deploy(a, &p.env_id, json!({})).await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "title": "first", "metadata": {"k": "v"}})).await;
    expect(&s, 201, None);
    let sid = id(&s.1);
    let r = a.post(&format!("/v1/sessions/{sid}"), json!({"title": "second"})).await;
    expect(&r, 200, None);
    assert_eq!((r.1["title"].as_str(), r.1["metadata"].clone()), (Some("second"), json!({"k": "v"})));
    let r = a.post(&format!("/v1/sessions/{sid}"), json!({"metadata": {"team": "blue"}})).await;
    expect(&r, 200, None);
    assert_eq!((r.1["title"].as_str(), r.1["metadata"].clone()), (Some("second"), json!({"team": "blue"})));
    let evs = events(a, &sid).await;
    let updated: Vec<Value> = evs.iter().filter(|e| e["type"] == "session.updated").map(|e| e["payload"].clone()).collect();
    assert_eq!(updated, vec![json!({"title": "second"}), json!({"metadata": {"team": "blue"}})]);
    expect(&a.post(&format!("/v1/sessions/{sid}"), json!({"title": "x".repeat(501)})).await, 400, Some("validation.invalid"));
    expect(&a.post(&format!("/v1/sessions/{sid}"), json!({"metadata": "nope"})).await, 400, Some("validation.invalid"));
    expect(&a.post(&format!("/v1/sessions/{sid}"), json!({"color": "red"})).await, 400, Some("validation.invalid"));
    // Someone who may not write to the Session.
    let other = a.post("/v1/principals", json!({"kind": "human", "name": "stranger"})).await;
    let key = a.post(&format!("/v1/principals/{}/api-keys", id(&other.1)), json!({})).await;
    let stranger = Api::new(&p.base, key.1["secret"].as_str().unwrap());
    let refused = stranger.post(&format!("/v1/sessions/{sid}"), json!({"title": "mine"})).await;
    assert!(matches!(refused.0.as_u16(), 403 | 404), "{:?}", refused);
    expect(&a.post(&format!("/v1/sessions/{sid}/archive"), json!({})).await, 200, None);
    expect(&a.post(&format!("/v1/sessions/{sid}"), json!({"title": "late"})).await, 409, Some("validation.conflict"));
    p.stop().await;
}
