//! The webhooks service against each store backend (SQLite always,
//! PostgreSQL when `CHECKFU_TEST_POSTGRES_URL` is set), with a clock moved
//! by hand and a local receiver that verifies every signature: the whole
//! retry schedule, the same `id` on every retry, dedupe of repeated events,
//! secret rotation, and refusal of private targets.

#![cfg(test)]

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use checkfu_bus::Record;
use checkfu_core::signature::verify;
use checkfu_store::{Db, Location};
use checkfu_webhooks::clock::ManualClock;
use checkfu_webhooks::store::SqlWebhooksStore;
use checkfu_webhooks::{MIGRATIONS, WebhooksService};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// The contract's waits between attempts, written out as the contract
/// states them (30 s, 5 min, 30 min, 1 h, 3 h, 12 h), not read from the
/// product: a wrong constant in the product fails here.
const SEC: i64 = 1000;
const MIN: i64 = 60 * SEC;
const HOUR: i64 = 60 * MIN;
const RETRY_WAITS_MS: [i64; 6] = [30 * SEC, 5 * MIN, 30 * MIN, HOUR, 3 * HOUR, 12 * HOUR];

#[test]
fn the_schedule_is_the_contracts() {
    assert_eq!(checkfu_webhooks::model::RETRY_WAITS_MS, RETRY_WAITS_MS);
    assert_eq!(checkfu_webhooks::model::MAX_ATTEMPTS, 7, "7 attempts in all");
    assert_eq!(RETRY_WAITS_MS.iter().sum::<i64>() / HOUR, 16, "about 17 hours from the first attempt to the last");
}

fn sealer() -> checkfu_store::sealed::Sealer {
    checkfu_store::sealed::Sealer::from_key("a test installation's secrets key, 32+ chars").unwrap()
}

#[derive(Clone, Default)]
struct Receiver {
    /// (signature header, body) of every request, in order.
    seen: Arc<Mutex<Vec<(String, String)>>>,
    /// Status codes to answer with, in order; then 200.
    script: Arc<Mutex<Vec<u16>>>,
}

async fn receiver() -> (Receiver, String) {
    let r = Receiver::default();
    let state = r.clone();
    let app = Router::new().route(
        "/hook",
        post(move |headers: HeaderMap, body: Bytes| {
            let state = state.clone();
            async move {
                let sig = headers.get("checkfu-signature").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                state.seen.lock().unwrap().push((sig, String::from_utf8_lossy(&body).into_owned()));
                let mut script = state.script.lock().unwrap();
                let code = if script.is_empty() { 200 } else { script.remove(0) };
                StatusCode::from_u16(code).unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}/hook", listener.local_addr().unwrap().port());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (r, url)
}

async fn backends() -> Vec<(Db, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let mut out = vec![(Db::open(&Location::SqliteDir(dir.path().into()), "webhooks", &MIGRATIONS).await.unwrap(), Some(dir))];
    if let Some(url) = checkfu_core::testing::postgres("the webhook schedule on PostgreSQL") {
        let schema = checkfu_core::testing::fresh_schema("webhooks");
        out.push((Db::open(&Location::Postgres(url), &schema, &MIGRATIONS).await.unwrap(), None));
    }
    out
}

fn event(id: &str, ty: &str, env: &str) -> Record {
    Record {
        topic: checkfu_bus::SESSION_EVENTS.into(),
        key: "sess_1".into(),
        id: id.into(),
        payload: json!({"id": id, "type": ty, "created_at": "2026-11-30T12:00:00.000Z", "environment_id": env, "session_id": "sess_1",
                        "seq": 9, "payload": {"secret": "never delivered"}})
        .to_string(),
        headers: vec![],
    }
}

const T0: i64 = 1_800_000_000_000;
const ENV_A: &str = "env_01jaaaaaaaaaaaaaaaaaaaaaaa";
const ENV_B: &str = "env_01jbbbbbbbbbbbbbbbbbbbbbbb";

#[tokio::test(flavor = "multi_thread")]
async fn deliveries_follow_the_schedule_signed_with_one_id() {
    for (db, _guard) in backends().await {
        let clock = ManualClock::at(T0);
        let svc = WebhooksService::new(Arc::new(SqlWebhooksStore::new(db, sealer())), Arc::new(clock.clone()), true);
        let (rx, url) = receiver().await;
        let (ep, secret) = svc.create_endpoint(ENV_A, &url, vec!["session.status_*".into()], "prin_1").await.unwrap();
        assert!(secret.starts_with("whsec_"));

        assert_eq!(svc.ingest(&event("evt_1", "session.status_idle", ENV_A)).await.unwrap(), 1);
        assert_eq!(svc.ingest(&event("evt_1", "session.status_idle", ENV_A)).await.unwrap(), 0, "a repeated event is deduplicated");
        assert_eq!(svc.ingest(&event("evt_2", "agent.message", ENV_A)).await.unwrap(), 0, "content events are never delivered");
        assert_eq!(svc.ingest(&event("evt_3", "session.status_idle", ENV_B)).await.unwrap(), 0, "another environment");

        // Six failures, then success on the seventh and last attempt.
        *rx.script.lock().unwrap() = vec![500, 503, 404, 500, 429, 500];
        assert_eq!(svc.deliver_due().await.unwrap(), 1, "the first attempt goes at once");
        for wait in RETRY_WAITS_MS {
            clock.advance(wait - 1);
            assert_eq!(svc.deliver_due().await.unwrap(), 0, "not before its wait ({wait} ms)");
            clock.advance(1);
            assert_eq!(svc.deliver_due().await.unwrap(), 1, "due after {wait} ms");
        }
        let seen = rx.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 7, "7 attempts in all");
        let mut t = T0;
        let mut ids = vec![];
        for (i, (sig, body)) in seen.iter().enumerate() {
            if i > 0 {
                t += RETRY_WAITS_MS[i - 1];
            }
            assert!(verify(&secret, sig, body.as_bytes(), t / 1000), "attempt {i} is signed with t={}", t / 1000);
            assert!(sig.starts_with(&format!("t={},v1=", t / 1000)));
            let v: Value = serde_json::from_str(body).unwrap();
            assert_eq!(v["type"], "session.status_idle");
            assert_eq!(v["data"], json!({"environment_id": ENV_A, "session_id": "sess_1"}), "thin: never payload content");
            ids.push(v["id"].as_str().unwrap().to_string());
        }
        assert!(ids[0].starts_with("wevt_") && ids.iter().all(|i| *i == ids[0]), "every retry carries the same id");
        let page = checkfu_core::page::PageRequest::standard(10, "").unwrap();
        let ds = svc.deliveries(&ep.id, &page).await.unwrap();
        assert_eq!(ds.len(), 1);
        let (d, history) = &ds[0];
        assert_eq!((d.status.as_str(), d.attempts, d.last_response_code), ("delivered", 7, 200));
        assert_eq!(history.iter().map(|a| a.response_code).collect::<Vec<_>>(), vec![500, 503, 404, 500, 429, 500, 200]);

        // Seven failures: the delivery fails for good.
        assert_eq!(svc.ingest(&event("evt_4", "session.status_running", ENV_A)).await.unwrap(), 1);
        *rx.script.lock().unwrap() = vec![500; 7];
        svc.deliver_due().await.unwrap();
        for wait in RETRY_WAITS_MS {
            clock.advance(wait);
            svc.deliver_due().await.unwrap();
        }
        clock.advance(RETRY_WAITS_MS[5] * 10);
        assert_eq!(svc.deliver_due().await.unwrap(), 0, "nothing after the seventh attempt");
        let ds = svc.deliveries(&ep.id, &page).await.unwrap();
        let (d, history) = ds.iter().find(|(d, _)| d.event_type == "session.status_running").unwrap();
        assert_eq!((d.status.as_str(), d.attempts, history.len()), ("failed", 7, 7));

        // A rotated secret signs what follows; the old one no longer verifies.
        let (_, fresh) = svc.rotate_secret(&ep.id).await.unwrap();
        assert_ne!(fresh, secret);
        svc.ingest(&event("evt_5", "session.status_idle", ENV_A)).await.unwrap();
        svc.deliver_due().await.unwrap();
        let (sig, body) = rx.seen.lock().unwrap().last().unwrap().clone();
        let now = (T0 + RETRY_WAITS_MS.iter().sum::<i64>() * 2 + RETRY_WAITS_MS[5] * 10) / 1000;
        assert!(verify(&fresh, &sig, body.as_bytes(), now));
        assert!(!verify(&secret, &sig, body.as_bytes(), now));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn private_targets_are_refused_unless_allowed() {
    let (db, _guard) = backends().await.remove(0);
    let svc = WebhooksService::new(Arc::new(SqlWebhooksStore::new(db, sealer())), Arc::new(ManualClock::at(T0)), false);
    for url in ["http://127.0.0.1:9/hook", "http://10.0.0.1/hook", "http://169.254.169.254/latest", "http://localhost/x"] {
        let e = svc.create_endpoint(ENV_A, url, vec!["run.*".into()], "prin_1").await.unwrap_err();
        assert_eq!(e.code, checkfu_core::Code::Invalid, "{url}");
        assert!(e.message.contains("private"), "{url}: {}", e.message);
    }
    let e = svc.create_endpoint(ENV_A, "ftp://example.com/x", vec!["run.*".into()], "prin_1").await.unwrap_err();
    assert_eq!(e.code, checkfu_core::Code::Invalid);
    let e = svc.create_endpoint(ENV_A, "https://example.com/x", vec!["agent.message".into()], "prin_1").await.unwrap_err();
    assert!(e.message.contains("subscribable"));
}
