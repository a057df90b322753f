//! The work a step program waits on that runs after the write reaching it
//! — Check evaluations, Connection steps' governance and calls — taken by
//! one replica at a time: each `(firing, step, attempt)` this replica is
//! handling is in its in-flight set, so concurrent advances of one program
//! start it once. Nothing starts while the Automation is paused (resuming
//! advances the program, which starts it), and authority is re-checked
//! first, as for every admission.

use crate::firing::Firing;
use crate::model::{Automation, AutomationStatus, Readiness};
use crate::service::SchedulerService;
use crate::steps::fail_running;
use checkfu_core::id::FiringId;

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

    /// This replica no longer handles the step's attempt (settled, refused
    /// or failed to save: the next advance may take it again).
    pub(crate) fn left(&self, firing: &FiringId, step_id: &str, attempt: i64) {
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner()).remove(&key(firing, step_id, attempt));
    }
}
