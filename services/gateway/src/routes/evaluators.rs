//! EvaluatorQualifications (api.md §18.1): which (provider, model) may
//! judge for a purpose. They gate every Check and delivery screen on the
//! installation, so only an installation `admin` records or revokes one;
//! any authenticated caller may read them (they hold no secret, and an
//! author needs them to see why an Automation is not ready).

use super::{Paging, created};
use crate::AppState;
use crate::auth::Caller;
use crate::bodies::{self, parse};
use crate::error::ApiResult;
use crate::extract::JsonBody;
use crate::idempotency::once;
use crate::views::{self, ErrorEnvelope, Page};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use checkfu_proto::modelgateway::v1 as mg;
use serde_json::json;

#[utoipa::path(post, path = "/v1/evaluator-qualifications", tag = "evaluatorQualifications", operation_id = "evaluatorQualifications.createEvaluatorQualification",
    params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::CreateEvaluatorQualification,
    responses((status = 201, body = views::EvaluatorQualification), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create(State(st): State<AppState>, caller: Caller, headers: HeaderMap, JsonBody(body): JsonBody) -> ApiResult<Response> {
    let b: bodies::CreateEvaluatorQualification = parse(&body)?;
    st.require_admin(&caller).await?;
    let req = mg::CreateEvaluatorQualificationRequest {
        provider: b.provider,
        model: b.model,
        purpose: b.purpose,
        evidence: b.evidence,
        reviewed_at: b.reviewed_at,
        expires_at: b.expires_at,
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/evaluator-qualifications", &body, || async {
        let q = st.models.clone().create_evaluator_qualification(req).await?.into_inner();
        let details = json!({"provider": q.provider, "model": q.model, "purpose": q.purpose, "expires_at": q.expires_at});
        st.audit(&caller, "evaluator_qualification.created", "evaluator_qualification", &q.id, details).await;
        created(views::evaluator_qualification(&q))
    })
    .await
}

#[utoipa::path(get, path = "/v1/evaluator-qualifications", tag = "evaluatorQualifications", operation_id = "evaluatorQualifications.listEvaluatorQualifications", params(Paging),
    responses((status = 200, body = Page<views::EvaluatorQualification>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list(State(st): State<AppState>, _caller: Caller, paging: Paging) -> ApiResult<Json<Page<views::EvaluatorQualification>>> {
    let req = mg::ListEvaluatorQualificationsRequest { limit: paging.limit(), page: paging.page() };
    let r = st.models.clone().list_evaluator_qualifications(req).await?.into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::evaluator_qualification)))
}

#[utoipa::path(get, path = "/v1/evaluator-qualifications/{id}", tag = "evaluatorQualifications", operation_id = "evaluatorQualifications.getEvaluatorQualification", params(("id" = String, Path)),
    responses((status = 200, body = views::EvaluatorQualification), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get(State(st): State<AppState>, _caller: Caller, Path(id): Path<String>) -> ApiResult<Json<views::EvaluatorQualification>> {
    checkfu_core::id::EvaluatorQualificationId::check("id", &id)?;
    let q = st.models.clone().get_evaluator_qualification(mg::GetEvaluatorQualificationRequest { id }).await?.into_inner();
    Ok(Json(views::evaluator_qualification(&q)))
}

/// Revoking is final and immediate: no judgment is asked under it again,
/// and Automations whose Checks relied on it stop being ready. Revoking a
/// revoked qualification answers it unchanged.
#[utoipa::path(post, path = "/v1/evaluator-qualifications/{id}/revoke", tag = "evaluatorQualifications", operation_id = "evaluatorQualifications.revokeEvaluatorQualification", params(("id" = String, Path)),
    responses((status = 200, body = views::EvaluatorQualification), (status = "4XX", body = ErrorEnvelope)))]
pub async fn revoke(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> ApiResult<Json<views::EvaluatorQualification>> {
    checkfu_core::id::EvaluatorQualificationId::check("id", &id)?;
    st.require_admin(&caller).await?;
    let req = mg::RevokeEvaluatorQualificationRequest { id: id.clone(), actor_id: caller.principal_id.clone() };
    let q = st.models.clone().revoke_evaluator_qualification(req).await?.into_inner();
    st.audit(&caller, "evaluator_qualification.revoked", "evaluator_qualification", &id, json!({})).await;
    Ok(Json(views::evaluator_qualification(&q)))
}
