//! Changing a Session: every change is a [`Draft`] decided from a fresh
//! read and committed with its events in one compare-and-set, retried from
//! a new read when another writer got there first.
//!
//! A commit that admits a Run hands it to a claim waiting on this replica
//! (`handoff.rs`), wakes the claims that poll when a Run is left queued,
//! and tells the gradings it started to whoever grades (`Gradings`). What
//! a change means is its caller's: the log only commits it.

use super::Log;
use crate::draft::Draft;
use crate::handoff::Waiting;
use crate::model::*;
use checkfu_core::events::EventType;
use checkfu_core::id::{RunId, SessionId};
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result};
use serde_json::json;
use std::sync::Mutex;
use tokio::sync::Notify;

const COMMIT_ATTEMPTS: usize = 64;

/// Sessions whose commit started a grading (`outcome.evaluation_started`),
/// waiting for the outcomes' grader to take them. The grader also sweeps
/// the store for gradings nobody finished, so an id lost with its process
/// is still graded.
///
/// Bounded by construction: a Session is due once however often it is
/// pushed, and beyond [`MAX_DUE`] a push is dropped — the sweep finds that
/// grading within a minute — so a build of the service without the grader
/// cannot grow it without end.
#[derive(Debug, Default)]
pub struct Gradings {
    due: Mutex<Vec<SessionId>>,
    wake: Notify,
}

/// Gradings waiting for the grader, at most.
const MAX_DUE: usize = 1024;

impl Gradings {
    fn push(&self, id: SessionId) {
        {
            let mut due = self.due.lock().unwrap_or_else(|p| p.into_inner());
            if due.contains(&id) {
                return;
            }
            if due.len() >= MAX_DUE {
                tracing::warn!(session_id = %id, "too many gradings waiting; the grading sweep will start this one");
                return;
            }
            due.push(id);
        }
        self.wake.notify_one();
    }

    /// Waits until a grading is due, then takes every one that is.
    pub async fn next(&self) -> Vec<SessionId> {
        loop {
            let due = std::mem::take(&mut *self.due.lock().unwrap_or_else(|p| p.into_inner()));
            if !due.is_empty() {
                return due;
            }
            self.wake.notified().await;
        }
    }
}

/// Whether a write leaves a Run waiting for a runner.
pub(super) fn queues(runs: &[Run]) -> bool {
    runs.iter().any(|r| r.status == RunStatus::Queued)
}

/// The refusal of a write whose lease has moved on.
pub(crate) fn lease_lost() -> Error {
    Error::new(Code::PreconditionFailed, "the lease on this run is no longer held").with_details(json!({"reason": "lease_lost"}))
}

impl Log {
    /// Reads the Session, lets `decide` change it, and commits the result;
    /// retried from a fresh read when another writer got there first.
    ///
    /// A Run the change admits goes straight to a claim waiting on this
    /// replica, if there is one (`handoff.rs`).
    pub(crate) async fn transact<T>(
        &self,
        session_id: &SessionId,
        decide: impl Fn(&mut Draft) -> Result<T>,
    ) -> Result<(T, Session, Vec<Event>)> {
        // Kept across retries; dropped unused, its claim looks again.
        let mut handing: Option<Waiting> = None;
        for attempt in 0..COMMIT_ATTEMPTS {
            let (session, run, child_runs) = self.state(session_id, attempt == 0).await?;
            let expected_version = session.version;
            let outcome_before = session.outcome.clone();
            let mut d = Draft::new(session, run, now_ms());
            d.child_runs = child_runs;
            let out = decide(&mut d);
            d.unfocus();
            let out = out?;
            if d.events.is_empty() && d.runs.is_empty() {
                return Ok((out, d.session, vec![]));
            }
            let handed = self.claim_for_waiting(&mut d, &mut handing);
            d.session.updated_ms = d.now_ms;
            let active = (d.run.clone(), d.child_runs.clone());
            let outcome_changed = d.session.outcome != outcome_before;
            let change = crate::store::Change {
                expected_version,
                session: d.session,
                events: d.events,
                runs: d.runs,
                claim_guard: d.claim_guard,
                flush: d.flush,
                outcome_changed,
            };
            let queued = queues(&change.runs);
            if let Some((session, events)) = self.commit(change, active).await? {
                self.after_commit(session_id, &events, queued);
                if let (Some(to), Some(run)) = (handing.take(), handed) {
                    self.deliver(to, session.clone(), run);
                }
                return Ok((out, session, events));
            }
            tokio::task::yield_now().await;
        }
        Err(Error::unavailable("the session is too busy to change right now; retry"))
    }

    /// Claims a Run the draft admits for the oldest claim waiting here.
    fn claim_for_waiting(&self, d: &mut Draft, handing: &mut Option<Waiting>) -> Option<Run> {
        let admitted = d.admitted.clone()?;
        let placement = d.run.iter().chain(&d.child_runs).find(|r| r.id == admitted && r.status == RunStatus::Queued)?.placement.clone();
        if handing.is_none() {
            *handing = self.parked.take(&placement);
        }
        let runner_id = handing.as_ref()?.runner_id.clone();
        if d.owner_other_than(&runner_id, &admitted) {
            return None;
        }
        d.focus_run(&admitted);
        let run = d.claim_run(&runner_id, self.lease_ms);
        d.unfocus();
        run
    }

    /// What follows a commit: a grading it started is due, and claims wake
    /// when it left a Run queued.
    pub(super) fn after_commit(&self, session_id: &SessionId, events: &[Event], queued: bool) {
        if events.iter().any(|e| e.event_type == EventType::OutcomeEvaluationStarted.as_str()) {
            self.gradings.push(session_id.clone());
        }
        if queued {
            self.work.notify_waiters();
        }
    }

    /// Sends a Run handed off in `session`'s commit to the claim that waits
    /// for it; if that claim is gone, the Run goes back in the queue.
    pub(crate) fn deliver(&self, to: Waiting, session: Session, run: Run) {
        let lease = Lease::of(&run);
        if !to.give(session, run) {
            // Dropped armed: the Run goes back in the queue.
            drop(Requeue::armed(self.clone(), lease));
        }
    }

    /// Puts a Run still held under `lease` back in the queue.
    pub(crate) async fn requeue(&self, lease: &Lease) -> Result<()> {
        let session_id = self.session_to_write(lease).await?;
        self.queue_again(&session_id, |r| lease.holds(r)).await
    }

    /// Puts the Session's active Run back in the queue if `which` picks it;
    /// the next claim takes it under the next generation.
    pub(crate) async fn queue_again(&self, session_id: &SessionId, which: impl Fn(&Run) -> bool) -> Result<()> {
        self.transact(session_id, |d| {
            if let Some(run) = d.run.clone().filter(|r| which(r)) {
                d.put_run(Run { status: RunStatus::Queued, lease_expires_ms: 0, runner_id: String::new(), ..run });
            }
            Ok(())
        })
        .await
        .map(|_| ())
    }

    /// The lease's Session for a write that re-checks the lease itself.
    pub(crate) async fn session_to_write(&self, lease: &Lease) -> Result<SessionId> {
        match &lease.session_id {
            Some(id) => Ok(id.clone()),
            None => self.session_of(lease).await,
        }
    }

    /// The Session whose Run `lease` holds; refused when it holds it no
    /// longer.
    pub(crate) async fn session_of(&self, lease: &Lease) -> Result<SessionId> {
        if let Some(run) = lease.session_id.as_ref().and_then(|s| self.cached_run(s, &lease.run_id)).filter(|r| lease.holds(r)) {
            return Ok(run.session_id);
        }
        let run = self.run(&lease.run_id).await?;
        if !lease.holds(&run) {
            return Err(lease_lost());
        }
        Ok(run.session_id)
    }

    pub async fn run(&self, id: &RunId) -> Result<Run> {
        self.store.get_run(id).await?.ok_or_else(|| Error::not_found("run", id))
    }
}

/// Puts a handed-off Run back in the queue when dropped armed: a claim
/// that never got it (or left while its item was prepared) must not hold it
/// until its lease runs out.
pub(crate) struct Requeue(Option<(Log, Lease)>);

impl Requeue {
    pub(crate) fn armed(log: Log, lease: Lease) -> Requeue {
        Requeue(Some((log, lease)))
    }

    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Requeue {
    fn drop(&mut self) {
        let Some((log, lease)) = self.0.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            if let Err(e) = log.requeue(&lease).await {
                tracing::warn!(error = %e, run_id = %lease.run_id, "a handed-off run could not be queued again; it waits for its lease");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A grading a commit starts reaches the grader at once, whether it
    /// waits already or comes to look later; none is taken twice.
    #[tokio::test]
    async fn a_started_grading_reaches_the_grader_once() {
        let g = std::sync::Arc::new(Gradings::default());
        let (a, b) = (SessionId::mint(), SessionId::mint());
        g.push(a.clone());
        assert_eq!(g.next().await, vec![a], "pushed before anyone waited");
        let waiter = tokio::spawn({
            let g = g.clone();
            async move { g.next().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        g.push(b.clone());
        let got = tokio::time::timeout(Duration::from_secs(2), waiter).await.expect("woken").expect("task");
        assert_eq!(got, vec![b]);
        assert!(tokio::time::timeout(Duration::from_millis(50), g.next()).await.is_err(), "nothing left to take");
    }

    /// Nobody taking gradings cannot make the queue grow without end: a
    /// Session is due once, and the queue stops at its bound.
    #[tokio::test]
    async fn the_queue_is_bounded_and_holds_a_session_once() {
        let g = Gradings::default();
        let a = SessionId::mint();
        g.push(a.clone());
        g.push(a.clone());
        assert_eq!(g.next().await, vec![a], "pushed twice, due once");
        for _ in 0..MAX_DUE + 10 {
            g.push(SessionId::mint());
        }
        assert_eq!(g.next().await.len(), MAX_DUE);
    }
}
