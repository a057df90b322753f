//! AutomationGraphs (api.md §12.7): documents with immutable revisions that
//! compile, by `plan` and `apply`, into an ordinary Automation
//! (`managed_by.kind:"graph"`). `document.rs` reads a document, `plan.rs`
//! checks and compiles it, `service.rs` holds the endpoints' logic,
//! `answers.rs` makes the typed answers (and `wire.rs` their 0.1.0 text),
//! `checks.rs` reads typed Checks and their rules, `memory_nodes.rs`
//! and `history_nodes.rs` Memory and history nodes, `skill_nodes.rs` Skill
//! nodes, `retry.rs` authored retries, and `rule_test.rs` tries a rule offline.

pub mod answers;
pub mod checks;
pub mod document;
pub mod history_nodes;
pub mod memory_nodes;
pub mod node_parts;
pub mod plan;
pub mod retry;
pub mod rule_test;
pub mod service;
pub mod skill_nodes;
pub mod wire;

use checkfu_core::id::{ApplicationId, EnvironmentId, GraphId, PrincipalId};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    pub id: GraphId,
    pub environment_id: EnvironmentId,
    /// The latest revision's document name.
    pub name: String,
    pub service_principal_id: PrincipalId,
    /// Attribution only: the caller or a Principal it may act as.
    pub created_by_principal_id: String,
    pub latest_revision: i64,
    /// 0 until the first apply.
    pub applied_revision: i64,
    /// The plan that apply wrote (drift compares a fresh plan with it).
    pub applied_plan_sha256: String,
    /// Empty until the first apply.
    pub automation_id: String,
    pub layout: Value,
    pub version: i64,
    pub deleted_ms: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// An immutable revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    pub graph_id: GraphId,
    pub revision: i64,
    pub document: Value,
    pub document_sha256: String,
    pub layout: Value,
    pub created_by: String,
    pub created_ms: i64,
}

/// One apply, in the graph's journal.
#[derive(Debug, Clone, PartialEq)]
pub struct Application {
    pub id: ApplicationId,
    pub graph_id: GraphId,
    pub revision: i64,
    pub plan_sha256: String,
    pub automation_id: String,
    /// `create`, `update` or `unchanged`.
    pub action: String,
    pub applied_by: String,
    pub created_ms: i64,
}

impl Application {
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "id": self.id, "graph_id": self.graph_id, "revision": self.revision, "plan_sha256": self.plan_sha256,
            "automation_id": self.automation_id, "action": self.action, "applied_by": self.applied_by,
            "created_at": checkfu_core::time::rfc3339(self.created_ms),
        })
    }
}
