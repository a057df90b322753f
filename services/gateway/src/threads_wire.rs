//! The shapes of a Session's threads and Outcomes (api.md §14–15), for the
//! OpenAPI document: the sessions service renders them as JSON and the
//! gateway passes that on; schemathesis checks every answer against these.

#![allow(dead_code, reason = "response shapes for the OpenAPI document; the sessions service renders the JSON")]

use serde_json::Value;
use utoipa::ToSchema;

/// The agent a thread runs: its version, pinned when the thread began.
#[derive(ToSchema)]
pub struct ThreadAgent {
    pub agent_id: String,
    pub version: i64,
    pub release_sha256: String,
    pub name: String,
}

/// One thread of a Session: the primary (its id derived from the
/// Session's), or a child a coordinator spawned.
#[derive(ToSchema)]
pub struct SessionThread {
    pub id: String,
    /// `session_thread`.
    #[schema(rename = "type")]
    pub kind: String,
    pub session_id: String,
    /// The primary's id for a child; null for the primary.
    pub parent_thread_id: Option<String>,
    pub agent: ThreadAgent,
    /// `idle`, `running`, `rescheduling` or `terminated`.
    pub status: String,
    #[schema(value_type = Option<Object>)]
    pub stop_reason: Option<Value>,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
    #[schema(value_type = Object)]
    pub usage: Value,
    #[schema(value_type = Option<Object>)]
    pub stats: Option<Value>,
}

/// An Outcome: what done means for a Session, graded each iteration.
#[derive(ToSchema)]
pub struct Outcome {
    pub id: String,
    /// `outcome`.
    #[schema(rename = "type")]
    pub kind: String,
    pub session_id: String,
    pub define_event_id: String,
    pub description: String,
    pub rubric: String,
    pub max_iterations: i64,
    /// `{name, question, failure}` each.
    #[schema(value_type = Vec<Object>)]
    pub criteria: Vec<Value>,
    #[schema(value_type = Option<Object>)]
    pub report_declaration: Option<Value>,
    /// `pending`, `running`, `satisfied`, `max_iterations_reached`, `failed` or `interrupted`.
    pub status: String,
    pub reason: Option<String>,
    pub iterations_used: i64,
    #[schema(value_type = Vec<Object>)]
    pub evaluations: Vec<Value>,
    #[schema(value_type = Option<Object>)]
    pub report: Option<Value>,
    #[schema(value_type = Object)]
    pub usage: Value,
    pub created_at: String,
    pub completed_at: Option<String>,
}
