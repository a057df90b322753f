//! Custom (host-side) tools: the Session waits with `requires_action`, only
//! settle events are accepted, and the host's results resume it.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::{Value, json};

fn result(who: &str, id: &Value, text: &str) -> Value {
    input(who, "user.custom_tool_result", json!({"custom_tool_use_id": id, "content": [{"type": "text", "text": text}]}))
}

#[tokio::test(flavor = "multi_thread")]
async fn custom_tool_round_trip_with_settle_only_rules() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let d = deploy(
        a,
        &p.env_id,
        json!({"tools": [
            {"type": "custom", "name": "lookup", "description": "Looks a thing up", "input_schema": {"type": "object"}, "read_only": true},
            {"type": "custom", "name": "charge", "input_schema": {"type": "object"}, "read_only": false, "destructive": false}
        ]}),
    )
    .await;
    let s = a
        .post(
            "/v1/sessions",
            json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "call lookup {\"q\": \"answer\"}")]}),
        )
        .await;
    let sid = id(&s.1);
    let waiting = settle(a, &sid).await;
    assert_eq!(waiting["stop_reason"]["type"], "requires_action", "{waiting}");
    let evs = events(a, &sid).await;
    let use_ = evs.iter().find(|e| e["type"] == "agent.custom_tool_use").unwrap().clone();
    assert_eq!(use_["payload"]["name"], "lookup");
    assert_eq!(waiting["stop_reason"]["event_ids"], json!([use_["id"]]));
    let tid = use_["payload"]["custom_tool_use_id"].clone();

    // Only settle events while waiting.
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "hello?")).await, 409, Some("validation.conflict"));
    let confirm = input(&me, "user.tool_confirmation", json!({"tool_use_id": tid, "result": "allow"}));
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), confirm).await, 409, Some("validation.conflict"));
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), result(&me, &json!("toolu_other"), "x")).await, 409, Some("validation.conflict"));

    // The host's result resumes the Session; the model reads it.
    let first = a.post(&format!("/v1/sessions/{sid}/events"), result(&me, &tid, "42")).await;
    expect(&first, 201, None);
    let done = settle(a, &sid).await;
    assert_eq!(done["stop_reason"]["type"], "end_turn");
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    assert_eq!(
        evs.iter().rev().find(|e| e["type"] == "agent.message").unwrap()["payload"]["content"][0]["text"],
        "tool lookup returned: 42"
    );
    assert_eq!(evs.iter().filter(|e| e["type"] == "run.created").count(), 2, "the result started a new Run");

    // An exact duplicate returns the first event; a conflicting one is refused.
    let again = a.post(&format!("/v1/sessions/{sid}/events"), result(&me, &tid, "42")).await;
    expect(&again, 200, None);
    assert_eq!(again.1["id"], first.1["id"]);
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), result(&me, &tid, "43")).await, 409, Some("validation.conflict"));

    // Three calls at once: the Session resumes only when all are settled. A
    // non-read-only custom tool passes through approval first; once approved,
    // the host owes its result like any other custom tool.
    a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "call lookup {\"q\": 1}\ncall lookup {\"q\": 2}\ncall charge {}")).await;
    let waiting = settle(a, &sid).await;
    let ids: Vec<Value> = waiting["stop_reason"]["waiting_on"].as_array().unwrap().clone();
    assert_eq!(ids.len(), 3, "{waiting}");
    let evs = events(a, &sid).await;
    let charge = evs.iter().rev().find(|e| e["type"] == "agent.tool_use" && e["payload"]["name"] == "charge").unwrap();
    assert_eq!(charge["payload"]["evaluated_permission"], "require_approval");
    let charge_id = charge["payload"]["tool_use_id"].clone();
    assert_eq!(ids[2], charge_id);
    // A host result cannot stand in for the approval.
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), result(&me, &charge_id, "paid")).await, 409, Some("validation.conflict"));
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), result(&me, &ids[0], "one")).await, 201, None);
    let still = a.get(&format!("/v1/sessions/{sid}")).await.1;
    assert_eq!((still["status"].clone(), still["stop_reason"]["waiting_on"].clone()), (json!("idle"), json!([ids[1], ids[2]])));
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), result(&me, &ids[1], "two")).await, 201, None);
    let ok = input(&me, "user.tool_confirmation", json!({"tool_use_id": charge_id, "result": "allow"}));
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), ok).await, 201, None);
    // Approved: the host is now asked to run it.
    let waiting = settle(a, &sid).await;
    assert_eq!(waiting["stop_reason"]["waiting_on"], json!([charge_id]), "{waiting}");
    let evs = events(a, &sid).await;
    let host_use = evs.iter().rev().find(|e| e["type"] == "agent.custom_tool_use").unwrap();
    assert_eq!(
        (host_use["payload"]["name"].clone(), host_use["payload"]["custom_tool_use_id"].clone()),
        (json!("charge"), charge_id.clone())
    );
    assert_eq!(waiting["stop_reason"]["event_ids"], json!([host_use["id"]]));
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), result(&me, &charge_id, "paid")).await, 201, None);
    settle(a, &sid).await;
    let last = events(a, &sid).await.into_iter().rev().find(|e| e["type"] == "agent.message").unwrap()["payload"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        last.contains("tool lookup returned: one")
            && last.contains("tool lookup returned: two")
            && last.contains("tool charge returned: paid"),
        "{last}"
    );

    // An interrupt ends a wait; the Session takes messages again.
    a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "call lookup {}")).await;
    assert_eq!(settle(a, &sid).await["stop_reason"]["type"], "requires_action");
    let interrupt = interrupt(&me);
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), interrupt).await, 201, None);
    assert_eq!(a.get(&format!("/v1/sessions/{sid}")).await.1["stop_reason"]["type"], "end_turn");
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "back")).await, 201, None);
    settle(a, &sid).await;
    assert_gapless(&events(a, &sid).await);
    p.stop().await;
}
