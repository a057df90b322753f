//! Outcomes through the public API (api.md §14): the acceptance checks of
//! §14.4 by number, on the embedded server and the scripted model, whose
//! grader judges `require:`, `forbid:` and `uncertain:` lines.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::{Value, json};

fn define(who: &str, payload: Value) -> Value {
    input(who, "user.define_outcome", payload)
}

/// A Session whose first event defines an Outcome; answers it settled.
async fn outcome_session(p: &Platform, d: &Deployed, payload: Value) -> (String, Value) {
    let body =
        json!({"agent_deployment_id": d.deployment_id, "principal_id": p.admin_id, "initial_events": [define(&p.admin_id, payload)]});
    let r = p.admin.post("/v1/sessions", body).await;
    expect(&r, 201, None);
    let sid = id(&r.1);
    let settled = settle(&p.admin, &sid).await;
    (sid, settled)
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

fn evaluations(events: &[Value]) -> Vec<Value> {
    of_type(events, "outcome.evaluation_completed").into_iter().map(|e| e["payload"].clone()).collect()
}

async fn say(p: &Platform, sid: &str, text: &str) -> Value {
    expect(&p.admin.post(&format!("/v1/sessions/{sid}/events"), message(&p.admin_id, text)).await, 201, None);
    settle(&p.admin, sid).await
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_1_a_satisfied_outcome_takes_one_run_and_idles() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let (sid, settled) =
        outcome_session(&p, &d, json!({"description": "say hello", "rubric": "require: hello", "max_iterations": 3})).await;
    assert_eq!(settled["stop_reason"], json!({"type": "end_turn"}), "{settled}");
    let evs = events(&p.admin, &sid).await;
    assert_gapless(&evs);
    let defined = of_type(&evs, "user.define_outcome")[0];
    let outcome_id = defined["payload"]["outcome_id"].as_str().unwrap().to_string();
    assert!(outcome_id.starts_with("outc_"), "the echo names the Outcome: {defined}");
    assert_eq!(of_type(&evs, "run.created").len(), 1);
    let started = of_type(&evs, "outcome.evaluation_started");
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["payload"], json!({"outcome_id": outcome_id, "iteration": 1}));
    let done = evaluations(&evs);
    assert_eq!((done[0]["result"].clone(), done[0]["outcome_status"].clone()), (json!("satisfied"), json!("satisfied")));
    // The order: the Run completes, the grading starts and ends, then the Session idles.
    let ts = types(&evs);
    let at = |t: &str| ts.iter().rposition(|x| x == t).unwrap();
    assert!(at("run.completed") < at("outcome.evaluation_started"));
    assert!(at("outcome.evaluation_started") < at("outcome.evaluation_completed"));
    assert!(at("outcome.evaluation_completed") < at("session.status_idle"));
    assert_eq!(ts.iter().filter(|t| *t == "session.status_idle").count(), 1, "the Session idles once, after the grading: {ts:?}");
    let agent = of_type(&evs, "agent.message");
    assert!(agent[0].to_string().contains("echo: say hello"), "the description is the Run's user turn");
    let listed = p.admin.get(&format!("/v1/sessions/{sid}/outcomes")).await;
    expect(&listed, 200, None);
    assert_eq!(listed.1["data"][0]["id"], outcome_id);
    assert_eq!(listed.1["data"][0]["status"], "satisfied");
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_2_needs_revision_starts_a_run_with_the_feedback() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let (sid, _) = outcome_session(&p, &d, json!({"description": "say hello", "rubric": "require: goodbye", "max_iterations": 3})).await;
    let evs = events(&p.admin, &sid).await;
    let done = evaluations(&evs);
    assert_eq!(done.len(), 2, "{done:?}");
    assert_eq!((done[0]["iteration"].clone(), done[0]["result"].clone()), (json!(1), json!("needs_revision")));
    assert_eq!(done[0]["feedback"], "fail require: goodbye");
    assert_eq!(done[0]["outcome_status"], "active");
    assert_eq!((done[1]["iteration"].clone(), done[1]["result"].clone()), (json!(2), json!("satisfied")));
    let runs = of_type(&evs, "run.created");
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[1]["caused_by"]["kind"], "outcome");
    assert_eq!(runs[1]["caused_by"]["id"], done[0]["outcome_id"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_3_the_last_iteration_ends_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let (sid, settled) = outcome_session(&p, &d, json!({"description": "hello", "rubric": "forbid: hello", "max_iterations": 2})).await;
    assert_eq!(settled["stop_reason"]["type"], "end_turn");
    let evs = events(&p.admin, &sid).await;
    let results: Vec<Value> = evaluations(&evs).iter().map(|e| e["result"].clone()).collect();
    assert_eq!(results, [json!("needs_revision"), json!("max_iterations_reached")]);
    assert_eq!(of_type(&evs, "run.created").len(), 2, "exactly two Runs");
    let o = p.admin.get(&format!("/v1/sessions/{sid}/outcomes")).await.1["data"][0].clone();
    assert_eq!((o["status"].clone(), o["iterations_used"].clone()), (json!("max_iterations_reached"), json!(2)));
    assert!(o["completed_at"].is_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_4_bad_definitions_are_refused_and_one_outcome_is_active_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let me = &p.admin_id;
    let base = json!({"description": "d", "rubric": "r", "max_iterations": 3});
    let with = |k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    let outputs = |n: usize| (0..n).map(|i| json!({"name": format!("o{i}"), "type": "string"})).collect::<Vec<_>>();
    let new = |events: Value| json!({"agent_deployment_id": d.deployment_id, "principal_id": me, "initial_events": events});
    for bad in [
        with("max_iterations", json!(0)),
        with("max_iterations", json!(21)),
        with("criteria", json!([{"name": "a", "question": "q", "failure": "fail_open"}])),
        with("criteria", json!([{"name": "a", "question": "q"}])),
        with("report", json!({"extraction": "json", "outputs": outputs(0)})),
        with("report", json!({"extraction": "json", "outputs": outputs(33)})),
        with("report", json!({"extraction": "lines", "outputs": outputs(1)})),
    ] {
        let r = p.admin.post("/v1/sessions", new(json!([define(me, bad.clone())]))).await;
        expect(&r, 400, Some("validation.invalid"));
    }
    let late = p.admin.post("/v1/sessions", new(json!([message(me, "hi"), define(me, base.clone())]))).await;
    expect(&late, 400, Some("validation.invalid"));
    // An Outcome the grader could not decide stays active: a second one is refused.
    let (sid, _) = outcome_session(&p, &d, json!({"description": "maybe", "rubric": "uncertain: maybe", "max_iterations": 3})).await;
    let again = p.admin.post(&format!("/v1/sessions/{sid}/events"), define(me, base.clone())).await;
    expect(&again, 409, Some("validation.conflict"));
    // Once it ended, another may be defined.
    expect(&p.admin.post(&format!("/v1/sessions/{sid}/events"), interrupt(me)).await, 201, None);
    settle(&p.admin, &sid).await;
    expect(&p.admin.post(&format!("/v1/sessions/{sid}/events"), define(me, with("rubric", json!("require: d")))).await, 201, None);
    settle(&p.admin, &sid).await;
    let listed = p.admin.get(&format!("/v1/sessions/{sid}/outcomes")).await.1;
    let statuses: Vec<&str> = listed["data"].as_array().unwrap().iter().map(|o| o["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["satisfied", "interrupted"], "newest first");
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_5_criteria_are_judged_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let criteria = json!([{"name": "greets", "question": "require: hello", "failure": "fail_closed"}]);
    let (sid, _) = outcome_session(&p, &d, json!({"description": "hello", "rubric": "", "max_iterations": 1, "criteria": criteria})).await;
    let done = evaluations(&events(&p.admin, &sid).await);
    assert_eq!(done[0]["result"], "satisfied");
    let judged: Vec<Value> = done[0]["judgments"].as_array().unwrap().clone();
    assert!(judged.contains(&json!({"source": "criterion", "name": "greets", "verdict": "true"})), "{judged:?}");
    let (sid, _) = outcome_session(&p, &d, json!({"description": "bye", "rubric": "", "max_iterations": 2, "criteria": criteria})).await;
    let done = evaluations(&events(&p.admin, &sid).await);
    assert_eq!(done[0]["result"], "needs_revision");
    assert!(done[0]["judgments"].as_array().unwrap().contains(&json!({"source": "criterion", "name": "greets", "verdict": "false"})));
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_6_an_undecided_grading_keeps_the_outcome_until_the_evidence_changes() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let uncertain = json!({"description": "maybe", "rubric": "uncertain: maybe", "max_iterations": 3});
    let outcome = |sid: String| {
        let p = &p;
        async move { p.admin.get(&format!("/v1/sessions/{sid}/outcomes")).await.1["data"][0].clone() }
    };

    let (sid, settled) = outcome_session(&p, &d, uncertain.clone()).await;
    assert_eq!(settled["stop_reason"]["type"], "end_turn");
    let first = evaluations(&events(&p.admin, &sid).await);
    assert_eq!((first[0]["result"].clone(), first[0]["reason"].clone()), (json!("interrupted"), json!("outcome.evaluation_unavailable")));
    let o = outcome(sid.clone()).await;
    assert_eq!((o["status"].clone(), o["iterations_used"].clone()), (json!("active"), json!(0)));
    // The same evidence again: not graded again.
    say(&p, &sid, "maybe").await;
    let done = evaluations(&events(&p.admin, &sid).await);
    assert_eq!((done[1]["result"].clone(), done[1]["reason"].clone()), (json!("interrupted"), json!("outcome.evidence_unchanged")));
    assert_eq!(done[1]["usage"], json!({"input_tokens": 0, "output_tokens": 0, "cost_micro_usd": 0}));
    assert_eq!(outcome(sid.clone()).await["status"], "interrupted");

    // Other evidence: graded as the same iteration.
    let (sid, _) = outcome_session(&p, &d, uncertain.clone()).await;
    say(&p, &sid, "fine").await;
    let done = evaluations(&events(&p.admin, &sid).await);
    assert_eq!((done[1]["result"].clone(), done[1]["iteration"].clone()), (json!("satisfied"), json!(1)));

    // An interrupt instead: the Outcome ends, no grading, no Run.
    let (sid, _) = outcome_session(&p, &d, uncertain).await;
    let before = events(&p.admin, &sid).await.len();
    expect(&p.admin.post(&format!("/v1/sessions/{sid}/events"), interrupt(&p.admin_id)).await, 201, None);
    settle(&p.admin, &sid).await;
    let evs = events(&p.admin, &sid).await;
    let after: Vec<String> = types(&evs[before..]);
    assert!(!after.contains(&"outcome.evaluation_started".to_string()) && !after.contains(&"run.created".to_string()), "{after:?}");
    let done = evaluations(&evs);
    assert_eq!((done[1]["result"].clone(), done[1]["reason"].clone()), (json!("interrupted"), json!("user.interrupt")));
    assert_eq!(outcome(sid).await["status"], "interrupted");
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_7_a_json_report_is_checked_against_its_acceptance() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let report = |min: i64| json!({"extraction": "json", "outputs": [{"name": "score", "type": "integer", "acceptance": {"min": min}}]});
    let (sid, _) =
        outcome_session(&p, &d, json!({"description": "{\"score\": 7}", "rubric": "", "max_iterations": 2, "report": report(5)})).await;
    let o = p.admin.get(&format!("/v1/sessions/{sid}/outcomes")).await.1["data"][0].clone();
    assert_eq!((o["status"].clone(), o["report"].clone()), (json!("satisfied"), json!({"score": 7})), "{o}");
    assert_eq!(o["report_declaration"], report(5));
    let (sid, _) =
        outcome_session(&p, &d, json!({"description": "{\"score\": 7}", "rubric": "", "max_iterations": 1, "report": report(8)})).await;
    let done = evaluations(&events(&p.admin, &sid).await);
    assert_eq!(done[0]["result"], "max_iterations_reached");
    assert!(done[0]["feedback"].as_str().unwrap().contains("score"), "{}", done[0]);
    let (sid, _) =
        outcome_session(&p, &d, json!({"description": "{\"score\": 7}", "rubric": "", "max_iterations": 2, "report": report(8)})).await;
    assert_eq!(evaluations(&events(&p.admin, &sid).await)[0]["result"], "needs_revision");
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_8_the_graders_cost_is_the_sessions_and_its_digest_is_stable() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let body = json!({"agent_deployment_id": d.deployment_id, "principal_id": p.admin_id, "budget": {"limit": 1_000_000, "metric": "model_tokens"},
        "initial_events": [define(&p.admin_id, json!({"description": "say hello", "rubric": "require: hello", "max_iterations": 3}))]});
    let r = p.admin.post("/v1/sessions", body).await;
    expect(&r, 201, None);
    let sid = id(&r.1);
    let session = settle(&p.admin, &sid).await;
    let evs = events(&p.admin, &sid).await;
    let outcome_id = of_type(&evs, "user.define_outcome")[0]["payload"]["outcome_id"].as_str().unwrap();
    let o = p.admin.get(&format!("/v1/outcomes/{outcome_id}")).await;
    expect(&o, 200, None);
    let e = &o.1["evaluations"][0];
    assert_eq!(e["explanation"], "pass require: hello");
    let digest = e["evaluation_input_sha256"].as_str().unwrap();
    assert!(digest.len() == 64 && digest.chars().all(|c| c.is_ascii_hexdigit()), "{digest}");
    // §14.3: ⌈(14 rubric + 15 evidence) ÷ 4⌉ in, ⌈19 explanation ÷ 4⌉ out.
    assert_eq!((e["usage"]["input_tokens"].clone(), e["usage"]["output_tokens"].clone()), (json!(8), json!(5)));
    assert_eq!(o.1["usage"]["input_tokens"], 8);
    // In the Session's usage beside the Run's model call, with no span for the grader.
    let spans = of_type(&evs, "span.model_request_end");
    assert_eq!(spans.len(), 1, "one model call: the Run's");
    let run_in = spans[0]["payload"]["model_usage"]["input_tokens"].as_i64().unwrap();
    let run_out = spans[0]["payload"]["model_usage"]["output_tokens"].as_i64().unwrap();
    assert_eq!(session["usage"]["input_tokens"].as_i64().unwrap(), run_in + 8, "{session}");
    assert_eq!(session["usage"]["output_tokens"].as_i64().unwrap(), run_out + 5);
    let budget = p.admin.get(&format!("/v1/budgets/{}", session["budget_id"].as_str().unwrap())).await.1;
    assert_eq!(budget["consumed"].as_i64().unwrap(), run_in + run_out + 13, "{budget}");
    // Equal rubric and evidence elsewhere: the same digest.
    let (other, _) = outcome_session(&p, &d, json!({"description": "say hello", "rubric": "require: hello", "max_iterations": 1})).await;
    let again = evaluations(&events(&p.admin, &other).await);
    assert_eq!(again[0]["evaluation_input_sha256"], digest);
    // Read like its Session: another Principal without access cannot.
    let who = id(&p.admin.post("/v1/principals", json!({"kind": "human", "name": "outsider"})).await.1);
    let key = p.admin.post(&format!("/v1/principals/{who}/api-keys"), json!({})).await.1["secret"].as_str().unwrap().to_string();
    let outsider = Api::new(&p.base, &key);
    let denied = outsider.get(&format!("/v1/outcomes/{outcome_id}")).await;
    assert!(denied.0 == 403 || denied.0 == 404, "{denied:?}");
    expect(&p.admin.get("/v1/outcomes/outc_01jx0000000000000000000000").await, 404, Some("not_found"));
}

#[tokio::test(flavor = "multi_thread")]
async fn evaluations_reach_webhooks_and_archiving_fails_an_active_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let (hooks, url) = hook_receiver().await;
    let types = ["outcome.evaluation_started", "outcome.evaluation_completed"];
    expect(&p.admin.post("/v1/webhook-endpoints", json!({"environment_id": p.env_id, "url": url, "event_types": types})).await, 201, None);
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let (sid, _) = outcome_session(&p, &d, json!({"description": "maybe", "rubric": "uncertain: maybe", "max_iterations": 3})).await;
    let outcome_id = p.admin.get(&format!("/v1/sessions/{sid}/outcomes")).await.1["data"][0]["id"].as_str().unwrap().to_string();
    for t in types {
        checkfu_e2e::automation::wait_for_hook(&hooks, t, &outcome_id).await;
    }
    let delivered: Vec<Value> = hooks.lock().unwrap().iter().filter_map(|b| serde_json::from_str(b).ok()).collect();
    assert!(delivered.iter().all(|b| b["data"]["session_id"] == sid), "{delivered:?}");
    // Still active (undecided): archiving the Session fails it.
    expect(&p.admin.post(&format!("/v1/sessions/{sid}/archive"), json!({})).await, 200, None);
    let o = p.admin.get(&format!("/v1/outcomes/{outcome_id}")).await.1;
    assert_eq!((o["status"].clone(), o["reason"].clone()), (json!("failed"), json!("session_archived")), "{o}");
    let last = evaluations(&events(&p.admin, &sid).await).last().cloned().unwrap();
    assert_eq!((last["result"].clone(), last["usage"]["input_tokens"].clone()), (json!("failed"), json!(0)));
}
