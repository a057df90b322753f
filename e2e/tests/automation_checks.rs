//! Typed Checks in AutomationGraphs through the public API (api.md §18.1):
//! what a document may say about them, the plan codes that guard their
//! arms and saved answers, the offline `test-rule`, evaluator
//! qualifications, and Checks evaluated live by the scripted model —
//! acceptance checks of §18.13 numbered 1 to 6.
#![cfg(test)]

use checkfu_e2e::automation::*;
use checkfu_e2e::*;
use serde_json::{Value, json};

fn document(f: &Fixture, name: &str, nodes: Value, edges: Value) -> Value {
    json!({"name": name, "environment_id": f.p.env_id, "service_principal_id": f.svc, "nodes": nodes, "edges": edges})
}

fn hook() -> Value {
    json!({"kind": "trigger", "id": "hook", "trigger": {"kind": "webhook", "dedupe_key": "/id"}})
}

/// `K`: `billing` requires "invoice", `tech` is uncertain on "maybe"; the
/// rule reads `billing`.
fn k(rule: Value) -> Value {
    json!({"modelRoutingProfileId": "mrp_01jx0000000000000000000001",
        "questions": [{"name": "billing", "question": "require: invoice"}, {"name": "tech", "question": "uncertain: maybe"}], "rule": rule})
}

fn decision(id: &str, condition: Value) -> Value {
    json!({"kind": "decision", "id": id, "condition": condition})
}

fn edge(kind: &str, from: &str, to: Option<&str>) -> Value {
    json!({"kind": kind, "from": from, "to": to})
}

/// Every arm of a Check's Decision, `continue` to `to` and the rest ending
/// the program.
fn arms(from: &str, to: Option<&str>) -> Vec<Value> {
    vec![edge("continue", from, to), edge("otherwise", from, None), edge("uncertain", from, None), edge("error", from, None)]
}

async fn create(f: &Fixture, doc: Value) -> String {
    let r = f.p.admin.post("/v1/automation-graphs", json!({"created_by_principal_id": f.p.admin_id, "document": doc})).await;
    expect(&r, 201, None);
    id(&r.1)
}

async fn plan_codes(f: &Fixture, graph: &str) -> Vec<String> {
    let r = f.p.admin.post(&format!("/v1/automation-graphs/{graph}/plan"), json!({"revision": 1})).await;
    expect(&r, 200, None);
    r.1["errors"].as_array().into_iter().flatten().map(|e| e["code"].as_str().unwrap_or_default().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_1_and_3_a_checks_decision_needs_every_arm_and_answers_it_can_read() {
    let f = fixture().await;
    let agent = json!({"kind": "step_agent", "id": "a", "agent": f.d.deployment_id, "prompt": "A"});
    // Two arms of four.
    let g = create(
        &f,
        document(
            &f,
            "two-arms",
            json!([hook(), decision("d", json!({"kind": "check", "check": k(json!("billing"))})), agent.clone()]),
            json!([edge("starts", "hook", Some("d")), edge("continue", "d", Some("a")), edge("otherwise", "d", None)]),
        ),
    )
    .await;
    assert_eq!(plan_codes(&f, &g).await, ["decision_arm_missing", "decision_arm_missing"]);

    // All four plan; the graph is saved but not executable yet.
    let mut edges = vec![edge("starts", "hook", Some("d"))];
    edges.extend(arms("d", Some("a")));
    let g = create(
        &f,
        document(
            &f,
            "four-arms",
            json!([hook(), decision("d", json!({"kind": "check", "check": k(json!("billing"))})), agent.clone()]),
            json!(edges),
        ),
    )
    .await;
    let r = f.p.admin.post(&format!("/v1/automation-graphs/{g}/plan"), json!({"revision": 1})).await;
    assert_eq!(r.1["kind"], "planned", "{}", r.1);

    // A rule over a name the Check does not ask: check_invalid.
    let bad = decision("d", json!({"kind": "check", "check": k(json!({"any": ["billing", "spam"]}))}));
    let g = create(&f, document(&f, "bad-rule", json!([hook(), bad, agent.clone()]), json!(edges))).await;
    assert_eq!(plan_codes(&f, &g).await, ["check_invalid"]);

    // check_result reached through the source's error arm, or around it.
    let result = decision("r", json!({"kind": "check_result", "sourceNodeId": "d", "rule": "tech"}));
    let nodes = json!([hook(), decision("d", json!({"kind": "check", "check": k(json!("billing"))})), result, agent]);
    let mut via_error = vec![edge("starts", "hook", Some("d")), edge("continue", "d", None), edge("otherwise", "d", None)];
    via_error.extend([edge("uncertain", "d", None), edge("error", "d", Some("r"))]);
    via_error.extend(arms("r", Some("a")));
    let g = create(&f, document(&f, "via-error", nodes.clone(), json!(via_error))).await;
    assert_eq!(plan_codes(&f, &g).await, ["check_result_not_guaranteed"]);
    let mut around = vec![edge("starts", "hook", Some("d")), edge("starts", "hook", Some("r"))];
    around.extend(arms("d", Some("r")));
    around.extend(arms("r", Some("a")));
    let g = create(&f, document(&f, "around", nodes.clone(), json!(around))).await;
    assert_eq!(plan_codes(&f, &g).await, ["check_result_not_guaranteed"]);
    let mut after_otherwise = vec![edge("starts", "hook", Some("d")), edge("continue", "d", None), edge("otherwise", "d", Some("r"))];
    after_otherwise.extend([edge("uncertain", "d", None), edge("error", "d", None)]);
    after_otherwise.extend(arms("r", Some("a")));
    let g = create(&f, document(&f, "after-otherwise", nodes, json!(after_otherwise))).await;
    assert_eq!(plan_codes(&f, &g).await, Vec::<String>::new(), "reached only by a verdict: planned");
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_5_a_rule_is_tested_offline_by_whoever_may_read_the_graph() {
    let f = fixture().await;
    let a = &f.p.admin;
    let d = decision("d", json!({"kind": "check", "check": k(json!("billing"))}));
    let any = decision("any", json!({"kind": "check", "check": k(json!({"any": ["billing", "tech"]}))}));
    let result = decision("r", json!({"kind": "check_result", "sourceNodeId": "d", "rule": {"not": "tech"}}));
    let step = json!({"kind": "step_check", "id": "s", "check": k(json!({"all": ["billing", "tech"]}))});
    let agent = json!({"kind": "step_agent", "id": "a", "agent": f.d.deployment_id, "prompt": "A"});
    let mut edges = vec![edge("starts", "hook", Some("d")), edge("starts", "hook", Some("any")), edge("starts", "hook", Some("s"))];
    edges.extend(arms("d", Some("r")));
    edges.extend(arms("r", Some("a")));
    edges.extend(arms("any", None));
    let g = create(&f, document(&f, "rules", json!([hook(), d, any, result, step, agent]), json!(edges))).await;
    let before = a.get(&format!("/v1/automation-graphs/{g}")).await.1;
    let url = format!("/v1/automation-graphs/{g}/revisions/1/test-rule");
    let tried = |node: &str, answers: Value| a.post(&url, json!({"node": node, "answers": answers}));
    let verdict = |r: &Reply| (r.0.as_u16(), r.1["verdict"].clone(), r.1["branch"].clone());

    let r = tried("d", json!({"billing": "yes", "tech": "uncertain"})).await;
    assert_eq!(verdict(&r), (200, json!("yes"), json!("continue")), "{}", r.1);
    assert_eq!(verdict(&tried("d", json!({"billing": "no", "tech": "yes"})).await), (200, json!("no"), json!("otherwise")));
    let r = tried("any", json!({"billing": "no", "tech": "uncertain"})).await;
    assert_eq!(verdict(&r), (200, json!("uncertain"), json!("uncertain")), "no or unknown is unknown");
    let r = tried("r", json!({"billing": "no", "tech": "no"})).await;
    assert_eq!(verdict(&r), (200, json!("yes"), json!("continue")), "check_result rules on its source's questions");
    let r = tried("s", json!({"billing": "yes", "tech": "uncertain"})).await;
    assert_eq!(verdict(&r), (200, json!("uncertain"), json!("then")), "a step_check completes whatever the verdict");

    let reason = |r: &Reply| (r.0.as_u16(), r.1["error"]["details"]["reason"].clone());
    assert_eq!(reason(&tried("d", json!({"billing": "yes"})).await), (400, json!("answers_invalid")), "a missing name");
    let extra = tried("d", json!({"billing": "yes", "tech": "no", "spam": "no"})).await;
    assert_eq!(reason(&extra), (400, json!("answers_invalid")), "an extra name");
    assert_eq!(reason(&tried("d", json!({"billing": "maybe", "tech": "no"})).await), (400, json!("answers_invalid")));
    assert_eq!(reason(&tried("d", json!({"billing": true, "tech": "no"})).await), (400, json!("answers_invalid")));
    assert_eq!(reason(&tried("a", json!({})).await), (400, json!("node_not_check")));
    expect(&tried("nope", json!({})).await, 404, None);
    expect(&a.post(&format!("/v1/automation-graphs/{g}/revisions/9/test-rule"), json!({"node": "d", "answers": {}})).await, 404, None);
    let not_a_revision = a.post(&format!("/v1/automation-graphs/{g}/revisions/first/test-rule"), json!({"node": "d", "answers": {}})).await;
    expect(&not_a_revision, 400, Some("validation.invalid"));
    let seventeen: serde_json::Map<String, Value> = (0..17).map(|i| (format!("q{i}"), json!("yes"))).collect();
    assert_eq!(
        reason(&tried("d", Value::Object(seventeen)).await),
        (400, json!("answers_invalid")),
        "more answers than a Check has questions"
    );

    // Offline: no qualification was needed, and nothing was recorded.
    assert_eq!(a.get(&format!("/v1/automation-graphs/{g}")).await.1, before, "the graph is as it was");

    // `read` on the Environment suffices; without it, the graph is not there.
    let who = id(&a.post("/v1/principals", json!({"kind": "service", "name": "reader"})).await.1);
    let key = a.post(&format!("/v1/principals/{who}/api-keys"), json!({"name": "k"})).await;
    let reader = Api::new(&f.p.base, key.1["secret"].as_str().unwrap());
    let body = json!({"node": "d", "answers": {"billing": "yes", "tech": "no"}});
    expect(&reader.post(&url, body.clone()).await, 404, None);
    let grant =
        json!({"subject": {"kind": "principal", "id": who}, "permission": "read", "resource": {"kind": "environment", "id": f.p.env_id}});
    expect(&a.post("/v1/permission-assignments", grant).await, 201, None);
    let r = reader.post(&url, body).await;
    assert_eq!(verdict(&r), (200, json!("yes"), json!("continue")), "{}", r.1);

    // The command line, as a person runs it.
    let text = f.cli(&["graph", "test-rule", &g, "--revision", "1", "--node", "any", "--answer", "billing=no", "--answer", "tech=yes"]);
    assert_eq!(text.trim(), "verdict yes → continue", "{text}");
    let out = f.cli_fails(&["graph", "test-rule", &g, "--revision", "1", "--node", "d", "--answer", "billing=yes"]);
    assert!(out.contains("400") && out.contains("no answer to \"tech\""), "{out}");
    f.p.stop().await;
}

/// Records that the fixture's scripted model (`scripted-1`) may judge
/// `decision`s for 30 days; answers the qualification's id.
async fn qualify(f: &Fixture) -> String {
    let now = checkfu_core::time::now_ms();
    let body = json!({"provider": "scripted", "model": "scripted-1", "purpose": "decision", "evidence": "the decision suite, 2026-12",
        "reviewed_at": checkfu_core::time::rfc3339(now - 3_600_000), "expires_at": checkfu_core::time::rfc3339(now + 30 * 86_400_000)});
    let r = f.p.admin.post("/v1/evaluator-qualifications", body).await;
    expect(&r, 201, None);
    assert_eq!((r.1["status"].clone(), r.1["purpose"].clone()), (json!("active"), json!("decision")), "{}", r.1);
    id(&r.1)
}

/// `K` on the fixture's scripted routing profile.
fn k_on(f: &Fixture, rule: Value, instructions: Option<&str>) -> Value {
    let mut k = k(rule);
    k["modelRoutingProfileId"] = json!(f.d.routing_profile_id);
    if let Some(i) = instructions {
        k["instructions"] = json!(i);
    }
    k
}

/// Creates, plans and applies a graph; answers its Automation, its
/// status after the apply, and the ingest secret.
async fn apply(f: &Fixture, name: &str, nodes: Value, edges: Value) -> (String, Value, String) {
    let a = &f.p.admin;
    let g = create(f, document(f, name, nodes, edges)).await;
    let p = a.post(&format!("/v1/automation-graphs/{g}/plan"), json!({"revision": 1})).await.1;
    assert_eq!(p["blockers"], json!([]), "{p}");
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    expect(&r, 200, None);
    let auto = r.1["automation_id"].as_str().unwrap().to_string();
    let am = a.get(&format!("/v1/automations/{auto}")).await.1;
    (auto, am, r.1["ingest_secret"].as_str().unwrap_or_default().to_string())
}

/// Fires through signed ingest and answers the settled firing and its trace.
async fn fire(f: &Fixture, auto: &str, secret: &str, body: Value) -> (Value, Value) {
    let r = ingest_signed(&f.p.base, auto, secret, &body.to_string()).await;
    expect(&r, 201, None);
    let done = settled(&f.p.admin, &id(&r.1)).await;
    let trace = f.p.admin.get(&format!("/v1/automation-firings/{}/trace", id(&r.1))).await.1;
    (done, trace)
}

fn step<'a>(firing: &'a Value, id: &str) -> &'a Value {
    firing["program"]["steps"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap()
}

fn evaluations(trace: &Value) -> Vec<Value> {
    trace["receipts"]["evaluations"].as_array().cloned().unwrap_or_default()
}

/// hook → d(check K with `rule`) -continue→ a, the other arms ending it.
fn routed(f: &Fixture, rule: Value, instructions: Option<&str>) -> (Value, Value) {
    let mut edges = vec![edge("starts", "hook", Some("d"))];
    edges.extend(arms("d", Some("a")));
    let agent = json!({"kind": "step_agent", "id": "a", "agent": f.d.deployment_id, "prompt": "A"});
    (json!([hook(), decision("d", json!({"kind": "check", "check": k_on(f, rule, instructions)})), agent]), json!(edges))
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_1_2_and_3_checks_route_by_their_verdict_under_a_qualification() {
    let f = fixture().await;
    let a = &f.p.admin;
    let mrp = f.d.routing_profile_id.clone();

    // 1. Nothing is qualified: the graph applies paused, `evaluators`
    // naming the purpose and the profile; qualified, it resumes.
    let (nodes, edges) = routed(&f, json!("billing"), None);
    let (billing, am, billing_secret) = apply(&f, "billing", nodes, edges).await;
    assert_eq!((am["status"].clone(), am["pause_reason"]["code"].clone()), (json!("paused"), json!("readiness_blocked")), "{am}");
    let ev = check(&am["readiness"], "evaluators");
    assert_eq!(ev["status"], "fail", "{am}");
    let reason = ev["reason"].as_str().unwrap();
    assert!(reason.contains("decision") && reason.contains(&mrp), "{reason}");
    let q = qualify(&f).await;
    let r = a.post(&format!("/v1/automations/{billing}/resume"), json!({})).await;
    expect(&r, 200, None);
    assert_eq!(r.1["status"], "active", "{}", r.1);
    assert_eq!(check(&r.1["readiness"], "evaluators")["status"], "pass");

    // 2. The verdict's arm, one evaluation each.
    let (done, trace) = fire(&f, &billing, &billing_secret, json!({"id": "1", "t": "invoice"})).await;
    assert_eq!((done["state"].clone(), step(&done, "d")["outcome"]["branch"].clone()), (json!("succeeded"), json!("continue")), "{done}");
    assert_eq!(done["child_session_ids"].as_array().unwrap().len(), 1, "a ran");
    let evs = evaluations(&trace);
    assert_eq!(evs.len(), 1, "{trace}");
    let e = &evs[0];
    assert!(e["id"].as_str().unwrap().starts_with("ceval_"), "{e}");
    assert_eq!(step(&done, "d")["evaluation_id"], e["id"]);
    assert_eq!(
        (e["provider"].clone(), e["model"].clone(), e["qualification_id"].clone()),
        (json!("scripted"), json!("scripted-1"), json!(q))
    );
    assert_eq!((e["answers"].clone(), e["verdict"].clone()), (json!({"billing": "yes", "tech": "yes"}), json!("yes")));
    assert!(e["usage"]["input_tokens"].as_i64().unwrap() > 0, "{e}");
    assert!(done["usage"]["input_tokens"].as_i64().unwrap() >= e["usage"]["input_tokens"].as_i64().unwrap(), "the cost joins the firing's");
    let receipts = trace["receipts"].to_string();
    assert!(!receipts.contains("require: invoice") && !receipts.contains("\"t\":\"invoice\""), "no question or input in the receipts");

    let (done, trace) = fire(&f, &billing, &billing_secret, json!({"id": "2", "t": "hi"})).await;
    assert_eq!((done["state"].clone(), step(&done, "d")["outcome"]["branch"].clone()), (json!("succeeded"), json!("otherwise")));
    assert_eq!(step(&done, "a")["outcome"]["kind"], "skipped");
    assert_eq!(evaluations(&trace).len(), 1);

    let (nodes, edges) = routed(&f, json!("tech"), None);
    let (tech, _, tech_secret) = apply(&f, "tech", nodes, edges).await;
    let (done, trace) = fire(&f, &tech, &tech_secret, json!({"id": "3", "t": "maybe"})).await;
    assert_eq!(step(&done, "d")["outcome"]["branch"], "uncertain", "{done}");
    assert_eq!(evaluations(&trace)[0]["verdict"], "uncertain");

    let (nodes, edges) = routed(&f, json!("billing"), Some("error: boom"));
    let (boom, _, boom_secret) = apply(&f, "boom", nodes, edges).await;
    let (done, trace) = fire(&f, &boom, &boom_secret, json!({"id": "4", "t": "boom"})).await;
    assert_eq!(done["state"], "succeeded", "the error arm is a route: {done}");
    assert_eq!(step(&done, "d")["outcome"], json!({"kind": "completed", "branch": "error", "reason": "check_provider_error"}));
    assert_eq!(
        (evaluations(&trace)[0]["error"].clone(), evaluations(&trace)[0]["verdict"].clone()),
        (json!("check_provider_error"), Value::Null)
    );

    // Revoked: nothing is called, the error arm says why, nothing is spent.
    let r = a.post(&format!("/v1/evaluator-qualifications/{q}/revoke"), json!({})).await;
    expect(&r, 200, None);
    assert_eq!(r.1["status"], "revoked");
    let (done, trace) = fire(&f, &billing, &billing_secret, json!({"id": "5", "t": "invoice"})).await;
    assert_eq!(step(&done, "d")["outcome"], json!({"kind": "completed", "branch": "error", "reason": "evaluator_unqualified"}), "{done}");
    let e = &evaluations(&trace)[0];
    assert_eq!(
        (e["error"].clone(), e["usage"]["input_tokens"].clone(), e["qualification_id"].clone()),
        (json!("evaluator_unqualified"), json!(0), Value::Null)
    );
    assert_eq!(done["usage"]["input_tokens"], 0, "zero usage: {done}");
    let am = a.get(&format!("/v1/automations/{billing}")).await.1;
    assert_eq!(check(&am["readiness"], "evaluators")["status"], "fail", "readiness says so too");

    // 3. A check_result reuses the source's answers: one evaluation for both.
    qualify(&f).await;
    let result = decision("r", json!({"kind": "check_result", "sourceNodeId": "d", "rule": "tech"}));
    let agent = json!({"kind": "step_agent", "id": "a", "agent": f.d.deployment_id, "prompt": "A"});
    let mut edges = vec![edge("starts", "hook", Some("d")), edge("continue", "d", None), edge("otherwise", "d", Some("r"))];
    edges.extend([edge("uncertain", "d", None), edge("error", "d", None)]);
    edges.extend(arms("r", Some("a")));
    let nodes = json!([hook(), decision("d", json!({"kind": "check", "check": k_on(&f, json!("billing"), None)})), result, agent]);
    let (reuse, _, reuse_secret) = apply(&f, "reuse", nodes, json!(edges)).await;
    let (done, trace) = fire(&f, &reuse, &reuse_secret, json!({"id": "6", "t": "hi"})).await;
    assert_eq!(
        (step(&done, "d")["outcome"]["branch"].clone(), step(&done, "r")["outcome"]["branch"].clone()),
        (json!("otherwise"), json!("continue")),
        "{done}"
    );
    assert_eq!(done["child_session_ids"].as_array().unwrap().len(), 1);
    assert_eq!(evaluations(&trace).len(), 1, "one evaluation for both: {trace}");
    assert!(step(&done, "r").get("evaluation_id").is_none());
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_4_a_step_check_feeds_its_answers_and_fails_on_an_evaluation_error() {
    let f = fixture().await;
    // Qualified from the command line, as an admin would.
    let out = f.cli(&["profiles", "evaluators", "qualify", "scripted:scripted-1", "--evidence", "the decision suite", "--days", "30"]);
    assert!(out.starts_with("evq_") && out.contains("scripted:scripted-1  decision  active until"), "{out}");
    let listed = f.cli(&["profiles", "evaluators", "list"]);
    assert!(listed.contains(out.split_whitespace().next().unwrap()), "{listed}");
    assert!(f.cli_fails(&["profiles", "evaluators", "qualify", "scripted", "--evidence", "x"]).contains("provider:model"));
    let graph = |name: &'static str, instructions: Option<&'static str>| {
        let c = json!({"kind": "step_check", "id": "c", "check": k_on(&f, json!("billing"), instructions)});
        let v = decision("v", json!({"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/verdict", "value": "no"}]}));
        let b = json!({"kind": "step_agent", "id": "b", "agent": f.d.deployment_id, "prompt": "B"});
        let edges = json!([
            edge("starts", "hook", Some("c")),
            edge("then", "c", Some("v")),
            edge("output", "c", Some("v")),
            edge("continue", "v", Some("b")),
            edge("otherwise", "v", None)
        ]);
        (name, json!([hook(), c, v, b]), edges)
    };
    let (name, nodes, edges) = graph("step-check", None);
    let (auto, am, secret) = apply(&f, name, nodes, edges).await;
    assert_eq!(am["status"], "active", "{am}");
    let (done, trace) = fire(&f, &auto, &secret, json!({"id": "1", "t": "hi"})).await;
    assert_eq!((done["state"].clone(), step(&done, "v")["outcome"]["branch"].clone()), (json!("succeeded"), json!("continue")), "{done}");
    assert_eq!(done["child_session_ids"].as_array().unwrap().len(), 1, "b ran");
    assert_eq!(evaluations(&trace)[0]["verdict"], "no");

    let (name, nodes, edges) = graph("step-check-boom", Some("error: boom"));
    let (auto, _, secret) = apply(&f, name, nodes, edges).await;
    let (done, _) = fire(&f, &auto, &secret, json!({"id": "2", "t": "boom"})).await;
    assert_eq!((done["state"].clone(), done["program"]["result"].clone()), (json!("failed"), json!("failed")), "{done}");
    assert_eq!(step(&done, "c")["outcome"], json!({"kind": "failed", "reason": "check_provider_error"}));
    assert_eq!(step(&done, "v")["outcome"]["kind"], "skipped");
    f.p.stop().await;
}

/// Qualifications are the installation's: only an admin records or
/// revokes one, every field is checked, and a plan names a Check's
/// missing routing profile as a blocker.
#[tokio::test(flavor = "multi_thread")]
async fn evaluator_qualifications_are_an_admins_and_profiles_are_found_at_plan() {
    let f = fixture().await;
    let a = &f.p.admin;
    let now = checkfu_core::time::now_ms();
    let at = checkfu_core::time::rfc3339;
    let body = |reviewed: i64, expires: i64| {
        json!({"provider": "scripted", "model": "scripted-1", "purpose": "decision", "evidence": "suite",
            "reviewed_at": at(reviewed), "expires_at": at(expires)})
    };
    let r = a.post("/v1/evaluator-qualifications", body(now - 1_000, now - 500)).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["field"], "expires_at");
    let r = a.post("/v1/evaluator-qualifications", body(now - 1_000, now + 367 * 86_400_000)).await;
    assert_eq!(r.1["error"]["details"]["field"], "expires_at", "at most 366 days after the review");
    let mut odd = body(now - 1_000, now + 86_400_000);
    odd["purpose"] = json!("grading");
    expect(&a.post("/v1/evaluator-qualifications", odd).await, 400, Some("validation.invalid"));
    let mut extra = body(now - 1_000, now + 86_400_000);
    extra["status"] = json!("active");
    expect(&a.post("/v1/evaluator-qualifications", extra).await, 400, Some("validation.invalid"));

    // A reader of the Environment is no installation admin.
    let reader = id(&a.post("/v1/principals", json!({"kind": "human", "name": "reader"})).await.1);
    let grant = json!({"subject": {"kind": "principal", "id": reader}, "permission": "read", "resource": {"kind": "environment", "id": f.p.env_id}});
    expect(&a.post("/v1/permission-assignments", grant).await, 201, None);
    let key = a.post(&format!("/v1/principals/{reader}/api-keys"), json!({"name": "k"})).await;
    let reader_api = Api::new(&f.p.base, key.1["secret"].as_str().unwrap());
    let r = reader_api.post("/v1/evaluator-qualifications", body(now - 1_000, now + 86_400_000)).await;
    expect(&r, 403, Some("permission.denied"));
    let q = qualify(&f).await;
    expect(&reader_api.post(&format!("/v1/evaluator-qualifications/{q}/revoke"), json!({})).await, 403, Some("permission.denied"));
    let listed = reader_api.get("/v1/evaluator-qualifications").await;
    expect(&listed, 200, None);
    assert_eq!(listed.1["data"][0]["id"], json!(q), "readable by any caller");
    expect(&a.get("/v1/evaluator-qualifications/evq_01jx0000000000000000000000").await, 404, Some("not_found"));
    let r = a.post(&format!("/v1/evaluator-qualifications/{q}/revoke"), json!({})).await;
    assert_eq!((r.1["status"].clone(), r.1["revoked_at"].is_string()), (json!("revoked"), true));
    let again = a.post(&format!("/v1/evaluator-qualifications/{q}/revoke"), json!({})).await;
    assert_eq!((again.0.as_u16(), again.1["revoked_at"].clone()), (200, r.1["revoked_at"].clone()), "revoked once");

    // The fixture's K names a profile that does not exist.
    let mut edges = vec![edge("starts", "hook", Some("d"))];
    edges.extend(arms("d", None));
    let g = create(
        &f,
        document(
            &f,
            "missing-profile",
            json!([hook(), decision("d", json!({"kind": "check", "check": k(json!("billing"))}))]),
            json!(edges),
        ),
    )
    .await;
    let p = a.post(&format!("/v1/automation-graphs/{g}/plan"), json!({"revision": 1})).await.1;
    assert_eq!(
        (p["blockers"][0]["code"].clone(), p["blockers"][0]["node"].clone()),
        (json!("model_routing_profile_not_found"), json!("d")),
        "{p}"
    );
    f.p.stop().await;
}

/// Acceptance 6 with a real process: a saved evaluation is read after a
/// SIGKILL, never asked for again.
#[tokio::test(flavor = "multi_thread")]
async fn acceptance_6_a_restart_reads_the_saved_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let Crashable { mut proc, base, key, i, svc, d } = crashable(dir.path(), json!({})).await;
    let a = &i.admin;
    let now = checkfu_core::time::now_ms();
    let q = json!({"provider": "scripted", "model": "scripted-1", "purpose": "decision", "evidence": "suite",
        "reviewed_at": checkfu_core::time::rfc3339(now - 60_000), "expires_at": checkfu_core::time::rfc3339(now + 86_400_000)});
    expect(&a.post("/v1/evaluator-qualifications", q).await, 201, None);
    let mut k = k(json!("billing"));
    k["modelRoutingProfileId"] = json!(d.routing_profile_id);
    let mut edges = vec![edge("starts", "hook", Some("c")), edge("then", "c", Some("w")), edge("then", "w", Some("r"))];
    edges.extend(arms("r", Some("a")));
    let doc = json!({"name": "g6", "environment_id": i.env_id, "service_principal_id": svc,
        "nodes": [hook(), {"kind": "step_check", "id": "c", "check": k}, {"kind": "step_wait", "id": "w", "durationSeconds": 5},
            decision("r", json!({"kind": "check_result", "sourceNodeId": "c", "rule": "billing"})),
            {"kind": "step_agent", "id": "a", "agent": d.deployment_id, "prompt": "after"}],
        "edges": edges});
    let g = id(&a.post("/v1/automation-graphs", json!({"created_by_principal_id": i.admin_id, "document": doc})).await.1);
    let p = a.post(&format!("/v1/automation-graphs/{g}/plan"), json!({"revision": 1})).await.1;
    assert_eq!(p["blockers"], json!([]), "{p}");
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    let auto = r.1["automation_id"].as_str().unwrap().to_string();
    let secret = r.1["ingest_secret"].as_str().unwrap().to_string();
    let fired = ingest_signed(&base, &auto, &secret, r#"{"id":"1","t":"invoice"}"#).await;
    expect(&fired, 201, None);
    let firing = id(&fired.1);
    // Killed once the evaluation is saved and the wait has begun.
    let mut waiting = false;
    for _ in 0..100 {
        let f = a.get(&format!("/v1/automation-firings/{firing}")).await.1;
        if step(&f, "w")["outcome"]["kind"] == "waiting" {
            waiting = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(waiting, "the step_check settled and the wait began");
    proc.kill_hard();

    let (_proc, base) = checkfu_e2e::procs::up(dir.path());
    wait_ready(&base).await;
    let a = Api::new(&base, &key);
    let done = settled(&a, &firing).await;
    assert_eq!((done["state"].clone(), step(&done, "r")["outcome"]["branch"].clone()), (json!("succeeded"), json!("continue")), "{done}");
    assert!(done["program"]["attempt"].as_i64().unwrap() >= 2, "recovered: {done}");
    let trace = a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1;
    assert_eq!(evaluations(&trace).len(), 1, "one evaluation across the restart: {trace}");
    assert_eq!(firings(&a, &auto).await.len(), 1, "the same firing");
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_11_a_failing_check_is_retried_by_its_retry_then_fails() {
    let f = fixture().await;
    qualify(&f).await;
    let c =
        |retry: Value| json!({"kind": "step_check", "id": "c", "check": k_on(&f, json!("billing"), Some("error: boom")), "retry": retry});
    let (auto, _, secret) = apply(
        &f,
        "retried",
        json!([hook(), c(json!({"maxAttempts": 3, "backoffSeconds": 1}))]),
        json!([edge("starts", "hook", Some("c"))]),
    )
    .await;
    let (done, trace) = fire(&f, &auto, &secret, json!({"id": "1", "t": "boom"})).await;
    assert_eq!(done["state"], "failed", "{done}");
    let s = step(&done, "c");
    assert_eq!(s["outcome"], json!({"kind": "failed", "reason": "check_provider_error"}));
    assert_eq!(s["attempt"], 3);
    let attempts: Vec<(i64, String)> =
        s["attempts"].as_array().unwrap().iter().map(|a| (a["n"].as_i64().unwrap(), a["outcome"].as_str().unwrap().to_string())).collect();
    assert_eq!(attempts, [(1, "failed".to_string()), (2, "failed".into()), (3, "failed".into())]);
    let evs = evaluations(&trace);
    assert_eq!(evs.iter().map(|e| e["attempt"].as_i64().unwrap()).collect::<Vec<_>>(), [1, 2, 3], "three evaluations: {trace}");
    let retrying: Vec<&Value> = trace["steps"]["outcomes"].as_array().unwrap().iter().filter(|o| o["kind"] == "retrying").collect();
    assert_eq!(retrying.len(), 2, "{trace}");
    assert_eq!((retrying[0]["attempt"].clone(), retrying[0]["reason"].clone()), (json!(1), json!("check_provider_error")));
    // Attempt 2 began at least a second after attempt 1 failed.
    let starts: Vec<i64> = evs
        .iter()
        .map(|e| {
            time::OffsetDateTime::parse(e["at"].as_str().unwrap(), &time::format_description::well_known::Rfc3339)
                .unwrap()
                .unix_timestamp_nanos() as i64
                / 1_000_000
        })
        .collect();
    assert!(starts[1] - starts[0] >= 1_000 && starts[2] - starts[1] >= 1_000, "{starts:?}");

    // Bounds and kinds.
    let g = create(
        &f,
        document(&f, "six", json!([hook(), c(json!({"maxAttempts": 6, "backoffSeconds": 1}))]), json!([edge("starts", "hook", Some("c"))])),
    )
    .await;
    assert_eq!(plan_codes(&f, &g).await, ["invalid_retry"]);
    let wait = json!({"kind": "step_wait", "id": "w", "durationSeconds": 1, "retry": {"maxAttempts": 2, "backoffSeconds": 1}});
    let g = create(&f, document(&f, "wait", json!([hook(), wait]), json!([edge("starts", "hook", Some("w"))]))).await;
    assert_eq!(plan_codes(&f, &g).await, ["retry_unsupported"]);
    f.p.stop().await;
}
