//! Typed Checks in AutomationGraphs through the public API (api.md §18.1):
//! what a document may say about them, the plan codes that guard their
//! arms and saved answers, and the offline `test-rule` — acceptance checks
//! of §18.13 numbered 1 (the arms), 3 (the plan code) and 5. A graph with
//! Checks plans but stays paused until Checks can run.
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
