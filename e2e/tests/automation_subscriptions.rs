//! `subscription` triggers through the public API (api.md §18.10): an
//! Automation fires on the platform's own events, once per event, only
//! while active, never on its own Sessions' events; `svc` must read the
//! Environment. Acceptance check 23 of §18.13 (the memory bus; the Kafka
//! side runs in `distributed.rs`).
#![cfg(test)]

use checkfu_e2e::automation::*;
use checkfu_e2e::*;
use serde_json::{Value, json};
use std::time::Duration;

fn subscribed(types: Value) -> Value {
    json!([{"kind": "subscription", "event_types": types}])
}

async fn read_grant(a: &Api, svc: &str, env: &str) -> String {
    let g = json!({"subject": {"kind": "principal", "id": svc}, "permission": "read", "resource": {"kind": "environment", "id": env}});
    let r = a.post("/v1/permission-assignments", g).await;
    expect(&r, 201, None);
    id(&r.1)
}

async fn store(a: &Api, env: &str, owner: &str, name: &str) -> String {
    let r = a.post("/v1/memory-stores", json!({"environment_id": env, "name": name, "owner": {"kind": "principal", "id": owner}})).await;
    expect(&r, 201, None);
    id(&r.1)
}

/// The Automation's firings once `n` are there and a quiet second passed
/// (so one more would have been seen).
async fn firings_then_quiet(a: &Api, auto: &str, n: usize) -> Vec<Value> {
    wait_firings(a, auto, n, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    firings(a, auto).await
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_23_a_subscription_fires_once_per_event_while_active() {
    let f = fixture().await;
    let a = &f.p.admin;
    // Refused: a family that does not exist.
    let r = create_with(&f, "bad", subscribed(json!(["nope.*"])), a0(&f.d.deployment_id), None).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "invalid_trigger", "{}", r.1);
    // Without read on the Environment it is not ready.
    let r = create_with(&f, "blind", subscribed(json!(["memory_store.created"])), a0(&f.d.deployment_id), None).await;
    expect(&r, 201, None);
    assert_eq!((r.1["status"].clone(), r.1["pause_reason"]["code"].clone()), (json!("paused"), json!("readiness_blocked")), "{}", r.1);
    assert_eq!(check(&r.1["readiness"], "subscription")["status"], "fail");
    expect(&a.delete(&format!("/v1/automations/{}", id(&r.1))).await, 200, None);

    read_grant(a, &f.svc, &f.p.env_id).await;
    let r = create_with(&f, "stores", subscribed(json!(["memory_store.created"])), a0(&f.d.deployment_id), None).await;
    expect(&r, 201, None);
    assert_eq!((r.1["status"].clone(), check(&r.1["readiness"], "subscription")["status"].clone()), (json!("active"), json!("pass")));
    assert_eq!(r.1["triggers"], json!([{"kind": "subscription", "event_types": ["memory_store.created"], "next_at": null}]), "{}", r.1);
    let n = id(&r.1);

    let m1 = store(a, &f.p.env_id, &f.p.admin_id, "m1").await;
    let fired = firings_then_quiet(a, &n, 1).await;
    assert_eq!(fired.len(), 1, "once: {fired:?}");
    let firing = &fired[0];
    assert_eq!(firing["source"], "subscription");
    let event = &firing["event"];
    assert_eq!((event["type"].clone(), event["data"]["resource_id"].clone()), (json!("memory_store.created"), json!(m1)), "{firing}");
    assert_eq!(event["data"]["environment_id"], f.p.env_id.as_str());
    assert_eq!(firing["dedupe_value"], event["id"], "the event's id is its identity");
    let mut keys: Vec<&String> = event.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["created_at", "data", "id", "type"], "the thin envelope");
    assert_eq!(settled(a, &id(firing)).await["state"], "succeeded");
    // Another type of the same store's does not fire it.
    expect(&a.post(&format!("/v1/memory-stores/{m1}/archive"), json!({})).await, 200, None);

    // Paused: nothing fires, and nothing is kept for later.
    expect(&a.post(&format!("/v1/automations/{n}/pause"), json!({})).await, 200, None);
    store(a, &f.p.env_id, &f.p.admin_id, "m2").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    expect(&a.post(&format!("/v1/automations/{n}/resume"), json!({})).await, 200, None);
    assert_eq!(firings_then_quiet(a, &n, 1).await.len(), 1, "none while paused");
    let m3 = store(a, &f.p.env_id, &f.p.admin_id, "m3").await;
    let fired = firings_then_quiet(a, &n, 2).await;
    assert_eq!(fired.len(), 2, "{fired:?}");
    assert_eq!(fired[1]["event"]["data"]["resource_id"], m3.as_str(), "m2 never fired");
    f.p.stop().await;
}

/// A subscription never feeds itself: the Sessions its firings start are
/// not events it fires on, though another Session's are.
#[tokio::test(flavor = "multi_thread")]
async fn a_subscription_never_fires_on_its_own_sessions() {
    let f = fixture().await;
    let a = &f.p.admin;
    read_grant(a, &f.svc, &f.p.env_id).await;
    let r = create_with(&f, "idles", subscribed(json!(["session.status_idle"])), a0(&f.d.deployment_id), None).await;
    expect(&r, 201, None);
    let n = id(&r.1);
    let other = a
        .post(
            "/v1/sessions",
            json!({"agent_deployment_id": f.d.deployment_id, "initial_events": [message(&f.p.admin_id, "someone else's work")]}),
        )
        .await;
    expect(&other, 201, None);
    let other = id(&other.1);
    let fired = firings_then_quiet(a, &n, 1).await;
    assert_eq!(fired.len(), 1, "the other Session's idle, and not its own child's: {fired:?}");
    assert_eq!(fired[0]["event"]["data"]["session_id"], other.as_str());
    let done = settled(a, &id(&fired[0])).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(firings(a, &n).await.len(), 1, "its child's idle did not fire it again");
    f.p.stop().await;
}

/// Acceptance 23's crash case: `checkfu up` is killed with SIGKILL just
/// after a subscription fired; after the restart it is still one firing.
#[tokio::test(flavor = "multi_thread")]
async fn acceptance_23_a_sigkill_after_a_subscription_fired_keeps_one_firing() {
    let dir = tempfile::tempdir().unwrap();
    let Crashable { mut proc, key, i, svc, d, .. } = crashable(dir.path(), json!({})).await;
    let a = &i.admin;
    read_grant(a, &svc, &i.env_id).await;
    let r = a
        .post(
            "/v1/automations",
            json!({"name": "stores", "environment_id": i.env_id, "service_principal_id": svc,
            "triggers": subscribed(json!(["memory_store.*"])), "target": a0(&d.deployment_id)}),
        )
        .await;
    expect(&r, 201, None);
    let n = id(&r.1);
    store(a, &i.env_id, &i.admin_id, "m1").await;
    wait_firings(a, &n, 1, Duration::from_secs(20)).await;
    proc.kill_hard();

    let (_proc, base) = checkfu_e2e::procs::up(dir.path());
    wait_ready(&base).await;
    let a = Api::new(&base, &key);
    let fired = firings_then_quiet(&a, &n, 1).await;
    assert_eq!(fired.len(), 1, "still one: {fired:?}");
    assert_eq!(fired[0]["source"], "subscription");
}

/// `checkfu automation create --on-event` makes a subscribed Automation,
/// and lists show what it subscribes to.
#[tokio::test(flavor = "multi_thread")]
async fn the_command_line_subscribes_an_automation_to_events() {
    let f = fixture().await;
    let a = &f.p.admin;
    read_grant(a, &f.svc, &f.p.env_id).await;
    let line = f.cli(&[
        "automation",
        "create",
        "--environment",
        &f.p.env_id,
        "--name",
        "stores",
        "--service-principal",
        &f.svc,
        "--deployment",
        &f.d.deployment_id,
        "--prompt",
        "A new store: {{event.data.resource_id}}",
        "--on-event",
        "memory_store.created",
        "--on-event",
        "memory_store.archived",
    ]);
    assert!(line.contains("on memory_store.created memory_store.archived"), "{line}");
    let n = line.split_whitespace().next().unwrap().to_string();
    assert!(n.starts_with("auto_"), "{line}");
    let m = store(a, &f.p.env_id, &f.p.admin_id, "m1").await;
    let fired = firings_then_quiet(a, &n, 1).await;
    let child = settled(a, &id(&fired[0])).await["child_session_ids"][0].as_str().unwrap().to_string();
    let evs = events(a, &child).await;
    let first = evs.iter().find(|e| e["type"] == "user.message").unwrap();
    assert_eq!(first["payload"]["content"][0]["text"], format!("A new store: {m}"));
    let refused = f.cli_fails(&[
        "automation",
        "create",
        "--environment",
        &f.p.env_id,
        "--name",
        "bad",
        "--service-principal",
        &f.svc,
        "--deployment",
        &f.d.deployment_id,
        "--prompt",
        "p",
        "--on-event",
        "nope.*",
    ]);
    assert!(refused.contains("invalid_trigger") || refused.contains("400"), "{refused}");
    f.p.stop().await;
}
