//! Automations through the public API (api.md §12), the acceptance checks
//! of §12.11 this build covers, named by their numbers: direct Automations
//! with an Agent target, readiness, pause and resume, deletion, manual fire
//! with idempotency, children pinned to a deployment revision with their
//! own Budgets, and firings settled from their child Sessions.
#![cfg(test)]

use checkfu_e2e::automation::*;
use checkfu_e2e::*;
use serde_json::{Value, json};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_1_an_automation_is_created_ready_for_its_service_principal() {
    let f = fixture().await;
    let a = &f.p.admin;
    let r = create(&f, "n1", a0(&f.d.deployment_id)).await;
    expect(&r, 201, None);
    let n1 = id(&r.1);
    assert!(n1.starts_with("auto_"));
    assert_eq!((r.1["status"].clone(), r.1["readiness"]["state"].clone()), (json!("active"), json!("ready")), "{}", r.1);
    assert_eq!(r.1["target"]["deployment_revision"], 1);
    assert_eq!(r.1["triggers"], json!([]));
    assert_eq!(r.1["trigger"], Value::Null);
    assert_eq!(r.1["managed_by"], json!({"kind": "direct"}));
    assert_eq!(r.1["pause_reason"], Value::Null);
    assert_eq!(r.1["last_firing"], Value::Null, "a new Automation never fired");
    wait_for_hook(&f.hooks, "automation.created", &n1).await;
    // The name is taken; a human is no service Principal.
    expect(&create(&f, "n1", a0(&f.d.deployment_id)).await, 409, Some("validation.conflict"));
    let human = id(&a.post("/v1/principals", json!({"kind": "human", "name": "h"})).await.1);
    let r = a
        .post(
            "/v1/automations",
            json!({"name": "h1", "environment_id": f.p.env_id, "service_principal_id": human, "target": a0(&f.d.deployment_id)}),
        )
        .await;
    expect(&r, 400, Some("validation.invalid"));
    // manage without act_as on svc → 403.
    let mgr = id(&a.post("/v1/principals", json!({"kind": "service", "name": "mgr"})).await.1);
    let g =
        json!({"subject": {"kind": "principal", "id": mgr}, "permission": "manage", "resource": {"kind": "environment", "id": f.p.env_id}});
    expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    let key = a.post(&format!("/v1/principals/{mgr}/api-keys"), json!({"name": "k"})).await;
    let m = Api::new(&f.p.base, key.1["secret"].as_str().unwrap());
    let r = m
        .post(
            "/v1/automations",
            json!({"name": "m1", "environment_id": f.p.env_id, "service_principal_id": f.svc, "target": a0(&f.d.deployment_id)}),
        )
        .await;
    expect(&r, 403, Some("permission.denied"));
    // Bad targets and triggers not offered yet are refused with their reasons.
    let r = create(&f, "x", json!({"kind": "steps"})).await;
    assert_eq!(r.1["error"]["details"]["reason"], "steps_require_graph", "{}", r.1);
    // A continued Session keeps its own Budget (§18.13 acceptance 12).
    let mut continued = a0(&f.d.deployment_id);
    continued["session_target"] = json!({"mode": "continue_selected", "session": "sess_01jx0000000000000000000001"});
    continued["budget"] = json!({"limit": 1000});
    let r = create(&f, "c", continued).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "session_target_conflict", "{}", r.1);
    let r = a
        .post(
            "/v1/automations",
            json!({"name": "s", "environment_id": f.p.env_id, "service_principal_id": f.svc,
        "trigger": {"kind": "subscription"}, "target": a0(&f.d.deployment_id)}),
        )
        .await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "invalid_trigger", "a subscription names its event types");
    let listed = a.get(&format!("/v1/automations?environment_id={}", f.p.env_id)).await;
    assert_eq!(listed.1["data"].as_array().unwrap().len(), 1);
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_2_a_manual_fire_runs_one_child_as_the_service_principal_and_settles() {
    let f = fixture().await;
    let a = &f.p.admin;
    let n1 = id(&create(&f, "n1", a0(&f.d.deployment_id)).await.1);
    let key = [("idempotency-key", "fire-1")];
    let fired = a.post_with(&format!("/v1/automations/{n1}/fire"), json!({"event": {"title": "Q"}}), &key).await;
    expect(&fired, 201, None);
    assert_eq!((fired.1["source"].clone(), fired.1["state"].clone()), (json!("manual"), json!("running")), "{}", fired.1);
    assert_eq!(fired.1["event"], json!({"title": "Q"}));
    let firing = id(&fired.1);
    assert!(firing.starts_with("afire_"));
    let child = fired.1["child_session_ids"][0].as_str().unwrap().to_string();
    let done = settled(a, &firing).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert!(done["usage"]["input_tokens"].as_i64().unwrap() > 0, "{done}");
    assert!(done["settled_at"].is_string());
    let s = a.get(&format!("/v1/sessions/{child}")).await;
    assert_eq!(s.1["principal_id"], f.svc.as_str());
    assert_eq!(s.1["metadata"], json!({"automation_id": n1, "automation_firing_id": firing, "step_id": null}), "{}", s.1);
    let evs = events(a, &child).await;
    let first = evs.iter().find(|e| e["type"] == "user.message").unwrap();
    assert_eq!(first["payload"]["content"][0]["text"], "Summarize Q");
    assert_eq!(first["authored_by"], f.svc.as_str());
    assert_eq!(first["caused_by"], json!({"kind": "automation_firing", "id": firing}));
    let reply = evs.iter().find(|e| e["type"] == "agent.message").unwrap();
    assert_eq!(reply["payload"]["content"][0]["text"], "echo: Summarize Q");
    // The same key: one firing, one Session; another event under it → 409.
    let again = a.post_with(&format!("/v1/automations/{n1}/fire"), json!({"event": {"title": "Q"}}), &key).await;
    assert_eq!(again.1["id"], firing.as_str());
    let firings = a.get(&format!("/v1/automations/{n1}/firings")).await;
    assert_eq!(firings.1["data"].as_array().unwrap().len(), 1);
    let other = a.post_with(&format!("/v1/automations/{n1}/fire"), json!({"event": {"title": "X"}}), &key).await;
    expect(&other, 409, Some("idempotency.key_reused"));
    // Without an event the prompt goes as written.
    let plain = a.post(&format!("/v1/automations/{n1}/fire"), json!({})).await;
    expect(&plain, 201, None);
    assert_eq!(plain.1["event"], Value::Null);
    let plain_done = settled(a, &id(&plain.1)).await;
    // Each read, the list's rows included, carries the newest firing.
    let listed = a.get(&format!("/v1/automations?environment_id={}", f.p.env_id)).await;
    let row = listed.1["data"].as_array().unwrap().iter().find(|x| x["id"] == n1.as_str()).unwrap().clone();
    assert_eq!(
        row["last_firing"],
        json!({"id": plain.1["id"], "source": "manual", "state": "succeeded", "created_at": plain_done["created_at"]}),
        "{row}"
    );
    assert_eq!(a.get(&format!("/v1/automations/{n1}")).await.1["last_firing"], row["last_firing"]);
    let c = plain.1["child_session_ids"][0].as_str().unwrap();
    let evs = events(a, c).await;
    assert_eq!(evs.iter().find(|e| e["type"] == "user.message").unwrap()["payload"]["content"][0]["text"], "Summarize {{event.title}}");
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_3_pause_fire_and_delete() {
    let f = fixture().await;
    let a = &f.p.admin;
    let r = create(&f, "n1", a0(&f.d.deployment_id)).await;
    let n1 = id(&r.1);
    let v = r.1["version"].as_i64().unwrap();
    let stale = a.post(&format!("/v1/automations/{n1}/pause"), json!({"expected_version": v + 5})).await;
    expect(&stale, 409, Some("validation.conflict"));
    let paused = a.post(&format!("/v1/automations/{n1}/pause"), json!({"expected_version": v, "note": "holiday"})).await;
    expect(&paused, 200, None);
    assert_eq!(paused.1["status"], "paused");
    assert_eq!(paused.1["pause_reason"], json!({"code": "manual", "note": "holiday"}));
    assert_eq!(paused.1["version"], v + 1);
    wait_for_hook(&f.hooks, "automation.paused", &n1).await;
    let again = a.post(&format!("/v1/automations/{n1}/pause"), json!({})).await;
    assert_eq!(again.1["version"], v + 1, "pausing a paused Automation changes nothing");
    expect(&a.post(&format!("/v1/automations/{n1}/fire"), json!({})).await, 409, Some("validation.conflict"));
    assert!(a.get(&format!("/v1/automations/{n1}/firings")).await.1["data"].as_array().unwrap().is_empty(), "no firing added");
    let resumed = a.post(&format!("/v1/automations/{n1}/resume"), json!({})).await;
    assert_eq!(resumed.1["status"], "active");
    let fired = a.post(&format!("/v1/automations/{n1}/fire"), json!({"event": {"title": "Z"}})).await;
    expect(&fired, 201, None);
    let firing = id(&fired.1);
    settled(a, &firing).await;
    let del = a.delete(&format!("/v1/automations/{n1}")).await;
    expect(&del, 200, None);
    assert_eq!(del.1["id"], n1.as_str());
    expect(&a.get(&format!("/v1/automations/{n1}")).await, 404, Some("not_found"));
    expect(&a.get(&format!("/v1/automation-firings/{firing}")).await, 200, None);
    expect(&a.get(&format!("/v1/automations/{n1}/firings")).await, 200, None);
    wait_for_hook(&f.hooks, "automation.deleted", &n1).await;
    // Audited.
    let audit = a.get(&format!("/v1/audit-events?resource_id={n1}")).await;
    let actions: Vec<&str> = audit.1["data"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    for want in ["automation.created", "automation.paused", "automation.fired", "automation.deleted"] {
        assert!(actions.contains(&want), "{want} in {actions:?}");
    }
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_4_readiness_follows_the_service_principals_invoke() {
    let f = fixture().await;
    let a = &f.p.admin;
    let r = create(&f, "n1", a0(&f.d.deployment_id)).await;
    let n1 = id(&r.1);
    expect(&a.post(&format!("/v1/automations/{n1}/pause"), json!({})).await, 200, None);
    expect(&a.delete(&format!("/v1/permission-assignments/{}", f.invoke)).await, 200, None);
    let r = a.post(&format!("/v1/automations/{n1}/resume"), json!({})).await;
    expect(&r, 409, Some("validation.conflict"));
    assert_eq!(check(&r.1["error"]["details"]["readiness"], "permissions")["status"], "fail", "{}", r.1);
    let got = a.get(&format!("/v1/automations/{n1}")).await;
    assert_eq!(got.1["readiness"]["state"], "blocked", "evaluated on every read");
    grant(&f.p, &f.svc, &f.d.agent_id).await;
    let r = a.post(&format!("/v1/automations/{n1}/resume"), json!({})).await;
    expect(&r, 200, None);
    assert_eq!(r.1["status"], "active");
    wait_for_hook(&f.hooks, "automation.resumed", &n1).await;
    // Lost again: a fire is recorded skipped, with no child.
    let rows = a.get(&format!("/v1/permission-assignments?subject_id={}", f.svc)).await;
    for row in rows.1["data"].as_array().unwrap() {
        a.delete(&format!("/v1/permission-assignments/{}", id(row))).await;
    }
    let fired = a.post(&format!("/v1/automations/{n1}/fire"), json!({})).await;
    expect(&fired, 201, None);
    assert_eq!(fired.1["state"], "skipped", "{}", fired.1);
    assert_eq!(fired.1["error"]["reason"], "readiness_blocked");
    assert_eq!(fired.1["child_session_ids"], json!([]));
    // A new Automation on the same target starts paused.
    let r = create(&f, "n2", a0(&f.d.deployment_id)).await;
    expect(&r, 201, None);
    assert_eq!((r.1["status"].clone(), r.1["pause_reason"]["code"].clone()), (json!("paused"), json!("readiness_blocked")));
    // An active Automation may not be saved into a blocked state.
    grant(&f.p, &f.svc, &f.d.agent_id).await;
    let other = deploy(a, &f.p.env_id, json!({})).await;
    let r = a.post(&format!("/v1/automations/{n1}"), json!({"target": a0(&other.deployment_id)})).await;
    expect(&r, 409, Some("validation.conflict"));
    assert!(r.1["error"]["details"]["readiness"].is_object());
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_5_children_run_the_pinned_revision_until_the_target_is_saved_again() {
    let f = fixture().await;
    let a = &f.p.admin;
    let n1 = id(&create(&f, "n1", a0(&f.d.deployment_id)).await.1);
    // Revision 2 of dep_a, on a new version of a.
    f.publish_revision_2().await;
    let run_revision = |child: String| async move {
        let evs = events(a, &child).await;
        evs.iter().find(|e| e["type"] == "run.created").unwrap()["payload"]["execution_pins"]["deployment_revision"].clone()
    };
    let fired = a.post(&format!("/v1/automations/{n1}/fire"), json!({})).await;
    settled(a, &id(&fired.1)).await;
    assert_eq!(run_revision(fired.1["child_session_ids"][0].as_str().unwrap().to_string()).await, 1);
    let saved = a.post(&format!("/v1/automations/{n1}"), json!({"target": a0(&f.d.deployment_id)})).await;
    expect(&saved, 200, None);
    assert_eq!(saved.1["target"]["deployment_revision"], 2);
    let fired = a.post(&format!("/v1/automations/{n1}/fire"), json!({})).await;
    settled(a, &id(&fired.1)).await;
    assert_eq!(run_revision(fired.1["child_session_ids"][0].as_str().unwrap().to_string()).await, 2);
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_6_each_child_gets_its_own_budget_and_a_waiting_child_keeps_its_firing_running() {
    let f = fixture().await;
    let a = &f.p.admin;
    let mut target = a0(&f.d.deployment_id);
    target["budget"] = json!({"limit": 1, "metric": "model_tokens"});
    let n1 = id(&create(&f, "n1", target).await.1);
    let one = a.post(&format!("/v1/automations/{n1}/fire"), json!({"event": {"title": "one"}})).await;
    let two = a.post(&format!("/v1/automations/{n1}/fire"), json!({"event": {"title": "two"}})).await;
    let mut budgets = vec![];
    for fired in [&one, &two] {
        let child = fired.1["child_session_ids"][0].as_str().unwrap().to_string();
        let s = settle(a, &child).await;
        assert_eq!(s["stop_reason"]["type"], "budget_reached", "{s}");
        budgets.push(s["budget_id"].as_str().unwrap().to_string());
    }
    assert_ne!(budgets[0], budgets[1], "a Budget each, never an aggregate");
    tokio::time::sleep(Duration::from_millis(500)).await;
    for fired in [&one, &two] {
        assert_eq!(a.get(&format!("/v1/automation-firings/{}", id(&fired.1))).await.1["state"], "running");
    }
    // The waiting child archived: its firing fails child_terminated.
    let child = one.1["child_session_ids"][0].as_str().unwrap();
    expect(&a.post(&format!("/v1/sessions/{child}/archive"), json!({})).await, 200, None);
    let done = settled(a, &id(&one.1)).await;
    assert_eq!((done["state"].clone(), done["error"]["reason"].clone()), (json!("failed"), json!("child_terminated")), "{done}");
    assert_eq!(a.get(&format!("/v1/automation-firings/{}", id(&two.1))).await.1["state"], "running", "the other child waits on");
    f.p.stop().await;
}

/// `checkfu automation create|fire|firings|pause|resume|delete`, as the
/// built binary, with `--json`.
#[tokio::test(flavor = "multi_thread")]
async fn the_command_line_creates_fires_pauses_and_deletes() {
    let f = fixture().await;
    let key = std::fs::read_to_string(f.dir.path().join("admin.key")).unwrap().trim().to_string();
    let (base, env, svc, dep) = (f.p.base.clone(), f.p.env_id.clone(), f.svc.clone(), f.d.deployment_id.clone());
    let run = move |args: Vec<String>| {
        let (base, key) = (base.clone(), key.clone());
        async move {
            tokio::task::spawn_blocking(move || {
                let out = std::process::Command::new(procs::binary())
                    .args(&args)
                    .args(["--server", &base, "--key", &key, "--json"])
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout).to_string();
                if out.status.success() {
                    Ok(text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).collect::<Vec<_>>())
                } else {
                    Err(String::from_utf8_lossy(&out.stderr).to_string())
                }
            })
            .await
            .unwrap()
        }
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let created = run(s(&[
        "automation",
        "create",
        "--environment",
        &env,
        "--name",
        "cli",
        "--service-principal",
        &svc,
        "--deployment",
        &dep,
        "--prompt",
        "Hello {{event.who}}",
    ]))
    .await
    .unwrap();
    let auto = id(&created[0]);
    assert_eq!(created[0]["status"], "active");
    let event = f.dir.path().join("event.json");
    std::fs::write(&event, r#"{"who":"ops"}"#).unwrap();
    let fired = run(s(&["automation", "fire", &auto, "--event-file", event.to_str().unwrap()])).await.unwrap();
    assert_eq!(fired[0]["source"], "manual");
    settled(&f.p.admin, &id(&fired[0])).await;
    let firings = run(s(&["automation", "firings", &auto])).await.unwrap();
    assert_eq!((firings.len(), firings[0]["state"].as_str()), (1, Some("succeeded")));
    let trace = run(s(&["automation", "trace", &id(&fired[0])])).await.unwrap();
    let child = fired[0]["child_session_ids"][0].as_str().unwrap();
    assert_eq!(trace[0]["receipts"]["sessions"][0]["session_id"], child);
    assert_eq!(trace[0]["receipts"]["sessions"][0]["stop_reason"]["type"], "end_turn");
    assert_eq!(trace[0]["evidence"], json!({"complete": true, "missing": []}));
    assert_eq!(trace[0]["steps"], Value::Null);
    // Without --json: a tree.
    let key = std::fs::read_to_string(f.dir.path().join("admin.key")).unwrap().trim().to_string();
    let out = std::process::Command::new(procs::binary())
        .args(["automation", "trace", &id(&fired[0]), "--server", &f.p.base, "--key", &key])
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(tree.contains("manual  succeeded") && tree.contains(&format!("└─ session {child}  idle (end_turn)")), "{tree}");
    assert_eq!(run(s(&["automation", "pause", &auto, "--note", "maintenance"])).await.unwrap()[0]["status"], "paused");
    let refused = run(s(&["automation", "fire", &auto])).await.unwrap_err();
    assert!(refused.contains("409"), "{refused}");
    assert_eq!(run(s(&["automation", "resume", &auto])).await.unwrap()[0]["status"], "active");
    assert_eq!(run(s(&["automation", "list", "--environment", &env])).await.unwrap().len(), 1);
    run(s(&["automation", "delete", &auto])).await.unwrap();
    assert!(run(s(&["automation", "get", &auto])).await.unwrap_err().contains("404"));
    f.p.stop().await;
}

/// A child waiting on a custom tool keeps its firing running; interrupted,
/// the firing fails `child_interrupted`.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_child_fails_its_firing() {
    let f = fixture().await;
    let a = &f.p.admin;
    let c = deploy(a, &f.p.env_id, json!({"tools": [{"type": "custom", "name": "lookup", "read_only": true}]})).await;
    grant(&f.p, &f.svc, &c.agent_id).await;
    let target = json!({"kind": "agent", "agent_deployment_id": c.deployment_id, "prompt": "call lookup {}"});
    let n = id(&create(&f, "waits", target).await.1);
    let fired = a.post(&format!("/v1/automations/{n}/fire"), json!({})).await;
    let child = fired.1["child_session_ids"][0].as_str().unwrap().to_string();
    let waiting = settle(a, &child).await;
    assert_eq!(waiting["stop_reason"]["type"], "requires_action", "{waiting}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(a.get(&format!("/v1/automation-firings/{}", id(&fired.1))).await.1["state"], "running");
    let stop =
        json!({"type": "user.interrupt", "payload": {}, "authored_by": f.svc, "caused_by": {"kind": "principal", "id": f.p.admin_id}});
    expect(&a.post(&format!("/v1/sessions/{child}/events"), stop).await, 201, None);
    let done = settled(a, &id(&fired.1)).await;
    assert_eq!((done["state"].clone(), done["error"]["reason"].clone()), (json!("failed"), json!("child_interrupted")), "{done}");
    f.p.stop().await;
}

/// A crash between recording a firing and creating its child leaves a
/// pending child (the state admission writes first). Recovery creates it
/// with the recorded Session id — once — and the firing settles with it.
#[tokio::test(flavor = "multi_thread")]
async fn a_child_left_pending_by_a_crash_is_created_once_by_recovery() {
    use checkfu_core::id::SessionId;
    use checkfu_scheduler::model::ChildRequest;
    use checkfu_scheduler::store::SchedulerStore;
    let f = fixture().await;
    let n1 = id(&create(&f, "n1", a0(&f.d.deployment_id)).await.1);
    let (svc, dep, env) = (f.svc.clone(), f.d.deployment_id.clone(), f.p.env_id.clone());
    let Fixture { p, dir, .. } = f;
    p.stop().await;

    // What admission records before it asks for the child, a minute old.
    let (store, firing) = crashed_firing(dir.path(), &n1, &env, &svc).await;
    let session_id = SessionId::mint().to_string();
    let child = ChildRequest {
        session_id: session_id.clone(),
        step_id: String::new(),
        agent_deployment_id: dep,
        deployment_revision: Some(1),
        principal_id: svc.clone(),
        title: "n1".into(),
        metadata: json!({"automation_id": n1, "automation_firing_id": firing.id, "step_id": null}),
        prompt: "Summarize after the crash".into(),
        budget: None,
        firing_id: firing.id.to_string(),
        outcome: None,
        continuation: None,
        delivery_screen: None,
    };
    assert!(store.insert_firing(&firing, Some(&child), None).await.unwrap());

    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let done = settled(&p.admin, firing.id.as_str()).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["child_session_ids"], json!([session_id]), "the recorded id, once");
    let s = p.admin.get(&format!("/v1/sessions/{session_id}")).await;
    assert_eq!(s.1["principal_id"], svc);
    let sessions = p.admin.get(&format!("/v1/sessions?agent_deployment_id={}&limit=100", child.agent_deployment_id)).await;
    let ours: Vec<&Value> =
        sessions.1["data"].as_array().unwrap().iter().filter(|x| x["metadata"]["automation_firing_id"] == firing.id.as_str()).collect();
    assert_eq!(ours.len(), 1, "one child: {}", sessions.1);
    p.stop().await;
}
