//! ActionApprovals and StandingApprovals through the public API: a gated
//! call waits durably, takes exactly one response (from any surface or from
//! inside the Session), runs with its frozen arguments only when approved,
//! and expires as denied. A StandingApproval covers one exact tuple until it
//! is revoked.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::{Value, json};
use std::time::Duration;

fn write_call(path: &str) -> String {
    format!("call write {{\"path\": \"{path}\", \"content\": \"approved\"}}")
}

async fn pending(a: &Api, sid: &str) -> Vec<Value> {
    let r = a.get(&format!("/v1/action-approvals?status=pending&session_id={sid}")).await;
    expect(&r, 200, None);
    r.1["data"].as_array().unwrap().clone()
}

async fn respond(a: &Api, approval: &str, body: Value) -> Reply {
    a.post(&format!("/v1/action-approvals/{approval}/responses"), body).await
}

/// A Session of an agent with the builtin `tools` whose first turn asks to
/// write `path` and now waits on that call's one approval: the deployment,
/// the Session's id and the pending approval.
async fn waiting_on_write(p: &Platform, tools: &[&str], path: &str) -> (Deployed, String, Value) {
    let a = &p.admin;
    let tools: Vec<Value> = tools.iter().map(|t| json!({"type": "builtin", "name": t})).collect();
    let d = deploy(a, &p.env_id, json!({"tools": tools})).await;
    let first = message(&p.admin_id, &write_call(path));
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [first]})).await;
    let sid = id(&s.1);
    assert_eq!(settle(a, &sid).await["stop_reason"]["type"], "requires_action");
    let list = pending(a, &sid).await;
    assert_eq!(list.len(), 1, "{list:?}");
    (d, sid, list[0].clone())
}

/// A service principal with `read` and `invoke` but not `approve`.
async fn reader(p: &Platform, agent_id: &str) -> (Api, String) {
    let a = &p.admin;
    let prin = a.post("/v1/principals", json!({"kind": "service", "name": "reader"})).await;
    let pid = id(&prin.1);
    let key = a.post(&format!("/v1/principals/{pid}/api-keys"), json!({"name": "k"})).await;
    for (perm, kind, rid) in [("read", "environment", p.env_id.as_str()), ("invoke", "agent", agent_id)] {
        let g = json!({"subject": {"kind": "principal", "id": pid}, "permission": perm, "resource": {"kind": kind, "id": rid}});
        expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    }
    (Api::new(&p.base, key.1["secret"].as_str().unwrap()), pid)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approved_write_runs_with_its_frozen_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let (d, sid, ap) = waiting_on_write(&p, &["write"], "out.txt").await;
    let file = dir.path().join("workspaces").join(&sid).join("out.txt");
    assert!(!file.exists());

    // Only settle events are accepted while the Session waits.
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "hello?")).await, 409, Some("validation.conflict"));
    assert_eq!(pending(a, &sid).await.len(), 1, "the refused message changed nothing");
    let aid = id(&ap);
    assert_eq!(ap["status"], "pending");
    assert_eq!(ap["frozen"]["tool"], "write");
    assert_eq!(ap["frozen"]["principal_id"], me.as_str());
    assert_eq!(ap["frozen"]["agent_id"], d.agent_id.as_str());
    assert_eq!(ap["frozen"]["arguments"], json!({"path": "out.txt", "content": "approved"}));
    assert_eq!(ap["frozen"]["arguments_sha256"].as_str().unwrap().len(), 64);
    let token = ap["response_token"].as_str().unwrap().to_string();
    let evs = events(a, &sid).await;
    let pend = evs.iter().find(|e| e["type"] == "action_approval.pending").unwrap();
    assert_eq!((pend["payload"]["action_approval_id"].as_str(), &pend["payload"]["tool_use_id"]), (Some(aid.as_str()), &ap["tool_use_id"]));

    // A reader sees the approval but not its token, and may not respond.
    let (r, _) = reader(&p, &d.agent_id).await;
    let seen = r.get(&format!("/v1/action-approvals/{aid}")).await;
    expect(&seen, 200, None);
    assert!(seen.1.get("response_token").is_none(), "{}", seen.1);
    expect(&respond(&r, &aid, json!({"decision": "approve", "response_token": token})).await, 403, Some("permission.denied"));

    // Bad input and a wrong token change nothing.
    expect(&respond(a, &aid, json!({"decision": "maybe", "response_token": token})).await, 400, Some("validation.invalid"));
    expect(&respond(a, &aid, json!({"decision": "approve", "response_token": "art_wrong"})).await, 409, Some("validation.conflict"));
    expect(
        &respond(a, "aapr_01jzzzzzzzzzzzzzzzzzzzzzzz", json!({"decision": "approve", "response_token": token})).await,
        404,
        Some("not_found"),
    );

    let ok = respond(a, &aid, json!({"decision": "approve", "response_token": token})).await;
    expect(&ok, 200, None);
    assert_eq!((ok.1["status"].as_str(), ok.1["decision"].as_str()), (Some("approved"), Some("approve")));
    assert_eq!(ok.1["responder_principal_id"], me.as_str());
    assert!(ok.1.get("response_token").is_none(), "the token is spent");
    // A second response, even with the right token, is a conflict.
    expect(&respond(a, &aid, json!({"decision": "deny", "response_token": token})).await, 409, Some("validation.conflict"));

    let done = settle(a, &sid).await;
    assert_eq!(done["stop_reason"]["type"], "end_turn", "{done}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "approved");
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    let resolved = evs.iter().find(|e| e["type"] == "action_approval.resolved").unwrap();
    assert_eq!(resolved["payload"]["decision"], "approve");
    assert_eq!(resolved["payload"]["responder_principal_id"], me.as_str());
    let auth = evs.iter().find(|e| e["type"] == "run.action_authorized").unwrap();
    assert_eq!(auth["payload"]["action_approval_id"], aid.as_str());
    let t = types(&evs);
    let pos = |ty: &str| t.iter().position(|x| x == ty).unwrap();
    assert!(pos("action_approval.pending") < pos("action_approval.resolved"));
    assert!(pos("action_approval.resolved") < pos("run.action_authorized"));
    assert!(pos("run.action_authorized") < pos("agent.tool_result"));
    assert_eq!(evs.iter().filter(|e| e["type"] == "agent.tool_use").count(), 1, "the call is recorded once");

    let audit = a.get(&format!("/v1/audit-events?resource_id={aid}")).await;
    assert_eq!(audit.1["data"][0]["action"], "action_approval.approved");
    assert!(pending(a, &sid).await.is_empty());
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_standing_approval_covers_its_exact_tuple_until_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let (d, sid, ap) = waiting_on_write(&p, &["write", "edit"], "a.txt").await;
    let body = json!({"decision": "approve", "response_token": ap["response_token"], "standing": {"ttl_seconds": 90 * 24 * 3600}});
    let ok = respond(a, &id(&ap), body).await;
    expect(&ok, 200, None);
    let sapr = ok.1["standing_approval_id"].as_str().unwrap().to_string();
    settle(a, &sid).await;

    let st = a.get(&format!("/v1/standing-approvals/{sapr}")).await;
    expect(&st, 200, None);
    assert_eq!(st.1["tuple"], json!({"principal_id": me, "agent_id": d.agent_id, "tool": "write", "connection_id": null}));
    assert_eq!(st.1["created_from_approval_id"], id(&ap).as_str());
    // RFC 3339 UTC strings of one format order like the instants they name.
    let expires = st.1["expires_at"].as_str().unwrap().to_string();
    let in_days = |d: i64| checkfu_core::time::rfc3339(checkfu_core::time::now_ms() + d * 24 * 3600 * 1000);
    assert!(expires <= in_days(30) && expires > in_days(29), "the TTL is capped at 30 days: {expires}");
    let listed = a.get("/v1/standing-approvals").await;
    assert_eq!(listed.1["data"][0]["id"], sapr.as_str());

    // The same tuple runs without asking; another tool still asks.
    a.post(&format!("/v1/sessions/{sid}/events"), message(&me, &write_call("b.txt"))).await;
    let s2 = settle(a, &sid).await;
    assert_eq!(s2["stop_reason"]["type"], "end_turn", "{s2}");
    let evs = events(a, &sid).await;
    let auth = evs.iter().rev().find(|e| e["type"] == "run.action_authorized").unwrap();
    assert_eq!(auth["payload"]["standing_approval_id"], sapr.as_str());
    assert!(dir.path().join("workspaces").join(&sid).join("b.txt").exists());
    a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "call edit {\"path\": \"b.txt\", \"old\": \"approved\", \"new\": \"x\"}"))
        .await;
    assert_eq!(settle(a, &sid).await["stop_reason"]["type"], "requires_action");
    let edit = pending(a, &sid).await[0].clone();
    assert_eq!(edit["frozen"]["tool"], "edit");
    expect(&respond(a, &id(&edit), json!({"decision": "deny", "response_token": edit["response_token"]})).await, 200, None);
    assert_eq!(settle(a, &sid).await["stop_reason"]["type"], "end_turn");

    // A standing approval is only ever minted by an approve.
    a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "call edit {\"path\": \"b.txt\", \"old\": \"a\", \"new\": \"b\"}")).await;
    settle(a, &sid).await;
    let edit = pending(a, &sid).await[0].clone();
    let bad = json!({"decision": "deny", "response_token": edit["response_token"], "standing": {"ttl_seconds": 60}});
    expect(&respond(a, &id(&edit), bad).await, 400, Some("validation.invalid"));
    expect(&respond(a, &id(&edit), json!({"decision": "deny", "response_token": edit["response_token"]})).await, 200, None);
    settle(a, &sid).await;

    // Revoked: the tuple asks again.
    let revoked = a.delete(&format!("/v1/standing-approvals/{sapr}")).await;
    expect(&revoked, 200, None);
    assert!(revoked.1["revoked_at"].is_string());
    a.post(&format!("/v1/sessions/{sid}/events"), message(&me, &write_call("c.txt"))).await;
    assert_eq!(settle(a, &sid).await["stop_reason"]["type"], "requires_action");
    assert!(!dir.path().join("workspaces").join(&sid).join("c.txt").exists());

    let audit = a.get(&format!("/v1/audit-events?resource_id={sapr}")).await;
    let actions: Vec<&str> = audit.1["data"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, vec!["standing_approval.revoked", "standing_approval.created"]);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn confirmations_inside_the_session_settle_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let d = deploy(a, &p.env_id, json!({"tools": [{"type": "builtin", "name": "write"}]})).await;
    let text = format!("{}\n{}", write_call("one.txt"), write_call("two.txt"));
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, &text)]})).await;
    let sid = id(&s.1);
    let waiting = settle(a, &sid).await;
    assert_eq!(waiting["stop_reason"]["event_ids"].as_array().unwrap().len(), 2);
    let uses: Vec<Value> = events(a, &sid).await.into_iter().filter(|e| e["type"] == "agent.tool_use").collect();
    let tid = |i: usize| uses[i]["payload"]["tool_use_id"].as_str().unwrap().to_string();
    let confirm = |t: String, result: &str| input(&me, "user.tool_confirmation", json!({"tool_use_id": t, "result": result}));

    // A reader may not decide, even inside the Session.
    let (r, rid) = reader(&p, &d.agent_id).await;
    let theirs = input(&rid, "user.tool_confirmation", json!({"tool_use_id": tid(0), "result": "allow"}));
    expect(&r.post(&format!("/v1/sessions/{sid}/events"), theirs).await, 403, Some("permission.denied"));

    let first = a.post(&format!("/v1/sessions/{sid}/events"), confirm(tid(0), "allow")).await;
    expect(&first, 201, None);
    // Still waiting on the second call.
    let mid = settle(a, &sid).await;
    assert_eq!(mid["stop_reason"]["waiting_on"], json!([tid(1)]));
    // An exact duplicate replays the first event; a conflicting one is refused.
    let again = a.post(&format!("/v1/sessions/{sid}/events"), confirm(tid(0), "allow")).await;
    expect(&again, 200, None);
    assert_eq!(again.1["id"], first.1["id"]);
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), confirm(tid(0), "deny")).await, 409, Some("validation.conflict"));
    // A custom tool result cannot settle an approval wait.
    let wrong = input(&me, "user.custom_tool_result", json!({"custom_tool_use_id": tid(1), "content": [{"type": "text", "text": "x"}]}));
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), wrong).await, 409, Some("validation.conflict"));

    let deny = input(&me, "user.tool_confirmation", json!({"tool_use_id": tid(1), "result": "deny", "deny_message": "not that file"}));
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), deny).await, 201, None);
    let done = settle(a, &sid).await;
    assert_eq!(done["stop_reason"]["type"], "end_turn");
    let ws = dir.path().join("workspaces").join(&sid);
    assert!(ws.join("one.txt").exists() && !ws.join("two.txt").exists());
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    let denied = evs.iter().find(|e| e["type"] == "policy.denied").unwrap();
    assert!(denied["payload"]["guidance"].as_str().unwrap().contains("not that file"), "{denied}");
    let resolved: Vec<&Value> = evs.iter().filter(|e| e["type"] == "action_approval.resolved").collect();
    assert_eq!(resolved.iter().map(|e| e["payload"]["decision"].as_str().unwrap()).collect::<Vec<_>>(), vec!["approve", "deny"]);
    // The message travels with the decision, whoever records it in the Session.
    assert_eq!(resolved[1]["payload"]["deny_message"], "not that file", "{}", resolved[1]);
    assert!(resolved[0]["payload"].get("deny_message").is_none());
    // The approval records were decided in-session, with the responder.
    let all = a.get(&format!("/v1/action-approvals?session_id={sid}")).await;
    assert!(all.1["data"].as_array().unwrap().iter().all(|x| x["responder_principal_id"] == me.as_str()));
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unanswered_approval_expires_as_denied() {
    let dir = tempfile::tempdir().unwrap();
    let tuning = Tuning { approval_ttl: Duration::from_millis(600), approval_sweep: Duration::from_millis(100), ..Default::default() };
    let p = Platform::start_timed(dir.path(), tuning).await;
    let a = &p.admin;
    let (_, sid, ap) = waiting_on_write(&p, &["write"], "late.txt").await;
    let mut done = Value::Null;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        done = a.get(&format!("/v1/sessions/{sid}")).await.1;
        if done["status"] == "idle" && done["stop_reason"]["type"] == "end_turn" {
            break;
        }
    }
    assert_eq!(done["stop_reason"]["type"], "end_turn", "the expiry resolved the wait: {done}");
    let record = a.get(&format!("/v1/action-approvals/{}", id(&ap))).await;
    assert_eq!((record.1["status"].as_str(), record.1["decision"].as_str()), (Some("expired"), Some("deny")));
    let late = respond(a, &id(&ap), json!({"decision": "approve", "response_token": ap["response_token"]})).await;
    expect(&late, 409, Some("validation.conflict"));
    let evs = events(a, &sid).await;
    let resolved = evs.iter().find(|e| e["type"] == "action_approval.resolved").unwrap();
    assert_eq!((resolved["payload"]["status"].as_str(), resolved["payload"]["responder_principal_id"].is_null()), (Some("expired"), true));
    let denied = evs.iter().find(|e| e["type"] == "policy.denied").unwrap();
    assert!(denied["payload"]["guidance"].as_str().unwrap().contains("expired"));
    assert!(!dir.path().join("workspaces").join(&sid).join("late.txt").exists());
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn denials_are_audited() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let d = deploy(a, &p.env_id, json!({"tools": [{"type": "builtin", "name": "bash"}]})).await;
    let rule = json!({"environment_id": p.env_id, "name": "no-bash", "rules": [
        {"subject": {"kind": "*", "id_glob": "*"}, "resource": {"kind": "tool", "id_glob": "bash"}, "permission_glob": "*", "disposition": "deny"}
    ]});
    expect(&a.post("/v1/action-policies", rule).await, 201, None);
    let s = a
        .post(
            "/v1/sessions",
            json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "call bash {\"command\": \"true\"}")]}),
        )
        .await;
    let sid = id(&s.1);
    assert_eq!(settle(a, &sid).await["stop_reason"]["type"], "end_turn");
    let audit = a.get(&format!("/v1/audit-events?resource_id={sid}")).await;
    let rec = &audit.1["data"][0];
    assert_eq!((rec["action"].as_str(), rec["actor_id"].as_str()), (Some("action.denied"), Some(me.as_str())));
    assert_eq!(rec["details"]["tool"], "bash");
    p.stop().await;
}

/// A response that lands while the Run that asked is still running (before
/// it settles into its wait) is not lost: the sweeper delivers it once the
/// Session waits.
#[tokio::test(flavor = "multi_thread")]
async fn a_response_before_the_run_settles_is_still_delivered() {
    use checkfu_proto::governance::v1 as gov;
    use checkfu_proto::runner::v1 as rp;
    let dir = tempfile::tempdir().unwrap();
    let roles = checkfu_node::Role::ALL.into_iter().filter(|r| *r != checkfu_node::Role::Runner).collect();
    let p = Platform::start_roles(dir.path(), roles).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let d = deploy(a, &p.env_id, json!({"tools": [{"type": "builtin", "name": "write"}]})).await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "go")]})).await;
    let sid = id(&s.1);
    // Play the runner by hand.
    let mut runner =
        rp::runner_service_client::RunnerServiceClient::new(p.internal(checkfu_node::Role::Runner, checkfu_node::Role::Runner));
    let work = runner.claim(rp::ClaimRequest { runner_id: "by-hand".into(), wait_ms: 5000 }).await.unwrap().into_inner().work.unwrap();
    let mut g = gov::governance_service_client::GovernanceServiceClient::new(
        p.internal(checkfu_node::Role::Runner, checkfu_node::Role::Governance),
    );
    let asked = g
        .request_approval(gov::RequestApprovalRequest {
            environment_id: p.env_id.clone(),
            session_id: sid.clone(),
            run_id: work.run_id.clone(),
            tool_use_id: "toolu_early".into(),
            frozen: Some(gov::FrozenAction {
                principal_id: me.clone(),
                agent_id: d.agent_id.clone(),
                tool: "write".into(),
                arguments_json: "{\"path\":\"e.txt\",\"content\":\"z\"}".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner();
    let ap = asked.approval.unwrap();
    // Approved before the Run has settled into its wait.
    let ok = respond(a, &ap.id, json!({"decision": "approve", "response_token": ap.response_token})).await;
    expect(&ok, 200, None);
    let events_for = |t: &str, p: &str| rp::NewEvent { r#type: t.into(), payload_json: p.into(), id: String::new() };
    // As a 0.1.0 runner sends it: the stop reason only as JSON text.
    #[allow(deprecated)]
    runner
        .complete(rp::CompleteRequest {
            lease: work.lease.clone(),
            stop_reason_json: json!({"type": "requires_action"}).to_string(),
            stop_reason: 0,
            last_seen_seq: work.tail.last().unwrap().seq,
            events: vec![
                events_for(
                    "agent.tool_use",
                    &json!({"tool_use_id": "toolu_early", "name": "write", "input": {"path": "e.txt", "content": "z"}, "evaluated_permission": "require_approval"}).to_string(),
                ),
                events_for("action_approval.pending", &json!({"action_approval_id": ap.id, "tool_use_id": "toolu_early"}).to_string()),
            ],
        })
        .await
        .unwrap();
    let mut resumed = Value::Null;
    for _ in 0..100 {
        resumed = a.get(&format!("/v1/sessions/{sid}")).await.1;
        if resumed["status"] == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(resumed["status"], "running", "the sweeper delivered the early approval and a new Run was admitted: {resumed}");
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    let resolved = evs.iter().find(|e| e["type"] == "action_approval.resolved").unwrap();
    assert_eq!(resolved["payload"]["decision"], "approve");
    p.stop().await;
}

/// An interrupt ends an approval wait; the approvals it leaves undecided
/// are withdrawn (expired, audited) so no approver answers a call that will
/// never run, and the next turn answers the call as denied, once.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_withdraws_the_approvals_it_leaves_undecided() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let (_, sid, ap) = waiting_on_write(&p, &["write"], "never.txt").await;

    expect(&a.post(&format!("/v1/sessions/{sid}/events"), input(&me, "user.interrupt", json!({}))).await, 201, None);
    assert_eq!(settle(a, &sid).await["stop_reason"]["type"], "end_turn");
    assert!(pending(a, &sid).await.is_empty(), "nothing is left for an approver");
    let record = a.get(&format!("/v1/action-approvals/{}", id(&ap))).await;
    assert_eq!((record.1["status"].as_str(), record.1["decision"].as_str()), (Some("expired"), Some("deny")));
    let late = respond(a, &id(&ap), json!({"decision": "approve", "response_token": ap["response_token"]})).await;
    expect(&late, 409, Some("validation.conflict"));
    let audit = a.get(&format!("/v1/audit-events?resource_id={}", id(&ap))).await;
    let withdrawn = audit.1["data"].as_array().unwrap().iter().find(|r| r["action"] == "action_approval.withdrawn").cloned();
    let withdrawn = withdrawn.unwrap_or_else(|| panic!("the withdrawal is audited: {}", audit.1));
    assert_eq!((withdrawn["actor_id"].as_str(), withdrawn["details"]["session_id"].as_str()), (Some(me.as_str()), Some(sid.as_str())));

    // The next turn answers the dangling call as denied, exactly once.
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "carry on")).await, 201, None);
    assert_eq!(settle(a, &sid).await["stop_reason"]["type"], "end_turn");
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    let tool_use_id = evs.iter().find(|e| e["type"] == "agent.tool_use").unwrap()["payload"]["tool_use_id"].clone();
    let answers = evs.iter().filter(|e| e["type"] == "policy.denied" && e["payload"]["tool_use_id"] == tool_use_id).count();
    assert_eq!(answers, 1, "{evs:?}");
    assert!(!dir.path().join("workspaces").join(&sid).join("never.txt").exists());
    p.stop().await;
}
