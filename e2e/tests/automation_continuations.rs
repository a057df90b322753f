//! `continue_selected` through the public API (api.md §18.4): a firing's
//! prompt goes into an existing Session as one later `user.message` caused
//! by the firing, and the firing (or its step) settles with the Run that
//! message started — into an idle `end_turn` Session only, rejoined, never
//! repeated, after a crash. Acceptance checks of §18.13 numbered 12 and 13.
#![cfg(test)]

use checkfu_e2e::automation::*;
use checkfu_e2e::*;
use serde_json::{Value, json};

fn text(e: &Value) -> &str {
    e["payload"]["content"][0]["text"].as_str().unwrap_or_default()
}

fn continuing(dep: &str, session: &str) -> Value {
    json!({"kind": "agent", "agent_deployment_id": dep, "prompt": "Continue with {{event.title}}",
        "session_target": {"mode": "continue_selected", "session": session}})
}

fn messages(evs: &[Value]) -> Vec<Value> {
    evs.iter().filter(|e| e["type"] == "user.message").cloned().collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_12_a_continuation_sends_one_input_into_an_idle_session_and_settles_with_its_run() {
    let f = fixture().await;
    let a = &f.p.admin;
    let dep = f.d.deployment_id.clone();
    let s = idle_session(a, &f.svc, &dep, json!({})).await;
    let r = create(&f, "c1", continuing(&dep, &s)).await;
    expect(&r, 201, None);
    assert_eq!((r.1["status"].clone(), r.1["readiness"]["state"].clone()), (json!("active"), json!("ready")), "{}", r.1);
    assert_eq!(check(&r.1["readiness"], "session_target")["status"], "pass");
    let n = id(&r.1);

    let fired = a.post(&format!("/v1/automations/{n}/fire"), json!({"event": {"title": "Q"}})).await;
    expect(&fired, 201, None);
    let firing = id(&fired.1);
    let done = settled(a, &firing).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["child_session_ids"], json!([s]), "the continued Session is listed, no new one: {done}");
    assert!(done["usage"]["input_tokens"].as_i64().unwrap() > 0, "the Run's usage: {done}");
    let evs = events(a, &s).await;
    assert_gapless(&evs);
    let msgs = messages(&evs);
    assert_eq!(msgs.len(), 2, "one input, after the Session's own");
    let input_event = &msgs[1];
    assert_eq!(text(input_event), "Continue with Q");
    assert_eq!(input_event["caused_by"], json!({"kind": "automation_firing", "id": firing}));
    assert_eq!(input_event["authored_by"], f.svc.as_str());
    let runs: Vec<&Value> = evs.iter().filter(|e| e["type"] == "run.created").collect();
    assert_eq!(runs.len(), 2, "a new Run");
    assert_eq!(runs[1]["caused_by"], json!({"kind": "event", "id": input_event["id"]}));
    let reply = evs.iter().rev().find(|e| e["type"] == "agent.message").unwrap();
    assert_eq!(text(reply), "echo: Continue with Q");
    let trace = a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1;
    assert_eq!(
        trace["receipts"]["inputs"],
        json!([{"step_id": null, "session_id": s, "event_id": input_event["id"], "run_id": runs[1]["run_id"]}]),
        "{trace}"
    );
    assert_eq!(trace["evidence"]["complete"], true);

    // A Budget beside it is refused: the Session keeps its own.
    let mut budgeted = continuing(&dep, &s);
    budgeted["budget"] = json!({"limit": 1000});
    let r = create(&f, "c2", budgeted).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "session_target_conflict");

    // Idle at budget_reached: busy, nothing appended.
    let capped = idle_session(a, &f.svc, &dep, json!({"budget": {"limit": 1, "metric": "model_tokens"}})).await;
    assert_eq!(settle(a, &capped).await["stop_reason"]["type"], "budget_reached");
    let before = events(a, &capped).await.len();
    let c3 = id(&create(&f, "c3", continuing(&dep, &capped)).await.1);
    let busy = settled(a, &id(&a.post(&format!("/v1/automations/{c3}/fire"), json!({"event": {"title": "Q"}})).await.1)).await;
    assert_eq!((busy["state"].clone(), busy["error"]["reason"].clone()), (json!("failed"), json!("session_busy")), "{busy}");
    assert_eq!(busy["child_session_ids"], json!([]), "{busy}");
    assert_eq!(events(a, &capped).await.len(), before, "nothing appended");

    // Archived: terminated; readiness says so.
    expect(&a.post(&format!("/v1/sessions/{s}/archive"), json!({})).await, 200, None);
    let gone = settled(a, &id(&a.post(&format!("/v1/automations/{n}/fire"), json!({"event": {"title": "R"}})).await.1)).await;
    assert_eq!((gone["state"].clone(), gone["error"]["reason"].clone()), (json!("failed"), json!("session_terminated")), "{gone}");
    assert_eq!(messages(&events(a, &s).await).len(), 2, "nothing appended");
    let auto = a.get(&format!("/v1/automations/{n}")).await.1;
    assert_eq!(check(&auto["readiness"], "session_target")["status"], "fail", "{auto}");
    f.p.stop().await;
}

/// The service Principal continues only its own Sessions or ones it may
/// act as: readiness says so, and losing `act_as` after the Automation was
/// made fails the firing `session_input_denied`, nothing appended.
#[tokio::test(flavor = "multi_thread")]
async fn a_continuation_needs_act_as_on_another_principals_session() {
    let f = fixture().await;
    let a = &f.p.admin;
    let dep = f.d.deployment_id.clone();
    let mine = idle_session(a, &f.p.admin_id, &dep, json!({})).await;
    let r = create(&f, "c1", continuing(&dep, &mine)).await;
    expect(&r, 201, None);
    assert_eq!((r.1["status"].clone(), r.1["pause_reason"]["code"].clone()), (json!("paused"), json!("readiness_blocked")), "{}", r.1);
    let failing = check(&r.1["readiness"], "session_target");
    assert_eq!((failing["status"].clone(), failing["resource_id"].clone()), (json!("fail"), json!(mine)), "{}", r.1);
    let n = id(&r.1);
    let g = json!({"subject": {"kind": "principal", "id": f.svc}, "permission": "act_as", "resource": {"kind": "principal", "id": f.p.admin_id}});
    let row = a.post("/v1/permission-assignments", g).await;
    expect(&row, 201, None);
    let resumed = a.post(&format!("/v1/automations/{n}/resume"), json!({})).await;
    expect(&resumed, 200, None);
    assert_eq!(resumed.1["status"], "active");
    let ok = settled(a, &id(&a.post(&format!("/v1/automations/{n}/fire"), json!({"event": {"title": "Q"}})).await.1)).await;
    assert_eq!(ok["state"], "succeeded", "{ok}");
    expect(&a.delete(&format!("/v1/permission-assignments/{}", id(&row.1))).await, 200, None);
    let denied = settled(a, &id(&a.post(&format!("/v1/automations/{n}/fire"), json!({"event": {"title": "R"}})).await.1)).await;
    assert_eq!((denied["state"].clone(), denied["error"]["reason"].clone()), (json!("failed"), json!("session_input_denied")), "{denied}");
    let texts: Vec<String> = messages(&events(a, &mine).await).iter().map(|e| text(e).to_string()).collect();
    assert_eq!(texts, ["first", "Continue with Q"], "nothing appended after act_as was lost");
    f.p.stop().await;
}

/// Acceptance 13: a graph's continue_selected step into an idle Session
/// whose Agent parks on a custom tool; `checkfu up` is killed with SIGKILL
/// while it is parked; after the restart the answer lets the work end, and
/// the step settles then — one input from the firing in all — and the
/// program goes on.
#[tokio::test(flavor = "multi_thread")]
async fn acceptance_13_a_sigkill_while_a_continued_run_is_parked_rejoins_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let tools = json!({"tools": [{"type": "custom", "name": "lookup", "read_only": true}]});
    let Crashable { mut proc, base, key, i, svc, d } = crashable(dir.path(), tools).await;
    let a = &i.admin;
    let s = a
        .post(
            "/v1/sessions",
            json!({"agent_deployment_id": d.deployment_id, "principal_id": svc,
            "initial_events": [input(&svc, "user.message", json!({"content": [{"type": "text", "text": "first"}]}))]}),
        )
        .await;
    expect(&s, 201, None);
    let s = id(&s.1);
    assert_eq!(settle(a, &s).await["stop_reason"]["type"], "end_turn");
    let hook = json!({"kind": "trigger", "id": "hook", "trigger": {"kind": "webhook", "dedupe_key": "/id"}});
    let step = json!({"kind": "step_agent", "id": "c", "agent": d.deployment_id, "prompt": "call lookup {}",
        "sessionTarget": {"mode": "continue_selected", "session": s}});
    let after = json!({"kind": "step_agent", "id": "b", "agent": d.deployment_id, "prompt": "after"});
    let doc = json!({"name": "g13", "environment_id": i.env_id, "service_principal_id": svc, "nodes": [hook, step, after],
        "edges": [{"kind": "starts", "from": "hook", "to": "c"}, {"kind": "then", "from": "c", "to": "b"}]});
    let g = id(&a.post("/v1/automation-graphs", json!({"created_by_principal_id": i.admin_id, "document": doc})).await.1);
    let p = a.post(&format!("/v1/automation-graphs/{g}/plan"), json!({"revision": 1})).await.1;
    assert_eq!((p["readiness"]["state"].clone(), p["target_kind"].clone()), (json!("ready"), json!("steps")), "{p}");
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    expect(&r, 200, None);
    let (auto, secret) = (r.1["automation_id"].as_str().unwrap().to_string(), r.1["ingest_secret"].as_str().unwrap().to_string());
    let fired = ingest_signed(&base, &auto, &secret, r#"{"id":"1"}"#).await;
    expect(&fired, 201, None);
    let firing = id(&fired.1);
    let parked = settle(a, &s).await;
    assert_eq!(parked["stop_reason"]["type"], "requires_action", "{parked}");
    proc.kill_hard();

    let (_proc, base) = checkfu_e2e::procs::up(dir.path());
    wait_ready(&base).await;
    let a = Api::new(&base, &key);
    let evs = events(&a, &s).await;
    let use_id = evs.iter().find(|e| e["type"] == "agent.custom_tool_use").unwrap()["payload"]["custom_tool_use_id"].clone();
    let result =
        input(&svc, "user.custom_tool_result", json!({"custom_tool_use_id": use_id, "content": [{"type": "text", "text": "found"}]}));
    expect(&a.post(&format!("/v1/sessions/{s}/events"), result).await, 201, None);
    let done = settled(&a, &firing).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert!(done["program"]["attempt"].as_i64().unwrap() >= 2, "recovered: {done}");
    let children = done["child_session_ids"].as_array().unwrap();
    assert_eq!((children.len(), children[0].clone()), (2, json!(s)), "the continued Session, then b's child: {done}");
    let evs = events(&a, &s).await;
    assert_gapless(&evs);
    let from_firing: Vec<&Value> = evs.iter().filter(|e| e["caused_by"] == json!({"kind": "automation_firing", "id": firing})).collect();
    assert_eq!(from_firing.len(), 1, "one input from that firing: {from_firing:?}");
    let run = evs.iter().find(|e| e["type"] == "run.created" && e["caused_by"]["id"] == from_firing[0]["id"]).unwrap();
    let step = done["program"]["steps"].as_array().unwrap().iter().find(|st| st["id"] == "c").unwrap().clone();
    assert_eq!(step["outcome"]["kind"], "completed", "{step}");
    assert_eq!(step["input"], json!({"session_id": s, "event_id": from_firing[0]["id"], "run_id": run["run_id"]}), "{step}");
    // Its work: that Run, parked, then the Run the answer started, ended.
    let idles: Vec<&Value> =
        evs.iter().filter(|e| e["type"] == "session.status_idle" && e["seq"].as_i64() > from_firing[0]["seq"].as_i64()).collect();
    let stops: Vec<&str> = idles.iter().map(|e| e["payload"]["stop_reason"]["type"].as_str().unwrap()).collect();
    assert_eq!(stops, ["requires_action", "end_turn"]);
    assert_eq!(idles[0]["run_id"], run["run_id"]);
}

/// A crash between recording an input and asking for it leaves it pending
/// (what admission writes first). Recovery appends it once, as the event
/// id minted with it, and the firing settles with its work.
#[tokio::test(flavor = "multi_thread")]
async fn an_input_left_pending_by_a_crash_is_appended_once_by_recovery() {
    use checkfu_scheduler::model::ChildRequest;
    use checkfu_scheduler::session_input::Continuation;
    use checkfu_scheduler::store::SchedulerStore;
    let f = fixture().await;
    let dep = f.d.deployment_id.clone();
    let s = idle_session(&f.p.admin, &f.svc, &dep, json!({})).await;
    let n = id(&create(&f, "c1", continuing(&dep, &s)).await.1);
    let (svc, env) = (f.svc.clone(), f.p.env_id.clone());
    let Fixture { p, dir, .. } = f;
    p.stop().await;

    let (store, firing) = crashed_firing(dir.path(), &n, &env, &svc).await;
    let k = Continuation::new(firing.id.as_str(), "", 1);
    let child = ChildRequest {
        session_id: s.clone(),
        step_id: String::new(),
        agent_deployment_id: dep,
        deployment_revision: Some(1),
        principal_id: svc.clone(),
        title: "c1".into(),
        metadata: json!({}),
        prompt: "Continue after the crash".into(),
        budget: None,
        firing_id: firing.id.to_string(),
        outcome: None,
        continuation: Some(k.clone()),
        delivery_screen: None,
    };
    assert!(store.insert_firing(&firing, Some(&child), None).await.unwrap());

    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let done = settled(&p.admin, firing.id.as_str()).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["child_session_ids"], json!([s]));
    let msgs = messages(&events(&p.admin, &s).await);
    let texts: Vec<&str> = msgs.iter().map(text).collect();
    assert_eq!(texts, ["first", "Continue after the crash"], "appended once");
    assert_eq!(msgs[1]["id"], k.event_id.as_str(), "as the event id minted with it");
    p.stop().await;
}
