//! A claimed Run: the lease its holder writes under and the work item a
//! claim answers with.

use super::*;
use checkfu_core::id::{RunId, SessionId};

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
    pub sandbox: WorkSandbox,
    /// What the model is told: the Session's instructions, then the skills
    /// it may open.
    pub instructions: String,
}

/// What a runner is told about the sandbox of a Run it claims. Serialized,
/// it is the JSON text a 0.1.0 runner reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkSandbox {
    /// The snapshot to restore; empty: none yet.
    pub snapshot_sha256: String,
    /// It materialised with this claim: the workspace starts empty.
    pub fresh: bool,
    pub expires_at_ms: i64,
    pub unenforced: Vec<Unenforced>,
    pub profile: SandboxSpec,
    pub mounts: Vec<WorkMount>,
    /// Mount folders the Run may change (read_write MemoryStores).
    pub writable_mounts: Vec<String>,
    /// The skills the model is told it may open.
    pub skills: Vec<WorkSkill>,
}

/// One file copied into the workspace, read-only, before a Run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkMount {
    pub path: String,
    pub sha256: String,
    pub size_bytes: i64,
    /// The blob kind it is read as: `uploads`, `skills` or `memory`.
    pub source: &'static str,
    /// An uploaded File's id and media type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

/// A skill the model may open, at `path` (its SKILL.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkSkill {
    pub name: String,
    pub description: String,
    pub path: String,
}
