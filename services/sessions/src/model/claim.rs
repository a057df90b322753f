//! A claimed Run: the lease its holder writes under and the work item a
//! claim answers with.

use super::*;
use checkfu_core::id::{RunId, SessionId};
use serde_json::Value;

/// Identifies the holder of a Run's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub run_id: RunId,
    pub lease_id: String,
    pub generation: i64,
    /// The Run's Session, as the claim named it; every write re-checks that
    /// the Session's active Run is this lease's, so a wrong one only fails.
    /// Older runners name none.
    pub session_id: Option<SessionId>,
}

impl Lease {
    /// The lease `run` is held under now.
    pub(crate) fn of(run: &Run) -> Lease {
        Lease {
            run_id: run.id.clone(),
            lease_id: run.lease_id.clone(),
            generation: run.generation,
            session_id: Some(run.session_id.clone()),
        }
    }

    /// Whether this lease is the one currently held on `run`.
    pub fn holds(&self, run: &Run) -> bool {
        run.id == self.run_id && run.lease_id == self.lease_id && run.generation == self.generation && run.status == RunStatus::Running
    }
}

/// A claimed Run and what the execution plane needs to run it.
#[derive(Debug, Clone)]
pub struct WorkItem {
    pub session: Session,
    pub run: Run,
    pub lease: Lease,
    pub tools: Vec<ToolDecl>,
    /// The newest events at claim time (a contiguous suffix of the log).
    pub tail: Vec<Event>,
    /// Lets the runner call the gateways for this Run while its lease holds.
    pub capability: String,
    /// The Session's sandbox: its snapshot, expiry, profile and mounts (`files.rs`).
    pub sandbox: Value,
    /// What the model is told: the Session's instructions, then the skills
    /// it may open.
    pub instructions: String,
}
