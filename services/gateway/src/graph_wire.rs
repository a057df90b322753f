//! The shapes AutomationGraph routes answer (api.md §12.7), for the OpenAPI
//! document: the scheduler renders them as JSON and the gateway passes that
//! on, so these types describe the answer rather than build it. schemathesis
//! checks every answer against them in CI, and the SDK's types come from
//! them.

#![allow(dead_code, reason = "response shapes for the OpenAPI document; the scheduler renders the JSON")]

use serde_json::Value;
use utoipa::ToSchema;

/// An AutomationGraph: authored intent, planned and applied into an Automation.
#[derive(ToSchema)]
pub struct AutomationGraph {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    pub service_principal_id: String,
    pub created_by_principal_id: String,
    pub latest_revision: i64,
    /// The revision last applied; null before the first apply.
    pub applied_revision: Option<i64>,
    /// The Automation it manages; null before the first apply.
    pub automation_id: Option<String>,
    /// The latest layout (node positions and the like).
    #[schema(value_type = Object)]
    pub layout: Value,
    pub drift: GraphDrift,
    pub version: i64,
    pub created_at: String,
    pub updated_at: String,
    /// On create and revise: the revision written (or, with the same
    /// document as the latest, the latest).
    pub revision: Option<AutomationGraphRevision>,
}

/// Whether the applied Automation still matches what its revision plans to.
#[derive(ToSchema)]
pub struct GraphDrift {
    /// `not_applied`, `in_sync` or `drifted`.
    pub state: String,
    /// `{code, detail?, node?}` for each difference.
    #[schema(value_type = Vec<Object>)]
    pub reasons: Vec<Value>,
}

/// One immutable revision: its `document` and `layout` are the export.
#[derive(ToSchema)]
pub struct AutomationGraphRevision {
    pub graph_id: String,
    pub revision: i64,
    /// `{name, environment_id, service_principal_id, nodes, edges}` as saved.
    #[schema(value_type = Object)]
    pub document: Value,
    pub document_sha256: String,
    #[schema(value_type = Object)]
    pub layout: Value,
    pub created_by: String,
    pub created_at: String,
}

/// A plan of one revision against what is live: `planned` (with its digest,
/// pins, blockers and readiness) or `rejected` (with its errors).
#[derive(ToSchema)]
pub struct GraphPlan {
    /// `planned` or `rejected`.
    pub kind: String,
    pub graph_id: String,
    pub revision: i64,
    /// On `rejected`: `{code, detail, node?, edge?}` for each error, drawn
    /// on the node or edge it names.
    #[schema(value_type = Option<Vec<Object>>)]
    pub errors: Option<Vec<Value>>,
    /// On `planned`: what apply must be given.
    pub plan_sha256: Option<String>,
    /// On `planned`: `{id, action}`, the Automation and what apply does to it.
    #[schema(value_type = Option<Object>)]
    pub automation: Option<Value>,
    /// On `planned`: `agent` or `steps`.
    pub target_kind: Option<String>,
    /// On `planned`: each Agent node's pinned version and deployment.
    #[schema(value_type = Option<Vec<Object>>)]
    pub pins: Option<Vec<Value>>,
    /// On `planned`: what stops apply, as errors are.
    #[schema(value_type = Option<Vec<Object>>)]
    pub blockers: Option<Vec<Value>>,
    /// On `planned`: the Automation's readiness if applied now.
    #[schema(value_type = Option<Object>)]
    pub readiness: Option<Value>,
    /// On `planned`: inputs apply takes (`ingest_secret`).
    #[schema(value_type = Option<Vec<Object>>)]
    pub required_inputs: Option<Vec<Value>>,
}

/// One apply of a revision.
#[derive(ToSchema)]
pub struct GraphApplication {
    pub id: String,
    pub graph_id: String,
    pub revision: i64,
    pub plan_sha256: String,
    pub automation_id: String,
    /// `create`, `update` or `unchanged`.
    pub action: String,
    pub applied_by: String,
    pub created_at: String,
}

/// What an apply did.
#[derive(ToSchema)]
pub struct GraphApplied {
    pub graph_id: String,
    pub revision: i64,
    pub application: GraphApplication,
    pub automation_id: String,
    /// `create`, `update` or `unchanged`.
    pub action: String,
    /// Generated for a webhook trigger when none was given: shown this once.
    pub ingest_secret: Option<String>,
}

/// A node test (`prompt_preview`): the Agent block's prompt rendered from an
/// event, and what a Session to run it once would pin.
#[derive(ToSchema)]
pub struct NodeTestPreview {
    /// `prompt_preview`.
    pub mode: String,
    pub graph_id: String,
    pub revision: i64,
    pub node: String,
    /// `literal`, `event_template` or `previous_output`.
    pub prompt_source: String,
    pub rendered_prompt: String,
    /// `{{event.x}}` references the event did not hold.
    pub missing_event_references: Vec<String>,
    pub agent_id: Option<String>,
    pub agent_version: Option<i64>,
    pub agent_deployment_id: String,
    pub environment_id: String,
}
