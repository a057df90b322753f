//! Dream domain types (api.md §13.5).

use serde::{Deserialize, Serialize};

/// The most Sessions one Dream reads.
pub const MAX_SESSIONS: usize = 100;
/// The longest `instructions`, in bytes.
pub const MAX_INSTRUCTIONS_BYTES: usize = 64 * 1024;
/// How long a worker owns a running Dream before another may take it over
/// (a worker that died mid-run).
pub const LEASE_MS: i64 = 5 * 60 * 1000;

checkfu_core::string_enum!(DreamStatus {
    Pending = "pending",
    Running = "running",
    Completed = "completed",
    Failed = "failed",
    Canceled = "canceled",
});

impl DreamStatus {
    pub fn terminal(self) -> bool {
        matches!(self, DreamStatus::Completed | DreamStatus::Failed | DreamStatus::Canceled)
    }
}

checkfu_core::string_enum!(
    /// `deterministic`: no model, equal documents and repeated lines
    /// collapse; `model`: the profile's model reads the Sessions first.
    DreamMode { Deterministic = "deterministic", Model = "model" }
);

/// What a Dream did, in counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DreamStats {
    pub documents_read: i64,
    pub sessions_read: i64,
    pub messages_read: i64,
    pub documents_written: i64,
    pub documents_removed: i64,
    pub duplicate_documents_removed: i64,
    pub duplicate_lines_removed: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DreamUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_micro_usd: i64,
}

/// Why a Dream failed, as the API's error object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DreamError {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dream {
    pub id: String,
    pub environment_id: String,
    pub status: DreamStatus,
    pub mode: DreamMode,
    pub input_store_id: String,
    pub input_store_version: i64,
    pub session_ids: Vec<String>,
    pub routing_profile_id: Option<String>,
    pub instructions: String,
    pub review: bool,
    /// Minted at creation, so a run taken over after a crash makes the same
    /// store (and its copied rows are not doubled); shown once completed.
    pub output_store_id: String,
    pub output_proposal_id: Option<String>,
    pub stats: DreamStats,
    pub usage: DreamUsage,
    pub error: Option<DreamError>,
    pub created_by: String,
    pub created_ms: i64,
    pub started_ms: i64,
    pub ended_ms: i64,
    pub archived_ms: i64,
    /// The worker that owns a running Dream, until `lease_expires_ms`.
    pub lease_holder: String,
    pub lease_expires_ms: i64,
    pub version: i64,
}

/// Filters for listing Dreams.
#[derive(Debug, Clone, Default)]
pub struct DreamFilter {
    pub environment_ids: Vec<String>,
    pub status: Option<DreamStatus>,
    pub include_archived: bool,
}
