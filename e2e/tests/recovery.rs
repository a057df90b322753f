//! Nothing accepted is lost: restarts, a runner dying mid-run, fencing of a
//! stale lease, interrupts and steering messages.
#![cfg(test)]

use checkfu_e2e::*;
use checkfu_node::Role;
use checkfu_proto::runner::v1 as rp;
use checkfu_proto::runner::v1::runner_service_client::RunnerServiceClient;
use serde_json::json;
use std::collections::BTreeSet;

fn without_runner() -> BTreeSet<Role> {
    Role::ALL.into_iter().filter(|r| *r != Role::Runner).collect()
}

type RunnerClient = RunnerServiceClient<checkfu_proto::transport::Transport>;

/// Plays the runner role by hand, in process.
async fn runner_client(p: &Platform) -> RunnerClient {
    RunnerServiceClient::new(p.internal(Role::Runner, Role::Runner))
}

async fn claim(client: &mut RunnerClient) -> rp::WorkItem {
    client
        .claim(rp::ClaimRequest { runner_id: "test-runner".into(), wait_ms: 5000 })
        .await
        .unwrap()
        .into_inner()
        .work
        .expect("a run to claim")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_loses_nothing_and_seq_continues() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let me = p.admin_id.clone();
    let s = p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "before")]})).await;
    let sid = id(&s.1);
    settle(&p.admin, &sid).await;
    let before = events(&p.admin, &sid).await;
    let key = p.admin.key.clone();
    p.stop().await;

    let p = Platform::start(dir.path()).await;
    assert_eq!(p.admin.key, key, "the bootstrap key file is not rewritten");
    let after_restart = events(&p.admin, &sid).await;
    assert_eq!(after_restart, before, "every accepted event survives the restart unchanged");
    expect(&p.admin.post(&format!("/v1/sessions/{sid}/events"), message(&me, "after")).await, 201, None);
    let s = settle(&p.admin, &sid).await;
    assert_eq!(s["stop_reason"]["type"], "end_turn");
    let all = events(&p.admin, &sid).await;
    assert_gapless(&all);
    assert_eq!(all.len(), before.len() * 2 - 1, "the second turn adds the same shape of events");
    assert_eq!(all.last().unwrap()["type"], "session.status_idle");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_whose_runner_died_is_resumed_and_the_stale_lease_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_roles(dir.path(), without_runner()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let me = p.admin_id.clone();
    let s = p
        .admin
        .post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "survive this")]}))
        .await;
    let sid = id(&s.1);
    assert_eq!(s.1["status"], "running");

    // A runner claims the Run, writes one event, then dies without settling.
    let mut client = runner_client(&p).await;
    let work = claim(&mut client).await;
    assert_eq!(work.session_id, sid);
    let stale = work.lease.clone().unwrap();
    assert_eq!(stale.generation, 1);
    let beat = client.heartbeat(stale.clone()).await.unwrap().into_inner();
    assert_eq!(beat.status, "ok");
    let appended = client
        .append_events(rp::AppendEventsRequest {
            lease: Some(stale.clone()),
            events: vec![rp::NewEvent {
                r#type: "span.model_request_start".into(),
                payload_json: json!({"provider": "scripted", "model": "scripted-1"}).to_string(),
                id: String::new(),
            }],
        })
        .await
        .unwrap();
    assert_eq!(appended.into_inner().seqs, vec![5]);
    // Lifecycle events are not the runner's to write.
    let forged = client
        .append_events(rp::AppendEventsRequest {
            lease: Some(stale.clone()),
            events: vec![rp::NewEvent { r#type: "session.status_idle".into(), payload_json: "{}".into(), id: String::new() }],
        })
        .await;
    assert_eq!(forged.unwrap_err().code(), tonic::Code::InvalidArgument);
    p.stop().await;

    // The process comes back with its runner: the Run is resumed and settles.
    let p = Platform::start(dir.path()).await;
    let settled = settle(&p.admin, &sid).await;
    assert_eq!(settled["stop_reason"]["type"], "end_turn");
    let all = events(&p.admin, &sid).await;
    assert_gapless(&all);
    assert_eq!(all.iter().filter(|e| e["type"] == "run.created").count(), 1, "the same Run was resumed, not replaced");
    assert_eq!(all.iter().filter(|e| e["type"] == "agent.message").count(), 1);
    assert_eq!(all.iter().find(|e| e["type"] == "agent.message").unwrap()["payload"]["content"][0]["text"], "echo: survive this");

    // The dead runner's lease is fenced: its writes are refused.
    let mut client = runner_client(&p).await;
    let late = client
        .append_events(rp::AppendEventsRequest {
            lease: Some(stale.clone()),
            events: vec![rp::NewEvent {
                r#type: "agent.message".into(),
                payload_json: json!({"content": [{"type": "text", "text": "zombie"}]}).to_string(),
                id: String::new(),
            }],
        })
        .await;
    assert_eq!(late.unwrap_err().code(), tonic::Code::FailedPrecondition);
    let lost = client.heartbeat(stale.clone()).await.unwrap().into_inner();
    assert_eq!(lost.status, "lost");
    // As a 0.1.0 runner sends it: the stop reason only as JSON text.
    #[allow(deprecated)]
    let done = client
        .complete(rp::CompleteRequest {
            lease: Some(stale),
            stop_reason_json: json!({"type": "end_turn"}).to_string(),
            stop_reason: 0,
            last_seen_seq: 0,
            events: vec![],
        })
        .await;
    assert_eq!(done.unwrap_err().code(), tonic::Code::FailedPrecondition);
    assert_eq!(events(&p.admin, &sid).await.len(), all.len(), "nothing written by the stale lease");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn interrupts_stop_at_the_next_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_roles(dir.path(), without_runner()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let me = p.admin_id.clone();
    let interrupt = interrupt(&me);

    // A Run nobody has claimed yet stops at once.
    let s = p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "x")]})).await;
    let queued = id(&s.1);
    expect(&p.admin.post(&format!("/v1/sessions/{queued}/events"), interrupt.clone()).await, 201, None);
    let now = p.admin.get(&format!("/v1/sessions/{queued}")).await.1;
    assert_eq!(now["status"], "idle");
    assert_eq!(now["stop_reason"]["type"], "end_turn");

    // A claimed Run stops at its next boundary, without another model call.
    let s = p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "y")]})).await;
    let running = id(&s.1);
    let mut client = runner_client(&p).await;
    let work = claim(&mut client).await;
    assert_eq!(work.session_id, running);
    expect(&p.admin.post(&format!("/v1/sessions/{running}/events"), interrupt).await, 201, None);
    assert_eq!(p.admin.get(&format!("/v1/sessions/{running}")).await.1["status"], "running", "the claimed Run decides at its boundary");
    p.stop().await;
    let p = Platform::start(dir.path()).await;
    let settled = settle(&p.admin, &running).await;
    assert_eq!(settled["stop_reason"]["type"], "end_turn");
    let all = events(&p.admin, &running).await;
    assert_gapless(&all);
    assert!(!all.iter().any(|e| e["type"] == "span.model_request_start"), "no model call after the interrupt");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_sent_while_running_steers_the_same_run() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_roles(dir.path(), without_runner()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let me = p.admin_id.clone();
    let s = p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "first")]})).await;
    let sid = id(&s.1);
    let queued = p.admin.post(&format!("/v1/sessions/{sid}/events"), message(&me, "actually, this")).await;
    expect(&queued, 201, None);
    assert_eq!(queued.1["run_id"], serde_json::Value::Null, "a steering message is input, not part of the Run yet");
    p.stop().await;

    let p = Platform::start(dir.path()).await;
    settle(&p.admin, &sid).await;
    let all = events(&p.admin, &sid).await;
    assert_gapless(&all);
    assert_eq!(all.iter().filter(|e| e["type"] == "run.created").count(), 1, "one Run answered both");
    let replies: Vec<_> = all.iter().filter(|e| e["type"] == "agent.message").map(|e| e["payload"]["content"][0]["text"].clone()).collect();
    assert_eq!(replies, vec![json!("echo: actually, this")]);
    p.stop().await;
}

/// A runner that died after recording an allowed tool call but before its
/// result: the resumed Run answers the call (it runs again, at least once)
/// before asking the model anything, so no tool use is left dangling.
#[tokio::test(flavor = "multi_thread")]
async fn a_tool_call_left_unanswered_by_a_dead_runner_is_answered_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_roles(dir.path(), without_runner()).await;
    let d = deploy(&p.admin, &p.env_id, json!({"tools": [{"type": "builtin", "name": "read"}]})).await;
    let me = p.admin_id.clone();
    let s =
        p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "read it")]})).await;
    let sid = id(&s.1);
    let mut client = runner_client(&p).await;
    let work = claim(&mut client).await;
    let lease = work.lease.clone().unwrap();
    let ev = |t: &str, p: serde_json::Value| rp::NewEvent { r#type: t.into(), payload_json: p.to_string(), id: String::new() };
    client
        .append_events(rp::AppendEventsRequest {
            lease: Some(lease),
            events: vec![
                ev("agent.tool_use", json!({"tool_use_id": "toolu_orphan", "name": "read", "input": {"path": "missing.txt"}, "evaluated_permission": "allow"})),
                ev("run.action_authorized", json!({"tool_use_id": "toolu_orphan"})),
            ],
        })
        .await
        .unwrap();
    p.stop().await;

    let p = Platform::start(dir.path()).await;
    assert_eq!(settle(&p.admin, &sid).await["stop_reason"]["type"], "end_turn");
    let all = events(&p.admin, &sid).await;
    assert_gapless(&all);
    let results: Vec<_> =
        all.iter().filter(|e| e["type"] == "agent.tool_result" && e["payload"]["tool_use_id"] == "toolu_orphan").collect();
    assert_eq!(results.len(), 1, "the orphaned call is answered exactly once");
    assert_eq!(all.iter().filter(|e| e["type"] == "run.action_authorized").count(), 1, "not authorized twice");
    let last = all.iter().rev().find(|e| e["type"] == "agent.message").unwrap();
    assert!(last["payload"]["content"][0]["text"].as_str().unwrap().starts_with("tool read returned:"), "{last}");
    p.stop().await;
}
