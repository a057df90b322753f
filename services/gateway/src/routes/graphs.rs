//! AutomationGraphs (api.md §12.7): writes, plan, apply and node tests need
//! `manage` on the Environment, reads and rule tests (offline, recording
//! nothing) `read` (else 404); creating one also
//! needs `act_as` on its service Principal, and `created_by_principal_id`
//! must be the caller or a Principal it may act as (403). The scheduler
//! answers each resource as its API JSON.

use super::{InEnvironment, Paging};
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query};
use crate::idempotency::once;
use crate::views::ErrorEnvelope;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use checkfu_core::Error;
use checkfu_proto::scheduler::v1 as pb;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;

type J = ApiResult<Json<Value>>;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateGraph {
    /// The caller or a Principal it may act as: attribution, not authority.
    pub created_by_principal_id: String,
    /// `{name, environment_id, service_principal_id, nodes, edges}`.
    #[schema(value_type = Object)]
    pub document: Value,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub layout: Option<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviseGraph {
    #[schema(value_type = Object)]
    pub document: Value,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub layout: Option<Value>,
    #[serde(default)]
    pub expected_version: Option<i64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanGraph {
    pub revision: i64,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyInputs {
    /// 32–256 printable ASCII; generated (and shown once) when a webhook
    /// trigger needs one and the Automation has none.
    #[serde(default)]
    pub ingest_secret: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyGraph {
    pub revision: i64,
    /// The `plan_sha256` of the plan being applied (409 `plan_stale` when
    /// planning now gives another).
    pub plan_sha256: String,
    #[serde(default)]
    pub inputs: Option<ApplyInputs>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeTest {
    /// `prompt_preview`.
    pub mode: String,
    pub revision: i64,
    pub node: String,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub event: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub previous_output: Option<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleTestBody {
    /// A `check` or `check_result` Decision, or a `step_check`.
    pub node: String,
    /// Each of the Check's question names (at most 16) to `yes`, `no` or
    /// `uncertain`.
    #[schema(value_type = std::collections::BTreeMap<String, RuleAnswer>)]
    pub answers: Value,
}

/// An answer to one of a Check's questions (and a verdict).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuleAnswer {
    Yes,
    No,
    Uncertain,
}

fn body<T: serde::de::DeserializeOwned>(v: &Value) -> ApiResult<T> {
    Ok(crate::bodies::parse(v)?)
}

fn answer(a: pb::GraphAnswer) -> ApiResult<Value> {
    Ok(crate::graph_wire::answer(a)?)
}

/// The graph, if the caller may read its Environment (else 404).
async fn readable(st: &AppState, caller: &Caller, id: &str) -> ApiResult<pb::GraphAnswer> {
    checkfu_core::id::GraphId::check("id", id)?;
    let g = st.scheduler.clone().get_graph(pb::GetByIdRequest { id: id.into() }).await?.into_inner();
    if st.allowed(&caller.principal_id, "read", "environment", &g.environment_id, &g.environment_id).await? {
        Ok(g)
    } else {
        Err(Error::not_found("automation_graph", id).into())
    }
}

async fn writable(st: &AppState, caller: &Caller, id: &str) -> ApiResult<pb::GraphAnswer> {
    let g = readable(st, caller, id).await?;
    st.require(caller, "manage", "environment", &g.environment_id, &g.environment_id).await?;
    Ok(g)
}

#[utoipa::path(post, path = "/v1/automation-graphs", tag = "automationGraphs", operation_id = "automationGraphs.createAutomationGraph", params(crate::idempotency::IdempotencyKeyHeader), request_body = CreateGraph,
    responses((status = 201, description = "The graph with its revision 1", body = crate::graph_wire::AutomationGraph), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_graph(State(st): State<AppState>, caller: Caller, headers: HeaderMap, JsonBody(raw): JsonBody) -> ApiResult<Response> {
    let b: CreateGraph = body(&raw)?;
    let created_by = b.created_by_principal_id;
    let env = b.document.get("environment_id").and_then(Value::as_str).unwrap_or_default().to_string();
    let svc = b.document.get("service_principal_id").and_then(Value::as_str).unwrap_or_default().to_string();
    st.require_manage(&caller, &env).await?;
    crate::authz::require_speaks_for(&st, &caller, &svc, "document.service_principal_id").await?;
    crate::authz::require_speaks_for(&st, &caller, &created_by, "created_by_principal_id").await?;
    let req = pb::CreateGraphRequest {
        created_by_principal_id: created_by,
        document_json: b.document.to_string(),
        layout_json: b.layout.map(|l| l.to_string()).unwrap_or_else(|| "{}".into()),
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/automation-graphs", &raw, || async {
        let a = st.scheduler.clone().create_graph(req).await?.into_inner();
        Ok((StatusCode::CREATED, answer(a)?))
    })
    .await
}

#[utoipa::path(get, path = "/v1/automation-graphs", tag = "automationGraphs", operation_id = "automationGraphs.listAutomationGraphs", params(Paging, InEnvironment),
    responses((status = 200, description = "Newest first", body = crate::views::Page<crate::graph_wire::AutomationGraph>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_graphs(State(st): State<AppState>, caller: Caller, paging: Paging, Query(env): Query<InEnvironment>) -> J {
    let envs = st.readable_envs(&caller, env.environment_id.as_deref()).await?;
    let req = pb::ListGraphsRequest { environment_ids: envs, limit: paging.limit(), page: paging.page() };
    let r = st.scheduler.clone().list_graphs(req).await?.into_inner();
    Ok(Json(list(r)?))
}

fn list(r: pb::ListGraphsResponse) -> ApiResult<Value> {
    Ok(crate::graph_wire::page(r)?)
}

#[utoipa::path(get, path = "/v1/automation-graphs/{id}", tag = "automationGraphs", operation_id = "automationGraphs.getAutomationGraph", params(("id" = String, Path)),
    responses((status = 200, body = crate::graph_wire::AutomationGraph), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_graph(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J {
    Ok(Json(answer(readable(&st, &caller, &id).await?)?))
}

/// Deletes the graph and the Automation it manages.
#[utoipa::path(delete, path = "/v1/automation-graphs/{id}", tag = "automationGraphs", operation_id = "automationGraphs.deleteAutomationGraph", params(("id" = String, Path)),
    responses((status = 200, body = crate::graph_wire::AutomationGraph), (status = "4XX", body = ErrorEnvelope)))]
pub async fn delete_graph(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J {
    writable(&st, &caller, &id).await?;
    let a = st.scheduler.clone().delete_graph(pb::ActorRequest { id, actor_id: caller.principal_id }).await?.into_inner();
    Ok(Json(answer(a)?))
}

/// A new revision (201), or the same document as the latest (200: only
/// `layout` changes).
#[utoipa::path(post, path = "/v1/automation-graphs/{id}/revisions", tag = "automationGraphs", operation_id = "automationGraphs.createAutomationGraphRevision", params(crate::idempotency::IdempotencyKeyHeader, ("id" = String, Path)), request_body = ReviseGraph,
    responses((status = 201, description = "Revision n+1", body = crate::graph_wire::AutomationGraph), (status = 200, description = "The document is the latest's", body = crate::graph_wire::AutomationGraph),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn revise_graph(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBody(raw): JsonBody,
) -> ApiResult<Response> {
    let b: ReviseGraph = body(&raw)?;
    writable(&st, &caller, &id).await?;
    let route = format!("POST /v1/automation-graphs/{id}/revisions");
    let req = pb::ReviseGraphRequest {
        id,
        document_json: b.document.to_string(),
        layout_json: b.layout.map(|l| l.to_string()),
        expected_version: b.expected_version,
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, &route, &raw, || async {
        let a = st.scheduler.clone().revise_graph(req).await?.into_inner();
        let status = if a.created { StatusCode::CREATED } else { StatusCode::OK };
        Ok((status, answer(a)?))
    })
    .await
}

#[utoipa::path(get, path = "/v1/automation-graphs/{id}/revisions", tag = "automationGraphs", operation_id = "automationGraphs.listAutomationGraphRevisions", params(("id" = String, Path), Paging),
    responses((status = 200, description = "Newest first", body = crate::views::Page<crate::graph_wire::AutomationGraphRevision>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_revisions(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, paging: Paging) -> J {
    readable(&st, &caller, &id).await?;
    let req = pb::ListGraphItemsRequest { id, limit: paging.limit(), page: paging.page() };
    Ok(Json(list(st.scheduler.clone().list_graph_revisions(req).await?.into_inner())?))
}

/// One revision: its `document` and `layout` are the export.
#[utoipa::path(get, path = "/v1/automation-graphs/{id}/revisions/{n}", tag = "automationGraphs", operation_id = "automationGraphs.getAutomationGraphRevision", params(("id" = String, Path), ("n" = i64, Path)),
    responses((status = 200, body = crate::graph_wire::AutomationGraphRevision), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_revision(State(st): State<AppState>, caller: Caller, Path((id, n)): Path<(String, String)>) -> J {
    let n: i64 = n.parse().ok().filter(|n| *n >= 1).ok_or_else(|| Error::invalid_field("n", "a revision number is 1 or more"))?;
    readable(&st, &caller, &id).await?;
    Ok(Json(answer(st.scheduler.clone().get_graph_revision(pb::GraphRevisionRequest { id, revision: n }).await?.into_inner())?))
}

/// `planned` (with pins, blockers, readiness and `plan_sha256`) or
/// `rejected` (with errors): a validation result that records nothing.
#[utoipa::path(post, path = "/v1/automation-graphs/{id}/plan", tag = "automationGraphs", operation_id = "automationGraphs.planAutomationGraph", params(("id" = String, Path)), request_body = PlanGraph,
    responses((status = 200, body = crate::graph_wire::GraphPlan), (status = "4XX", body = ErrorEnvelope)))]
pub async fn plan_graph(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, JsonBody(raw): JsonBody) -> J {
    let b: PlanGraph = body(&raw)?;
    writable(&st, &caller, &id).await?;
    Ok(Json(answer(st.scheduler.clone().plan_graph(pb::GraphRevisionRequest { id, revision: b.revision }).await?.into_inner())?))
}

/// Writes the planned Automation (`create`, `update` or `unchanged`);
/// 409 `plan_rejected`, `plan_blocked` or `plan_stale`.
#[utoipa::path(post, path = "/v1/automation-graphs/{id}/apply", tag = "automationGraphs", operation_id = "automationGraphs.applyAutomationGraph", params(("id" = String, Path)), request_body = ApplyGraph,
    responses((status = 200, body = crate::graph_wire::GraphApplied), (status = "4XX", body = ErrorEnvelope)))]
pub async fn apply_graph(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, JsonBody(raw): JsonBody) -> J {
    let b: ApplyGraph = body(&raw)?;
    writable(&st, &caller, &id).await?;
    let req = pb::ApplyGraphRequest {
        id,
        revision: b.revision,
        plan_sha256: b.plan_sha256,
        ingest_secret: b.inputs.and_then(|i| i.ingest_secret),
        actor_id: caller.principal_id,
    };
    Ok(Json(answer(st.scheduler.clone().apply_graph(req).await?.into_inner())?))
}

/// The apply journal, newest first.
#[utoipa::path(get, path = "/v1/automation-graphs/{id}/applications", tag = "automationGraphs", operation_id = "automationGraphs.listAutomationGraphApplications", params(("id" = String, Path), Paging),
    responses((status = 200, description = "Newest first", body = crate::views::Page<crate::graph_wire::GraphApplication>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_applications(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, paging: Paging) -> J {
    readable(&st, &caller, &id).await?;
    let req = pb::ListGraphItemsRequest { id, limit: paging.limit(), page: paging.page() };
    Ok(Json(list(st.scheduler.clone().list_graph_applications(req).await?.into_inner())?))
}

/// A prompt preview of a `step_agent` node: no Session, model call or record.
#[utoipa::path(post, path = "/v1/automation-graphs/{id}/node-tests", tag = "automationGraphs", operation_id = "automationGraphs.testAutomationGraphNode", params(("id" = String, Path)), request_body = NodeTest,
    responses((status = 200, body = crate::graph_wire::NodeTestPreview), (status = "4XX", body = ErrorEnvelope)))]
pub async fn test_node(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, JsonBody(raw): JsonBody) -> J {
    let b: NodeTest = body(&raw)?;
    writable(&st, &caller, &id).await?;
    let req = pb::GraphNodeTestRequest {
        id,
        mode: b.mode,
        revision: b.revision,
        node: b.node,
        event_json: b.event.filter(|e| !e.is_null()).map(|e| e.to_string()).unwrap_or_default(),
        previous_output_json: b.previous_output.map(|e| e.to_string()).unwrap_or_default(),
    };
    Ok(Json(answer(st.scheduler.clone().test_graph_node(req).await?.into_inner())?))
}

/// A Check asks at most this many questions.
const MAX_ANSWERS: usize = 16;

/// A Check's rule on given answers, offline: no model call, evaluator
/// qualification or record, so it needs only `read`.
#[utoipa::path(post, path = "/v1/automation-graphs/{id}/revisions/{n}/test-rule", tag = "automationGraphs", operation_id = "automationGraphs.testAutomationGraphRule", params(("id" = String, Path), ("n" = i64, Path)), request_body = RuleTestBody,
    responses((status = 200, body = crate::graph_wire::RuleTestResult), (status = "4XX", body = ErrorEnvelope)))]
pub async fn test_rule(State(st): State<AppState>, caller: Caller, Path((id, n)): Path<(String, String)>, JsonBody(raw): JsonBody) -> J {
    let n: i64 = n.parse().ok().filter(|n| *n >= 1).ok_or_else(|| Error::invalid_field("n", "a revision number is 1 or more"))?;
    let b: RuleTestBody = body(&raw)?;
    readable(&st, &caller, &id).await?;
    let invalid = || {
        Error::invalid_field("answers", "answers maps each of the Check's (at most 16) question names to yes, no or uncertain")
            .with_reason("answers_invalid")
    };
    let answers = b
        .answers
        .as_object()
        .filter(|a| a.len() <= MAX_ANSWERS)
        .ok_or_else(invalid)?
        .iter()
        .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())).ok_or_else(invalid))
        .collect::<Result<_, _>>()?;
    let req = pb::GraphRuleTestRequest { id, revision: n, node: b.node, answers };
    Ok(Json(answer(st.scheduler.clone().test_graph_rule(req).await?.into_inner())?))
}
