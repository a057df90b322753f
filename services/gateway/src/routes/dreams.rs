//! Dreams (api.md §13.5): curation passes over a memory store whose output
//! is a new store. The memory service checks `manage` (create, cancel,
//! archive) and `read` on the input store (reading) itself.

use super::Paging;
use super::memory::actor;
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query};
use crate::idempotency::once;
use crate::memory_wire::{Dream, one, page};
use crate::views::ErrorEnvelope;
use crate::views::Page;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use checkfu_proto::memory::v1 as pb;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

type J<T> = ApiResult<Json<T>>;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDream {
    /// The input store: active, in an Environment where the caller holds `manage`.
    pub memory_store_id: String,
    /// 0 to 100 Sessions of the store's Environment, none `running`.
    #[serde(default)]
    pub session_ids: Vec<String>,
    /// Absent: a `deterministic` Dream; present: a `model` Dream on this profile.
    #[serde(default)]
    pub model_routing_profile_id: Option<String>,
    /// For the model; at most 64 KiB.
    #[serde(default)]
    pub instructions: Option<String>,
    /// True: the output stays at version 1 and the changes become one open `dream_review` proposal.
    #[serde(default)]
    pub review: Option<bool>,
}

/// `?environment_id=&status=&include_archived=&limit=&page=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DreamQuery {
    #[serde(default)]
    pub environment_id: Option<String>,
    /// `pending`, `running`, `completed`, `failed` or `canceled`.
    #[serde(default)]
    pub status: Option<String>,
    /// Archived Dreams are hidden unless true.
    #[serde(default)]
    pub include_archived: Option<bool>,
}

#[utoipa::path(post, path = "/v1/dreams", tag = "dreams", operation_id = "dreams.createDream", params(crate::idempotency::IdempotencyKeyHeader), request_body = CreateDream,
    responses((status = 201, description = "The Dream, pending, with the input's head pinned", body = crate::memory_wire::Dream), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_dream(State(st): State<AppState>, caller: Caller, headers: HeaderMap, JsonBody(raw): JsonBody) -> ApiResult<Response> {
    let b: CreateDream = crate::bodies::parse(&raw)?;
    let req = pb::CreateDreamRequest {
        memory_store_id: b.memory_store_id,
        session_ids: b.session_ids,
        model_routing_profile_id: b.model_routing_profile_id.unwrap_or_default(),
        instructions: b.instructions.unwrap_or_default(),
        review: b.review.unwrap_or(false),
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/dreams", &raw, || async {
        super::created(one::<Dream>(st.memory.clone().create_dream(req).await?.into_inner())?)
    })
    .await
}

#[utoipa::path(get, path = "/v1/dreams", tag = "dreams", operation_id = "dreams.listDreams", params(DreamQuery, Paging),
    responses((status = 200, description = "The Dreams whose input store the caller may read, newest first", body = crate::views::Page<crate::memory_wire::Dream>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_dreams(State(st): State<AppState>, caller: Caller, Query(q): Query<DreamQuery>, paging: Paging) -> J<Page<Dream>> {
    let req = pb::ListDreamsRequest {
        environment_id: q.environment_id.unwrap_or_default(),
        status: q.status.unwrap_or_default(),
        include_archived: q.include_archived.unwrap_or(false),
        limit: paging.limit(),
        page: paging.page(),
        actor_id: caller.principal_id,
    };
    Ok(Json(page(st.memory.clone().list_dreams(req).await?.into_inner())?))
}

#[utoipa::path(get, path = "/v1/dreams/{id}", tag = "dreams", operation_id = "dreams.getDream", params(("id" = String, Path)),
    responses((status = 200, body = crate::memory_wire::Dream), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_dream(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<Dream> {
    Ok(Json(one(st.memory.clone().get_dream(actor(id, &caller)).await?.into_inner())?))
}

#[utoipa::path(post, path = "/v1/dreams/{id}/cancel", tag = "dreams", operation_id = "dreams.cancelDream", params(("id" = String, Path)),
    responses((status = 200, description = "Canceled (a repeat answers the same); a finished Dream is 409", body = crate::memory_wire::Dream), (status = "4XX", body = ErrorEnvelope)))]
pub async fn cancel_dream(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<Dream> {
    Ok(Json(one(st.memory.clone().cancel_dream(actor(id, &caller)).await?.into_inner())?))
}

#[utoipa::path(post, path = "/v1/dreams/{id}/archive", tag = "dreams", operation_id = "dreams.archiveDream", params(("id" = String, Path)),
    responses((status = 200, description = "Archived (idempotent; only a finished Dream); its output is untouched", body = crate::memory_wire::Dream), (status = "4XX", body = ErrorEnvelope)))]
pub async fn archive_dream(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<Dream> {
    Ok(Json(one(st.memory.clone().archive_dream(actor(id, &caller)).await?.into_inner())?))
}
