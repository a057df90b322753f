//! A child's `send_message` run again for the same tool use (its runner
//! died before recording the result, and the next Run answers the call
//! again) delivers the message once and answers the first result.
#![cfg(test)]

mod common;

use checkfu_core::testing::tid;
use checkfu_sessions::Builder;
use checkfu_sessions::model::Lease;
use checkfu_sessions::model::*;
use checkfu_sessions::store::{SessionsStore, SqlSessionsStore, View};
use checkfu_sessions::thread_tools::ThreadCall;
use checkfu_store::{Db, Location};
use serde_json::json;
use std::sync::Arc;

const CHILD: &str = "sthr_01jx00000000000000000000c1";

#[tokio::test(flavor = "multi_thread")]
async fn a_message_sent_again_for_the_same_tool_use_is_delivered_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&Location::SqliteDir(dir.path().into()), "sessions", &checkfu_sessions::MIGRATIONS).await.unwrap();
    let store: Arc<dyn SessionsStore> = Arc::new(SqlSessionsStore::new(db));
    let sid = checkfu_core::id::new_id("sess");
    let mut s = common::session(&sid);
    s.threads.push(SessionThread {
        id: CHILD.into(),
        agent: ThreadAgent { agent_id: "agt_b".into(), version: 1, release_sha256: None, name: "B".into() },
        status: SessionStatus::Running,
        stop_reason: None,
        usage: Usage::default(),
        last_user_message_seq: 0,
        queued: 0,
        spawned_by_tool_use_id: "toolu_0".into(),
        created_ms: 1,
        updated_ms: 1,
        archived_ms: None,
    });
    let far = checkfu_core::time::now_ms() + 600_000;
    let run = Run {
        id: tid("run_01jx00000000000000000000c1"),
        session_id: tid(&sid),
        status: RunStatus::Running,
        stop_reason: None,
        execution_pins: checkfu_sessions::model::ExecutionPins::default(),
        usage: Usage::default(),
        start_seq: 1,
        lease_id: "lease_1".into(),
        generation: 1,
        lease_expires_ms: far,
        runner_id: "rnr_1".into(),
        created_ms: 1,
        completed_ms: None,
        traceparent: String::new(),
        placement: String::new(),
        thread_id: Some(CHILD.into()),
    };
    store.insert_session(&s, &[common::event("session.created")], std::slice::from_ref(&run)).await.unwrap();
    let svc = Builder::new(store.clone()).build();
    let call = ThreadCall {
        lease: Lease { run_id: run.id.clone(), lease_id: "lease_1".into(), generation: 1, session_id: Some(tid(&sid)) },
        tool_use_id: "toolu_7".into(),
        name: "send_message".into(),
        input: json!({"message": "done"}),
        approval_id: String::new(),
        standing_approval_id: String::new(),
    };
    let (first, err) = svc.threads.call_thread_tool(&call).await.unwrap();
    assert!(!err, "{first}");
    assert_eq!(first["delivery"], "delivered", "the idle primary wakes: {first}");
    let (again, err) = svc.threads.call_thread_tool(&call).await.unwrap();
    assert!(!err);
    assert_eq!(again, first, "the same result");
    let received = store.list_events(&tid(&sid), &View::Primary, 0, 100, &["agent.thread_message_received".into()]).await.unwrap();
    assert_eq!(received.len(), 1, "delivered once");
    assert_eq!(received[0].payload["from_agent_name"], "B");
    let sent = store.list_events(&tid(&sid), &View::Child(CHILD.into()), 0, 100, &["agent.thread_message_sent".into()]).await.unwrap();
    assert_eq!(sent.len(), 1);
    // Another tool use is another message.
    let next = ThreadCall { tool_use_id: "toolu_8".into(), ..call };
    let (third, _) = svc.threads.call_thread_tool(&next).await.unwrap();
    assert_ne!(third["event_id"], first["event_id"]);
    assert_eq!(third["delivery"], "queued", "the primary now runs");
}
