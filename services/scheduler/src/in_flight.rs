//! The work a step program waits on that runs after the write reaching it
//! — Check evaluations, Connection steps' governance and calls, Memory,
//! history and Skill steps — taken by one replica at a time: each `(firing, step, attempt)` this replica is
//! handling is in its in-flight set, so concurrent advances of one program
//! start it once. Nothing starts while the Automation is paused (resuming
//! advances the program, which starts it), and authority is re-checked
//! first, as for every admission.

use crate::firing::Firing;
use crate::model::{Automation, AutomationStatus, Readiness};
use crate::program::Program;
use crate::service::SchedulerService;
use crate::steps::fail_running;
use checkfu_core::id::FiringId;
use std::future::Future;

/// The key of a step's attempt in a replica's in-flight set.
fn key(firing: &FiringId, step_id: &str, attempt: i64) -> String {
    format!("{firing}/{step_id}/{attempt}")
}

impl SchedulerService {
    /// Takes the `(step, attempt)` items of `f` this replica is not already
    /// handling. Refused by `admits` on the Automation's readiness, they
    /// fail `admission_denied` and none is returned.
    pub(crate) async fn take_in_flight<T>(
        &self,
        f: &Firing,
        a: &Automation,
        items: Vec<T>,
        step_of: impl Fn(&T) -> (&str, i64),
        admits: impl Fn(&Readiness) -> bool,
    ) -> Vec<T> {
        if a.status == AutomationStatus::Paused {
            return vec![];
        }
        let taken: Vec<T> = {
            let mut here = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            items
                .into_iter()
                .filter(|t| {
                    let (step, attempt) = step_of(t);
                    here.insert(key(&f.id, step, attempt))
                })
                .collect()
        };
        if taken.is_empty() || admits(&self.readiness(a).await) {
            return taken;
        }
        taken.iter().for_each(|t| {
            let (step, attempt) = step_of(t);
            self.left(&f.id, step, attempt);
        });
        let change = fail_running(taken.iter().map(|t| step_of(t).0.to_string()).collect(), "admission_denied");
        if let Err(e) = self.advance_program(&f.id, Some(change)).await {
            tracing::warn!(firing_id = %f.id, error = %e.message, "refused steps could not be recorded");
        }
        vec![]
    }

    /// Asks `ask` for a taken step's answer off the caller's path, then
    /// saves it with `save` in the compare-and-set that advances the
    /// program (`None`: nothing to save yet — the next advance asks
    /// again). The step's attempt leaves the in-flight set either way; an
    /// answer that could not be saved is asked for again by recovery.
    pub(crate) fn answer_later<A: Send + Sync + 'static>(
        &self,
        firing: FiringId,
        (step_id, attempt): (String, i64),
        what: &'static str,
        ask: impl Future<Output = Option<A>> + Send + 'static,
        save: impl Fn(&mut Firing, &mut Program, &A, i64) + Send + Sync + 'static,
    ) {
        let svc = self.clone();
        tokio::spawn(async move {
            if let Some(answer) = ask.await {
                let change = move |f: &mut Firing, p: &mut Program, now: i64| save(f, p, &answer, now);
                if let Err(e) = svc.advance_program(&firing, Some(Box::new(change))).await {
                    tracing::warn!(firing_id = %firing, %step_id, error = %e.message, "{what} could not be saved; recovery asks again");
                }
            }
            svc.left(&firing, &step_id, attempt);
        });
    }

    /// This replica no longer handles the step's attempt (settled, refused
    /// or failed to save: the next advance may take it again).
    pub(crate) fn left(&self, firing: &FiringId, step_id: &str, attempt: i64) {
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner()).remove(&key(firing, step_id, attempt));
    }
}
