//! Sessions storage: the narrow trait and its SQL implementation.
//!
//! Every change to a Session goes through [`SessionsStore::commit`]: an
//! optimistic compare-and-set on the session's `version` that appends events
//! with the next gapless `seq`s, rewrites the session row and upserts runs in
//! one transaction. A writer that lost the race retries from a fresh read, so
//! no two writers ever assign the same `seq` and a crash mid-commit leaves
//! nothing behind.

mod files;
mod group_commit;
mod log_writes;
mod mounts;
pub mod outbox;
mod rows;
mod runners;
mod sql;
mod uploads;
mod work;

use crate::model::*;
use checkfu_core::Result;
use checkfu_core::id::{AgentId, BudgetId, DeploymentId, RunId, SandboxProfileId, SessionId};
use checkfu_core::page::PageRequest;

pub use files::FilesStore;
pub use mounts::MountsStore;
pub use runners::RunnersStore;
pub use sql::SqlSessionsStore;
pub use uploads::UploadsStore;
pub use work::WorkStore;

/// One atomic change to a Session.
#[derive(Debug, Clone)]
pub struct Change {
    /// The `version` the change was decided from.
    pub expected_version: i64,
    /// The new session row; `last_seq` and `version` are set by the store.
    pub session: Session,
    pub events: Vec<NewEvent>,
    /// Runs to insert or overwrite.
    pub runs: Vec<Run>,
    /// For a claim: the Run must still be claimable when the change commits.
    pub claim_guard: Option<ClaimGuard>,
    /// On disk before the commit returns (an accepted input answered with
    /// a 201); otherwise written, and on disk with the next flushed commit
    /// (embedded SQLite only: PostgreSQL flushes every commit).
    pub flush: bool,
    /// The Session's Outcome changed: its row in `outcomes` follows.
    pub outcome_changed: bool,
}

/// A claim's precondition, re-checked inside the commit under a row lock:
/// the Run is at `generation` and queued, or its lease expired before
/// `now_ms`. A heartbeat that renewed the lease in between wins.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimGuard {
    pub run_id: RunId,
    pub generation: i64,
    pub now_ms: i64,
}

/// Which of a Session's events a read returns (api.md §15.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    /// The whole log.
    All,
    /// The primary view: the primary's events and the cross-posts.
    Primary,
    /// The primary's own events, without cross-posts (what its Runs read).
    PrimaryOwn,
    /// A child thread's own events.
    Child(String),
}

#[derive(Debug, Clone, Default)]
pub struct SessionFilter {
    pub environment_ids: Vec<String>,
    pub status: String,
    pub deployment_id: String,
    /// Empty matches every principal.
    pub principal_id: String,
    /// Oldest first, the page cursor then the id the rows sort after.
    pub ascending: bool,
}

#[async_trait::async_trait]
pub trait SessionsStore: RunnersStore + FilesStore + UploadsStore + MountsStore + WorkStore {
    async fn insert_agent(&self, a: &Agent) -> Result<()>;
    async fn get_agent(&self, id: &AgentId) -> Result<Option<Agent>>;
    async fn list_agents(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Agent>>;
    /// Compare-and-set on the agent's `version`.
    async fn update_agent(&self, a: &Agent, expected_version: i64) -> Result<bool>;
    /// Inserts the version and moves the agent's `latest_version`, if the
    /// agent is still at `expected_agent_version`.
    async fn publish_agent_version(&self, v: &AgentVersion, expected_agent_version: i64) -> Result<bool>;
    async fn get_agent_version(&self, agent_id: &AgentId, version: i64) -> Result<Option<AgentVersion>>;
    async fn list_agent_versions(&self, agent_id: &AgentId, before_version: Option<i64>, limit: i64) -> Result<Vec<AgentVersion>>;

    async fn insert_sandbox_profile(&self, p: &SandboxProfile, first: &SandboxRevision) -> Result<()>;
    /// Appends the next revision if the profile is still at `revision - 1`.
    async fn insert_sandbox_revision(&self, rev: &SandboxRevision) -> Result<bool>;
    async fn get_sandbox_profile(&self, id: &SandboxProfileId) -> Result<Option<SandboxProfile>>;
    /// Archives a profile (once: a second archive keeps the first time);
    /// `None` when there is no such profile.
    async fn archive_sandbox_profile(&self, id: &SandboxProfileId, at_ms: i64) -> Result<Option<SandboxProfile>>;
    async fn get_sandbox_revision(&self, profile_id: &SandboxProfileId, revision: i64) -> Result<Option<SandboxRevision>>;
    async fn list_sandbox_profiles(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<SandboxProfile>>;

    async fn insert_deployment(&self, d: &Deployment) -> Result<()>;
    /// Records `d.revision` with `d.pins` if the deployment is at `d.revision - 1`.
    async fn insert_deployment_revision(&self, d: &Deployment) -> Result<bool>;
    async fn get_deployment(&self, id: &DeploymentId) -> Result<Option<Deployment>>;
    /// The deployment as it was at `revision` (revisions are immutable).
    async fn get_deployment_at(&self, id: &DeploymentId, revision: i64) -> Result<Option<Deployment>>;
    async fn list_deployments(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Deployment>>;

    /// Inserts a new Session with its first events (seq 1..n) and runs.
    async fn insert_session(&self, s: &Session, events: &[NewEvent], runs: &[Run]) -> Result<Vec<Event>>;
    async fn get_session(&self, id: &SessionId) -> Result<Option<Session>>;
    async fn list_sessions(&self, f: &SessionFilter, page: &PageRequest) -> Result<Vec<Session>>;
    async fn session_by_budget(&self, budget_id: &BudgetId) -> Result<Option<Session>>;
    /// Sessions holding a Budget, newest Budget first (paged by budget id).
    async fn list_budget_sessions(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Session>>;
    /// Applies a change; `None` when the session moved since it was read.
    async fn commit(&self, change: Change) -> Result<Option<(Session, Vec<Event>)>>;
    async fn list_events(&self, session_id: &SessionId, view: &View, after_seq: i64, limit: i64, types: &[String]) -> Result<Vec<Event>>;

    async fn get_run(&self, id: &RunId) -> Result<Option<Run>>;
    /// The primary thread's queued or running Run, if any (at most one
    /// exists).
    async fn active_run(&self, session_id: &SessionId) -> Result<Option<Run>>;
    /// The child threads' queued or running Runs (at most one each).
    async fn child_runs(&self, session_id: &SessionId) -> Result<Vec<Run>>;
    async fn list_runs(&self, session_id: &SessionId, page: &PageRequest) -> Result<Vec<Run>>;
    /// Runs of `placement` waiting for an execution plane: queued, or
    /// running on a lease that expired before `now_ms`. Oldest first.
    async fn claimable_runs(&self, placement: &str, now_ms: i64, limit: i64) -> Result<Vec<Run>>;
    /// Extends a live lease; false when the lease moved, expired before
    /// `now_ms` (it may be claimed by another runner) or the Run ended.
    async fn extend_lease(&self, run_id: &RunId, lease_id: &str, generation: i64, now_ms: i64, expires_ms: i64) -> Result<bool>;
    /// Expires every running lease (embedded start-up: the only runner died
    /// with the previous process). Returns how many.
    async fn expire_all_leases(&self) -> Result<u64>;

    async fn get_outcome(&self, id: &str) -> Result<Option<crate::model::outcome::Outcome>>;
    /// A Session's Outcomes, newest first.
    async fn list_outcomes(&self, session_id: &SessionId, page: &PageRequest) -> Result<Vec<crate::model::outcome::Outcome>>;
    /// Sessions with a grading under way (after a crash, nobody may be at it).
    async fn grading_sessions(&self, limit: i64) -> Result<Vec<SessionId>>;
}

#[cfg(test)]
pub(crate) mod conformance;
