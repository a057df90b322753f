//! CMA session threads (api.md §17.12) ↔ §15.2's SessionThreads: the
//! primary first, each child's view of the one log, its live stream.

use super::cx::{Cx, encode};
use super::events;
use super::wire::{self, CmaResult};
use crate::threads_wire::SessionThread;
use axum::Json;
use axum::extract::{Path, RawQuery};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

/// `GET /v1/sessions/{id}/threads`: the primary first, then children in
/// spawn order.
pub async fn list(cx: Cx, Path(id): Path<String>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let id = super::wire::path_id::<checkfu_core::id::SessionId>("session", &id)?;
    let q = wire::query_pairs(raw.as_deref())?;
    let limit = wire::limit(&q, 1000, 1000)? as usize;
    let statuses = wire::params(&q, "statuses");
    let all: Vec<Value> = cx
        .native
        .all::<SessionThread>(&format!("/v1/sessions/{id}/threads"), 10_000)
        .await?
        .iter()
        .filter(|t| statuses.is_empty() || statuses.contains(&t.status.as_str()))
        .map(render)
        .collect();
    let skip = wire::number_token::<usize>(&q)?.unwrap_or(0);
    let data: Vec<Value> = all.iter().skip(skip).take(limit).cloned().collect();
    let next = (skip + data.len() < all.len()).then(|| (skip + data.len()).to_string());
    Ok(Json(wire::page(data, next)))
}

/// `GET /v1/sessions/{id}/threads/{tid}`.
pub async fn retrieve(cx: Cx, Path((id, tid)): Path<(String, String)>) -> CmaResult<Json<Value>> {
    let (id, tid) = checked(&id, &tid)?;
    Ok(Json(render(&cx.native.get(&format!("/v1/sessions/{id}/threads/{tid}")).await?)))
}

/// `POST /v1/sessions/{id}/threads/{tid}/archive`.
pub async fn archive(cx: Cx, Path((id, tid)): Path<(String, String)>) -> CmaResult<Json<Value>> {
    let (id, tid) = checked(&id, &tid)?;
    Ok(Json(render(&cx.native.post(&format!("/v1/sessions/{id}/threads/{tid}/archive"), &json!({})).await?)))
}

/// `GET /v1/sessions/{id}/threads/{tid}/events`: the thread's view.
pub async fn list_events(cx: Cx, Path((id, tid)): Path<(String, String)>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let (id, tid) = checked(&id, &tid)?;
    events::list_view(cx, id, view(&tid), raw).await
}

/// `GET /v1/sessions/{id}/threads/{tid}/stream`: the thread's live view.
pub async fn stream(cx: Cx, Path((id, tid)): Path<(String, String)>, headers: HeaderMap, RawQuery(raw): RawQuery) -> CmaResult<Response> {
    let (id, tid) = checked(&id, &tid)?;
    events::stream_view(cx, id, view(&tid), headers, raw).await
}

/// The native path segment of a thread's view.
fn view(tid: &str) -> Option<String> {
    Some(format!("threads/{}", encode(tid)))
}

fn checked(id: &str, tid: &str) -> CmaResult<(String, String)> {
    let id = super::wire::path_id::<checkfu_core::id::SessionId>("session", id)?;
    Ok((id, super::wire::path_id::<checkfu_core::id::SessionThreadId>("session thread", tid)?))
}

/// A native SessionThread as CMA shows it.
pub fn render(t: &SessionThread) -> Value {
    json!({
        "type": "session_thread",
        "id": t.id,
        "session_id": t.session_id,
        "parent_thread_id": t.parent_thread_id,
        "agent": {"type": "agent", "id": t.agent.agent_id, "version": t.agent.version, "name": t.agent.name},
        "status": t.status,
        "stop_reason": t.stop_reason,
        "usage": t.usage,
        "stats": t.stats,
        "created_at": t.created_at,
        "updated_at": t.updated_at,
        "archived_at": t.archived_at,
    })
}
