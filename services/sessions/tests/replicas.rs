//! Two sessions replicas over one store: a subscriber on one sees, live,
//! what the other commits — through the shared fan-out (the in-process twin
//! always, Redis when `CHECKFU_TEST_REDIS_URL` is set).
#![cfg(test)]

use checkfu_core::testing::tid;
use checkfu_ephemeral::Fanout;
use checkfu_sessions::SessionsService;
use checkfu_sessions::input::Input;
use checkfu_sessions::live::Item;
use checkfu_sessions::model::*;
use checkfu_sessions::store::{SessionsStore, SqlSessionsStore};
use checkfu_store::{Db, Location};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn session(id: &str) -> Session {
    Session {
        id: tid(id),
        environment_id: tid("env_1"),
        agent_id: tid("agt_1"),
        deployment_id: tid("dep_1"),
        deployment_revision: 1,
        principal_id: tid("prin_1"),
        status: SessionStatus::Idle,
        stop_reason: None,
        title: String::new(),
        metadata: json!({}),
        budget: None,
        usage: Usage::default(),
        selection: Selection::default(),
        pins: Pins {
            agent_version: 1,
            release_sha256: "r".into(),
            harness: BUILTIN_HARNESS.into(),
            model_routing_profile_id: tid("mrp_01jx0000000000000000000001"),
            sandbox_profile_id: tid("sbp_01jx0000000000000000000001"),
            sandbox_profile_revision: 1,
            execution: Execution::Managed,
        },
        last_seq: 0,
        last_user_message_seq: 0,
        outcome: None,
        created_ms: 1,
        updated_ms: 1,
        version: 1,
    }
}

async fn replicas_see_each_other(fanout: Arc<dyn Fanout>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&Location::SqliteDir(dir.path().into()), "sessions", &checkfu_sessions::MIGRATIONS).await.unwrap();
    let store: Arc<dyn SessionsStore> = Arc::new(SqlSessionsStore::new(db));
    let sid = checkfu_core::id::new_id("sess");
    let created = NewEvent {
        id: checkfu_core::id::EventId::mint(),
        event_type: "session.created".into(),
        run_id: None,
        thread_id: None,
        authored_by: json!(null),
        caused_by: json!({"kind": "principal", "id": "prin_1"}),
        payload: json!({}),
        created_ms: 1,
    };
    store.insert_session(&session(&sid), &[created], &[]).await.unwrap();
    let a = SessionsService::new(store.clone()).with_fanout(fanout.clone()).await.unwrap();
    let b = SessionsService::new(store).with_fanout(fanout).await.unwrap();

    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let follower = b.clone();
    let s = sid.clone();
    tokio::spawn(async move { follower.subscribe(&s, 0, vec![], tx).await });
    let first = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
    assert!(matches!(first, Item::Event(ref e) if e.seq == 1), "the replay comes first");

    let who = checkfu_core::id::new_id("prin");
    let msg =
        Input::parse("user.message", json!({"content": [{"type": "text", "text": "hi"}]}), &who, json!({"kind": "principal", "id": who}))
            .unwrap();
    a.append_user_event(&sid, msg).await.unwrap();
    let mut seqs = vec![];
    while seqs.len() < 3 {
        match tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("live events from the other replica").unwrap() {
            Item::Event(e) => seqs.push(e.seq),
            Item::Delta(_) => {}
        }
    }
    assert_eq!(seqs, vec![2, 3, 4], "user.message, run.created, session.status_running — in order, once");
}

#[tokio::test(flavor = "multi_thread")]
async fn replicas_share_live_events_in_process() {
    replicas_see_each_other(Arc::new(checkfu_ephemeral::memory::MemoryFanout::default())).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn replicas_share_live_events_through_redis() {
    let Some(url) = checkfu_core::testing::service("CHECKFU_TEST_REDIS_URL", "replicas fanning out through Redis") else {
        return;
    };
    replicas_see_each_other(Arc::new(checkfu_ephemeral::redis_impl::Redis::connect(&url).await.unwrap())).await;
}
