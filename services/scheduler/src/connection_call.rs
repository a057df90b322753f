//! `step_connection` in a program (api.md §18.3): the arguments a step
//! sends, and its ConnectionCall — the record of one `tools/call`, saved
//! with `sent_at` in the write that lets it leave, so a call whose answer
//! never came back is known to be one and is never sent again.
//!
//! A Connection step is `running` while governance decides (then
//! `awaiting_approval` if a person must), `running` again once approved,
//! and settles with its call: `completed` with `{content,
//! structured_content}`, or `failed` — `tool_error` (a definite failure),
//! `call_not_sent` (nothing left; an authored retry may try again) or
//! `effect_indeterminate` (it may have had its effect; never retried).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One `tools/call` of a Connection step's attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectionCall {
    /// `ccall_…`, sent to the server in `_meta`.
    pub id: String,
    pub step_id: String,
    pub attempt: i64,
    pub tool: String,
    pub tool_source_id: String,
    pub connection_id: String,
    pub arguments_sha256: String,
    /// `succeeded` or `failed`; `None` while unanswered and when the
    /// answer is unknown.
    pub status: Option<String>,
    pub error_code: Option<String>,
    pub sent_at_ms: i64,
    /// After this, an unanswered call no replica is waiting on is taken as
    /// indeterminate (the ToolSource's call timeout and a margin).
    pub deadline_ms: i64,
}

impl ConnectionCall {
    /// Whether it ended: answered, or taken as indeterminate.
    pub fn settled(&self) -> bool {
        self.status.is_some() || self.error_code.is_some()
    }
}

/// A Connection step waiting for governance or for its call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallWork {
    pub step_id: String,
    pub attempt: i64,
    pub tool: String,
    pub tool_source_id: String,
    pub connection_id: String,
    pub arguments: Value,
    /// A person approved this attempt's call: governance's first two
    /// checks run again, the approval is not asked for again.
    pub approved: bool,
}

/// How a call ended, as the capability gateway answered it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallAnswer {
    /// `succeeded`, `failed`, `not_sent` or `indeterminate`.
    pub outcome: String,
    pub code: String,
    pub output: Option<Value>,
}
