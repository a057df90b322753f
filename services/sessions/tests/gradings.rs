//! A grading a dead process left is taken up again (docs/outcomes.md,
//! Durability): the sweeper finds it through the `outcomes` table, grades
//! it once, and a second sweep finds nothing. The grader here is
//! unreachable (no model gateway), so the evaluation is `unresolved`.
#![cfg(test)]

mod common;

use checkfu_core::testing::tid;
use checkfu_sessions::Builder;
use checkfu_sessions::model::outcome::*;
use checkfu_sessions::model::*;
use checkfu_sessions::store::{SessionsStore, SqlSessionsStore, View};
use checkfu_store::{Db, Location};
use serde_json::json;
use std::sync::Arc;

fn grading_session(id: &str, started_ms: i64) -> Session {
    let outcome = Outcome {
        id: checkfu_core::id::OutcomeId::mint().to_string(),
        session_id: id.into(),
        define_event_id: "evt_1".into(),
        definition: Definition { description: "d".into(), rubric: "require: x".into(), max_iterations: 2, criteria: vec![], report: None },
        status: OutcomeStatus::Active,
        reason: None,
        iterations_used: 0,
        evaluations: vec![],
        report: None,
        usage: OutcomeUsage::default(),
        created_ms: 1,
        completed_ms: 0,
        grading: Some(Grading { iteration: 1, run_id: "run_1".into(), started_seq: 2, started_ms }),
        last_unavailable_sha256: None,
        interrupt_requested: false,
    };
    Session { status: SessionStatus::Running, outcome: Some(outcome), ..common::session(id) }
}

use common::event;

#[tokio::test(flavor = "multi_thread")]
async fn a_grading_left_behind_is_finished_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(&Location::SqliteDir(dir.path().into()), "sessions", &checkfu_sessions::MIGRATIONS).await.unwrap();
    let store: Arc<dyn SessionsStore> = Arc::new(SqlSessionsStore::new(db));
    let stale = checkfu_core::id::new_id("sess");
    let fresh = checkfu_core::id::new_id("sess");
    store.insert_session(&grading_session(&stale, 1), &[event("session.created"), event("outcome.evaluation_started")], &[]).await.unwrap();
    let now = checkfu_core::time::now_ms();
    store
        .insert_session(&grading_session(&fresh, now), &[event("session.created"), event("outcome.evaluation_started")], &[])
        .await
        .unwrap();
    let svc = Builder::new(store.clone()).build();

    assert_eq!(svc.outcomes.resume_gradings().await.unwrap(), 1, "only the stale grading: a live one may still be at work");
    let s = svc.log.session(&stale).await.unwrap();
    assert_eq!((s.status, serde_json::to_value(&s.stop_reason).unwrap()), (SessionStatus::Idle, json!({"type": "end_turn"})));
    let o = s.outcome.unwrap();
    assert_eq!((o.status, o.grading.clone(), o.iterations_used), (OutcomeStatus::Active, None, 0), "undecided: the iteration is not used");
    let events = store.list_events(&tid(&stale), &View::All, 0, 100, &[]).await.unwrap();
    let last: Vec<&str> = events.iter().rev().take(2).map(|e| e.event_type.as_str()).collect();
    assert_eq!(last, ["session.status_idle", "outcome.evaluation_completed"]);
    let completed = &events[events.len() - 2].payload;
    assert_eq!((completed["result"].clone(), completed["reason"].clone()), (json!("interrupted"), json!("outcome.evaluation_unavailable")));
    assert_eq!(store.get_outcome(&o.id).await.unwrap().unwrap().grading, None, "the readable copy follows");

    assert_eq!(svc.outcomes.resume_gradings().await.unwrap(), 0, "finished once; the live one is left alone");
    // A repeat of the finished grading changes nothing.
    svc.outcomes.grade(&tid(&stale)).await.unwrap();
    assert_eq!(store.list_events(&tid(&stale), &View::All, 0, 100, &[]).await.unwrap().len(), events.len());
}
