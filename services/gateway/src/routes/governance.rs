//! ActionPolicies, the `evaluate` dry run, and the audit trail.

use super::{InEnvironment, Paging, created};
use crate::AppState;
use crate::auth::Caller;
use crate::bodies::{self, parse};
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query};
use crate::idempotency::once;
use crate::views::{self, ErrorEnvelope, Page};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use checkfu_core::Error;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::sessions::v1 as ss;
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;

type J<T> = ApiResult<Json<T>>;

async fn policy_for(st: &AppState, id: &str) -> ApiResult<gov::ActionPolicy> {
    checkfu_core::id::PolicyId::check("id", id)?;
    Ok(st.gov.clone().get_action_policy(gov::GetByIdRequest { id: id.into() }).await?.into_inner())
}

#[utoipa::path(post, path = "/v1/action-policies", tag = "actionPolicies", operation_id = "actionPolicies.createActionPolicy", params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::CreateActionPolicy,
    responses((status = 201, body = views::ActionPolicy), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_policy(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let b: bodies::CreateActionPolicy = parse(&body)?;
    st.require_manage(&caller, &b.environment_id).await?;
    // `rules_json` too, for a 0.1.0 governance until the release after it.
    #[allow(deprecated)]
    let req = gov::CreateActionPolicyRequest {
        environment_id: b.environment_id,
        name: b.name,
        rules: crate::policy_rules::to_wire(&b.rules)?,
        rules_json: Value::Array(b.rules).to_string(),
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/action-policies", &body, || async {
        created(views::action_policy(&st.gov.clone().create_action_policy(req).await?.into_inner()))
    })
    .await
}

#[utoipa::path(get, path = "/v1/action-policies", tag = "actionPolicies", operation_id = "actionPolicies.listActionPolicies", params(Paging, InEnvironment),
    responses((status = 200, body = Page<views::ActionPolicy>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_policies(
    State(st): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(env): Query<InEnvironment>,
) -> J<Page<views::ActionPolicy>> {
    let envs = st.readable_envs(&caller, env.environment_id.as_deref()).await?;
    let r = st
        .gov
        .clone()
        .list_action_policies(gov::ListActionPoliciesRequest {
            environment_ids: envs,
            limit: paging.limit(),
            page: paging.page(),
            name: String::new(),
        })
        .await?
        .into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::action_policy)))
}

#[utoipa::path(get, path = "/v1/action-policies/{id}", tag = "actionPolicies", operation_id = "actionPolicies.getActionPolicy", params(("id" = String, Path)),
    responses((status = 200, body = views::ActionPolicy), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_policy(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::ActionPolicy> {
    let p = policy_for(&st, &id).await?;
    st.require_read(&caller, &p.environment_id).await?;
    Ok(Json(views::action_policy(&p)))
}

#[utoipa::path(post, path = "/v1/action-policies/{id}", tag = "actionPolicies", operation_id = "actionPolicies.updateActionPolicy", params(("id" = String, Path)), request_body = bodies::UpdateActionPolicy,
    responses((status = 200, body = views::ActionPolicy), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_policy(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> J<views::ActionPolicy> {
    let p = policy_for(&st, &id).await?;
    st.require_manage(&caller, &p.environment_id).await?;
    let b: bodies::UpdateActionPolicy = parse(&body)?;
    let rules = b.rules.as_deref().map(crate::policy_rules::to_wire).transpose()?;
    // `rules_json` too, for a 0.1.0 governance until the release after it.
    #[allow(deprecated)]
    let req = gov::UpdateActionPolicyRequest {
        id,
        name: b.name,
        rules: rules.map(|rules| gov::PolicyRules { rules }),
        rules_json: b.rules.map(|r| Value::Array(r).to_string()),
        expected_version: b.expected_version,
        actor_id: caller.principal_id,
    };
    Ok(Json(views::action_policy(&st.gov.clone().update_action_policy(req).await?.into_inner())))
}

#[utoipa::path(delete, path = "/v1/action-policies/{id}", tag = "actionPolicies", operation_id = "actionPolicies.deleteActionPolicy", params(("id" = String, Path)),
    responses((status = 200, body = views::ActionPolicy), (status = "4XX", body = ErrorEnvelope)))]
pub async fn delete_policy(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::ActionPolicy> {
    let p = policy_for(&st, &id).await?;
    st.require_manage(&caller, &p.environment_id).await?;
    Ok(Json(views::action_policy(
        &st.gov.clone().delete_action_policy(gov::ActorRequest { id, actor_id: caller.principal_id }).await?.into_inner(),
    )))
}

#[utoipa::path(post, path = "/v1/action-policies/evaluate", tag = "actionPolicies", operation_id = "actionPolicies.evaluateActionPolicies", request_body = bodies::EvaluateAction,
    responses((status = 200, description = "What the Environment's policies decide; nothing is recorded", body = views::Evaluation), (status = "4XX", body = ErrorEnvelope)))]
pub async fn evaluate(State(st): State<AppState>, caller: Caller, JsonBody(body): JsonBody) -> J<views::Evaluation> {
    let b: bodies::EvaluateAction = parse(&body)?;
    let env = match (&b.environment_id, b.resource.kind.as_str()) {
        (Some(e), _) => e.clone(),
        (None, "environment") => b.resource.id.clone(),
        (None, "agent") => {
            checkfu_core::id::AgentId::check("resource.id", &b.resource.id)?;
            st.sessions.clone().get_agent(ss::GetByIdRequest { id: b.resource.id.clone() }).await?.into_inner().environment_id
        }
        (None, _) => return Err(Error::invalid_field("environment_id", "name the Environment whose policies apply").into()),
    };
    checkfu_core::id::EnvironmentId::check("environment_id", &env)?;
    st.require_read(&caller, &env).await?;
    // `tool_json` too, for a 0.1.0 governance until the release after it.
    #[allow(deprecated)]
    let req = gov::EvaluateActionRequest {
        environment_id: env,
        subject: Some(gov::ResourceRef { kind: b.subject.kind, id: b.subject.id }),
        resource: Some(gov::ResourceRef { kind: b.resource.kind, id: b.resource.id }),
        permission: b.permission,
        tool: Some(gov::CalledTool::from_declaration(&b.tool)),
        tool_json: b.tool.to_string(),
        ..Default::default()
    };
    let d = st.gov.clone().evaluate_action(req).await?.into_inner();
    Ok(Json(views::Evaluation { disposition: d.disposition, matched_rule_ids: d.matched_rule_ids, reason: d.reason }))
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    #[serde(default)]
    resource_id: String,
    #[serde(default)]
    actor_id: String,
}

/// The append-only audit trail: grants, revocations, policy and identity
/// changes. Installation admins only.
#[utoipa::path(get, path = "/v1/audit-events", tag = "auditEvents", operation_id = "auditEvents.listAuditEvents", params(AuditQuery, Paging),
    responses((status = 200, body = Page<views::AuditEvent>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_audit(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<AuditQuery>,
    paging: Paging,
) -> J<Page<views::AuditEvent>> {
    st.require_admin(&caller).await?;
    let req = gov::ListAuditEventsRequest { resource_id: q.resource_id, actor_id: q.actor_id, limit: paging.limit(), page: paging.page() };
    let r = st.gov.clone().list_audit_events(req).await?.into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::audit_event)))
}
