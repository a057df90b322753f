//! A firing as the scheduler keeps it: one execution of an Automation,
//! with a steps target's program and its progress.

use crate::model::{FiringSource, FiringState, Usage};
use crate::program::Program;
use checkfu_core::id::{AutomationId, EnvironmentId, FiringId};
use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq)]
pub struct Firing {
    pub id: FiringId,
    pub automation_id: AutomationId,
    pub environment_id: EnvironmentId,
    pub source: FiringSource,
    pub event: Value,
    pub scheduled_for_ms: i64,
    pub dedupe_value: String,
    pub actor_principal_id: String,
    pub automation_version: i64,
    pub state: FiringState,
    pub child_session_ids: Vec<String>,
    pub usage: Usage,
    /// `{reason, message}` once it failed or was skipped.
    pub error: Option<Value>,
    pub created_ms: i64,
    pub settled_ms: i64,
    /// A steps target's program and progress (`None`: an Agent target).
    pub program: Option<Program>,
    /// `{graph_id, revision}` when a graph's Automation fired it, else null.
    pub graph: Value,
    /// The WebhookSource a provider delivery fired it through, else empty.
    pub webhook_source_id: String,
    /// Bumped by each program write (a compare-and-set).
    pub version: i64,
}

impl Firing {
    pub fn settle(&mut self, state: FiringState, error: Option<(&str, String)>, now_ms: i64) {
        self.state = state;
        self.error = error.map(|(reason, message)| json!({"reason": reason, "message": message}));
        self.settled_ms = now_ms;
    }

    pub fn failed_or_skipped(&self) -> bool {
        matches!(self.state, FiringState::Failed | FiringState::Skipped)
    }
}
