//! AutomationGraphs through the public API (api.md §12.7), the acceptance
//! checks of §12.11 numbered 13, 14 and 22: documents and revisions, plans
//! with their rejection codes and pins, apply with its plan digest, the
//! Automation a graph manages, and node tests.
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

fn step(f: &Fixture, id: &str, prompt: &str) -> Value {
    json!({"kind": "step_agent", "id": id, "agent": f.d.deployment_id, "prompt": prompt})
}

fn starts(to: &str) -> Value {
    json!({"kind": "starts", "from": "hook", "to": to})
}

async fn create_graph(f: &Fixture, doc: Value) -> Reply {
    f.p.admin.post("/v1/automation-graphs", json!({"created_by_principal_id": f.p.admin_id, "document": doc})).await
}

async fn plan(f: &Fixture, graph: &str, revision: i64) -> Value {
    let r = f.p.admin.post(&format!("/v1/automation-graphs/{graph}/plan"), json!({"revision": revision})).await;
    expect(&r, 200, None);
    r.1
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_13_a_graph_applies_to_an_automation_it_manages() {
    let f = fixture().await;
    let a = &f.p.admin;
    let doc = document(&f, "g13", json!([hook(), step(&f, "s1", "Summarize {{event.title}}")]), json!([starts("s1")]));
    // created_by_principal_id is required.
    let r = a.post("/v1/automation-graphs", json!({"document": doc})).await;
    expect(&r, 400, Some("validation.invalid"));
    let r = create_graph(&f, doc.clone()).await;
    expect(&r, 201, None);
    let g = id(&r.1);
    assert!(g.starts_with("agph_"), "{}", r.1);
    assert_eq!((r.1["latest_revision"].clone(), r.1["drift"]["state"].clone()), (json!(1), json!("not_applied")));
    // The list narrows to one Environment when asked to.
    let other = id(&a.post("/v1/environments", json!({"name": "other"})).await.1);
    let listed = |env: String| async move { a.get(&format!("/v1/automation-graphs?environment_id={env}")).await.1["data"].clone() };
    assert_eq!(listed(f.p.env_id.clone()).await.as_array().map(|l| l.iter().any(|x| x["id"] == g.as_str())), Some(true));
    assert_eq!(listed(other).await, json!([]), "the other Environment holds no graph");

    let p = plan(&f, &g, 1).await;
    assert_eq!(p["kind"], "planned", "{p}");
    assert_eq!(p["automation"], json!({"id": null, "action": "create"}));
    assert_eq!(p["target_kind"], "agent");
    assert_eq!(p["pins"][0]["agent_version"], 1);
    assert_eq!(p["pins"][0]["node"], "s1");
    assert_eq!(p["pins"][0]["agent_deployment_id"], f.d.deployment_id);
    assert_eq!(p["blockers"], json!([]));
    assert_eq!(p["readiness"]["state"], "ready");
    assert_eq!(p["required_inputs"], json!([{"name": "ingest_secret", "generated_if_absent": true}]));
    assert_eq!(plan(&f, &g, 1).await["plan_sha256"], p["plan_sha256"], "planning records nothing and is stable");

    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    expect(&r, 200, None);
    assert_eq!(r.1["action"], "create");
    let auto = r.1["automation_id"].as_str().unwrap().to_string();
    let secret = r.1["ingest_secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"), "generated once: {}", r.1);
    let am = a.get(&format!("/v1/automations/{auto}")).await.1;
    assert_eq!(am["managed_by"], json!({"kind": "graph", "graph_id": g, "revision": 1}));
    assert_eq!(am["status"], "active");
    assert_eq!(am["target"]["deployment_revision"], 1);
    wait_for_hook(&f.hooks, "automation.created", &auto).await;
    // The managed Automation takes events like any other.
    let fired = ingest_signed(&f.p.base, &auto, &secret, r#"{"id":"g1","title":"Q"}"#).await;
    expect(&fired, 201, None);
    assert_eq!(settled(a, &id(&fired.1)).await["state"], "succeeded");

    // Direct writes to what the graph owns are refused; the rest stay direct.
    let r = a.post(&format!("/v1/automations/{auto}"), json!({"target": a0(&f.d.deployment_id)})).await;
    expect(&r, 409, Some("validation.conflict"));
    assert_eq!(r.1["error"]["details"]["reason"], "managed_by_graph");
    expect(&a.delete(&format!("/v1/automations/{auto}")).await, 409, Some("validation.conflict"));
    expect(&a.post(&format!("/v1/automations/{auto}"), json!({"metadata": {"team": "ops"}})).await, 200, None);
    // The same document again: 200, no new revision.
    let r = a.post(&format!("/v1/automation-graphs/{g}/revisions"), json!({"document": doc, "layout": {"s1": [10, 20]}})).await;
    expect(&r, 200, None);
    assert_eq!(r.1["latest_revision"], 1);
    assert_eq!(r.1["layout"], json!({"s1": [10, 20]}));
    // Applying the same plan again changes nothing.
    let again = plan(&f, &g, 1).await;
    assert_eq!(again["automation"], json!({"id": auto, "action": "unchanged"}));
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": again["plan_sha256"]})).await;
    expect(&r, 200, None);
    assert_eq!(r.1["action"], "unchanged");
    assert!(r.1.get("ingest_secret").is_none());
    let graph = a.get(&format!("/v1/automation-graphs/{g}")).await.1;
    assert_eq!((graph["applied_revision"].clone(), graph["automation_id"].clone()), (json!(1), json!(auto)));
    assert_eq!(graph["drift"]["state"], "in_sync", "{graph}");
    let journal = a.get(&format!("/v1/automation-graphs/{g}/applications")).await.1;
    let actions: Vec<&str> = journal["data"].as_array().unwrap().iter().map(|x| x["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["unchanged", "create"]);
    // A direct Automation is never adopted: its name blocks the plan.
    expect(&create(&f, "taken", a0(&f.d.deployment_id)).await, 201, None);
    let other = create_graph(&f, document(&f, "taken", json!([hook(), step(&f, "s1", "x")]), json!([starts("s1")]))).await;
    let p = plan(&f, &id(&other.1), 1).await;
    assert_eq!(p["blockers"][0]["code"], "name_taken", "{p}");
    let r = a.post(&format!("/v1/automation-graphs/{}/apply", id(&other.1)), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    assert_eq!((r.0.as_u16(), r.1["error"]["details"]["reason"].clone()), (409, json!("plan_blocked")));
    // A pinned deployment moving on drifts the applied graph.
    f.publish_revision_2().await;
    let graph = a.get(&format!("/v1/automation-graphs/{g}")).await.1;
    assert_eq!(graph["drift"]["state"], "drifted", "{graph}");
    assert_eq!(
        (graph["drift"]["reasons"][0]["code"].clone(), graph["drift"]["reasons"][0]["node"].clone()),
        (json!("pin_changed"), json!("s1"))
    );
    // Deleting the graph deletes its Automation.
    expect(&a.delete(&format!("/v1/automation-graphs/{g}")).await, 200, None);
    expect(&a.get(&format!("/v1/automations/{auto}")).await, 404, None);
    expect(&a.get(&format!("/v1/automation-graphs/{g}")).await, 404, None);
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_14_plans_reject_with_their_codes_and_stale_plans_are_refused() {
    let f = fixture().await;
    let a = &f.p.admin;
    let rejected = |p: &Value, code: &str| {
        assert_eq!(p["kind"], "rejected", "{p}");
        assert!(p["errors"].as_array().unwrap().iter().any(|e| e["code"] == code), "{code}: {p}");
    };
    let bad_edge = create_graph(
        &f,
        document(
            &f,
            "e",
            json!([hook(), step(&f, "a", "x"), step(&f, "b", "y")]),
            json!([starts("a"), {"kind": "starts", "from": "a", "to": "b"}]),
        ),
    )
    .await;
    let p = plan(&f, &id(&bad_edge.1), 1).await;
    rejected(&p, "edge_endpoint_kind");
    let e = p["errors"].as_array().unwrap().iter().find(|e| e["code"] == "edge_endpoint_kind").unwrap();
    assert_eq!(e["edge"], json!({"index": 1, "kind": "starts", "from": "a", "to": "b"}));
    let cycle = create_graph(
        &f,
        document(
            &f,
            "c",
            json!([hook(), step(&f, "a", "x"), step(&f, "b", "y")]),
            json!([starts("a"), {"kind": "then", "from": "a", "to": "b"}, {"kind": "then", "from": "b", "to": "a"}]),
        ),
    )
    .await;
    rejected(&plan(&f, &id(&cycle.1), 1).await, "cycle");
    let schedules = create_graph(
        &f,
        document(
            &f,
            "s",
            json!([{"kind": "trigger", "id": "cron", "trigger": {"kind": "schedule", "cron": "0 9 * * *", "timezone": "UTC"}},
                   {"kind": "trigger", "id": "once", "trigger": {"kind": "schedule_once", "at": "2030-01-01T00:00:00Z"}},
                   step(&f, "a", "x")]),
            json!([{"kind": "starts", "from": "cron", "to": "a"}, {"kind": "starts", "from": "once", "to": "a"}]),
        ),
    )
    .await;
    rejected(&plan(&f, &id(&schedules.1), 1).await, "multiple_schedule_triggers");
    // A deployment that does not exist blocks the apply (the plan is not rejected).
    let missing = json!({"kind": "step_agent", "id": "a", "agent": "dep_01jx0000000000000000000000", "prompt": "x"});
    let m = create_graph(&f, document(&f, "m", json!([hook(), missing]), json!([starts("a")]))).await;
    let p = plan(&f, &id(&m.1), 1).await;
    assert_eq!((p["kind"].clone(), p["blockers"][0]["code"].clone()), (json!("planned"), json!("agent_deployment_missing")), "{p}");
    let r = a.post(&format!("/v1/automation-graphs/{}/apply", id(&m.1)), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    assert_eq!(r.1["error"]["details"]["reason"], "plan_blocked");
    // A document that is not even an outline is refused when saved.
    let r = create_graph(&f, json!({"name": "x", "nodes": "no"})).await;
    expect(&r, 400, Some("validation.invalid"));

    // A plan older than dep_a's new revision is stale.
    let g = id(&create_graph(&f, document(&f, "p", json!([hook(), step(&f, "a", "x")]), json!([starts("a")]))).await.1);
    let old = plan(&f, &g, 1).await;
    assert_eq!(old["pins"][0]["deployment_revision"], 1);
    f.publish_revision_2().await;
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": old["plan_sha256"]})).await;
    assert_eq!((r.0.as_u16(), r.1["error"]["details"]["reason"].clone()), (409, json!("plan_stale")), "{}", r.1);
    let fresh = plan(&f, &g, 1).await;
    assert_eq!((fresh["pins"][0]["deployment_revision"].clone(), fresh["pins"][0]["agent_version"].clone()), (json!(2), json!(2)));
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": fresh["plan_sha256"]})).await;
    expect(&r, 200, None);
    // Revisions page newest first.
    for prompt in ["y", "z"] {
        let doc = document(&f, "p", json!([hook(), step(&f, "a", prompt)]), json!([starts("a")]));
        expect(&a.post(&format!("/v1/automation-graphs/{g}/revisions"), json!({"document": doc})).await, 201, None);
    }
    let first = a.get(&format!("/v1/automation-graphs/{g}/revisions?limit=2")).await.1;
    let numbers = |v: &Value| v["data"].as_array().unwrap().iter().map(|r| r["revision"].as_i64().unwrap()).collect::<Vec<_>>();
    assert_eq!(numbers(&first), [3, 2]);
    let rest = a.get(&format!("/v1/automation-graphs/{g}/revisions?limit=2&page={}", first["next_page"].as_str().unwrap())).await.1;
    assert_eq!((numbers(&rest), rest["next_page"].clone()), (vec![1], Value::Null));
    assert_eq!(a.get(&format!("/v1/automation-graphs/{g}/revisions/2")).await.1["document"]["nodes"][1]["prompt"], "y");
    // A rejected revision cannot be applied.
    let r = a.post(&format!("/v1/automation-graphs/{}/apply", id(&cycle.1)), json!({"revision": 1, "plan_sha256": "x"})).await;
    assert_eq!(r.1["error"]["details"]["reason"], "plan_rejected");
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_22_a_node_test_previews_a_prompt_and_records_nothing() {
    let f = fixture().await;
    let a = &f.p.admin;
    let node = json!({"kind": "step_agent", "id": "fix", "agent": f.d.deployment_id, "prompt": "Fix {{event.title}} {{event.nope}}", "includeEvent": true});
    let lonely = step(&f, "lonely", "never reached");
    let g = id(&create_graph(&f, document(&f, "n", json!([hook(), node, lonely]), json!([starts("fix")]))).await.1);
    let url = format!("/v1/automation-graphs/{g}/node-tests");
    let test = |body: Value| a.post(&url, body);
    let sessions_before = a.get("/v1/sessions?limit=100").await.1["data"].as_array().unwrap().len();
    let r = test(json!({"mode": "prompt_preview", "revision": 1, "node": "fix", "event": {"title": "X"}})).await;
    expect(&r, 200, None);
    assert_eq!(r.1["rendered_prompt"], "Fix X ");
    assert_eq!(r.1["prompt_source"], "event_template");
    assert_eq!(r.1["missing_event_references"], json!(["event.nope"]));
    assert_eq!(r.1["agent_version"], 1);
    assert_eq!(r.1["agent_id"], f.d.agent_id);
    assert_eq!(r.1["agent_deployment_id"], f.d.deployment_id);
    let reason = |r: &Reply| r.1["error"]["details"]["reason"].clone();
    let r = test(json!({"mode": "prompt_preview", "revision": 1, "node": "fix"})).await;
    assert_eq!((r.0.as_u16(), reason(&r)), (400, json!("event_sample_required")));
    let r = test(json!({"mode": "prompt_preview", "revision": 1, "node": "fix", "event": {"title": "x".repeat(70_000)}})).await;
    assert_eq!((r.0.as_u16(), reason(&r)), (400, json!("rendered_prompt_too_large")));
    let r = test(json!({"mode": "prompt_preview", "revision": 1, "node": "lonely", "event": {}})).await;
    assert_eq!((r.0.as_u16(), reason(&r)), (400, json!("node_receives_no_prompt")));
    let r = test(json!({"mode": "prompt_preview", "revision": 1, "node": "hook", "event": {}})).await;
    assert_eq!((r.0.as_u16(), reason(&r)), (400, json!("node_not_agent")));
    let r = test(json!({"mode": "dry_run", "revision": 1, "node": "fix"})).await;
    assert_eq!((r.0.as_u16(), reason(&r)), (400, json!("unsupported_mode")));
    expect(&test(json!({"mode": "prompt_preview", "revision": 9, "node": "fix"})).await, 404, None);
    expect(&test(json!({"mode": "prompt_preview", "revision": 1, "node": "nope"})).await, 404, None);
    assert_eq!(a.get("/v1/sessions?limit=100").await.1["data"].as_array().unwrap().len(), sessions_before, "no Session is created");
    f.p.stop().await;
}

/// `checkfu graph create|revise|plan|apply|test`, as the built binary, in
/// text and with `--json`.
#[tokio::test(flavor = "multi_thread")]
async fn the_command_line_creates_plans_applies_and_tests_graphs() {
    let f = fixture().await;
    let cli = |args: &[&str]| f.cli(args);
    let node = json!({"kind": "step_agent", "id": "s1", "agent": f.d.deployment_id, "prompt": "Triage {{event.title}}"});
    let file = f.dir.path().join("graph.json");
    std::fs::write(&file, document(&f, "cli-graph", json!([hook(), node]), json!([starts("s1")])).to_string()).unwrap();
    let text = cli(&["graph", "create", file.to_str().unwrap(), "--created-by", &f.p.admin_id]);
    assert!(text.contains("cli-graph  revision 1 (applied none)  drift not_applied"), "{text}");
    let g = text.split_whitespace().next().unwrap().to_string();
    let plan = cli(&["graph", "plan", &g, "--revision", "1"]);
    assert!(plan.starts_with("planned  revision 1  create Automation (new)  target agent  readiness ready"), "{plan}");
    assert!(plan.contains(&format!("pin s1 → {} revision 1", f.d.deployment_id)), "{plan}");
    let applied = cli(&["graph", "apply", &g, "--revision", "1"]);
    assert!(
        applied.contains("applied revision 1: create auto_") && applied.contains("ingest secret (shown once; keep it): whsec_"),
        "{applied}"
    );
    let event = f.dir.path().join("event.json");
    std::fs::write(&event, r#"{"title":"Slow checkout"}"#).unwrap();
    let preview = cli(&["graph", "test", &g, "--revision", "1", "--node", "s1", "--event-file", event.to_str().unwrap()]);
    assert!(preview.contains("event_template") && preview.contains("\n---\nTriage Slow checkout\n---\n"), "{preview}");
    // The same document again is no new revision; --json answers the resource.
    let json_out = cli(&["graph", "revise", &g, file.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_str(json_out.trim()).unwrap();
    assert_eq!(v["latest_revision"], 1);
    let listed = cli(&["graph", "list"]);
    assert!(listed.contains(&g) && listed.contains("drift in_sync"), "{listed}");
    f.p.stop().await;
}

/// Applies a one-revision graph and answers its Automation and ingest secret.
async fn applied(f: &Fixture, name: &str, nodes: Value, edges: Value) -> (String, String) {
    let a = &f.p.admin;
    let g = create_graph(f, document(f, name, nodes, edges)).await;
    expect(&g, 201, None);
    let g = id(&g.1);
    let p = plan(f, &g, 1).await;
    assert_eq!(p["blockers"], json!([]), "{p}");
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    expect(&r, 200, None);
    (r.1["automation_id"].as_str().unwrap().to_string(), r.1["ingest_secret"].as_str().unwrap_or_default().to_string())
}

fn outcome<'a>(firing: &'a Value, step: &str) -> &'a Value {
    &firing["program"]["steps"].as_array().unwrap().iter().find(|s| s["id"] == step).unwrap()["outcome"]
}

/// The first user.message text of a Session.
async fn first_message(a: &Api, session: &str) -> String {
    let evs = events(a, session).await;
    evs.iter().find(|e| e["type"] == "user.message").unwrap()["payload"]["content"][0]["text"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_16_a_decision_routes_on_typed_values_and_fails_on_a_missing_binding() {
    let f = fixture().await;
    let a = &f.p.admin;
    let decision = json!({"kind": "decision", "id": "d", "inputBindings": {"flag": {"sourceNodeId": "hook", "pointer": "/flag"}},
        "condition": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/flag", "value": false}]}});
    let (auto, secret) = applied(
        &f,
        "g16",
        json!([hook(), decision, step(&f, "b", "B ran")]),
        json!([starts("d"), {"kind": "continue", "from": "d", "to": "b"}, {"kind": "otherwise", "from": "d", "to": null}]),
    )
    .await;
    let am = a.get(&format!("/v1/automations/{auto}")).await.1;
    assert_eq!((am["status"].clone(), am["target"]["kind"].clone()), (json!("active"), json!("steps")), "{am}");
    let fire = |body: &'static str| ingest_signed(&f.p.base, &auto, &secret, body);
    let r = fire(r#"{"id":"1","flag":false}"#).await;
    expect(&r, 201, None);
    assert_eq!(r.1["graph"]["revision"], 1);
    let done = settled(a, &id(&r.1)).await;
    assert_eq!((done["state"].clone(), done["program"]["result"].clone()), (json!("succeeded"), json!("succeeded")), "{done}");
    assert_eq!(outcome(&done, "d")["branch"], "continue");
    assert_eq!(done["child_session_ids"].as_array().unwrap().len(), 1, "b ran");
    let r = fire(r#"{"id":"2","flag":"false"}"#).await;
    let done = settled(a, &id(&r.1)).await;
    assert_eq!((done["state"].clone(), outcome(&done, "d")["branch"].clone()), (json!("succeeded"), json!("otherwise")), "{done}");
    assert_eq!(outcome(&done, "b")["kind"], "skipped");
    assert!(done["child_session_ids"].as_array().unwrap().is_empty());
    let r = fire(r#"{"id":"3"}"#).await;
    let done = settled(a, &id(&r.1)).await;
    assert_eq!((done["state"].clone(), done["program"]["result"].clone()), (json!("failed"), json!("failed")));
    assert_eq!(outcome(&done, "d"), &json!({"kind": "failed", "reason": "binding_unavailable"}));
    assert_eq!(done["error"]["reason"], "binding_unavailable");
    assert!(done["child_session_ids"].as_array().unwrap().is_empty(), "no child");
    let trace = a.get(&format!("/v1/automation-firings/{}/trace", id(&r.1))).await.1;
    assert_eq!(trace["steps"]["outcomes"][0]["n"], 1);
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_17_parse_json_checks_text_json_and_schema() {
    let f = fixture().await;
    let a = &f.p.admin;
    let parse = json!({"kind": "step_parse_json", "id": "p", "inputBindings": {"content": {"sourceNodeId": "hook", "pointer": "/payload"}},
        "outputSchema": {"type": "object", "properties": {"escalate": {"type": "boolean"}}, "required": ["escalate"]}});
    let decision = json!({"kind": "decision", "id": "d", "condition": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/escalate", "value": true}]}});
    let (auto, secret) = applied(
        &f,
        "g17",
        json!([hook(), parse, decision, step(&f, "b", "escalated")]),
        json!([starts("p"), {"kind": "then", "from": "p", "to": "d"}, {"kind": "output", "from": "p", "to": "d"},
            {"kind": "continue", "from": "d", "to": "b"}, {"kind": "otherwise", "from": "d", "to": null}]),
    )
    .await;
    for (n, payload, reason) in
        [(1, "not json", Some("invalid_json")), (2, r#"{\"escalate\":1}"#, Some("schema_mismatch")), (3, r#"{\"escalate\":true}"#, None)]
    {
        let body = format!(r#"{{"id":"{n}","payload":"{payload}"}}"#);
        let r = ingest(&f.p.base, &auto, body.as_bytes(), &sig(&secret, now_s(), body.as_bytes())).await;
        expect(&r, 201, None);
        let done = settled(a, &id(&r.1)).await;
        match reason {
            Some(reason) => {
                assert_eq!(outcome(&done, "p")["reason"], reason, "{done}");
                assert_eq!(done["state"], "failed");
            }
            None => {
                assert_eq!(done["state"], "succeeded", "{done}");
                let child = done["child_session_ids"][0].as_str().unwrap();
                assert_eq!(first_message(a, child).await, "escalated", "b runs");
            }
        }
    }
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_18_an_output_edge_feeds_the_next_agent() {
    let f = fixture().await;
    let a = &f.p.admin;
    let (auto, _) = applied(
        &f,
        "g18",
        json!([hook(), step(&f, "a", "P"), step(&f, "b", "")]),
        json!([starts("a"), {"kind": "then", "from": "a", "to": "b"}, {"kind": "output", "from": "a", "to": "b"}]),
    )
    .await;
    let r = a.post(&format!("/v1/automations/{auto}/fire"), json!({})).await;
    expect(&r, 201, None);
    assert_eq!(r.1["program"]["state"], "pending");
    assert_eq!(r.1["program"]["attempt"], 1);
    let done = settled(a, &id(&r.1)).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let kids = done["child_session_ids"].as_array().unwrap();
    assert_eq!(kids.len(), 2);
    let b = outcome(&done, "b");
    assert_eq!(b["kind"], "completed");
    let b_child = done["program"]["steps"].as_array().unwrap().iter().find(|s| s["id"] == "b").unwrap()["child_session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(first_message(a, &b_child).await, "echo: P", "b starts with a's whole output");
    let last = events(a, &b_child).await;
    let reply = last.iter().rev().find(|e| e["type"] == "agent.message").unwrap();
    assert_eq!(reply["payload"]["content"][0]["text"], "echo: echo: P");
    assert!(done["usage"]["input_tokens"].as_i64().unwrap() > 0, "usage sums the children: {}", done["usage"]);
    let trace = a.get(&format!("/v1/automation-firings/{}/trace", id(&r.1))).await.1;
    let ns: Vec<i64> = trace["steps"]["outcomes"].as_array().unwrap().iter().map(|o| o["n"].as_i64().unwrap()).collect();
    assert_eq!(ns, (1..=ns.len() as i64).collect::<Vec<_>>(), "gapless");
    assert_eq!(trace["receipts"]["sessions"].as_array().unwrap().iter().filter(|s| s["step_id"] == "b").count(), 1);
    f.p.stop().await;
}

/// A continue_selected step (api.md §18.4) whose Session does not exist
/// plans `blocked` on readiness `session_target` and applies paused; the
/// rest of the program is checked as usual.
#[tokio::test(flavor = "multi_thread")]
async fn a_continued_session_that_does_not_exist_keeps_the_program_paused() {
    let f = fixture().await;
    let a = &f.p.admin;
    let missing = "sess_01jx0000000000000000000001";
    let cont = json!({"kind": "step_agent", "id": "w", "agent": f.d.deployment_id, "prompt": "more",
        "sessionTarget": {"mode": "continue_selected", "session": missing}});
    let g = id(&create_graph(
        &f,
        document(
            &f,
            "continues",
            json!([hook(), cont, step(&f, "a", "P")]),
            json!([starts("w"), {"kind": "then", "from": "w", "to": "a"}]),
        ),
    )
    .await
    .1);
    let p = plan(&f, &g, 1).await;
    assert_eq!((p["target_kind"].clone(), p["readiness"]["state"].clone()), (json!("steps"), json!("blocked")), "{p}");
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    expect(&r, 200, None);
    let auto = a.get(&format!("/v1/automations/{}", r.1["automation_id"].as_str().unwrap())).await.1;
    let step_a = auto["target"]["steps"].as_array().unwrap().iter().find(|s| s["id"] == "a").unwrap().clone();
    assert_eq!((step_a["kind"].clone(), step_a["agentDeploymentId"].clone()), (json!("step_agent"), json!(f.d.deployment_id)));
    assert_eq!((auto["status"].clone(), auto["pause_reason"]["code"].clone()), (json!("paused"), json!("readiness_blocked")));
    let failing = check(&auto["readiness"], "session_target");
    assert_eq!((failing["status"].clone(), failing["resource_id"].clone()), (json!("fail"), json!(missing)), "{auto}");
    assert_eq!(check(&auto["readiness"], "capabilities")["status"], "pass", "it runs once its Session exists");
    assert_eq!(check(&auto["readiness"], "target")["status"], "pass", "each pinned deployment is checked");
    expect(&a.post(&format!("/v1/automations/{}/resume", auto["id"].as_str().unwrap()), json!({})).await, 409, Some("validation.conflict"));
    // A sessionTarget that names no Session is no document.
    let unnamed = json!({"kind": "step_agent", "id": "w", "agent": f.d.deployment_id, "prompt": "more",
        "sessionTarget": {"mode": "continue_selected"}});
    let r = create_graph(&f, document(&f, "unnamed", json!([hook(), unnamed]), json!([starts("w")]))).await;
    let p = plan(&f, &id(&r.1), 1).await;
    assert_eq!(p["kind"], "rejected", "{p}");
    assert!(p["errors"].as_array().unwrap().iter().any(|e| e["code"] == "document_invalid" && e["node"] == "w"), "{p}");
    f.p.stop().await;
}

/// Acceptance 24 of §18.13: a `step_managed_tool` is a plan blocker, the
/// apply is refused, and the installation says why.
#[tokio::test(flavor = "multi_thread")]
async fn acceptance_24_managed_tools_stay_refused_explicitly() {
    let f = fixture().await;
    let a = &f.p.admin;
    let tool = json!({"kind": "step_managed_tool", "id": "m"});
    let g = id(&create_graph(&f, document(&f, "managed", json!([hook(), tool]), json!([starts("m")]))).await.1);
    let p = plan(&f, &g, 1).await;
    assert_eq!((p["blockers"][0]["code"].clone(), p["blockers"][0]["node"].clone()), (json!("capability_unavailable"), json!("m")), "{p}");
    assert!(p["blockers"][0]["detail"].as_str().unwrap().contains("managed_tools"), "{p}");
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    expect(&r, 409, Some("validation.conflict"));
    assert_eq!(r.1["error"]["details"]["reason"], "plan_blocked", "{}", r.1);
    let caps = a.get("/v1/capabilities").await;
    let managed = caps.1["data"].as_array().unwrap().iter().find(|c| c["name"] == "managed_tools").cloned().unwrap();
    assert_eq!((managed["available"].clone(), managed["reason"].clone()), (json!(false), json!("dependency_missing")));
    f.p.stop().await;
}

fn waits_then(f: &Fixture, seconds: i64, prompt: &str) -> (Value, Value) {
    (
        json!([hook(), {"kind": "step_wait", "id": "w", "durationSeconds": seconds}, step(f, "r", prompt)]),
        json!([starts("w"), {"kind": "then", "from": "w", "to": "r"}]),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_15_a_firing_keeps_its_revision_through_a_wait() {
    let f = fixture().await;
    let a = &f.p.admin;
    let (nodes, edges) = waits_then(&f, 3, "r1");
    let g = id(&create_graph(&f, document(&f, "g15", nodes, edges)).await.1);
    let p = plan(&f, &g, 1).await;
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    let auto = r.1["automation_id"].as_str().unwrap().to_string();
    let first = a.post(&format!("/v1/automations/{auto}/fire"), json!({})).await;
    expect(&first, 201, None);
    assert_eq!(outcome(&first.1, "w")["kind"], "waiting");
    assert!(first.1["program"]["steps"][0]["wait_until"].is_string(), "{}", first.1);
    // Revision 2 applied during the wait.
    let (nodes, edges) = waits_then(&f, 3, "r2");
    let r = a.post(&format!("/v1/automation-graphs/{g}/revisions"), json!({"document": document(&f, "g15", nodes, edges)})).await;
    expect(&r, 201, None);
    let p = plan(&f, &g, 2).await;
    assert_eq!(p["automation"]["action"], "update");
    expect(&a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 2, "plan_sha256": p["plan_sha256"]})).await, 200, None);
    let done = settled(a, &id(&first.1)).await;
    assert_eq!((done["state"].clone(), done["graph"]["revision"].clone()), (json!("succeeded"), json!(1)), "{done}");
    let child = done["child_session_ids"][0].as_str().unwrap();
    let reply = events(a, child).await.into_iter().rev().find(|e| e["type"] == "agent.message").unwrap();
    assert_eq!(reply["payload"]["content"][0]["text"], "echo: r1", "the firing kept revision 1's program");
    let trace = a.get(&format!("/v1/automation-firings/{}/trace", id(&first.1))).await.1;
    assert_eq!(trace["receipts"]["waits"][0]["elapsed"], true, "{trace}");
    let second = a.post(&format!("/v1/automations/{auto}/fire"), json!({})).await;
    let done = settled(a, &id(&second.1)).await;
    assert_eq!(done["graph"]["revision"], 2);
    let child = done["child_session_ids"][0].as_str().unwrap();
    let reply = events(a, child).await.into_iter().rev().find(|e| e["type"] == "agent.message").unwrap();
    assert_eq!(reply["payload"]["content"][0]["text"], "echo: r2");
    f.p.stop().await;
}

/// Acceptance 20 with a real process: `checkfu up` is killed with SIGKILL
/// while a firing waits, restarted on the same data directory, and the same
/// firing settles — recovered (`attempt` ≥ 2), with one child.
#[tokio::test(flavor = "multi_thread")]
async fn acceptance_20_a_sigkill_during_a_wait_loses_nothing() {
    use checkfu_e2e::procs::up;
    let dir = tempfile::tempdir().unwrap();
    let Crashable { mut proc, key, i, svc, d, .. } = crashable(dir.path(), json!({})).await;
    let a = &i.admin;
    let doc = json!({"name": "g20", "environment_id": i.env_id, "service_principal_id": svc,
        "nodes": [hook(), {"kind": "step_wait", "id": "w", "durationSeconds": 5}, {"kind": "step_agent", "id": "r", "agent": d.deployment_id, "prompt": "after"}],
        "edges": [starts("w"), {"kind": "then", "from": "w", "to": "r"}]});
    let g = id(&a.post("/v1/automation-graphs", json!({"created_by_principal_id": i.admin_id, "document": doc})).await.1);
    let p = a.post(&format!("/v1/automation-graphs/{g}/plan"), json!({"revision": 1})).await.1;
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    let auto = r.1["automation_id"].as_str().unwrap().to_string();
    let fired = a.post(&format!("/v1/automations/{auto}/fire"), json!({})).await;
    expect(&fired, 201, None);
    let firing = id(&fired.1);
    assert_eq!(outcome(&fired.1, "w")["kind"], "waiting");
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    proc.kill_hard();

    let (_proc, base) = up(dir.path());
    wait_ready(&base).await;
    let a = Api::new(&base, &key);
    let done = settled(&a, &firing).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert!(done["program"]["attempt"].as_i64().unwrap() >= 2, "recovered: {done}");
    assert_eq!(done["child_session_ids"].as_array().unwrap().len(), 1, "one child");
    assert_eq!(firings(&a, &auto).await.len(), 1, "the same firing");
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_21_pause_holds_the_next_step_and_an_archived_child_fails_its_step_once() {
    let f = fixture().await;
    let a = &f.p.admin;
    let c = deploy(a, &f.p.env_id, json!({"tools": [{"type": "custom", "name": "lookup", "read_only": true}]})).await;
    grant(&f.p, &f.svc, &c.agent_id).await;
    let nodes =
        json!([hook(), {"kind": "step_agent", "id": "c", "agent": c.deployment_id, "prompt": "call lookup {}"}, step(&f, "b", "B")]);
    let (auto, _) = applied(&f, "g21", nodes, json!([starts("c"), {"kind": "then", "from": "c", "to": "b"}])).await;
    let child_of = |firing: &Value, step: &str| {
        firing["program"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == step)
            .and_then(|s| s["child_session_id"].as_str())
            .map(String::from)
    };
    let fired = a.post(&format!("/v1/automations/{auto}/fire"), json!({})).await;
    expect(&fired, 201, None);
    let firing = id(&fired.1);
    let c_child = child_of(&fired.1, "c").expect("c admitted");
    assert_eq!(settle(a, &c_child).await["stop_reason"]["type"], "requires_action");
    expect(&a.post(&format!("/v1/automations/{auto}/pause"), json!({})).await, 200, None);
    let evs = events(a, &c_child).await;
    let use_id = evs.iter().find(|e| e["type"] == "agent.custom_tool_use").unwrap()["payload"]["custom_tool_use_id"].clone();
    let result =
        input(&f.svc, "user.custom_tool_result", json!({"custom_tool_use_id": use_id, "content": [{"type": "text", "text": "found"}]}));
    expect(&a.post(&format!("/v1/sessions/{c_child}/events"), result).await, 201, None);
    assert_eq!(settle(a, &c_child).await["stop_reason"]["type"], "end_turn");
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let held = a.get(&format!("/v1/automation-firings/{firing}")).await.1;
    assert_eq!(outcome(&held, "c")["kind"], "completed", "{held}");
    assert!(outcome(&held, "b").is_null(), "b is not admitted while paused: {held}");
    assert_eq!(held["state"], "running");
    expect(&a.post(&format!("/v1/automations/{auto}/resume"), json!({})).await, 200, None);
    let done = settled(a, &firing).await;
    assert_eq!(done["state"], "succeeded", "the same firing continues: {done}");
    assert_eq!(done["child_session_ids"].as_array().unwrap().len(), 2);

    // Archiving a waiting child fails its step, once, even after a restart.
    let fired = a.post(&format!("/v1/automations/{auto}/fire"), json!({})).await;
    let firing = id(&fired.1);
    let c_child = child_of(&fired.1, "c").expect("c admitted");
    assert_eq!(settle(a, &c_child).await["stop_reason"]["type"], "requires_action");
    expect(&a.post(&format!("/v1/sessions/{c_child}/archive"), json!({})).await, 200, None);
    let done = settled(a, &firing).await;
    assert_eq!(outcome(&done, "c"), &json!({"kind": "failed", "reason": "child_terminated"}), "{done}");
    assert_eq!(outcome(&done, "b")["kind"], "skipped");
    assert_eq!((done["state"].clone(), done["program"]["result"].clone()), (json!("failed"), json!("failed")));
    let Fixture { p, dir, .. } = f;
    p.stop().await;
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let after = p.admin.get(&format!("/v1/automation-firings/{firing}")).await.1;
    assert_eq!(
        (after["state"].clone(), after["child_session_ids"].as_array().unwrap().len()),
        (json!("failed"), 1),
        "no second child: {after}"
    );
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_19_an_approval_step_waits_for_a_real_action_approval() {
    let f = fixture().await;
    let a = &f.p.admin;
    let (approval_hooks, url) = hook_receiver().await;
    let ep = json!({"environment_id": f.p.env_id, "url": url, "event_types": ["action_approval.pending", "action_approval.resolved"]});
    expect(&a.post("/v1/webhook-endpoints", ep).await, 201, None);
    let gate = json!({"kind": "step_approval", "id": "ok", "title": "Ship it?", "ttlSeconds": 600});
    let (auto, _) = applied(
        &f,
        "g19",
        json!([hook(), gate, step(&f, "a", "shipping")]),
        json!([starts("ok"), {"kind": "then", "from": "ok", "to": "a"}]),
    )
    .await;
    let approval_of = |firing: &Value| {
        firing["program"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "ok")
            .and_then(|s| s["action_approval_id"].as_str())
            .map(String::from)
    };
    let awaiting = |firing: String| async move {
        for _ in 0..100 {
            let v = a.get(&format!("/v1/automation-firings/{firing}")).await.1;
            if approval_of(&v).is_some() {
                return v;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("no approval for {firing}");
    };
    let fired = a.post(&format!("/v1/automations/{auto}/fire"), json!({})).await;
    expect(&fired, 201, None);
    let firing = id(&fired.1);
    let v = awaiting(firing.clone()).await;
    assert_eq!(outcome(&v, "ok")["kind"], "awaiting_approval");
    assert_eq!((v["state"].clone(), v["program"]["result"].clone()), (json!("running"), Value::Null));
    let ap_id = approval_of(&v).unwrap();
    let ap = a.get(&format!("/v1/action-approvals/{ap_id}")).await.1;
    assert_eq!((ap["automation_firing_id"].clone(), ap["step_id"].clone()), (json!(firing), json!("ok")), "{ap}");
    assert_eq!((ap["session_id"].clone(), ap["run_id"].clone(), ap["tool_use_id"].clone()), (Value::Null, Value::Null, Value::Null));
    assert_eq!((ap["frozen"]["principal_id"].clone(), ap["frozen"]["tool"].clone()), (json!(f.svc), json!("automation.approval")));
    assert_eq!(ap["frozen"]["arguments"], json!({"title": "Ship it?"}));
    let token = ap["response_token"].as_str().unwrap().to_string();
    let url = format!("/v1/action-approvals/{ap_id}/responses");
    let respond = |body: Value| a.post(&url, body);
    let r = respond(json!({"decision": "approve", "response_token": token, "standing": {"ttl_seconds": 60}})).await;
    expect(&r, 400, Some("validation.invalid"));
    expect(&respond(json!({"decision": "approve", "response_token": token})).await, 200, None);
    expect(&respond(json!({"decision": "approve", "response_token": token})).await, 409, Some("validation.conflict"));
    let done = settled(a, &firing).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(outcome(&done, "ok")["kind"], "completed");
    assert_eq!(done["child_session_ids"].as_array().unwrap().len(), 1, "approve runs a");
    let trace = a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1;
    assert_eq!(trace["receipts"]["approvals"], json!([{"step_id": "ok", "action_approval_id": ap_id, "status": "approved"}]));
    // Delivered as webhooks with the approval as the resource, no Session.
    wait_for_hook(&approval_hooks, "action_approval.pending", &ap_id).await;
    wait_for_hook(&approval_hooks, "action_approval.resolved", &ap_id).await;

    // Denied elsewhere: the step is denied, its dependent skipped, and the
    // program still succeeds (a denial is not a failure).
    let fired = a.post(&format!("/v1/automations/{auto}/fire"), json!({})).await;
    let firing = id(&fired.1);
    let v = awaiting(firing.clone()).await;
    let ap_id = approval_of(&v).unwrap();
    let token = a.get(&format!("/v1/action-approvals/{ap_id}")).await.1["response_token"].as_str().unwrap().to_string();
    expect(
        &a.post(&format!("/v1/action-approvals/{ap_id}/responses"), json!({"decision": "deny", "response_token": token})).await,
        200,
        None,
    );
    let done = settled(a, &firing).await;
    assert_eq!(outcome(&done, "ok")["kind"], "denied", "{done}");
    assert_eq!(outcome(&done, "a")["kind"], "skipped");
    assert_eq!((done["state"].clone(), done["program"]["result"].clone()), (json!("succeeded"), json!("succeeded")));
    assert!(done["child_session_ids"].as_array().unwrap().is_empty());
    let trace = a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1;
    let ns: Vec<i64> = trace["steps"]["outcomes"].as_array().unwrap().iter().map(|o| o["n"].as_i64().unwrap()).collect();
    assert_eq!(ns, (1..=ns.len() as i64).collect::<Vec<_>>(), "gapless: {trace}");
    f.p.stop().await;
}

/// The step's `forEach` items as the firing shows them: `(index, child)`.
fn items(firing: &Value, step: &str) -> Vec<(i64, Option<String>)> {
    firing["program"]["steps"].as_array().unwrap().iter().find(|s| s["id"] == step).unwrap()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|i| (i["index"].as_i64().unwrap(), i["child_session_id"].as_str().map(String::from)))
        .collect()
}

/// Answers a parked child's `lookup` call with `text`.
async fn answer(f: &Fixture, child: &str, text: &str) {
    answer_lookup(&f.p.admin, &f.svc, child, text).await;
}

/// Acceptance 14 of §18.13: a `forEach` starts a child per item in item
/// order, at most `concurrency` unsettled, and its output keeps item order
/// whatever order the children finish in; too many items or no array
/// start nothing.
#[tokio::test(flavor = "multi_thread")]
async fn acceptance_14_for_each_keeps_item_order_within_its_concurrency() {
    let f = fixture().await;
    let a = &f.p.admin;
    let c = deploy(a, &f.p.env_id, json!({"tools": [{"type": "custom", "name": "lookup", "read_only": true}]})).await;
    grant(&f.p, &f.svc, &c.agent_id).await;
    let each = json!({"kind": "step_agent", "id": "c", "agent": c.deployment_id, "prompt": "call lookup {}",
        "forEach": {"items": {"sourceNodeId": "hook", "pointer": "/items"}, "maxItems": 3, "concurrency": 2}});
    let nodes = json!([hook(), each, step(&f, "b", "ignored")]);
    let edges = json!([starts("c"), {"kind": "then", "from": "c", "to": "b"}, {"kind": "output", "from": "c", "to": "b"}]);
    let (auto, secret) = applied(&f, "g14", nodes, edges).await;
    let r = ingest_signed(&f.p.base, &auto, &secret, r#"{"id":"1","items":["x","y","z"]}"#).await;
    expect(&r, 201, None);
    let firing = id(&r.1);
    let path = format!("/v1/automation-firings/{firing}");
    let first = a.get(&path).await.1;
    let started = items(&first, "c");
    assert_eq!(started.iter().map(|(i, c)| (*i, c.is_some())).collect::<Vec<_>>(), [(0, true), (1, true), (2, false)], "{first}");
    let child = |v: &Value, i: usize| items(v, "c")[i].1.clone().unwrap();
    // The second finishes first; only then does the third start.
    answer(&f, &child(&first, 1), "found-1").await;
    let mut third = None;
    for _ in 0..100 {
        if let Some(c) = items(&a.get(&path).await.1, "c")[2].1.clone() {
            third = Some(c);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let third = third.expect("the third item's child started once the second settled");
    answer(&f, &child(&first, 0), "found-0").await;
    answer(&f, &third, "found-2").await;
    let done = settled(a, &firing).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["child_session_ids"].as_array().unwrap().len(), 4, "three items and b");
    let b = done["program"]["steps"].as_array().unwrap().iter().find(|s| s["id"] == "b").unwrap()["child_session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let fed: Value = serde_json::from_str(&first_message(a, &b).await).unwrap();
    let texts: Vec<String> = fed.as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
    assert!(texts[0].contains("found-0") && texts[1].contains("found-1") && texts[2].contains("found-2"), "item order: {texts:?}");

    for (body, reason) in
        [(r#"{"id":"2","items":[1,2,3,4]}"#, "for_each_too_many_items"), (r#"{"id":"3","items":{}}"#, "for_each_not_array")]
    {
        let r = ingest_signed(&f.p.base, &auto, &secret, body).await;
        let done = settled(a, &id(&r.1)).await;
        assert_eq!(outcome(&done, "c"), &json!({"kind": "failed", "reason": reason}), "{done}");
        assert!(done["child_session_ids"].as_array().unwrap().is_empty(), "no child");
    }
    f.p.stop().await;
}

/// Acceptance 15 of §18.13: a join gathers its nodes' outputs by name when
/// all completed, and is skipped otherwise.
#[tokio::test(flavor = "multi_thread")]
async fn acceptance_15_a_join_gathers_outputs_or_is_skipped() {
    let f = fixture().await;
    let a = &f.p.admin;
    let parse = json!({"kind": "step_parse_json", "id": "p", "inputBindings": {"content": {"sourceNodeId": "hook", "pointer": "/p"}}, "outputSchema": {"type": "object"}});
    let join = json!({"kind": "step_join", "id": "j", "mode": "all_completed", "collect": {"x": "a", "y": "p"}});
    let nodes = json!([hook(), step(&f, "a", "A"), parse, join, step(&f, "b", "ignored")]);
    let edges = json!([starts("a"), starts("p"), {"kind": "then", "from": "a", "to": "j"}, {"kind": "then", "from": "p", "to": "j"},
        {"kind": "then", "from": "j", "to": "b"}, {"kind": "output", "from": "j", "to": "b"}]);
    let (auto, secret) = applied(&f, "g15j", nodes, edges).await;
    let r = ingest_signed(&f.p.base, &auto, &secret, r#"{"id":"1","p":"{\"k\":1}"}"#).await;
    let done = settled(a, &id(&r.1)).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let b = done["program"]["steps"].as_array().unwrap().iter().find(|s| s["id"] == "b").unwrap()["child_session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(first_message(a, &b).await, r#"{"x":"echo: A","y":{"k":1}}"#);
    let r = ingest_signed(&f.p.base, &auto, &secret, r#"{"id":"2","p":"no"}"#).await;
    let done = settled(a, &id(&r.1)).await;
    assert_eq!((outcome(&done, "j")["kind"].clone(), outcome(&done, "b")["kind"].clone()), (json!("skipped"), json!("skipped")), "{done}");
    f.p.stop().await;
}

/// Acceptance 14's crash case: `checkfu up` is killed with SIGKILL while two
/// of three items' children are parked; after the restart the same firing
/// goes on under the same limit and order — three children in all.
#[tokio::test(flavor = "multi_thread")]
async fn acceptance_14_a_sigkill_keeps_a_fan_outs_children_order_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let tools = json!({"tools": [{"type": "custom", "name": "lookup", "read_only": true}]});
    let Crashable { mut proc, base, key, i, svc, d } = crashable(dir.path(), tools).await;
    let a = &i.admin;
    let each = json!({"kind": "step_agent", "id": "c", "agent": d.deployment_id, "prompt": "call lookup {}",
        "forEach": {"items": {"sourceNodeId": "hook", "pointer": "/items"}, "maxItems": 3, "concurrency": 2}});
    let doc =
        json!({"name": "g14k", "environment_id": i.env_id, "service_principal_id": svc, "nodes": [hook(), each], "edges": [starts("c")]});
    let g = id(&a.post("/v1/automation-graphs", json!({"created_by_principal_id": i.admin_id, "document": doc})).await.1);
    let p = a.post(&format!("/v1/automation-graphs/{g}/plan"), json!({"revision": 1})).await.1;
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    let (auto, secret) = (r.1["automation_id"].as_str().unwrap().to_string(), r.1["ingest_secret"].as_str().unwrap().to_string());
    let fired = ingest_signed(&base, &auto, &secret, r#"{"id":"1","items":["x","y","z"]}"#).await;
    expect(&fired, 201, None);
    let firing = id(&fired.1);
    let view = a.get(&format!("/v1/automation-firings/{firing}")).await.1;
    assert_eq!(p["target_kind"], "steps", "a fan-out is a steps program");
    let parked = items(&view, "c");
    for (_, child) in parked.iter().take(2) {
        assert_eq!(settle(a, child.as_deref().unwrap()).await["stop_reason"]["type"], "requires_action");
    }
    proc.kill_hard();

    let (_proc, base) = checkfu_e2e::procs::up(dir.path());
    wait_ready(&base).await;
    let a = Api::new(&base, &key);
    let answer = |child: String| {
        let a = a.clone();
        let svc = svc.clone();
        async move { answer_lookup(&a, &svc, &child, "found").await }
    };
    let path = format!("/v1/automation-firings/{firing}");
    assert!(items(&a.get(&path).await.1, "c")[2].1.is_none(), "still two unsettled: the third waits");
    answer(parked[0].1.clone().unwrap()).await;
    answer(parked[1].1.clone().unwrap()).await;
    let mut third = None;
    for _ in 0..200 {
        if let Some(c) = items(&a.get(&path).await.1, "c")[2].1.clone() {
            third = Some(c);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    answer(third.expect("the third child started after the restart")).await;
    let done = settled(&a, &firing).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert!(done["program"]["attempt"].as_i64().unwrap() >= 2, "recovered: {done}");
    assert_eq!(done["child_session_ids"].as_array().unwrap().len(), 3, "three children in all: {done}");
}

/// Acceptance 7 of §18.13: an `outcome` reviewing a `step_agent` starts its
/// child with that Outcome (the prompt its description); the step settles
/// when the Outcome ends — satisfied after a revision in the same child,
/// or `rejected` when its iterations run out (a negative verdict: the
/// dependent is skipped, the firing succeeds); `fail_open` is refused.
#[tokio::test(flavor = "multi_thread")]
async fn acceptance_7_an_outcome_node_settles_its_step_by_the_outcome() {
    let f = fixture().await;
    let a = &f.p.admin;
    let reviewed = |name: &'static str, rubric: &str, max: i64| {
        let outcome = json!({"kind": "outcome", "id": "o", "rubric": rubric, "maxIterations": max});
        let nodes = json!([hook(), step(&f, "a", "say hello"), outcome, step(&f, "b", "after")]);
        let edges = json!([starts("a"), {"kind": "reviews", "from": "a", "to": "o"}, {"kind": "then", "from": "a", "to": "b"}]);
        (name, nodes, edges)
    };
    // `require: goodbye` fails once (the scripted model echoes the
    // feedback), then passes: two Runs in one child.
    let (name, nodes, edges) = reviewed("g7", "require: goodbye", 3);
    let (auto, _) = applied(&f, name, nodes, edges).await;
    let fired = a.post(&format!("/v1/automations/{auto}/fire"), json!({})).await;
    expect(&fired, 201, None);
    let done = settled(a, &id(&fired.1)).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(outcome(&done, "a")["kind"], "completed", "{done}");
    let step_a = done["program"]["steps"].as_array().unwrap().iter().find(|s| s["id"] == "a").unwrap().clone();
    let child = step_a["child_session_id"].as_str().unwrap().to_string();
    let evs = events(a, &child).await;
    let define = evs.iter().find(|e| e["type"] == "user.define_outcome").expect("the child starts with its Outcome");
    assert_eq!((&define["payload"]["description"], &define["payload"]["rubric"]), (&json!("say hello"), &json!("require: goodbye")));
    assert_eq!(evs.iter().filter(|e| e["type"] == "user.message").count(), 0, "no separate first message");
    let runs = a.get(&format!("/v1/sessions/{child}/runs")).await.1;
    assert_eq!(runs["data"].as_array().unwrap().len(), 2, "{runs}");
    assert_eq!(done["child_session_ids"].as_array().unwrap().len(), 2, "one child for a, one for b: {done}");
    let out = a.get(&format!("/v1/outcomes/{}", step_a["outcome_id"].as_str().expect("outcome_id"))).await.1;
    assert_eq!((&out["status"], &out["session_id"]), (&json!("satisfied"), &json!(child)));
    let trace = a.get(&format!("/v1/automation-firings/{}/trace", id(&fired.1))).await.1;
    assert_eq!(
        trace["receipts"]["outcomes"],
        json!([{"step_id": "a", "outcome_id": step_a["outcome_id"], "session_id": child, "status": "satisfied", "iterations_used": 2}]),
        "{trace}"
    );
    assert!(!trace["receipts"].to_string().contains("goodbye"), "no rubric in the receipts");

    // `forbid: hello` never passes: rejected after two iterations.
    let (name, nodes, edges) = reviewed("g7b", "forbid: hello", 2);
    let (auto, _) = applied(&f, name, nodes, edges).await;
    let fired = a.post(&format!("/v1/automations/{auto}/fire"), json!({})).await;
    let done = settled(a, &id(&fired.1)).await;
    assert_eq!(done["state"], "succeeded", "a negative verdict is not a failure: {done}");
    assert_eq!(*outcome(&done, "a"), json!({"kind": "rejected", "reason": "outcome_max_iterations_reached"}));
    assert_eq!(outcome(&done, "b")["kind"], "skipped");

    // fail_open is refused, never rewritten.
    let mut bad = reviewed("g7c", "require: x", 2);
    bad.1[2]["criteria"] = json!([{"name": "done", "question": "require: x", "failure": "fail_open"}]);
    let g = id(&create_graph(&f, document(&f, bad.0, bad.1, bad.2)).await.1);
    let p = plan(&f, &g, 1).await;
    assert_eq!(p["errors"][0]["code"], "invalid_outcome", "{p}");
    f.p.stop().await;
}
