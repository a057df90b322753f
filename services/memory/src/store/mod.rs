//! The memory service's store: stores (a compare-and-set on `version`),
//! documents as a versioned tree, committed change sets, content by digest
//! and proposals, with `memory_store.*` events staged in the outbox in the
//! same transaction as the change they describe.
//!
//! A commit is one transaction that first takes the store's row (an
//! `UPDATE … RETURNING`, which PostgreSQL holds locked until the commit and
//! SQLite serialises anyway), then checks every expectation against the
//! head it now owns: of two writers expecting the same sha, exactly one
//! commits and the other sees `sha_mismatch`.

use crate::dreams::model::{Dream, DreamFilter};
use crate::model::*;
use checkfu_bus::Record;
use checkfu_core::Result;
use checkfu_core::id::{MemoryStoreId, ProposalId};
use checkfu_core::page::PageRequest;

mod sql;
pub use sql::SqlMemoryDb;

#[cfg(test)]
mod conformance;

/// A change set to commit as one version.
#[derive(Debug, Clone)]
pub struct Commit {
    pub store_id: MemoryStoreId,
    pub changes: Vec<Staged>,
    pub actor: Actor,
    pub via: Via,
    /// The proposal this commit approves: marked `approved` in the same
    /// transaction, only if it is still open.
    pub approves: Option<Decision>,
    /// An archived store refuses every commit but a Dream's copy.
    pub allow_archived: bool,
    /// A sender's idempotency key (empty: none): a commit whose key a
    /// version of the store already holds answers that version
    /// ([`Committed::Replayed`]) and writes nothing.
    pub key: String,
    pub now_ms: i64,
}

/// A proposal's decision.
#[derive(Debug, Clone)]
pub struct Decision {
    pub proposal_id: ProposalId,
    pub decided_by: String,
    pub note: String,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq)]
pub enum Committed {
    /// A new version.
    Version(Version),
    /// The version an earlier commit with the same key made: nothing
    /// committed now.
    Replayed(Version),
    /// Every change was already so: nothing committed; the head.
    Unchanged(i64),
    /// An expectation did not hold: nothing committed.
    Mismatch { path: String, current: Option<String>, head_version: i64 },
    /// The store is archived (or gone).
    Archived,
    /// The proposal was decided meanwhile.
    Decided,
}

/// A Dream's end, written in one transaction: the Dream completed (only if
/// it is still the running one at `expected_version`, so a cancel that got
/// there first wins), its output store with version 1 (the copy) and
/// either version 2 or a review proposal, and the store's event.
#[derive(Debug, Clone)]
pub struct DreamOutput {
    pub dream: Dream,
    pub expected_version: i64,
    pub store: Store,
    pub copy: Commit,
    pub changes: Option<Commit>,
    pub proposal: Option<Proposal>,
    pub events: Vec<Record>,
}

/// Filters for listing stores.
#[derive(Debug, Clone, Default)]
pub struct StoreFilter {
    pub environment_id: Option<String>,
    pub owner_kind: Option<String>,
    pub owner_id: Option<String>,
    pub include_archived: bool,
}

#[async_trait::async_trait]
pub trait MemoryDb: Send + Sync + 'static {
    async fn insert_store(&self, s: &Store, events: &[Record]) -> Result<()>;
    /// Writes `s` if the stored row is at `expected_version`; false when it
    /// moved.
    async fn update_store(&self, s: &Store, expected_version: i64, events: &[Record]) -> Result<bool>;
    async fn get_store(&self, id: &str) -> Result<Option<Store>>;
    /// Newest first.
    async fn list_stores(&self, filter: &StoreFilter, page: &PageRequest) -> Result<Vec<Store>>;
    /// Removes an archived store at `expected_version` with everything it
    /// holds (content shared by digest stays); false when it moved.
    async fn delete_store(&self, id: &str, expected_version: i64, events: &[Record]) -> Result<bool>;

    /// A path as of `at` (`None`: the head); `None` when absent then.
    async fn document(&self, store_id: &str, path: &str, at: Option<i64>) -> Result<Option<DocumentMeta>>;
    /// Paths under `prefix` after `after`, by path, as of `at`.
    async fn documents(&self, store_id: &str, prefix: &str, at: Option<i64>, after: &str, limit: i64) -> Result<Vec<DocumentMeta>>;
    /// Content by digest: `Some(None)` when it lives in the blob store.
    async fn content(&self, sha256: &str) -> Result<Option<Option<String>>>;
    /// Records content without committing anything (a proposal's).
    async fn put_contents(&self, contents: &[Content]) -> Result<()>;

    async fn commit(&self, c: &Commit) -> Result<Committed>;
    /// Newest first, below `before` (`None`: from the head).
    async fn versions(&self, store_id: &str, before: Option<i64>, limit: i64) -> Result<Vec<Version>>;
    async fn version(&self, store_id: &str, n: i64) -> Result<Option<Version>>;

    async fn insert_proposal(&self, p: &Proposal) -> Result<()>;
    /// Inserts `p` unless a proposal of its store holds `key`: answers
    /// the one that does, or `p`.
    async fn propose_once(&self, p: &Proposal, key: &str) -> Result<Proposal>;
    async fn get_proposal(&self, id: &str) -> Result<Option<Proposal>>;
    /// Newest first; `status` empty for all.
    async fn list_proposals(&self, store_id: &str, status: &str, page: &PageRequest) -> Result<Vec<Proposal>>;
    /// Rejects an open proposal; false when it was decided meanwhile.
    async fn reject_proposal(&self, d: &Decision, now_ms: i64) -> Result<bool>;

    /// Remembers that a Session mounted the store (idempotent).
    async fn record_mount(&self, store_id: &str, session_id: &str) -> Result<()>;
    /// The Sessions that mounted the store.
    async fn mounting_sessions(&self, store_id: &str) -> Result<Vec<String>>;

    async fn insert_dream(&self, d: &Dream) -> Result<()>;
    async fn get_dream(&self, id: &str) -> Result<Option<Dream>>;
    /// Newest first.
    async fn list_dreams(&self, filter: &DreamFilter, page: &PageRequest) -> Result<Vec<Dream>>;
    /// Writes `d` if the stored row is at `expected_version`.
    async fn update_dream(&self, d: &Dream, expected_version: i64) -> Result<bool>;
    /// A Dream to run: the oldest pending one, or a running one whose
    /// worker's lease ran out (its worker died); `None` when there is none.
    async fn next_dream(&self, now_ms: i64) -> Result<Option<Dream>>;
    /// False (and nothing written) when the Dream moved meanwhile.
    async fn complete_dream(&self, out: &DreamOutput) -> Result<bool>;
}
