//! MemoryStores, documents, versions and MemoryProposals (api.md §13.1–13.3).
//! The memory service checks the caller's `read`, `write`, `approve` or
//! `manage` itself (403 without a row) and answers each resource as its API
//! JSON; these handlers shape-check bodies and queries and pass the caller.

use super::Paging;
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query};
use crate::idempotency::once;
use crate::memory_wire::{self as w, one, page};
use crate::views::ErrorEnvelope;
use crate::views::Page;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use checkfu_core::Error;
use checkfu_proto::memory::v1 as pb;
use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

type J<T> = ApiResult<Json<T>>;

fn body<T: serde::de::DeserializeOwned>(v: &Value) -> ApiResult<T> {
    Ok(crate::bodies::parse(v)?)
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryOwner {
    /// `environment`, `agent_definition`, `principal` or `session` (`surface_scope` is reserved: 400).
    pub kind: String,
    pub id: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMemoryStore {
    pub environment_id: String,
    /// 1–200 printable characters.
    pub name: String,
    /// At most 4 KiB.
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// Fixes the review mode: `proposal` for `environment` and `agent_definition`, `direct` for `principal` and `session`.
    pub owner: MemoryOwner,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMemoryStore {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    #[serde(default)]
    pub expected_version: Option<i64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteMemoryDocument {
    /// Starts with `/`; segments of `[A-Za-z0-9._-]`, no `.` or `..`; at most 1,024 bytes.
    pub path: String,
    /// UTF-8 text, at most 256 KiB.
    pub content: String,
    /// Required: `null` to create only, or the path's current `content_sha256` (no blind writes).
    #[schema(value_type = Option<String>)]
    pub expected_sha256: Value,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateMemoryProposal {
    pub memory_store_id: String,
    /// 1–1,000 of `{path, content|null, expected_sha256}` (`content: null` deletes).
    #[schema(value_type = Vec<Object>)]
    pub changes: Value,
    /// At most 16 KiB.
    #[serde(default)]
    pub rationale: Option<String>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideMemoryProposal {
    /// At most 16 KiB.
    #[serde(default)]
    pub note: Option<String>,
}

/// `?environment_id=&owner_kind=&owner_id=&include_archived=&limit=&page=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StoreQuery {
    #[serde(default)]
    pub environment_id: Option<String>,
    #[serde(default)]
    pub owner_kind: Option<String>,
    #[serde(default)]
    pub owner_id: Option<String>,
    #[serde(default)]
    pub include_archived: Option<bool>,
}

/// `?path=&at_version=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DocumentQuery {
    pub path: String,
    /// A version from 0 to the head; the head when absent.
    #[serde(default)]
    pub at_version: Option<i64>,
}

/// `?path=&expected_sha256=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteDocumentQuery {
    pub path: String,
    pub expected_sha256: String,
}

/// `?path_prefix=&at_version=&limit=&page=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DocumentsQuery {
    #[serde(default)]
    pub path_prefix: Option<String>,
    #[serde(default)]
    pub at_version: Option<i64>,
}

/// `?memory_store_id=&status=&limit=&page=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ProposalQuery {
    pub memory_store_id: String,
    /// `open`, `approved` or `rejected`.
    #[serde(default)]
    pub status: Option<String>,
}

#[utoipa::path(post, path = "/v1/memory-stores", tag = "memoryStores", operation_id = "memoryStores.createMemoryStore", params(crate::idempotency::IdempotencyKeyHeader), request_body = CreateMemoryStore,
    responses((status = 201, description = "The store, at head_version 0", body = crate::memory_wire::MemoryStore), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_store(State(st): State<AppState>, caller: Caller, headers: HeaderMap, JsonBody(raw): JsonBody) -> ApiResult<Response> {
    let b: CreateMemoryStore = body(&raw)?;
    let req = pb::CreateStoreRequest {
        environment_id: b.environment_id,
        name: b.name,
        description: b.description.unwrap_or_default(),
        metadata_json: b.metadata.map(|m| m.to_string()).unwrap_or_default(),
        owner_kind: b.owner.kind,
        owner_id: b.owner.id,
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/memory-stores", &raw, || async {
        super::created(one::<w::MemoryStore>(st.memory.clone().create_store(req).await?.into_inner())?)
    })
    .await
}

#[utoipa::path(get, path = "/v1/memory-stores", tag = "memoryStores", operation_id = "memoryStores.listMemoryStores", params(StoreQuery, Paging),
    responses((status = 200, description = "The stores the caller may read, newest first", body = crate::views::Page<crate::memory_wire::MemoryStore>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_stores(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<StoreQuery>,
    paging: Paging,
) -> J<Page<w::MemoryStore>> {
    let req = pb::ListStoresRequest {
        environment_id: q.environment_id.unwrap_or_default(),
        owner_kind: q.owner_kind.unwrap_or_default(),
        owner_id: q.owner_id.unwrap_or_default(),
        include_archived: q.include_archived.unwrap_or(false),
        limit: paging.limit(),
        page: paging.page(),
        actor_id: caller.principal_id,
    };
    Ok(Json(page(st.memory.clone().list_stores(req).await?.into_inner())?))
}

pub(super) fn actor(id: String, caller: &Caller) -> pb::ActorRequest {
    pb::ActorRequest { id, actor_id: caller.principal_id.clone(), note: String::new() }
}

#[utoipa::path(get, path = "/v1/memory-stores/{id}", tag = "memoryStores", operation_id = "memoryStores.getMemoryStore", params(("id" = String, Path)),
    responses((status = 200, body = crate::memory_wire::MemoryStore), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_store(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<w::MemoryStore> {
    Ok(Json(one(st.memory.clone().get_store(actor(id, &caller)).await?.into_inner())?))
}

#[utoipa::path(post, path = "/v1/memory-stores/{id}", tag = "memoryStores", operation_id = "memoryStores.updateMemoryStore", params(("id" = String, Path)), request_body = UpdateMemoryStore,
    responses((status = 200, body = crate::memory_wire::MemoryStore), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_store(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(raw): JsonBody,
) -> J<w::MemoryStore> {
    let b: UpdateMemoryStore = body(&raw)?;
    let req = pb::UpdateStoreRequest {
        id,
        name: b.name,
        description: b.description,
        metadata_json: b.metadata.map(|m| m.to_string()),
        expected_version: b.expected_version,
        actor_id: caller.principal_id,
    };
    Ok(Json(one(st.memory.clone().update_store(req).await?.into_inner())?))
}

#[utoipa::path(post, path = "/v1/memory-stores/{id}/archive", tag = "memoryStores", operation_id = "memoryStores.archiveMemoryStore", params(("id" = String, Path)),
    responses((status = 200, description = "Archived (idempotent); still readable", body = crate::memory_wire::MemoryStore), (status = "4XX", body = ErrorEnvelope)))]
pub async fn archive_store(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<w::MemoryStore> {
    Ok(Json(one(st.memory.clone().archive_store(actor(id, &caller)).await?.into_inner())?))
}

#[utoipa::path(delete, path = "/v1/memory-stores/{id}", tag = "memoryStores", operation_id = "memoryStores.deleteMemoryStore", params(("id" = String, Path)),
    responses((status = 200, description = "The store's last state; only an archived store no live Session mounts", body = crate::memory_wire::MemoryStore), (status = "4XX", body = ErrorEnvelope)))]
pub async fn delete_store(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<w::MemoryStore> {
    Ok(Json(one(st.memory.clone().delete_store(actor(id, &caller)).await?.into_inner())?))
}

#[utoipa::path(get, path = "/v1/memory-stores/{id}/document", tag = "memoryStores", operation_id = "memoryStores.readMemoryStoreDocument", params(("id" = String, Path), DocumentQuery),
    responses((status = 200, description = "{memory_store_id, store_version, document}", body = crate::memory_wire::MemoryDocumentAnswer), (status = "4XX", body = ErrorEnvelope)))]
pub async fn read_document(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<DocumentQuery>,
) -> J<w::MemoryDocumentAnswer> {
    let req = pb::ReadDocumentRequest { store_id: id, path: q.path, at_version: q.at_version, actor_id: caller.principal_id };
    Ok(Json(one(st.memory.clone().read_document(req).await?.into_inner())?))
}

#[utoipa::path(post, path = "/v1/memory-stores/{id}/document", tag = "memoryStores", operation_id = "memoryStores.writeMemoryStoreDocument", params(crate::idempotency::IdempotencyKeyHeader, ("id" = String, Path)), request_body = WriteMemoryDocument,
    responses((status = 200, description = "{memory_store_id, store_version, document}", body = crate::memory_wire::MemoryDocumentAnswer), (status = "4XX", body = ErrorEnvelope)))]
pub async fn write_document(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    Path(id): Path<String>,
    JsonBody(raw): JsonBody,
) -> ApiResult<Response> {
    let b: WriteMemoryDocument = body(&raw)?;
    // Omitted, null and a string are three different requests.
    let (expected_sha256, expect_absent) = match (raw.get("expected_sha256"), b.expected_sha256) {
        (None, _) => (None, false),
        (Some(_), Value::Null) => (None, true),
        (Some(_), Value::String(s)) => (Some(s), false),
        (Some(_), _) => return Err(Error::invalid_field("expected_sha256", "expected_sha256 must be null or a sha256 string").into()),
    };
    let req = pb::WriteDocumentRequest {
        store_id: id.clone(),
        path: b.path,
        content: b.content,
        expected_sha256,
        expect_absent,
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, &format!("POST /v1/memory-stores/{id}/document"), &raw, || async {
        let d: w::MemoryDocumentAnswer = one(st.memory.clone().write_document(req).await?.into_inner())?;
        Ok((axum::http::StatusCode::OK, crate::json_text::value(d)?))
    })
    .await
}

#[utoipa::path(delete, path = "/v1/memory-stores/{id}/document", tag = "memoryStores", operation_id = "memoryStores.deleteMemoryStoreDocument", params(("id" = String, Path), DeleteDocumentQuery),
    responses((status = 200, description = "{memory_store_id, store_version, deleted:{path, content_sha256}}", body = crate::memory_wire::MemoryDocumentDeleted), (status = "4XX", body = ErrorEnvelope)))]
pub async fn delete_document(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<DeleteDocumentQuery>,
) -> J<w::MemoryDocumentDeleted> {
    let req = pb::DeleteDocumentRequest { store_id: id, path: q.path, expected_sha256: q.expected_sha256, actor_id: caller.principal_id };
    Ok(Json(one(st.memory.clone().delete_document(req).await?.into_inner())?))
}

#[utoipa::path(get, path = "/v1/memory-stores/{id}/documents", tag = "memoryStores", operation_id = "memoryStores.listMemoryStoreDocuments", params(("id" = String, Path), DocumentsQuery, Paging),
    responses((status = 200, description = "{memory_store_id, store_version, data, next_page}: documents without content, by path", body = crate::memory_wire::MemoryDocumentPage), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_documents(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<DocumentsQuery>,
    paging: Paging,
) -> J<w::MemoryDocumentPage> {
    let req = pb::ListDocumentsRequest {
        store_id: id.clone(),
        path_prefix: q.path_prefix.unwrap_or_default(),
        at_version: q.at_version,
        limit: paging.limit(),
        page: paging.page(),
        actor_id: caller.principal_id,
    };
    Ok(Json(w::document_page(st.memory.clone().list_documents(req).await?.into_inner(), id)?))
}

#[utoipa::path(get, path = "/v1/memory-stores/{id}/versions", tag = "memoryStores", operation_id = "memoryStores.listMemoryStoreVersions", params(("id" = String, Path), Paging),
    responses((status = 200, description = "Versions, newest first", body = crate::views::Page<crate::memory_wire::MemoryVersion>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_versions(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    paging: Paging,
) -> J<Page<w::MemoryVersion>> {
    let req = pb::ListVersionsRequest { store_id: id, limit: paging.limit(), page: paging.page(), actor_id: caller.principal_id };
    Ok(Json(page(st.memory.clone().list_versions(req).await?.into_inner())?))
}

#[utoipa::path(get, path = "/v1/memory-stores/{id}/versions/{n}", tag = "memoryStores", operation_id = "memoryStores.getMemoryStoreVersion", params(("id" = String, Path), ("n" = i64, Path)),
    responses((status = 200, body = crate::memory_wire::MemoryVersion), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_version(State(st): State<AppState>, caller: Caller, Path((id, n)): Path<(String, String)>) -> J<w::MemoryVersion> {
    let n: i64 = n.parse().ok().filter(|n| *n >= 1).ok_or_else(|| Error::invalid_field("n", "a version number is 1 or more"))?;
    let req = pb::GetVersionRequest { store_id: id, version: n, actor_id: caller.principal_id };
    Ok(Json(one(st.memory.clone().get_version(req).await?.into_inner())?))
}

#[utoipa::path(post, path = "/v1/memory-proposals", tag = "memoryProposals", operation_id = "memoryProposals.createMemoryProposal", params(crate::idempotency::IdempotencyKeyHeader), request_body = CreateMemoryProposal,
    responses((status = 201, description = "The proposal, open", body = crate::memory_wire::MemoryProposal), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_proposal(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(raw): JsonBody,
) -> ApiResult<Response> {
    let b: CreateMemoryProposal = body(&raw)?;
    // The changes' shape is checked here, before the idempotency layer.
    let changes = pb::ProposedChange::list_from_json(&b.changes)?;
    #[allow(deprecated)] // changes_json: a 0.1.0 memory service's
    let req = pb::CreateProposalRequest {
        store_id: b.memory_store_id,
        changes_json: b.changes.to_string(),
        rationale: b.rationale.unwrap_or_default(),
        actor_id: caller.principal_id.clone(),
        changes,
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/memory-proposals", &raw, || async {
        super::created(one::<w::MemoryProposal>(st.memory.clone().create_proposal(req).await?.into_inner())?)
    })
    .await
}

#[utoipa::path(get, path = "/v1/memory-proposals", tag = "memoryProposals", operation_id = "memoryProposals.listMemoryProposals", params(ProposalQuery, Paging),
    responses((status = 200, description = "A store's proposals, newest first", body = crate::views::Page<crate::memory_wire::MemoryProposal>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_proposals(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<ProposalQuery>,
    paging: Paging,
) -> J<Page<w::MemoryProposal>> {
    let req = pb::ListProposalsRequest {
        store_id: q.memory_store_id,
        status: q.status.unwrap_or_default(),
        limit: paging.limit(),
        page: paging.page(),
        actor_id: caller.principal_id,
    };
    Ok(Json(page(st.memory.clone().list_proposals(req).await?.into_inner())?))
}

#[utoipa::path(get, path = "/v1/memory-proposals/{id}", tag = "memoryProposals", operation_id = "memoryProposals.getMemoryProposal", params(("id" = String, Path)),
    responses((status = 200, body = crate::memory_wire::MemoryProposal), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_proposal(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<w::MemoryProposal> {
    Ok(Json(one(st.memory.clone().get_proposal(actor(id, &caller)).await?.into_inner())?))
}

async fn decide(st: AppState, caller: Caller, id: String, raw: Value, approve: bool) -> J<w::MemoryProposal> {
    let b: DecideMemoryProposal = if raw.is_null() { DecideMemoryProposal::default() } else { body(&raw)? };
    let req = pb::DecideProposalRequest { id, approve, note: b.note.unwrap_or_default(), actor_id: caller.principal_id };
    Ok(Json(one(st.memory.clone().decide_proposal(req).await?.into_inner())?))
}

#[utoipa::path(post, path = "/v1/memory-proposals/{id}/approve", tag = "memoryProposals", operation_id = "memoryProposals.approveMemoryProposal", params(("id" = String, Path)), request_body = DecideMemoryProposal,
    responses((status = 200, description = "Approved: every change applied as one version", body = crate::memory_wire::MemoryProposal), (status = "4XX", body = ErrorEnvelope)))]
pub async fn approve_proposal(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(raw): JsonBody,
) -> J<w::MemoryProposal> {
    decide(st, caller, id, raw, true).await
}

#[utoipa::path(post, path = "/v1/memory-proposals/{id}/reject", tag = "memoryProposals", operation_id = "memoryProposals.rejectMemoryProposal", params(("id" = String, Path)), request_body = DecideMemoryProposal,
    responses((status = 200, body = crate::memory_wire::MemoryProposal), (status = "4XX", body = ErrorEnvelope)))]
pub async fn reject_proposal(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(raw): JsonBody,
) -> J<w::MemoryProposal> {
    decide(st, caller, id, raw, false).await
}
