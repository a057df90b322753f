//! Two sessions replicas over one store: a subscriber on one sees, live,
//! what the other commits — through the shared fan-out (the in-process twin
//! always, Redis when `CHECKFU_TEST_REDIS_URL` is set).
#![cfg(test)]

use checkfu_ephemeral::Fanout;
use checkfu_sessions::Builder;
use checkfu_sessions::input::Input;
use checkfu_sessions::live::Item;
use checkfu_sessions::store::{SessionsStore, SqlSessionsStore};
use checkfu_store::{Db, Location};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

mod common;
use common::session;

async fn replicas_see_each_other(fanout: Arc<dyn Fanout>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&Location::SqliteDir(dir.path().into()), "sessions", &checkfu_sessions::MIGRATIONS).await.unwrap();
    let store: Arc<dyn SessionsStore> = Arc::new(SqlSessionsStore::new(db));
    let sid = checkfu_core::id::new_id("sess");
    let created = common::event("session.created");
    store.insert_session(&session(&sid), &[created], &[]).await.unwrap();
    let a = Builder::new(store.clone()).with_fanout(fanout.clone()).await.unwrap().build();
    let b = Builder::new(store).with_fanout(fanout).await.unwrap().build();

    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let follower = b.clone();
    let s = sid.clone();
    tokio::spawn(async move { follower.log.subscribe(&s, 0, vec![], tx).await });
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
