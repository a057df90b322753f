//! Budgets. Reading needs `read` on the Environment; attaching, changing
//! the limit, pausing and resuming need `manage` there, because a Budget is
//! the platform team's cap on spend, not the Session owner's.

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
use checkfu_proto::sessions::v1 as ss;

type J<T> = ApiResult<Json<T>>;

async fn budget_for(st: &AppState, id: &str) -> ApiResult<ss::Budget> {
    checkfu_core::id::BudgetId::check("id", id)?;
    Ok(st.sessions.clone().get_budget(ss::GetByIdRequest { id: id.into() }).await?.into_inner())
}

#[utoipa::path(get, path = "/v1/budgets", tag = "budgets", operation_id = "budgets.listBudgets", params(Paging, InEnvironment),
    responses((status = 200, body = Page<views::Budget>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_budgets(
    State(st): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(env): Query<InEnvironment>,
) -> J<Page<views::Budget>> {
    let envs = st.readable_envs(&caller, env.environment_id.as_deref()).await?;
    let req = ss::ListInEnvironmentsRequest { environment_ids: envs, limit: paging.limit(), page: paging.page() };
    let r = st.sessions.clone().list_budgets(req).await?.into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::budget)))
}

/// Attaches a Budget to a Session that has none.
#[utoipa::path(post, path = "/v1/budgets", tag = "budgets", operation_id = "budgets.createBudget", params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::CreateBudget,
    responses((status = 201, body = views::Budget), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_budget(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let b: bodies::CreateBudget = parse(&body)?;
    if b.scope.kind != "session" {
        return Err(Error::invalid_field("scope.kind", "budgets cover a session").into());
    }
    checkfu_core::id::SessionId::check("scope.id", &b.scope.id)?;
    let s = st.sessions.clone().get_session(ss::GetByIdRequest { id: b.scope.id.clone() }).await?.into_inner();
    st.require_manage(&caller, &s.environment_id).await?;
    let req = ss::AttachBudgetRequest {
        session_id: s.id,
        budget: Some(ss::NewBudget { limit: b.limit, metric: b.metric.unwrap_or_default() }),
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/budgets", &body, || async {
        created(views::budget(&st.sessions.clone().attach_budget(req).await?.into_inner()))
    })
    .await
}

#[utoipa::path(get, path = "/v1/budgets/{id}", tag = "budgets", operation_id = "budgets.getBudget", params(("id" = String, Path)),
    responses((status = 200, body = views::Budget), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_budget(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Budget> {
    let b = budget_for(&st, &id).await?;
    st.require_read(&caller, &b.environment_id).await?;
    Ok(Json(views::budget(&b)))
}

async fn change(st: &AppState, caller: &Caller, id: &str, req: ss::UpdateBudgetRequest) -> J<views::Budget> {
    let b = budget_for(st, id).await?;
    st.require_manage(caller, &b.environment_id).await?;
    Ok(Json(views::budget(&st.sessions.clone().update_budget(req).await?.into_inner())))
}

/// Sets the limit. Strictly above `consumed` re-opens admission and
/// restarts work queued behind the pause; at or below it stays paused.
#[utoipa::path(post, path = "/v1/budgets/{id}", tag = "budgets", operation_id = "budgets.updateBudget", params(("id" = String, Path)), request_body = bodies::UpdateBudget,
    responses((status = 200, body = views::Budget), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_budget(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> J<views::Budget> {
    let b: bodies::UpdateBudget = parse(&body)?;
    let req = ss::UpdateBudgetRequest {
        id: id.clone(),
        limit: Some(b.limit),
        expected_version: b.expected_version,
        action: String::new(),
        actor_id: caller.principal_id.clone(),
    };
    change(&st, &caller, &id, req).await
}

/// Detaches the Budget from its Session: nothing caps the Session any
/// more, and work stopped at the cap restarts. Audited. Answers the Budget
/// as it was, `status: "detached"`.
#[utoipa::path(delete, path = "/v1/budgets/{id}", tag = "budgets", operation_id = "budgets.detachBudget", params(("id" = String, Path)),
    responses((status = 200, body = views::Budget), (status = "4XX", body = ErrorEnvelope)))]
pub async fn detach_budget(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Budget> {
    let req =
        ss::UpdateBudgetRequest { id: id.clone(), action: "detach".into(), actor_id: caller.principal_id.clone(), ..Default::default() };
    let out = change(&st, &caller, &id, req).await?;
    let details = serde_json::json!({"scope": out.0.scope, "limit": out.0.limit, "consumed": out.0.consumed});
    st.audit(&caller, "budget.detached", "budget", &id, details).await;
    Ok(out)
}

/// Stops admission until resumed (reversible; the Session is never terminated).
#[utoipa::path(post, path = "/v1/budgets/{id}/pause", tag = "budgets", operation_id = "budgets.pauseBudget", params(("id" = String, Path)),
    responses((status = 200, body = views::Budget), (status = "4XX", body = ErrorEnvelope)))]
pub async fn pause_budget(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Budget> {
    let req =
        ss::UpdateBudgetRequest { id: id.clone(), action: "pause".into(), actor_id: caller.principal_id.clone(), ..Default::default() };
    change(&st, &caller, &id, req).await
}

/// Re-opens admission if `consumed` is below the limit, restarting queued work.
#[utoipa::path(post, path = "/v1/budgets/{id}/resume", tag = "budgets", operation_id = "budgets.resumeBudget", params(("id" = String, Path)),
    responses((status = 200, body = views::Budget), (status = "4XX", body = ErrorEnvelope)))]
pub async fn resume_budget(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Budget> {
    let req =
        ss::UpdateBudgetRequest { id: id.clone(), action: "resume".into(), actor_id: caller.principal_id.clone(), ..Default::default() };
    change(&st, &caller, &id, req).await
}
