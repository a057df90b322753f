//! ActionApprovals and StandingApprovals. Anyone who may read an
//! Environment sees its approvals; only holders of `approve` see a pending
//! approval's response token, and only they may respond or revoke.

use super::{InEnvironment, Paging};
use crate::AppState;
use crate::auth::Caller;
use crate::bodies::{self, parse};
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query};
use crate::idempotency::once;
use crate::views::{self, ErrorEnvelope, Page};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use checkfu_core::Error;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::sessions::v1 as ss;
use serde::Deserialize;
use std::collections::BTreeMap;
use utoipa::IntoParams;

type J<T> = ApiResult<Json<T>>;

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ApprovalQuery {
    /// `pending`, `approved`, `denied` or `expired`.
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    environment_id: Option<String>,
}

async fn approval_for(st: &AppState, id: &str) -> ApiResult<gov::ActionApproval> {
    checkfu_core::id::ApprovalId::check("id", id)?;
    Ok(st.gov.clone().get_action_approval(gov::GetByIdRequest { id: id.into() }).await?.into_inner())
}

async fn may_approve(st: &AppState, caller: &Caller, env: &str) -> ApiResult<bool> {
    st.allowed(&caller.principal_id, "approve", "environment", env, env).await
}

#[utoipa::path(get, path = "/v1/action-approvals", tag = "approvals", operation_id = "approvals.listActionApprovals", params(ApprovalQuery, Paging),
    responses((status = 200, body = Page<views::ActionApproval>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_approvals(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<ApprovalQuery>,
    paging: Paging,
) -> J<Page<views::ActionApproval>> {
    let envs = st.readable_envs(&caller, q.environment_id.as_deref()).await?;
    let req = gov::ListActionApprovalsRequest {
        environment_ids: envs,
        status: q.status.unwrap_or_default(),
        session_id: q.session_id.unwrap_or_default(),
        limit: paging.limit(),
        page: paging.page(),
    };
    let r = st.gov.clone().list_action_approvals(req).await?.into_inner();
    let mut approvers: BTreeMap<String, bool> = BTreeMap::new();
    for a in &r.data {
        if !approvers.contains_key(&a.environment_id) {
            approvers.insert(a.environment_id.clone(), may_approve(&st, &caller, &a.environment_id).await?);
        }
    }
    Ok(Json(views::page(&r.data, &r.next_page, |a| views::action_approval(a, approvers.get(&a.environment_id) == Some(&true)))))
}

#[utoipa::path(get, path = "/v1/action-approvals/{id}", tag = "approvals", operation_id = "approvals.getActionApproval", params(("id" = String, Path)),
    responses((status = 200, body = views::ActionApproval), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_approval(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::ActionApproval> {
    let a = approval_for(&st, &id).await?;
    st.require_read(&caller, &a.environment_id).await?;
    let show = may_approve(&st, &caller, &a.environment_id).await?;
    Ok(Json(views::action_approval(&a, show)))
}

/// The one response an approval takes. A second response, a wrong token or
/// a response after expiry is 409 `validation.conflict`. An approve may ask
/// for a StandingApproval on the exact tuple (`standing.ttl_seconds`, capped
/// at 30 days). The Session waiting on the call resumes at once.
#[utoipa::path(post, path = "/v1/action-approvals/{id}/responses", tag = "approvals", operation_id = "approvals.answerActionApproval", params(crate::idempotency::IdempotencyKeyHeader, ("id" = String, Path)),
    request_body = bodies::RespondToApproval,
    responses((status = 200, description = "The decided approval", body = views::ActionApproval), (status = "4XX", body = ErrorEnvelope)))]
pub async fn respond(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let b: bodies::RespondToApproval = parse(&body)?;
    let a = approval_for(&st, &id).await?;
    st.require_read(&caller, &a.environment_id).await?;
    let ttl = match &b.standing {
        Some(s) if s.ttl_seconds <= 0 => {
            return Err(Error::invalid_field("standing.ttl_seconds", "ttl_seconds must be at least 1").into());
        }
        Some(s) => s.ttl_seconds,
        None => 0,
    };
    let req = gov::RespondToApprovalRequest {
        id: id.clone(),
        decision: b.decision,
        response_token: b.response_token,
        standing_ttl_seconds: ttl,
        responder_id: caller.principal_id.clone(),
        in_session: false,
        deny_message: String::new(),
    };
    let path = format!("POST /v1/action-approvals/{id}/responses");
    once(&st.idem, &caller.principal_id, &headers, &path, &body, || async {
        let decided = st.gov.clone().respond_to_approval(req).await?.into_inner();
        // The Session records the outcome now; if this fails, the sessions
        // role's sweeper records it shortly. (An Automation's approval step
        // has no Session: the scheduler records it.)
        if decided.automation_firing_id.is_empty()
            && let Err(status) = st.sessions.clone().resolve_approval(ss::GetByIdRequest { id: decided.id.clone() }).await
        {
            tracing::warn!(%status, approval_id = %decided.id, "the session will record this approval on its next sweep");
        }
        Ok((StatusCode::OK, crate::json_text::value(views::action_approval(&decided, false))?))
    })
    .await
}

#[utoipa::path(get, path = "/v1/standing-approvals", tag = "standingApprovals", operation_id = "standingApprovals.listStandingApprovals", params(Paging, InEnvironment),
    responses((status = 200, body = Page<views::StandingApproval>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_standing(
    State(st): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(env): Query<InEnvironment>,
) -> J<Page<views::StandingApproval>> {
    let envs = st.readable_envs(&caller, env.environment_id.as_deref()).await?;
    let req = gov::ListStandingApprovalsRequest { environment_ids: envs, limit: paging.limit(), page: paging.page() };
    let r = st.gov.clone().list_standing_approvals(req).await?.into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::standing_approval)))
}

async fn standing_for(st: &AppState, id: &str) -> ApiResult<gov::StandingApproval> {
    checkfu_core::id::StandingApprovalId::check("id", id)?;
    Ok(st.gov.clone().get_standing_approval(gov::GetByIdRequest { id: id.into() }).await?.into_inner())
}

#[utoipa::path(get, path = "/v1/standing-approvals/{id}", tag = "standingApprovals", operation_id = "standingApprovals.getStandingApproval", params(("id" = String, Path)),
    responses((status = 200, body = views::StandingApproval), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_standing(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::StandingApproval> {
    let s = standing_for(&st, &id).await?;
    st.require_read(&caller, &s.environment_id).await?;
    Ok(Json(views::standing_approval(&s)))
}

/// Revokes at once (audited); the next call with the tuple asks again.
/// Needs `approve` on the Environment.
#[utoipa::path(delete, path = "/v1/standing-approvals/{id}", tag = "standingApprovals", operation_id = "standingApprovals.revokeStandingApproval", params(("id" = String, Path)),
    responses((status = 200, body = views::StandingApproval), (status = "4XX", body = ErrorEnvelope)))]
pub async fn revoke_standing(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::StandingApproval> {
    let s = standing_for(&st, &id).await?;
    st.require(&caller, "approve", "environment", &s.environment_id, &s.environment_id).await?;
    let req = gov::ActorRequest { id, actor_id: caller.principal_id };
    Ok(Json(views::standing_approval(&st.gov.clone().revoke_standing_approval(req).await?.into_inner())))
}
