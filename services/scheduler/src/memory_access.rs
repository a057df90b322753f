//! What a Memory step (api.md §18.7) sends and what it got back: the work
//! the service sends to the memory service, its answer, and the receipt a
//! program keeps of each (no content). The rules that move a program on
//! with them are in `memory_steps.rs`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One Memory step's attempt as it ended: the trace's receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryAccess {
    pub step_id: String,
    pub attempt: i64,
    pub memory_store_id: String,
    pub path: String,
    /// `read` or `write`.
    pub operation: String,
    /// `read`, `written`, `proposed` or `failed`.
    pub result: String,
    pub store_version: Option<i64>,
    pub content_sha256: Option<String>,
    pub memory_proposal_id: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    pub at_ms: i64,
}

/// A Memory step to send.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryWork {
    pub step_id: String,
    pub attempt: i64,
    pub store: String,
    pub path: String,
    pub at_version: Option<i64>,
    /// A write's content and the sha it expects (`None`: absent).
    pub write: Option<(String, Option<String>)>,
}

/// What the memory service answered.
#[derive(Debug, Clone, PartialEq)]
pub enum MemoryAnswer {
    /// Read or written: `{store_version, document}` as the API shows it.
    Document {
        store_version: i64,
        document: Value,
    },
    Proposed {
        memory_proposal_id: String,
    },
    /// `memory_document_not_found`, `memory_sha_mismatch`,
    /// `memory_unavailable` (retried if authored), `permission_denied`,
    /// `memory_store_archived`, `memory_write_refused`.
    Failed(String),
}
