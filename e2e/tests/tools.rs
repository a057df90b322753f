//! Governed tool use through the API: every call is decided by the
//! Environment's ActionPolicies before it runs in the Session's sandbox.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn tool_calls_are_decided_then_run_in_the_sandbox() {
    if !checkfu_runner::sandbox::isolation_available() {
        checkfu_core::testing::skip("tool calls in the sandbox", "bubblewrap is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let d = deploy(
        a,
        &p.env_id,
        json!({"tools": [{"type": "builtin", "name": "read"}, {"type": "builtin", "name": "write"}, {"type": "builtin", "name": "bash"}]}),
    )
    .await;
    let allow_bash = json!({"environment_id": p.env_id, "name": "bash-ok", "rules": [
        {"subject": {"kind": "agent_definition", "id_glob": d.agent_id}, "resource": {"kind": "tool", "id_glob": "bash"}, "permission_glob": "invoke", "disposition": "allow"}
    ]});
    let policy = a.post("/v1/action-policies", allow_bash).await;
    expect(&policy, 201, None);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();

    let text = format!(
        "call write {{\"path\": \"a.txt\", \"content\": \"x\"}}\ncall bash {{\"command\": \"echo hi > f.txt && cat f.txt\"}}\ncall nope {{}}\ncall bash {{\"command\": \"echo x > ../escape; exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected\"}}"
    );
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, &text)]})).await;
    let sid = id(&s.1);
    let settled = settle(a, &sid).await;
    // write needs approval (the default for a write tool): the Session waits on it.
    assert_eq!(settled["stop_reason"]["type"], "requires_action", "{settled}");
    let evs = events(a, &sid).await;
    let write_use = evs.iter().find(|e| e["type"] == "agent.tool_use" && e["payload"]["name"] == "write").unwrap();
    assert_eq!(settled["stop_reason"]["event_ids"], json!([write_use["id"]]));
    assert!(!dir.path().join("workspaces").join(&sid).join("a.txt").exists(), "nothing runs before approval");
    let pending = a.get(&format!("/v1/action-approvals?status=pending&session_id={sid}")).await;
    expect(&pending, 200, None);
    let approval = pending.1["data"][0].clone();
    assert_eq!(approval["tool_use_id"], write_use["payload"]["tool_use_id"]);
    let deny = json!({"decision": "deny", "response_token": approval["response_token"]});
    expect(&a.post(&format!("/v1/action-approvals/{}/responses", id(&approval)), deny).await, 200, None);
    let settled = settle(a, &sid).await;
    assert_eq!(settled["stop_reason"]["type"], "end_turn");
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    let uses: Vec<_> = evs.iter().filter(|e| e["type"] == "agent.tool_use").collect();
    let decided: Vec<(String, String)> = uses
        .iter()
        .map(|e| (e["payload"]["name"].as_str().unwrap().into(), e["payload"]["evaluated_permission"].as_str().unwrap().into()))
        .collect();
    assert_eq!(
        decided,
        vec![
            ("write".into(), "require_approval".into()),
            ("bash".into(), "allow".into()),
            ("nope".into(), "deny".into()),
            ("bash".into(), "allow".into())
        ]
    );
    let id_of = |i: usize| uses[i]["payload"]["tool_use_id"].clone();
    let answer = |tid: &serde_json::Value| {
        evs.iter()
            .find(|e| (e["type"] == "agent.tool_result" || e["type"] == "policy.denied") && e["payload"]["tool_use_id"] == *tid)
            .unwrap()
            .clone()
    };

    // write: the approver declined, so it was refused and never run.
    let w = answer(&id_of(0));
    assert_eq!(w["type"], "policy.denied");
    assert!(w["payload"]["guidance"].as_str().unwrap().contains("declined"), "{w}");
    assert!(!dir.path().join("workspaces").join(&sid).join("a.txt").exists());
    // bash: allowed by the policy rule, authorized, run in the workspace.
    assert!(evs.iter().any(|e| e["type"] == "run.action_authorized" && e["payload"]["tool_use_id"] == id_of(1)));
    let b = answer(&id_of(1));
    assert_eq!(
        (b["type"].clone(), b["payload"]["content"].clone(), b["payload"]["is_error"].clone()),
        (json!("agent.tool_result"), json!("hi\n"), json!(false))
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("workspaces").join(&sid).join("f.txt")).unwrap(), "hi\n");
    // nope: not declared by the agent.
    let n = answer(&id_of(2));
    assert_eq!((n["type"].clone(), n["payload"]["matched_rule_id"].clone()), (json!("policy.denied"), json!(null)));
    assert!(n["payload"]["guidance"].as_str().unwrap().contains("not a tool this agent declares"));
    assert_eq!(n["payload"]["reason"], "tool_not_declared", "{n}");
    assert_eq!(w["payload"]["reason"], "approval_not_granted", "{w}");
    // The sandbox reaches neither the network nor outside its workspace.
    let escape = answer(&id_of(3));
    assert_eq!(escape["payload"]["is_error"], true, "{escape}");
    assert!(!escape["payload"]["content"].as_str().unwrap().contains("connected"));
    assert!(listener.accept().is_err(), "the sandbox never connected");
    assert!(!dir.path().join("workspaces").join("escape").exists());
    // The model saw every answer and reported them.
    let last =
        evs.iter().rev().find(|e| e["type"] == "agent.message").unwrap()["payload"]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(last.contains("tool bash returned: hi") && last.contains("tool write returned: not run: the approver declined"), "{last}");

    // read is read-only: allowed by default, in the same workspace.
    a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "call read {\"path\": \"f.txt\"}")).await;
    settle(a, &sid).await;
    let evs = events(a, &sid).await;
    let last = evs.iter().rev().find(|e| e["type"] == "agent.message").unwrap()["payload"]["content"][0]["text"].clone();
    assert_eq!(last, "tool read returned: hi\n");

    // Revoking the allow rule takes effect at the next call.
    expect(&a.delete(&format!("/v1/action-policies/{}", id(&policy.1))).await, 200, None);
    a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "call bash {\"command\": \"echo again\"}")).await;
    settle(a, &sid).await;
    let evs = events(a, &sid).await;
    let use_ = evs.iter().rev().find(|e| e["type"] == "agent.tool_use").unwrap();
    assert_eq!(use_["payload"]["evaluated_permission"], "require_approval");
    assert_eq!(evs.last().unwrap()["payload"]["stop_reason"]["type"], "requires_action");
    p.stop().await;
}
