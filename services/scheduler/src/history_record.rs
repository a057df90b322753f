//! What a history step (api.md §18.7) runs and what came of it: the work,
//! its answer, and the receipt a program keeps. The rules that move a
//! program on with them are in `history_steps.rs`.

use serde::{Deserialize, Serialize};

/// One history step as it ended: the trace's receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryReceipt {
    pub step_id: String,
    /// `select` or `record`.
    pub operation: String,
    pub frontier: String,
    /// The frontier's position the selection started after (`""`: none).
    pub base: String,
    /// The last Session selected (`base` when none was).
    pub through: String,
    pub session_ids: Vec<String>,
    /// `selected`, `moved` or `failed`.
    pub result: String,
    pub error: Option<String>,
    pub at_ms: i64,
}

/// A history step to run.
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryWork {
    Select { step_id: String, frontier: String, agents: Vec<String>, limit: i64 },
    Record { step_id: String, frontier: String, base: String, through: String, session_ids: Vec<String> },
}

impl HistoryWork {
    pub fn step_id(&self) -> &str {
        match self {
            HistoryWork::Select { step_id, .. } | HistoryWork::Record { step_id, .. } => step_id,
        }
    }
}

/// What running it came to.
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryAnswer {
    Selected {
        base: String,
        session_ids: Vec<String>,
    },
    Moved,
    /// `frontier_moved` (a record), `history_unavailable`.
    Failed(String),
}
