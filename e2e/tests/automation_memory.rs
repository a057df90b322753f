//! Memory steps in AutomationGraphs through the public API (api.md §18.7):
//! a `step_memory_read` and a `step_memory_write` go through the memory
//! service as the Automation's service Principal; a write is the API's
//! compare-and-set, recorded `via:"automation"`, and a document that
//! changed since it was read fails the step rather than being overwritten.
//! History steps select the Sessions after a named frontier and move it
//! only once the work they required completed.
//! Acceptance checks of §18.13 numbered 16 and 17, and readiness `memory`.
#![cfg(test)]

use checkfu_e2e::automation::*;
use checkfu_e2e::*;
use serde_json::{Value, json};

/// Store `M` with `svc` holding `read` and `write`, and `/n.md` written by
/// the admin: the store, the `write` row.
async fn store_m(f: &Fixture) -> (String, String) {
    let a = &f.p.admin;
    let r = a
        .post("/v1/memory-stores", json!({"environment_id": f.p.env_id, "name": "M", "owner": {"kind": "principal", "id": f.p.admin_id}}))
        .await;
    expect(&r, 201, None);
    let m = id(&r.1);
    let mut write = String::new();
    for permission in ["read", "write"] {
        let g =
            json!({"subject": {"kind": "principal", "id": f.svc}, "permission": permission, "resource": {"kind": "memory_store", "id": m}});
        let r = a.post("/v1/permission-assignments", g).await;
        expect(&r, 201, None);
        write = id(&r.1);
    }
    put(a, &m, "/n.md", "first", Value::Null).await;
    (m, write)
}

/// Writes a document through the API; its new sha.
async fn put(a: &Api, store: &str, path: &str, content: &str, expected: Value) -> String {
    let r = a
        .post(&format!("/v1/memory-stores/{store}/document"), json!({"path": path, "content": content, "expected_sha256": expected}))
        .await;
    expect(&r, 200, None);
    r.1["document"]["content_sha256"].as_str().unwrap().to_string()
}

async fn document(a: &Api, store: &str, path: &str) -> Value {
    a.get(&format!("/v1/memory-stores/{store}/document?path={path}")).await.1
}

/// `hook → r(read M path) → wait(3 s) → m(write content ← /t, expectedSha256 ← r's sha)`.
fn read_wait_write(f: &Fixture, name: &str, store: &str, path: &str) -> Value {
    let nodes = json!([
        hook_node(),
        {"kind": "step_memory_read", "id": "r", "memoryStore": store, "path": path},
        {"kind": "step_wait", "id": "w", "durationSeconds": 3},
        {"kind": "step_memory_write", "id": "m", "memoryStore": store, "path": path,
            "inputBindings": {"content": {"sourceNodeId": "hook", "pointer": "/t"},
                "expectedSha256": {"sourceNodeId": "r", "pointer": "/document/content_sha256"}}}
    ]);
    let edges = json!([graph_edge("starts", "hook", "r"), graph_edge("then", "r", "w"), graph_edge("then", "w", "m")]);
    graph_document(f, name, nodes, edges)
}

fn reason(firing: &Value, step: &str) -> Value {
    firing_step(firing, step)["outcome"]["reason"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_16_a_memory_write_is_a_compare_and_set_on_what_the_graph_read() {
    let f = fixture().await;
    let a = &f.p.admin;
    let (m, _) = store_m(&f).await;
    let (auto, secret) = apply_graph(&f, read_wait_write(&f, "curate", &m, "/n.md")).await;
    assert_eq!(auto["status"], "active", "{auto}");
    assert_eq!(check(&auto["readiness"], "memory")["status"], "pass", "{auto}");
    let auto_id = auto["id"].as_str().unwrap();
    let head = a.get(&format!("/v1/memory-stores/{m}")).await.1["head_version"].as_i64().unwrap();

    // Nothing changes meanwhile: head + 1, by svc, via the automation.
    let firing = fire_signed(&f, auto_id, &secret, json!({"id": "1", "t": "second"})).await;
    let done = settled(a, &firing).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert!(firing_step(&done, "r").get("output").is_none(), "steps are content-free: {done}");
    assert_eq!(document(a, &m, "/n.md").await["document"]["content"], "second");
    let v = a.get(&format!("/v1/memory-stores/{m}/versions/{}", head + 1)).await.1;
    assert_eq!((v["via"].clone(), v["actor"].clone()), (json!("automation"), json!({"kind": "principal", "id": f.svc})), "{v}");
    let trace = a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1;
    let receipts: Vec<(Value, Value, Value)> = trace["receipts"]["memory"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["step_id"].clone(), r["result"].clone(), r["store_version"].clone()))
        .collect();
    assert_eq!(receipts, vec![(json!("r"), json!("read"), json!(head)), (json!("m"), json!("written"), json!(head + 1))], "{trace}");
    let receipts = trace["receipts"].to_string();
    assert!(!receipts.contains("second") && !receipts.contains("first"), "no content in the receipts: {trace}");
    assert_eq!(trace["evidence"]["complete"], true);

    // The API writes while the firing waits: the step fails, the API's
    // content stays.
    let firing = fire_signed(&f, auto_id, &secret, json!({"id": "2", "t": "from the graph"})).await;
    let mut waiting = Value::Null;
    for _ in 0..100 {
        waiting = a.get(&format!("/v1/automation-firings/{firing}")).await.1;
        if firing_step(&waiting, "w")["outcome"]["kind"] == "waiting" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(firing_step(&waiting, "w")["outcome"]["kind"], "waiting", "{waiting}");
    let current = document(a, &m, "/n.md").await["document"]["content_sha256"].clone();
    put(a, &m, "/n.md", "from the api", current).await;
    let done = settled(a, &firing).await;
    assert_eq!((done["state"].clone(), reason(&done, "m")), (json!("failed"), json!("memory_sha_mismatch")), "{done}");
    assert_eq!(document(a, &m, "/n.md").await["document"]["content"], "from the api", "never overwritten");

    // A document that is not there.
    let (missing, secret) = apply_graph(&f, read_wait_write(&f, "missing", &m, "/absent.md")).await;
    let firing = fire_signed(&f, missing["id"].as_str().unwrap(), &secret, json!({"id": "3", "t": "x"})).await;
    let done = settled(a, &firing).await;
    assert_eq!((done["state"].clone(), reason(&done, "r")), (json!("failed"), json!("memory_document_not_found")), "{done}");
    assert_eq!(firing_step(&done, "m")["outcome"]["kind"], "skipped");
    assert_eq!(document(a, &m, "/absent.md").await["error"]["type"], "not_found", "nothing created");

    // A write that expects nothing is refused when planned.
    let blind = json!([hook_node(), {"kind": "step_memory_write", "id": "m", "memoryStore": m, "path": "/n.md",
        "inputBindings": {"content": {"sourceNodeId": "hook", "pointer": "/t"}}}]);
    let g = save_graph(&f, graph_document(&f, "blind", blind, json!([graph_edge("starts", "hook", "m")]))).await;
    assert_eq!(plan_errors(&f, &g).await, ["memory_write_unconditional"]);
    f.p.stop().await;
}

/// Readiness `memory`: the store exists and is active, and `svc` holds
/// `read` (and `write` where a step writes); losing `write` blocks a resume.
/// A create-only write (`expectedSha256: null`) of text content creates the
/// document once, and a second firing finds it there.
#[tokio::test(flavor = "multi_thread")]
async fn readiness_memory_needs_the_store_and_svcs_permissions_and_null_creates_only() {
    let f = fixture().await;
    let a = &f.p.admin;
    let (m, write) = store_m(&f).await;
    let nodes = json!([hook_node(), {"kind": "step_memory_write", "id": "m", "memoryStore": m, "path": "/new.md",
        "inputBindings": {"content": {"sourceNodeId": "hook", "pointer": "/t"}}, "expectedSha256": null}]);
    let (auto, secret) = apply_graph(&f, graph_document(&f, "create", nodes, json!([graph_edge("starts", "hook", "m")]))).await;
    let auto_id = auto["id"].as_str().unwrap().to_string();
    let firing = fire_signed(&f, &auto_id, &secret, json!({"id": "1", "t": "made"})).await;
    assert_eq!(settled(a, &firing).await["state"], "succeeded");
    assert_eq!(document(a, &m, "/new.md").await["document"]["content"], "made");
    let firing = fire_signed(&f, &auto_id, &secret, json!({"id": "2", "t": "again"})).await;
    let done = settled(a, &firing).await;
    assert_eq!(reason(&done, "m"), "memory_sha_mismatch", "create only: {done}");
    let firing = fire_signed(&f, &auto_id, &secret, json!({"id": "3", "t": {"not": "text"}})).await;
    assert_eq!(reason(&settled(a, &firing).await, "m"), "memory_content_not_text");

    // Pausing, then losing write: resume is refused with the check.
    expect(&a.post(&format!("/v1/automations/{auto_id}/pause"), json!({})).await, 200, None);
    expect(&a.delete(&format!("/v1/permission-assignments/{write}")).await, 200, None);
    let r = a.post(&format!("/v1/automations/{auto_id}/resume"), json!({})).await;
    expect(&r, 409, None);
    let checks = &r.1["error"]["details"]["readiness"];
    assert_eq!(check(checks, "memory")["status"], "fail", "{}", r.1);
    assert_eq!(check(checks, "memory")["resource_id"], m.as_str());

    // An archived store fails it too.
    let g = json!({"subject": {"kind": "principal", "id": f.svc}, "permission": "write", "resource": {"kind": "memory_store", "id": m}});
    expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    expect(&a.post(&format!("/v1/automations/{auto_id}/resume"), json!({})).await, 200, None);
    expect(&a.post(&format!("/v1/memory-stores/{m}/archive"), json!({})).await, 200, None);
    let got = a.get(&format!("/v1/automations/{auto_id}")).await.1;
    assert_eq!(check(&got["readiness"], "memory")["status"], "fail", "{got}");
    f.p.stop().await;
}

fn history(trace: &Value) -> Vec<(String, Vec<String>)> {
    trace["receipts"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let ids = h["session_ids"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect();
            (h["result"].as_str().unwrap().to_string(), ids)
        })
        .collect()
}

async fn frontiers(a: &Api, automation: &str) -> Value {
    let r = a.get(&format!("/v1/automations/{automation}/frontiers")).await;
    expect(&r, 200, None);
    r.1["data"].clone()
}

/// The agent step's child once it is admitted.
async fn child(a: &Api, firing: &str, step: &str) -> String {
    for _ in 0..200 {
        let f = a.get(&format!("/v1/automation-firings/{firing}")).await.1;
        if let Some(c) = firing_step(&f, step)["child_session_id"].as_str() {
            return c.to_string();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no child for {step}: {}", a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1)
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_17_a_frontier_moves_past_a_selection_only_once_its_work_completed() {
    let f = fixture().await;
    let a = &f.p.admin;
    let c = deploy(a, &f.p.env_id, json!({"tools": [{"type": "custom", "name": "lookup", "read_only": true}]})).await;
    grant(&f.p, &f.svc, &c.agent_id).await;
    let s1 = idle_session(a, &f.svc, &f.d.deployment_id, json!({})).await;
    let s2 = idle_session(a, &f.svc, &f.d.deployment_id, json!({})).await;
    let nodes = json!([
        hook_node(),
        {"kind": "step_select_history", "id": "sel", "frontier": "learn", "limit": 10},
        {"kind": "step_agent", "id": "agent", "agent": c.deployment_id, "prompt": "call lookup {}"},
        {"kind": "step_record_history", "id": "rec", "selection": "sel", "requires": ["agent"]}
    ]);
    let edges = json!([graph_edge("starts", "hook", "sel"), graph_edge("then", "sel", "agent"), graph_edge("then", "agent", "rec")]);
    let (auto, secret) = apply_graph(&f, graph_document(&f, "learn", nodes, edges)).await;
    let auto_id = auto["id"].as_str().unwrap().to_string();
    assert_eq!(frontiers(a, &auto_id).await, json!([]), "never moved");

    // Both Sessions, oldest first; answered, the frontier moves to s2.
    let first = fire_signed(&f, &auto_id, &secret, json!({"id": "1"})).await;
    answer_lookup(a, &f.svc, &child(a, &first, "agent").await, "found").await;
    let done = settled(a, &first).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let trace = a.get(&format!("/v1/automation-firings/{first}/trace")).await.1;
    assert_eq!(history(&trace), [("selected".into(), vec![s1.clone(), s2.clone()]), ("moved".into(), vec![s1.clone(), s2.clone()])]);
    assert_eq!(frontiers(a, &auto_id).await, json!([{"name": "learn", "position": s2, "firing_id": first}]));

    // Only the newer s3 (not the first firing's own child); its child
    // archived, the record is skipped and the frontier stays.
    let s3 = idle_session(a, &f.svc, &f.d.deployment_id, json!({})).await;
    let second = fire_signed(&f, &auto_id, &secret, json!({"id": "2"})).await;
    let parked = child(a, &second, "agent").await;
    assert_eq!(settle(a, &parked).await["stop_reason"]["type"], "requires_action");
    expect(&a.post(&format!("/v1/sessions/{parked}/archive"), json!({})).await, 200, None);
    let done = settled(a, &second).await;
    assert_eq!(firing_step(&done, "rec")["outcome"]["kind"], "skipped", "{done}");
    let trace = a.get(&format!("/v1/automation-firings/{second}/trace")).await.1;
    assert_eq!(history(&trace), [("selected".into(), vec![s3.clone()])]);
    assert_eq!(frontiers(a, &auto_id).await[0]["position"], s2.as_str(), "unmoved");

    // So the next firing selects s3 again.
    let third = fire_signed(&f, &auto_id, &secret, json!({"id": "3"})).await;
    answer_lookup(a, &f.svc, &child(a, &third, "agent").await, "found").await;
    let done = settled(a, &third).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let trace = a.get(&format!("/v1/automation-firings/{third}/trace")).await.1;
    assert_eq!(history(&trace)[0], ("selected".to_string(), vec![s3.clone()]));
    assert_eq!(frontiers(a, &auto_id).await[0]["position"], s3.as_str());
    assert_eq!(trace["evidence"]["complete"], true);
    assert_eq!(f.cli(&["automation", "frontiers", &auto_id]), format!("learn  at {s3}  moved by {third}\n"));
    let tree = f.cli(&["automation", "trace", &third]);
    assert!(tree.contains(&format!("frontier learn  moved to {s3}")), "{tree}");

    // A record whose requirement lies outside its selection's reach.
    let nodes = json!([hook_node(),
        {"kind": "step_select_history", "id": "sel", "frontier": "x", "limit": 1},
        {"kind": "step_wait", "id": "w", "durationSeconds": 1},
        {"kind": "step_record_history", "id": "rec", "selection": "sel", "requires": ["w"]}]);
    let edges = json!([graph_edge("starts", "hook", "sel"), graph_edge("starts", "hook", "w"), graph_edge("then", "sel", "rec")]);
    let g = save_graph(&f, graph_document(&f, "around", nodes, edges)).await;
    assert_eq!(plan_errors(&f, &g).await, ["record_requires_invalid"]);
    f.p.stop().await;
}
