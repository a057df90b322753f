//! Settling firings from their children (§12.5), consumed from the durable
//! session-event topic — never polled. A record is committed only after the
//! firing it settles is written, so a crash delivers it again (settling an
//! already settled firing changes nothing).
//!
//! An Agent target's firing settles with its child: `succeeded` at the
//! child's first `end_turn` idle, `failed` with `child_interrupted` (that
//! idle followed a `user.interrupt`), `child_failed` (`retries_exhausted`)
//! or `child_terminated` (archived); `requires_action` and
//! `budget_reached` keep it `running`. A screened child whose last message
//! was withheld fails it `delivery_blocked` (§18.8).

use crate::SchedulerService;
use crate::model::{FiringState, Usage};
use checkfu_bus::{Bus, Record};
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use checkfu_proto::sessions::v1 as ss;
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The consumer group the scheduler reads session events with.
pub const GROUP: &str = "checkfu-scheduler";

impl SchedulerService {
    /// Settles the firing a session event's Session belongs to, if it ends
    /// it — as a child it started, or as one a `continue_selected` input
    /// went into (`continuation.rs`). Unrelated events cost a lookup or two.
    pub async fn on_session_event(&self, r: &Record) -> Result<()> {
        let kind = r.header("type").unwrap_or_default();
        if kind != "session.status_idle" && kind != "session.status_terminated" {
            return Ok(());
        }
        let e: Value = serde_json::from_str(&r.payload).map_err(|e| Error::invalid(format!("unreadable session event: {e}")))?;
        let session_id = e.get("session_id").and_then(Value::as_str).unwrap_or_default();
        self.on_input_event(kind, &e, session_id).await?;
        let Some(firing_id) = self.store.firing_of_child(session_id).await? else { return Ok(()) };
        let Some(mut f) = self.store.get_firing(&firing_id).await? else { return Ok(()) };
        if f.state != FiringState::Running {
            return Ok(());
        }
        let seq = e.get("seq").and_then(Value::as_i64).unwrap_or(0);
        let stop = e.pointer("/payload/stop_reason/type").and_then(Value::as_str).unwrap_or_default();
        let interrupted = stop == "end_turn" && self.interrupted_between(session_id, 0, seq).await?;
        let Some((state, error)) = ended(kind, stop, interrupted) else { return Ok(()) };
        if f.program.is_some() {
            return self.settle_step(&f, session_id, step_outcome(&state, &error), None).await;
        }
        let s = self.sessions.clone().get_session(ss::GetByIdRequest { id: session_id.into() }).await.map_err(Error::from)?.into_inner();
        f.usage = Usage::from(s.usage.unwrap_or_default());
        // A screened child whose last message was withheld delivered
        // nothing: the firing fails (§18.8).
        let (state, error) = match state {
            FiringState::Succeeded if s.delivery_screen.is_some() && self.last_message(session_id).await?.is_none() => {
                (FiringState::Failed, Some(("delivery_blocked", "the child's delivery screen withheld its last message".to_string())))
            }
            _ => (state, error),
        };
        f.settle(state, error, now_ms());
        self.store.update_firing(&f).await?;
        self.after_settle(&f).await;
        Ok(())
    }

    /// Whether the Session's log holds a `user.interrupt` after `from` and
    /// before `to` (an input's Run is ended only by one after the input).
    pub(crate) async fn interrupted_between(&self, session_id: &str, from: i64, to: i64) -> Result<bool> {
        let req = ss::ListEventsRequest {
            session_id: session_id.into(),
            after_seq: from,
            limit: 1,
            types: vec!["user.interrupt".into()],
            view: String::new(),
        };
        let found = self.sessions.clone().list_events(req).await.map_err(Error::from)?.into_inner().data;
        Ok(found.first().is_some_and(|e| e.seq < to))
    }
}

/// A step's outcome for how its child (or input) ended.
pub(crate) fn step_outcome(state: &FiringState, error: &Option<(&str, String)>) -> crate::program::Outcome {
    match (state, error) {
        (FiringState::Succeeded, _) => crate::program::Outcome::completed(),
        (_, Some((reason, _))) => crate::program::Outcome::failed(reason),
        _ => crate::program::Outcome::failed("child_failed"),
    }
}

/// How an idle or a termination ends what waits on it: `end_turn` →
/// succeeded (failed `child_interrupted` after an interrupt),
/// `retries_exhausted` → `child_failed`, terminated → `child_terminated`;
/// `None` (`requires_action`, `budget_reached`): it still waits.
pub(crate) fn ended(kind: &str, stop_reason: &str, interrupted: bool) -> Option<(FiringState, Option<(&'static str, String)>)> {
    if kind == "session.status_terminated" {
        return Some((FiringState::Failed, Some(("child_terminated", "the child Session was archived".to_string()))));
    }
    match stop_reason {
        "end_turn" if interrupted => {
            Some((FiringState::Failed, Some(("child_interrupted", "the child Session was interrupted".to_string()))))
        }
        "end_turn" => Some((FiringState::Succeeded, None)),
        "retries_exhausted" => {
            Some((FiringState::Failed, Some(("child_failed", "the child's model calls failed (retries_exhausted)".to_string()))))
        }
        _ => None,
    }
}

/// Consumes session events until `stop`, settling firings.
pub async fn consume(svc: SchedulerService, bus: Arc<dyn Bus>, stop: CancellationToken) {
    checkfu_bus::consume(bus, checkfu_bus::SESSION_EVENTS, GROUP, stop, |record| {
        let svc = svc.clone();
        async move { svc.on_session_event(&record).await }
    })
    .await
}
