//! ToolSources (api.md §16.4): MCP servers reached through a Connection.
//! `manage` on the Environment writes (creating one also needs the caller's
//! own `use_connection` on the Connection); `read` reads.

use super::{InEnvironment, Paging, created};
use crate::AppState;
use crate::auth::Caller;
use crate::bodies::parse;
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query};
use crate::idempotency::once;
use crate::reach_wire::{self as wire};
use crate::views::{ErrorEnvelope, Page, page};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use checkfu_core::Error;
use checkfu_proto::capability::v1 as cap;

type J<T> = ApiResult<Json<T>>;

async fn source_for(st: &AppState, id: &str) -> ApiResult<cap::ToolSource> {
    checkfu_core::id::ToolSourceId::check("id", id)?;
    Ok(st.tool_sources.clone().get_tool_source(cap::GetToolSourceRequest { id: id.into() }).await?.into_inner())
}

#[utoipa::path(post, path = "/v1/tool-sources", tag = "toolSources", operation_id = "toolSources.createToolSource", params(crate::idempotency::IdempotencyKeyHeader), request_body = wire::CreateToolSource,
    responses((status = 201, description = "Created, even if its first sync failed (see sync_status)", body = wire::ToolSource),
        (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn create_tool_source(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let b: wire::CreateToolSource = parse(&body)?;
    st.require_manage(&caller, &b.environment_id).await?;
    checkfu_core::id::ConnectionId::check("connection_id", &b.connection_id)?;
    if !st.allowed(&caller.principal_id, "use_connection", "connection", &b.connection_id, &b.environment_id).await? {
        return Err(Error::denied(format!("{} lacks use_connection on connection {}", caller.principal_id, b.connection_id))
            .with_details(serde_json::json!({"permission": "use_connection", "resource": {"kind": "connection", "id": b.connection_id}}))
            .into());
    }
    let req = cap::CreateToolSourceRequest {
        environment_id: b.environment_id,
        name: b.name,
        description: b.description.unwrap_or_default(),
        connection_id: b.connection_id,
        transport: b.transport.unwrap_or_default(),
        default_enabled: b.default_config.enabled,
        call_timeout_seconds: b.call_timeout_seconds,
        sync_interval_seconds: b.sync_interval_seconds,
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/tool-sources", &body, || async {
        created(wire::tool_source(&st.tool_sources.clone().create_tool_source(req).await?.into_inner()))
    })
    .await
}

#[utoipa::path(get, path = "/v1/tool-sources", tag = "toolSources", operation_id = "toolSources.listToolSources", params(Paging, InEnvironment),
    responses((status = 200, body = Page<wire::ToolSource>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_tool_sources(
    State(st): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(env): Query<InEnvironment>,
) -> J<Page<wire::ToolSource>> {
    let envs = st.readable_envs(&caller, env.environment_id.as_deref()).await?;
    let req = cap::ListToolSourcesRequest { environment_ids: envs, limit: paging.limit(), page: paging.page() };
    let r = st.tool_sources.clone().list_tool_sources(req).await?.into_inner();
    Ok(Json(page(&r.data, &r.next_page, wire::tool_source)))
}

#[utoipa::path(get, path = "/v1/tool-sources/{id}", tag = "toolSources", operation_id = "toolSources.getToolSource", params(("id" = String, Path)),
    responses((status = 200, body = wire::ToolSource), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_tool_source(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<wire::ToolSource> {
    let t = source_for(&st, &id).await?;
    st.require_read(&caller, &t.environment_id).await?;
    Ok(Json(wire::tool_source(&t)))
}

#[utoipa::path(post, path = "/v1/tool-sources/{id}", tag = "toolSources", operation_id = "toolSources.updateToolSource", params(("id" = String, Path)), request_body = wire::UpdateToolSource,
    responses((status = 200, body = wire::ToolSource), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_tool_source(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> J<wire::ToolSource> {
    let t = source_for(&st, &id).await?;
    st.require_manage(&caller, &t.environment_id).await?;
    let b: wire::UpdateToolSource = parse(&body)?;
    let req = cap::UpdateToolSourceRequest {
        id,
        name: b.name,
        description: b.description,
        call_timeout_seconds: b.call_timeout_seconds,
        sync_interval_seconds: b.sync_interval_seconds,
        expected_version: b.expected_version,
        actor_id: caller.principal_id,
    };
    Ok(Json(wire::tool_source(&st.tool_sources.clone().update_tool_source(req).await?.into_inner())))
}

/// New publications naming it are refused (409 `tool_source_archived`);
/// calls answer `tool.not_offered`.
#[utoipa::path(post, path = "/v1/tool-sources/{id}/archive", tag = "toolSources", operation_id = "toolSources.archiveToolSource", params(("id" = String, Path)),
    responses((status = 200, body = wire::ToolSource), (status = "4XX", body = ErrorEnvelope)))]
pub async fn archive_tool_source(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<wire::ToolSource> {
    let t = source_for(&st, &id).await?;
    st.require_manage(&caller, &t.environment_id).await?;
    let req = cap::ToolSourceActorRequest { id, actor_id: caller.principal_id };
    Ok(Json(wire::tool_source(&st.tool_sources.clone().archive_tool_source(req).await?.into_inner())))
}

/// Discovery now: `initialize` and `tools/list` through the Connection. A
/// failure keeps the last good list (`sync_status:"failed"`, `sync_error`).
#[utoipa::path(post, path = "/v1/tool-sources/{id}/sync", tag = "toolSources", operation_id = "toolSources.syncToolSource", params(("id" = String, Path)),
    responses((status = 200, body = wire::ToolSource), (status = "4XX", body = ErrorEnvelope)))]
pub async fn sync_tool_source(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<wire::ToolSource> {
    let t = source_for(&st, &id).await?;
    st.require_manage(&caller, &t.environment_id).await?;
    let req = cap::ToolSourceActorRequest { id, actor_id: caller.principal_id };
    Ok(Json(wire::tool_source(&st.tool_sources.clone().sync_tool_source(req).await?.into_inner())))
}

/// Enables or disables one tool (`null`: follow `default_config`); no
/// sync changes it.
#[utoipa::path(post, path = "/v1/tool-sources/{id}/tools/{name}", tag = "toolSources", operation_id = "toolSources.setToolSourceTool", params(("id" = String, Path), ("name" = String, Path)),
    request_body = wire::SetTool, responses((status = 200, body = wire::ToolSource), (status = "4XX", body = ErrorEnvelope)))]
pub async fn set_tool(
    State(st): State<AppState>,
    caller: Caller,
    Path((id, name)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> J<wire::ToolSource> {
    let t = source_for(&st, &id).await?;
    st.require_manage(&caller, &t.environment_id).await?;
    let b: wire::SetTool = parse(&body)?;
    if name.is_empty() || name.len() > 128 {
        return Err(Error::invalid_field("name", "a tool name is 1 to 128 bytes").into());
    }
    let req = cap::SetToolRequest { id, tool: name, enabled: b.enabled, actor_id: caller.principal_id };
    Ok(Json(wire::tool_source(&st.tool_sources.clone().set_tool(req).await?.into_inner())))
}
