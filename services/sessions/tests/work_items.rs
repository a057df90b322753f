//! The Environment Work API's lease rules (api.md §17.13) on the service:
//! who may poll, acknowledge, heartbeat and stop; compare-and-set
//! heartbeats; a lapsed lease re-queued with `session.status_rescheduled`;
//! tool results fenced by the delivery that holds the item.
#![cfg(test)]

mod common;

use checkfu_core::Code;
use checkfu_core::id::EnvironmentId;
use checkfu_sessions::model::*;
use checkfu_sessions::runners::NewPairing;
use checkfu_sessions::store::{SessionsStore, SqlSessionsStore, View};
use checkfu_sessions::{Builder, SessionsService};
use checkfu_store::{Db, Location};
use serde_json::json;
use std::sync::Arc;

struct World {
    svc: SessionsService,
    store: Arc<dyn SessionsStore>,
    profile: String,
    /// A Runner credential of the profile's pool, and its Runner.
    key: String,
    runner: Runner,
    session_id: String,
    _dir: tempfile::TempDir,
}

async fn runner(svc: &SessionsService, env: &EnvironmentId, pool: &str) -> (Runner, String) {
    let p = NewPairing {
        environment_id: env.as_str(),
        principal_id: "prin_01jx0000000000000000000001",
        pool,
        ttl_seconds: None,
        created_by: "prin_01jx0000000000000000000001",
    };
    let (_, code) = svc.runs.runners.create_pairing(p).await.expect("pairing");
    svc.runs.runners.redeem(&code, "w").await.expect("redeem")
}

/// An external_tools Session whose Run waits on `toolu_1` (bash).
async fn world() -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(&Location::SqliteDir(dir.path().into()), "sessions", &checkfu_sessions::MIGRATIONS).await.expect("db");
    let store: Arc<dyn SessionsStore> = Arc::new(SqlSessionsStore::new(db));
    let svc = Builder::new(store.clone()).build();
    let env = EnvironmentId::mint();
    let (profile, _) = svc
        .catalog
        .create_sandbox_profile(
            env.as_str(),
            "sh",
            SandboxSpec::requested(json!({"image": "self-hosted", "execution": "external_tools"})).expect("spec"),
        )
        .await
        .expect("profile");
    let pool = checkfu_sessions::work::pool_of(profile.id.as_str());
    let (runner, key) = runner(&svc, &env, &pool).await;
    let mut s = common::session(&checkfu_core::id::new_id("sess"));
    s.environment_id = env.clone();
    s.status = SessionStatus::Running;
    s.pins.sandbox_profile_id = profile.id.clone();
    s.pins.execution = Execution::ExternalTools { pool };
    let mut used = common::event("agent.tool_use");
    used.payload =
        json!({"tool_use_id": "toolu_1", "name": "bash", "input": {"command": "true"}, "evaluated_permission": "allow", "external": true});
    let mut local = common::event("agent.tool_use");
    local.payload = json!({"tool_use_id": "toolu_2", "name": "web_fetch", "input": {}, "evaluated_permission": "allow"});
    store.insert_session(&s, &[common::event("session.created"), used, local], &[]).await.expect("session");
    svc.runs.ensure_work(&s).await.expect("queued");
    World { svc, store, profile: profile.id.to_string(), key, runner, session_id: s.id.to_string(), _dir: dir }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_is_acknowledged_once_and_heartbeats_compare_and_set() {
    let w = world().await;
    let (svc, p) = (&w.svc, w.profile.as_str());
    // Only a Runner of the profile's pool polls.
    let env = svc.catalog.sandbox_profile(p).await.expect("profile").environment_id;
    let (_, other) = runner(svc, &env, "cma:sbp_01jx0000000000000000000009").await;
    assert_eq!(svc.runs.poll_work(p, &other, 0, None, "").await.expect_err("other pool").code, Code::PermissionDenied);
    assert_eq!(svc.runs.poll_work(p, "crr_forged", 0, None, "").await.expect_err("forged").code, Code::InvalidKey);
    assert_eq!(svc.runs.poll_work(p, &w.key, 1000, None, "").await.expect_err("block_ms").code, Code::Invalid);

    let (item, token) = svc.runs.poll_work(p, &w.key, 0, None, "w1").await.expect("poll").expect("the Session's item");
    assert_eq!((item.session_id.as_str(), item.generation, item.state), (w.session_id.as_str(), 1, WorkState::Queued));
    assert!(svc.runs.poll_work(p, &w.key, 1, None, "w1").await.expect("poll").is_none(), "delivered, not yet reclaimable");
    assert_eq!(svc.runs.work_stats(p).await.expect("stats"), (0, 1, Some(item.created_ms), 1));

    // Another Runner of the pool holds nothing of it.
    let (_, mate) = runner(svc, &env, &checkfu_sessions::work::pool_of(p)).await;
    assert_eq!(svc.runs.ack_work(p, item.id.as_str(), &mate).await.expect_err("not its delivery").code, Code::PermissionDenied);
    let acked = svc.runs.ack_work(p, item.id.as_str(), &token).await.expect("ack");
    assert_eq!(acked.state, WorkState::Starting);
    let again = svc.runs.ack_work(p, item.id.as_str(), &w.key).await.expect_err("acknowledged");
    assert_eq!((again.code, again.details["reason"].as_str()), (Code::Conflict, Some("work_already_acknowledged")));

    let beat = svc.runs.heartbeat_work(p, item.id.as_str(), &token, NO_HEARTBEAT, Some(30)).await.expect("first heartbeat");
    assert!(beat.lease_extended && beat.item.state == WorkState::Active && beat.item.ttl_seconds == 30);
    let stale = svc.runs.heartbeat_work(p, item.id.as_str(), &token, NO_HEARTBEAT, None).await.expect_err("stale");
    assert_eq!((stale.code, stale.details["reason"].as_str()), (Code::PreconditionFailed, Some("heartbeat_precondition_failed")));
    let last = checkfu_core::time::rfc3339(beat.item.heartbeat_ms.expect("stamped"));
    assert_eq!(stale.details["current_state"]["last_heartbeat"], json!(last));
    assert_eq!(stale.details["current_state"]["state"], "active");
    let next = svc.runs.heartbeat_work(p, item.id.as_str(), &token, &last, None).await.expect("second heartbeat");
    assert!(next.item.heartbeat_ms > beat.item.heartbeat_ms, "each heartbeat has its own stamp");
    assert!(svc.runs.heartbeat_work(p, item.id.as_str(), &token, &last, Some(301)).await.is_err(), "ttl is 10 to 300 s");

    // Stop gracefully: the holder's next heartbeat hears it; again → 409; forced → stopped.
    let stopping = svc.runs.stop_work(p, item.id.as_str(), "", false).await.expect("a manager stops it");
    assert_eq!(stopping.state, WorkState::Stopping);
    let told = svc.runs.heartbeat_work(p, item.id.as_str(), &token, "whatever", None).await.expect("told, not compared");
    assert!(!told.lease_extended && told.item.state == WorkState::Stopping);
    assert_eq!(svc.runs.stop_work(p, item.id.as_str(), &token, false).await.expect_err("again").code, Code::Conflict);
    assert_eq!(svc.runs.stop_work(p, item.id.as_str(), &token, true).await.expect("forced").state, WorkState::Stopped);
    assert_eq!(svc.runs.stop_work(p, item.id.as_str(), &token, true).await.expect_err("stopped").code, Code::Conflict);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lapsed_lease_is_queued_again_and_the_old_token_is_fenced_off() {
    let w = world().await;
    let (svc, p) = (&w.svc, w.profile.as_str());
    let (item, old) = svc.runs.poll_work(p, &w.key, 0, None, "").await.expect("poll").expect("item");
    svc.runs.ack_work(p, item.id.as_str(), &old).await.expect("ack");
    svc.runs.heartbeat_work(p, item.id.as_str(), &old, NO_HEARTBEAT, Some(10)).await.expect("heartbeat");
    // The lease lapses (as 10 s without a heartbeat would).
    let mut lapsed = w.store.get_work(&item.id).await.expect("get").expect("item");
    let rev = lapsed.rev;
    lapsed.rev += 1;
    lapsed.lease_expires_ms = Some(1);
    assert!(w.store.update_work(&lapsed, rev).await.expect("age it"));
    assert_eq!(svc.runs.sweep_work().await.expect("sweep"), 1);
    let types: Vec<String> =
        w.store.list_events(&item.session_id, &View::All, 0, 100, &[]).await.expect("log").into_iter().map(|e| e.event_type).collect();
    assert_eq!(types[types.len() - 2..], ["session.status_rescheduled", "session.status_running"], "{types:?}");
    // Re-queued, not yet delivered again: the old token holds nothing.
    let content = json!([{"type": "text", "text": "done"}]);
    let early = svc.runs.send_tool_result(&old, &w.session_id, "toolu_1", content.clone(), false).await.expect_err("lapsed");
    assert_eq!((early.code, early.details["reason"].as_str()), (Code::Conflict, Some("work_lease_superseded")));
    let stop = svc.runs.stop_work(p, item.id.as_str(), &old, true).await.expect_err("a lapsed token stops nothing");
    assert_eq!((stop.code, stop.details["reason"].as_str()), (Code::Conflict, Some("work_lease_superseded")));
    assert_eq!(svc.runs.ack_work(p, item.id.as_str(), &old).await.expect_err("nor acknowledges").code, Code::Conflict);
    assert_eq!(w.store.get_work(&item.id).await.expect("get").expect("item").state, WorkState::Queued);
    let (again, new) = svc.runs.poll_work(p, &w.key, 0, None, "").await.expect("poll").expect("re-queued");
    assert_eq!((again.id.clone(), again.generation), (item.id.clone(), 2));
    assert_ne!(new, old);

    let fenced = svc.runs.send_tool_result(&old, &w.session_id, "toolu_1", content.clone(), false).await.expect_err("superseded");
    assert_eq!((fenced.code, fenced.details["reason"].as_str()), (Code::Conflict, Some("work_lease_superseded")));
    let hb = svc.runs.heartbeat_work(p, item.id.as_str(), &old, NO_HEARTBEAT, None).await.expect_err("old delivery");
    assert_eq!(hb.code, Code::PreconditionFailed, "the old holder learns it lost the lease");
    svc.runs.ack_work(p, item.id.as_str(), &new).await.expect("ack");

    // Only the holder's calls, once, and only a call the holder runs.
    let (e, replayed) = svc.runs.send_tool_result(&new, &w.session_id, "toolu_1", content.clone(), false).await.expect("answered");
    assert!(!replayed && e.event_type == "user.tool_result");
    assert_eq!(e.caused_by, json!({"kind": "runner", "id": w.runner.id, "work_id": item.id}));
    assert_eq!(e.authored_by, json!(w.runner.principal_id));
    let (dup, replayed) = svc.runs.send_tool_result(&new, &w.session_id, "toolu_1", content, false).await.expect("the same again");
    assert!(replayed && dup.id == e.id, "an exact duplicate answers the first");
    let other = svc.runs.send_tool_result(&new, &w.session_id, "toolu_1", json!("different"), false).await.expect_err("conflicting");
    assert_eq!(other.code, Code::Conflict);
    let local = svc.runs.send_tool_result(&new, &w.session_id, "toolu_2", json!("x"), false).await.expect_err("not external");
    assert_eq!(local.details["reason"].as_str(), Some("no_such_wait"));
    let elsewhere = svc.runs.send_tool_result(&new, "sess_01jx0000000000000000000009", "toolu_1", json!("x"), false).await;
    assert_eq!(elsewhere.expect_err("another Session").code, Code::PermissionDenied);
    let big = json!("x".repeat(1024 * 1024 + 1));
    assert_eq!(
        svc.runs.send_tool_result(&new, &w.session_id, "toolu_9", big, false).await.expect_err("too big").code,
        Code::PayloadTooLarge
    );

    // A revoked Runner's token stops at once; the Session's end stops its item.
    svc.runs.revoke_runner(w.runner.id.as_str()).await.expect("revoke");
    assert_eq!(svc.runs.verify_work_token(&new).await.expect_err("revoked").code, Code::InvalidKey);
    let beat = svc.runs.heartbeat_work(p, item.id.as_str(), &new, NO_HEARTBEAT, None).await.expect_err("revoked");
    assert_eq!(beat.code, Code::InvalidKey, "a revoked Runner's token holds nothing");
    assert_eq!(svc.runs.stop_work(p, item.id.as_str(), "cwt_unknown", true).await.expect_err("unknown").code, Code::InvalidKey);
    svc.archive(&w.session_id, "prin_01jx0000000000000000000001").await.expect("archive");
    assert_eq!(w.store.live_work(&item.session_id).await.expect("live"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_native_client_cannot_send_a_tool_result() {
    let e = checkfu_sessions::input::Input::parse("user.tool_result", json!({}), "prin_1", json!({"kind": "principal", "id": "prin_1"}))
        .expect_err("work holder only");
    assert_eq!((e.code, e.details["reason"].as_str()), (Code::PermissionDenied, Some("work_holder_only")));
}
