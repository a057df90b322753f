//! Dream domain types (api.md §13.5).

use serde::{Deserialize, Serialize};

/// The most Sessions one Dream reads.
pub const MAX_SESSIONS: usize = 100;
/// The longest `instructions`, in bytes.
pub const MAX_INSTRUCTIONS_BYTES: usize = 64 * 1024;
/// How long a worker owns a running Dream before another may take it over
/// (a worker that died mid-run).
pub const LEASE_MS: i64 = 5 * 60 * 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DreamStatus {
    Pending,
    Running,
    Completed,
    Failed,
    Canceled,
}

impl DreamStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DreamStatus::Pending => "pending",
            DreamStatus::Running => "running",
            DreamStatus::Completed => "completed",
            DreamStatus::Failed => "failed",
            DreamStatus::Canceled => "canceled",
        }
    }

    pub fn parse(field: &str, s: &str) -> checkfu_core::Result<Self> {
        [DreamStatus::Pending, DreamStatus::Running, DreamStatus::Completed, DreamStatus::Failed, DreamStatus::Canceled]
            .into_iter()
            .find(|x| x.as_str() == s)
            .ok_or_else(|| {
                checkfu_core::Error::invalid_field(
                    field,
                    format!("{field} must be pending, running, completed, failed or canceled, got {s:?}"),
                )
            })
    }

    pub fn terminal(self) -> bool {
        matches!(self, DreamStatus::Completed | DreamStatus::Failed | DreamStatus::Canceled)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DreamMode {
    /// No model: collapse equal documents and repeated lines.
    Deterministic,
    /// The profile's model reads the Sessions first.
    Model,
}

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
