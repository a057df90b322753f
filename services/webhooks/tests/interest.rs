//! Who wants which events, kept between ingests (`interest.rs`): an ingest
//! that starts after an endpoint was created, disabled, enabled or deleted
//! decides on the new rows — in one process owning its store, and across
//! replicas sharing one through the epoch — while ingests with nothing
//! changed between them read the endpoints table once. SQLite always,
//! PostgreSQL when `CHECKFU_TEST_POSTGRES_URL` is set.

#![cfg(test)]

use checkfu_bus::Record;
use checkfu_core::id::{DeliveryId, EndpointId};
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};
use checkfu_ephemeral::Epochs;
use checkfu_ephemeral::memory::MemoryEpochs;
use checkfu_store::{Db, Location};
use checkfu_webhooks::clock::ManualClock;
use checkfu_webhooks::interest::Interest;
use checkfu_webhooks::model::{Attempt, Delivery, Endpoint};
use checkfu_webhooks::service::EndpointChange;
use checkfu_webhooks::store::{SqlWebhooksStore, WebhooksStore};
use checkfu_webhooks::{MIGRATIONS, WebhooksService};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const ENV: &str = "env_01jaaaaaaaaaaaaaaaaaaaaaaa";

/// The SQL store, counting how often the endpoints a given Environment's
/// events go to are read.
struct Counting {
    inner: SqlWebhooksStore,
    reads: AtomicUsize,
}

#[async_trait::async_trait]
impl WebhooksStore for Counting {
    async fn insert_endpoint(&self, e: &Endpoint) -> Result<()> {
        self.inner.insert_endpoint(e).await
    }
    async fn get_endpoint(&self, id: &EndpointId) -> Result<Option<Endpoint>> {
        self.inner.get_endpoint(id).await
    }
    async fn list_endpoints(&self, environment_ids: &[String], include_installation: bool, page: &PageRequest) -> Result<Vec<Endpoint>> {
        self.inner.list_endpoints(environment_ids, include_installation, page).await
    }
    async fn endpoints_for(&self, environment_id: &str) -> Result<Vec<Endpoint>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.endpoints_for(environment_id).await
    }
    async fn update_endpoint(&self, e: &Endpoint, expected_version: i64) -> Result<bool> {
        self.inner.update_endpoint(e, expected_version).await
    }
    async fn delete_endpoint(&self, id: &EndpointId) -> Result<bool> {
        self.inner.delete_endpoint(id).await
    }
    async fn insert_delivery(&self, d: &Delivery) -> Result<bool> {
        self.inner.insert_delivery(d).await
    }
    async fn due_deliveries(&self, now_ms: i64, limit: i64) -> Result<Vec<Delivery>> {
        self.inner.due_deliveries(now_ms, limit).await
    }
    async fn take_delivery(&self, id: &DeliveryId, seen_next_ms: i64, hold_until_ms: i64) -> Result<bool> {
        self.inner.take_delivery(id, seen_next_ms, hold_until_ms).await
    }
    async fn record_attempt(&self, d: &Delivery, a: &Attempt) -> Result<()> {
        self.inner.record_attempt(d, a).await
    }
    async fn list_deliveries(&self, endpoint_id: &EndpointId, page: &PageRequest) -> Result<Vec<Delivery>> {
        self.inner.list_deliveries(endpoint_id, page).await
    }
    async fn attempts_of(&self, delivery_ids: &[DeliveryId]) -> Result<Vec<Attempt>> {
        self.inner.attempts_of(delivery_ids).await
    }
}

/// An epoch store that cannot be reached.
struct Unreachable;

#[async_trait::async_trait]
impl Epochs for Unreachable {
    async fn current(&self, _: &str) -> Result<Option<String>> {
        Err(Error::unavailable("redis is down"))
    }
    async fn advance(&self, _: &str) -> Result<()> {
        Err(Error::unavailable("redis is down"))
    }
    async fn ensure(&self, _: &str) -> Result<()> {
        Err(Error::unavailable("redis is down"))
    }
}

fn sealer() -> checkfu_store::sealed::Sealer {
    checkfu_store::sealed::Sealer::from_key("a test installation's secrets key, 32+ chars").unwrap()
}

async fn backends() -> Vec<(Db, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let mut out = vec![(Db::open(&Location::SqliteDir(dir.path().into()), "webhooks", &MIGRATIONS).await.unwrap(), Some(dir))];
    if let Some(url) = checkfu_core::testing::postgres("webhook interest on PostgreSQL") {
        let schema = checkfu_core::testing::fresh_schema("webhooks");
        out.push((Db::open(&Location::Postgres(url), &schema, &MIGRATIONS).await.unwrap(), None));
    }
    out
}

/// A replica: the service over its own handle on the shared store.
fn replica(db: &Db, interest: Interest) -> (WebhooksService, Arc<Counting>) {
    let store = Arc::new(Counting { inner: SqlWebhooksStore::new(db.clone(), sealer()), reads: AtomicUsize::new(0) });
    let svc = WebhooksService::new(store.clone(), Arc::new(ManualClock::at(1_800_000_000_000)), true).with_interest(interest);
    (svc, store)
}

/// A fresh idle event of the Environment (each its own id: no dedupe).
fn idle() -> Record {
    let id = checkfu_core::id::new_id("evt");
    Record {
        topic: checkfu_bus::SESSION_EVENTS.into(),
        key: "sess_1".into(),
        id: id.clone(),
        payload: json!({"id": id, "type": "session.status_idle", "created_at": "2026-11-30T12:00:00.000Z", "environment_id": ENV,
                        "session_id": "sess_1", "seq": 9})
        .to_string(),
        headers: vec![],
    }
}

fn disabled(on: bool) -> EndpointChange {
    EndpointChange { disabled: Some(on), ..Default::default() }
}

/// Every kind of endpoint write, made through `writer`, is seen by the very
/// next ingest of `reader`.
async fn writes_are_seen_by_the_next_ingest(writer: &WebhooksService, reader: &WebhooksService) {
    assert_eq!(reader.ingest(&idle()).await.unwrap(), 0, "no endpoint yet");
    let (ep, _) = writer.create_endpoint(ENV, "http://127.0.0.1:9/hook", vec!["session.status_*".into()], "prin_1").await.unwrap();
    assert_eq!(reader.ingest(&idle()).await.unwrap(), 1, "a created endpoint gets the next event");
    writer.update_endpoint(ep.id.as_str(), disabled(true)).await.unwrap();
    assert_eq!(reader.ingest(&idle()).await.unwrap(), 0, "a disabled endpoint gets nothing more");
    writer.update_endpoint(ep.id.as_str(), disabled(false)).await.unwrap();
    assert_eq!(reader.ingest(&idle()).await.unwrap(), 1, "enabled again");
    let change = EndpointChange { event_types: Some(vec!["session.status_running".into()]), ..Default::default() };
    writer.update_endpoint(ep.id.as_str(), change).await.unwrap();
    assert_eq!(reader.ingest(&idle()).await.unwrap(), 0, "it no longer wants idles");
    writer
        .update_endpoint(ep.id.as_str(), EndpointChange { event_types: Some(vec!["session.*".into()]), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(reader.ingest(&idle()).await.unwrap(), 1);
    writer.delete_endpoint(ep.id.as_str()).await.unwrap();
    assert_eq!(reader.ingest(&idle()).await.unwrap(), 0, "a deleted endpoint gets nothing more");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_process_sees_its_own_writes_and_reads_the_table_once_between_them() {
    for (db, _guard) in backends().await {
        let (svc, store) = replica(&db, Interest::local());
        writes_are_seen_by_the_next_ingest(&svc, &svc).await;
        let (ep, _) = svc.create_endpoint(ENV, "http://127.0.0.1:9/hook", vec!["session.*".into()], "prin_1").await.unwrap();
        let before = store.reads.load(Ordering::SeqCst);
        for _ in 0..20 {
            assert_eq!(svc.ingest(&idle()).await.unwrap(), 1);
        }
        assert_eq!(store.reads.load(Ordering::SeqCst) - before, 1, "twenty ingests with no write between them read the endpoints once");
        svc.rotate_secret(ep.id.as_str()).await.unwrap();
        assert_eq!(svc.ingest(&idle()).await.unwrap(), 1);
        assert_eq!(store.reads.load(Ordering::SeqCst) - before, 2, "a write makes the next ingest read again");
    }
}

/// An event no endpoint can want is passed over on its type alone: its
/// payload (a message's text, a tool's input) is not even read.
#[tokio::test(flavor = "multi_thread")]
async fn events_no_endpoint_can_want_are_passed_over_unread() {
    for (db, _guard) in backends().await {
        let (svc, store) = replica(&db, Interest::local());
        svc.create_endpoint(ENV, "http://127.0.0.1:9/hook", vec!["session.*".into()], "prin_1").await.unwrap();
        let before = store.reads.load(Ordering::SeqCst);
        for ty in ["agent.message", "user.message", "agent.tool_use", "span.model_request_end"] {
            let r = Record { headers: vec![("type".into(), ty.into())], payload: "not JSON: never read".into(), ..idle() };
            assert_eq!(svc.ingest(&r).await.unwrap(), 0, "{ty}");
        }
        assert_eq!(store.reads.load(Ordering::SeqCst), before, "no endpoints were looked up");
        let typed = Record { headers: vec![("type".into(), "session.status_idle".into())], ..idle() };
        assert_eq!(svc.ingest(&typed).await.unwrap(), 1, "a subscribable type is delivered as before");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn replicas_see_each_others_writes_through_the_epoch() {
    for (db, _guard) in backends().await {
        let epochs: Arc<dyn Epochs> = Arc::new(MemoryEpochs::default());
        // The role gives the epoch its first token (`keep_epoch`).
        epochs.ensure(checkfu_webhooks::interest::EPOCH).await.unwrap();
        let (a, a_store) = replica(&db, Interest::shared(epochs.clone()));
        let (b, _) = replica(&db, Interest::shared(epochs.clone()));
        // Each ingest of `a` keeps what it read; each write of `b` must
        // make `a` read again.
        writes_are_seen_by_the_next_ingest(&b, &a).await;
        b.create_endpoint(ENV, "http://127.0.0.1:9/hook", vec!["session.*".into()], "prin_1").await.unwrap();
        let before = a_store.reads.load(Ordering::SeqCst);
        for _ in 0..10 {
            assert_eq!(a.ingest(&idle()).await.unwrap(), 1);
        }
        assert_eq!(a_store.reads.load(Ordering::SeqCst) - before, 1, "kept under the epoch between writes");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_reachable_epoch_every_ingest_reads_the_table() {
    for (db, _guard) in backends().await {
        let (reader, store) = replica(&db, Interest::shared(Arc::new(Unreachable)));
        let (writer, _) = replica(&db, Interest::local());
        writes_are_seen_by_the_next_ingest(&writer, &reader).await;
        let before = store.reads.load(Ordering::SeqCst);
        reader.ingest(&idle()).await.unwrap();
        reader.ingest(&idle()).await.unwrap();
        assert_eq!(store.reads.load(Ordering::SeqCst) - before, 2);
        // A write whose change cannot be announced is saved, and says so.
        let e = reader.create_endpoint(ENV, "http://127.0.0.1:9/hook", vec!["session.*".into()], "prin_1").await.unwrap_err();
        assert_eq!(e.code, checkfu_core::Code::Unavailable, "{e:?}");
        assert_eq!(reader.ingest(&idle()).await.unwrap(), 1, "the endpoint was saved");
    }
}
