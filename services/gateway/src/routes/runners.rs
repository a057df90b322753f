//! Self-hosted Runners: pairing codes (`manage` on the Environment, and the
//! right to speak for the Principal the Runner acts as), the Runners made
//! from them (`read`), and revocation (`manage`).

use super::{InEnvironment, Paging, created};
use crate::AppState;
use crate::auth::Caller;
use crate::authz::require_speaks_for;
use crate::bodies::{self, parse};
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query};
use crate::idempotency::once;
use crate::views::{self, ErrorEnvelope, Page};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use checkfu_proto::sessions::v1 as ss;

type J<T> = ApiResult<Json<T>>;

async fn runner_for(st: &AppState, id: &str) -> ApiResult<ss::Runner> {
    checkfu_core::id::RunnerId::check("id", id)?;
    Ok(st.sessions.clone().get_runner(ss::GetByIdRequest { id: id.into() }).await?.into_inner())
}

#[utoipa::path(post, path = "/v1/runner-pairings", tag = "runners", operation_id = "runners.createRunnerPairing", params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::CreateRunnerPairing,
    responses((status = 201, description = "The single-use code, shown once", body = views::RunnerPairing), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_pairing(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let b: bodies::CreateRunnerPairing = parse(&body)?;
    st.require_manage(&caller, &b.environment_id).await?;
    require_speaks_for(&st, &caller, &b.principal_id, "principal_id").await?;
    let req = ss::CreateRunnerPairingRequest {
        environment_id: b.environment_id,
        principal_id: b.principal_id,
        pool: b.pool,
        ttl_seconds: b.ttl_seconds,
        created_by: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/runner-pairings", &body, || async {
        created(views::runner_pairing(st.sessions.clone().create_runner_pairing(req).await?.into_inner()))
    })
    .await
}

#[utoipa::path(get, path = "/v1/runners", tag = "runners", operation_id = "runners.listRunners", params(Paging, InEnvironment),
    responses((status = 200, body = Page<views::Runner>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_runners(
    State(st): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(env): Query<InEnvironment>,
) -> J<Page<views::Runner>> {
    let envs = st.readable_envs(&caller, env.environment_id.as_deref()).await?;
    let r = st
        .sessions
        .clone()
        .list_runners(ss::ListInEnvironmentsRequest { environment_ids: envs, limit: paging.limit(), page: paging.page() })
        .await?
        .into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::runner)))
}

#[utoipa::path(get, path = "/v1/runners/{id}", tag = "runners", operation_id = "runners.getRunner", params(("id" = String, Path)),
    responses((status = 200, body = views::Runner), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_runner(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Runner> {
    let r = runner_for(&st, &id).await?;
    st.require_read(&caller, &r.environment_id).await?;
    Ok(Json(views::runner(&r)))
}

#[utoipa::path(post, path = "/v1/runners/{id}/revoke", tag = "runners", operation_id = "runners.revokeRunner", params(("id" = String, Path)),
    responses((status = 200, description = "Revoked at once: no new claims, its calls refused, its Runs queued again", body = views::Runner),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn revoke_runner(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Runner> {
    let r = runner_for(&st, &id).await?;
    st.require_manage(&caller, &r.environment_id).await?;
    Ok(Json(views::runner(&st.sessions.clone().revoke_runner(ss::GetByIdRequest { id }).await?.into_inner())))
}
