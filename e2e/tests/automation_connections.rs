//! `step_connection` in AutomationGraphs through the public API (api.md
//! §18.3), against a real MCP server from the official Python SDK: the
//! plan pins the ToolSource and Connection, the call goes the governed
//! path (use_connection → ActionPolicy → ActionApproval) with the
//! Automation's service Principal and no agent, the capability gateway
//! injects the credential, and a call whose answer never came back — a
//! timeout, or a process killed after it left — is never sent again, and
//! settles at its deadline.
//! Acceptance checks of §18.13 numbered 8 to 10.
#![cfg(test)]

use checkfu_e2e::automation::*;
use checkfu_e2e::mcp::McpFixture;
use checkfu_e2e::*;
use serde_json::{Value, json};
use std::time::Duration;

const S: &str = "s3cret-XYZ";

/// §18.13's fixture: §12.11's, plus Connection `C` to the MCP server with
/// `S`, ToolSource `T` (`timeout` s calls), and `svc` holding
/// use_connection on `C`.
struct Reach {
    f: Fixture,
    mcp: McpFixture,
    connection: String,
    source: String,
    use_connection: String,
}

async fn reach(what: &str, timeout: i64) -> Option<Reach> {
    let mcp = McpFixture::start(what, S, &[]).await?;
    let f = fixture().await;
    let (connection, source, use_connection) = connect(&f.p.admin, &f.p.env_id, &f.svc, &mcp.url, timeout).await;
    Some(Reach { f, mcp, connection, source, use_connection })
}

/// `C`, `T` and `svc`'s use_connection row on `C`.
async fn connect(a: &Api, env: &str, svc: &str, url: &str, timeout: i64) -> (String, String, String) {
    let c = a
        .post(
            "/v1/connections",
            json!({"environment_id": env, "name": "C", "kind": "mcp", "endpoint": {"url": url},
                "credential": {"type": "static_bearer", "token": S}}),
        )
        .await;
    expect(&c, 201, None);
    let connection = id(&c.1);
    let t = a
        .post(
            "/v1/tool-sources",
            json!({"environment_id": env, "name": "T", "connection_id": connection, "default_config": {"enabled": true}, "call_timeout_seconds": timeout}),
        )
        .await;
    expect(&t, 201, None);
    assert_eq!(t.1["sync_status"], "ok", "{}", t.1);
    let g = json!({"subject": {"kind": "principal", "id": svc}, "permission": "use_connection", "resource": {"kind": "connection", "id": connection}});
    let r = a.post("/v1/permission-assignments", g).await;
    expect(&r, 201, None);
    (connection, id(&t.1), id(&r.1))
}

fn hook() -> Value {
    json!({"kind": "trigger", "id": "hook", "trigger": {"kind": "webhook", "dedupe_key": "/id"}})
}

fn edge(kind: &str, from: &str, to: &str) -> Value {
    json!({"kind": kind, "from": from, "to": to})
}

/// `hook → c(step_connection T tool)`, with more nodes and edges after.
fn call_graph(env: &str, svc: &str, name: &str, c: Value, more: &[Value], more_edges: &[Value]) -> Value {
    let mut nodes = vec![hook(), c];
    nodes.extend(more.iter().cloned());
    let mut edges = vec![edge("starts", "hook", "c")];
    edges.extend(more_edges.iter().cloned());
    json!({"name": name, "environment_id": env, "service_principal_id": svc, "nodes": nodes, "edges": edges})
}

fn add_node() -> Value {
    json!({"kind": "step_connection", "id": "c", "toolSource": "T", "tool": "add", "arguments": {"a": 2},
        "argumentBindings": {"b": {"sourceNodeId": "hook", "pointer": "/b"}}})
}

/// Creates, plans (no blockers) and applies a graph: its Automation, the
/// plan and the ingest secret.
async fn apply(a: &Api, admin_id: &str, doc: Value) -> (String, Value, String) {
    let r = a.post("/v1/automation-graphs", json!({"created_by_principal_id": admin_id, "document": doc})).await;
    expect(&r, 201, None);
    let g = id(&r.1);
    let p = a.post(&format!("/v1/automation-graphs/{g}/plan"), json!({"revision": 1})).await.1;
    assert_eq!(p["blockers"], json!([]), "{p}");
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    expect(&r, 200, None);
    (r.1["automation_id"].as_str().unwrap().to_string(), p, r.1["ingest_secret"].as_str().unwrap_or_default().to_string())
}

fn step<'a>(firing: &'a Value, id: &str) -> &'a Value {
    firing["program"]["steps"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap()
}

fn calls(trace: &Value) -> Vec<Value> {
    trace["receipts"]["connection_calls"].as_array().cloned().unwrap_or_default()
}

async fn tool_calls(mcp: &McpFixture) -> i64 {
    mcp.stats().await["tool_calls"].as_i64().unwrap()
}

/// Fires through signed ingest: the firing's id.
async fn fire(base: &str, auto: &str, secret: &str, body: Value) -> String {
    let r = ingest_signed(base, auto, secret, &body.to_string()).await;
    expect(&r, 201, None);
    id(&r.1)
}

/// The firing once step `c` reached `kind` (or as it is after 20 s).
async fn step_reaches(a: &Api, firing: &str, kind: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..400 {
        last = a.get(&format!("/v1/automation-firings/{firing}")).await.1;
        if step(&last, "c")["outcome"]["kind"] == kind {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("step c never reached {kind}: {last}");
}

/// A rule letting every call through ToolSource `source` run unasked.
async fn allow_source(a: &Api, env: &str, source: &str) -> String {
    let rule = json!({"environment_id": env, "name": "allow-T", "rules": [
        {"subject": {"kind": "*"}, "resource": {"kind": "tool_source", "id_glob": source}, "disposition": "allow"}]});
    let r = a.post("/v1/action-policies", rule).await;
    expect(&r, 201, None);
    id(&r.1)
}

/// Nothing the public API shows of the firing (firing, trace, audit,
/// approvals, the child's events) holds the credential.
async fn secret_nowhere(a: &Api, firing: &str, more: &[Value]) {
    let mut seen = vec![
        a.get(&format!("/v1/automation-firings/{firing}")).await.1,
        a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1,
        a.get(&format!("/v1/audit-events?resource_id={firing}")).await.1,
        a.get("/v1/action-approvals").await.1,
    ];
    seen.extend(more.iter().cloned());
    for v in seen {
        assert!(!v.to_string().contains(S), "the credential leaked: {v}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_8_a_connection_step_calls_its_tool_with_bound_arguments() {
    let Some(r) = reach("acceptance_8", 2).await else { return };
    let (a, f) = (&r.f.p.admin, &r.f);
    allow_source(a, &f.p.env_id, &r.source).await;
    let echo = json!({"kind": "step_agent", "id": "e", "agent": f.d.deployment_id, "prompt": "unused"});
    let doc = call_graph(&f.p.env_id, &f.svc, "g8", add_node(), &[echo], &[edge("then", "c", "e"), edge("output", "c", "e")]);
    let (auto, plan, secret) = apply(a, &f.p.admin_id, doc).await;
    assert_eq!(plan["resources"], json!([{"node": "c", "tool_source_id": r.source, "connection_id": r.connection}]), "{plan}");
    let am = a.get(&format!("/v1/automations/{auto}")).await.1;
    assert_eq!(check(&am["readiness"], "connections")["status"], "pass", "{am}");
    assert_eq!(am["status"], "active", "{am}");

    let firing = fire(&f.p.base, &auto, &secret, json!({"id": "1", "b": 3})).await;
    let done = settled(a, &firing).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let c = step(&done, "c");
    assert_eq!(c["outcome"]["kind"], "completed", "{done}");
    let trace = a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1;
    let calls = calls(&trace);
    assert_eq!(calls.len(), 1, "{trace}");
    assert_eq!(calls[0]["id"], c["connection_call_id"]);
    assert!(calls[0]["id"].as_str().unwrap().starts_with("ccall_"));
    assert_eq!(
        (&calls[0]["status"], &calls[0]["tool"], &calls[0]["connection_id"]),
        (&json!("succeeded"), &json!("add"), &json!(r.connection))
    );
    let args = json!({"a": 2, "b": 3});
    assert_eq!(calls[0]["arguments_sha256"], checkfu_core::sha256_hex(args.to_string()), "the bound key replaced, hashed");
    assert!(calls[0].get("arguments").is_none(), "a receipt holds no arguments");
    assert_eq!(trace["evidence"]["complete"], true);
    assert_eq!(tool_calls(&r.mcp).await, 1);
    // The step's output `{content, structured_content}` feeds the next step.
    let child = step(&done, "e")["child_session_id"].as_str().unwrap().to_string();
    let events = a.get(&format!("/v1/sessions/{child}/events?types[]=user.message")).await.1;
    let text = events["data"][0]["payload"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{events}"));
    let first: Value = serde_json::from_str(text).unwrap();
    assert_eq!(first["content"], "5", "{first}");
    assert_eq!(first["structured_content"], json!({"result": 5}));
    let audit = a.get(&format!("/v1/audit-events?resource_id={firing}")).await.1;
    assert!(audit["data"].as_array().unwrap().iter().any(|e| e["action"] == "connection_call.succeeded"), "{audit}");
    secret_nowhere(a, &firing, &[events, a.get(&format!("/v1/sessions/{child}/events")).await.1]).await;

    // A missing binding fails the step before anything is sent.
    let firing = fire(&f.p.base, &auto, &secret, json!({"id": "2"})).await;
    let done = settled(a, &firing).await;
    assert_eq!(step(&done, "c")["outcome"], json!({"kind": "failed", "reason": "binding_unavailable"}));
    // A bound value the tool's schema refuses: arguments_invalid, nothing sent.
    let firing = fire(&f.p.base, &auto, &secret, json!({"id": "3", "b": "three"})).await;
    let done = settled(a, &firing).await;
    assert_eq!(step(&done, "c")["outcome"], json!({"kind": "failed", "reason": "arguments_invalid"}));
    assert_eq!(tool_calls(&r.mcp).await, 1, "neither was sent");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_steps_plan_refuses_what_it_cannot_pin() {
    let Some(r) = reach("connection_plan", 2).await else { return };
    let (a, f) = (&r.f.p.admin, &r.f);
    let codes = |node: Value| {
        let doc = call_graph(&f.p.env_id, &f.svc, "gp", node, &[], &[]);
        async move {
            let g = id(&a.post("/v1/automation-graphs", json!({"created_by_principal_id": f.p.admin_id, "document": doc})).await.1);
            let p = a.post(&format!("/v1/automation-graphs/{g}/plan"), json!({"revision": 1})).await.1;
            let of = |k: &str| p[k].as_array().into_iter().flatten().map(|e| e["code"].as_str().unwrap().to_string()).collect::<Vec<_>>();
            (of("errors"), of("blockers"))
        }
    };
    let node = |ts: &str, tool: &str, arguments: Value| json!({"kind": "step_connection", "id": "c", "toolSource": ts, "tool": tool, "arguments": arguments});
    assert_eq!(codes(node("nope", "add", json!({"a": 1, "b": 2}))).await.1, ["tool_source_not_found"]);
    assert_eq!(codes(node(&r.source, "nope", json!({}))).await.1, ["tool_not_offered"]);
    assert_eq!(codes(node("T", "add", json!({"a": "x", "b": 2}))).await.1, ["arguments_invalid"]);
    assert_eq!(codes(node("T", "add", json!({"a": 1}))).await.1, ["arguments_invalid"], "b is required and not bound");
    assert_eq!(codes(node("T", "add", json!("a=1"))).await.0, ["arguments_invalid"]);
    let big = json!({"a": "x".repeat(70_000)});
    assert_eq!(codes(node("T", "add", big)).await.0, ["arguments_invalid"]);
    let mut bound = add_node();
    bound["argumentBindings"]["b"]["sourceNodeId"] = json!("later");
    assert_eq!(codes(bound).await.0, ["binding_source_not_ancestor"]);
    assert_eq!(codes(add_node()).await, (vec![], vec![]));
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_9_a_connection_step_is_governed_like_a_runs_call() {
    let Some(r) = reach("acceptance_9", 2).await else { return };
    let (a, f) = (&r.f.p.admin, &r.f);
    let doc = call_graph(&f.p.env_id, &f.svc, "g9", add_node(), &[], &[]);
    let (auto, _, secret) = apply(a, &f.p.admin_id, doc).await;

    // No rule: require_approval, frozen with no agent.
    let firing = fire(&f.p.base, &auto, &secret, json!({"id": "1", "b": 3})).await;
    let waiting = step_reaches(a, &firing, "awaiting_approval").await;
    let mut ap_id = step(&waiting, "c")["action_approval_id"].clone();
    for _ in 0..100 {
        if ap_id.is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        ap_id = step(&a.get(&format!("/v1/automation-firings/{firing}")).await.1, "c")["action_approval_id"].clone();
    }
    let ap_id = ap_id.as_str().expect("the approval was asked for").to_string();
    let ap = a.get(&format!("/v1/action-approvals/{ap_id}")).await.1;
    assert_eq!(ap["frozen"]["agent_id"], Value::Null, "{ap}");
    assert_eq!(ap["frozen"]["principal_id"], json!(f.svc));
    assert_eq!((&ap["frozen"]["tool"], &ap["frozen"]["connection_id"]), (&json!("add"), &json!(r.connection)));
    assert_eq!(ap["frozen"]["arguments"], json!({"a": 2, "b": 3}));
    assert_eq!((&ap["automation_firing_id"], &ap["step_id"]), (&json!(firing), &json!("c")));
    let token = ap["response_token"].as_str().unwrap().to_string();
    let standing = json!({"decision": "approve", "response_token": token, "standing": {"ttl_seconds": 60}});
    expect(&a.post(&format!("/v1/action-approvals/{ap_id}/responses"), standing).await, 400, None);
    let deny = json!({"decision": "deny", "response_token": token});
    expect(&a.post(&format!("/v1/action-approvals/{ap_id}/responses"), deny).await, 200, None);
    let done = settled(a, &firing).await;
    assert_eq!(step(&done, "c")["outcome"]["kind"], "denied", "{done}");
    assert_eq!(tool_calls(&r.mcp).await, 0, "a denied call is never sent");

    // Approved: governance's checks run again, then the call.
    let firing = fire(&f.p.base, &auto, &secret, json!({"id": "2", "b": 4})).await;
    let ap = approval_of(a, &firing).await;
    let approve = json!({"decision": "approve", "response_token": ap["response_token"]});
    expect(&a.post(&format!("/v1/action-approvals/{}/responses", ap["id"].as_str().unwrap()), approve).await, 200, None);
    let done = settled(a, &firing).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(tool_calls(&r.mcp).await, 1);
    secret_nowhere(a, &firing, &[]).await;

    // svc's row deleted while the approval waits: permission_denied, no call.
    let firing = fire(&f.p.base, &auto, &secret, json!({"id": "3", "b": 5})).await;
    let ap = approval_of(a, &firing).await;
    expect(&a.delete(&format!("/v1/permission-assignments/{}", r.use_connection)).await, 200, None);
    let approve = json!({"decision": "approve", "response_token": ap["response_token"]});
    expect(&a.post(&format!("/v1/action-approvals/{}/responses", ap["id"].as_str().unwrap()), approve).await, 200, None);
    let done = settled(a, &firing).await;
    assert_eq!(step(&done, "c")["outcome"], json!({"kind": "failed", "reason": "permission_denied"}), "{done}");
    assert_eq!(tool_calls(&r.mcp).await, 1, "nothing more was sent");
    let am = a.get(&format!("/v1/automations/{auto}")).await.1;
    assert_eq!(check(&am["readiness"], "connections")["status"], "fail", "{am}");

    // A deny rule on C: policy_denied, before any approval.
    let g = json!({"subject": {"kind": "principal", "id": f.svc}, "permission": "use_connection", "resource": {"kind": "connection", "id": r.connection}});
    expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    let rule = json!({"environment_id": f.p.env_id, "name": "deny-C", "rules": [
        {"subject": {"kind": "*"}, "resource": {"kind": "connection", "id_glob": r.connection}, "disposition": "deny"}]});
    expect(&a.post("/v1/action-policies", rule).await, 201, None);
    let firing = fire(&f.p.base, &auto, &secret, json!({"id": "4", "b": 6})).await;
    let done = settled(a, &firing).await;
    assert_eq!(step(&done, "c")["outcome"], json!({"kind": "failed", "reason": "policy_denied"}), "{done}");
    assert_eq!(tool_calls(&r.mcp).await, 1);
    let audit = a.get(&format!("/v1/audit-events?resource_id={firing}")).await.1;
    assert!(audit["data"].as_array().unwrap().iter().any(|e| e["action"] == "action.denied"), "{audit}");
}

/// The approval a firing's step `c` waits on, once asked for.
async fn approval_of(a: &Api, firing: &str) -> Value {
    for _ in 0..400 {
        let f = a.get(&format!("/v1/automation-firings/{firing}")).await.1;
        if let Some(id) = step(&f, "c")["action_approval_id"].as_str() {
            return a.get(&format!("/v1/action-approvals/{id}")).await.1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no approval was asked for in {firing}");
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_10_a_call_without_an_answer_is_never_sent_again() {
    let Some(r) = reach("acceptance_10", 2).await else { return };
    let (a, f) = (&r.f.p.admin, &r.f);
    allow_source(a, &f.p.env_id, &r.source).await;
    let slow = json!({"kind": "step_connection", "id": "c", "toolSource": "T", "tool": "slow",
        "retry": {"maxAttempts": 3, "backoffSeconds": 1}});
    let (auto, _, secret) = apply(a, &f.p.admin_id, call_graph(&f.p.env_id, &f.svc, "g10", slow, &[], &[])).await;
    let firing = fire(&f.p.base, &auto, &secret, json!({"id": "1"})).await;
    let done = settled(a, &firing).await;
    assert_eq!(step(&done, "c")["outcome"], json!({"kind": "failed", "reason": "effect_indeterminate"}), "{done}");
    assert_eq!(step(&done, "c")["attempts"].as_array().unwrap().len(), 1, "never retried: {done}");
    let trace = a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1;
    let calls = calls(&trace);
    assert_eq!(calls.len(), 1, "{trace}");
    assert_eq!(calls[0]["status"], Value::Null);
    assert_eq!(calls[0]["error_code"], "mcp.timeout");
    assert_eq!(tool_calls(&r.mcp).await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_10_a_call_cut_off_by_a_crash_is_indeterminate_after_restart() {
    if !checkfu_e2e::mcp::sdk_present("acceptance_10_crash") {
        return;
    }
    let mcp = McpFixture::start("acceptance_10_crash", S, &[]).await.expect("the MCP fixture");
    let dir = tempfile::tempdir().unwrap();
    let env = [("CHECKFU_ALLOW_PRIVATE_TARGETS", "true")];
    let (mut proc, base) = checkfu_e2e::procs::up_with(dir.path(), &[], &env);
    wait_ready(&base).await;
    let key = std::fs::read_to_string(dir.path().join("admin.key")).unwrap().trim().to_string();
    let i = Installation::discover(&base, &key).await;
    let a = &i.admin;
    let svc = id(&a.post("/v1/principals", json!({"kind": "service", "name": "svc"})).await.1);
    let (_, source, _) = connect(a, &i.env_id, &svc, &mcp.url, 30).await;
    allow_source(a, &i.env_id, &source).await;
    let slow = json!({"kind": "step_connection", "id": "c", "toolSource": "T", "tool": "slow",
        "retry": {"maxAttempts": 3, "backoffSeconds": 1}});
    let (auto, _, secret) = apply(a, &i.admin_id, call_graph(&i.env_id, &svc, "g10c", slow, &[], &[])).await;
    let firing = fire(&base, &auto, &secret, json!({"id": "1"})).await;
    // Killed a second after the call left.
    let mut sent = false;
    for _ in 0..200 {
        let t = a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1;
        if !calls(&t).is_empty() {
            sent = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(sent, "the call was recorded as sent");
    tokio::time::sleep(Duration::from_secs(1)).await;
    proc.kill_hard();

    let (_proc, base) = checkfu_e2e::procs::up_with(dir.path(), &[], &env);
    wait_ready(&base).await;
    let a = Api::new(&base, &key);
    // Its deadline (the 30 s call timeout and a margin) decides; nothing
    // sends it again meanwhile.
    let mut done = Value::Null;
    for _ in 0..240 {
        done = a.get(&format!("/v1/automation-firings/{firing}")).await.1;
        if done["state"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(done["state"], "failed", "{done}");
    assert_eq!(step(&done, "c")["outcome"], json!({"kind": "failed", "reason": "effect_indeterminate"}), "{done}");
    assert_eq!(done["program"]["attempt"], 2, "recovered once: {done}");
    let trace = a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1;
    let calls = calls(&trace);
    assert_eq!(calls.len(), 1, "{trace}");
    assert_eq!(calls[0]["status"], Value::Null);
    // Long enough for a second call to have arrived had one been sent.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(tool_calls(&mcp).await, 1, "one call in all");
}
