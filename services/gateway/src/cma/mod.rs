//! The CMA-compatible projection (api.md §17, docs/cma.md): a second public
//! surface, under `/cma`, that speaks Claude Managed Agents' wire protocol
//! so the official Anthropic SDK drives Checkfu unchanged.
//!
//! It holds no state and no authority. Every route authenticates the
//! caller once, then calls the native `/v1` API in process as that caller
//! (`cx::Native`), so PermissionAssignments, ActionPolicies, approvals,
//! Budgets, audit and limits are the native ones; it translates shapes both
//! ways and refuses, in CMA's envelope, what it cannot honour (never faking
//! a success, a stop reason or a secret).

pub mod agents;
pub mod cx;
pub mod deployments;
pub mod dreams;
pub mod environments;
pub mod events;
pub mod facts;
pub mod files;
pub mod logcache;
pub mod mapping;
pub mod mcp;
pub mod memory;
pub mod permissions;
pub mod sessions;
pub mod skills;
pub mod threads;
pub mod vaults;
pub mod wire;
pub mod work;

use crate::AppState;
use axum::Router;
use axum::extract::{Path, Request};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use checkfu_core::Error;
use cx::{Cma, Cx};
use serde_json::{Value, json};
use std::sync::Arc;
use wire::{CmaError, CmaResult, refuse};

/// The projection's routes under `prefix` (`/cma`); `native` is the `/v1`
/// router it translates onto. Off (`cma_projection` disabled), every
/// route answers 503 `capability_unavailable`.
pub fn router(state: AppState, native: Router, prefix: &str, enabled: bool) -> Router {
    let cma = Cma { state: state.clone(), native, enabled, default_env: Arc::default(), logs: Arc::default() };
    let v1 = Router::new()
        .route("/agents", get(agents::list).post(agents::create))
        .route("/agents/{id}", get(agents::retrieve).post(agents::update))
        .route("/agents/{id}/archive", post(agents::archive))
        .route("/agents/{id}/versions", get(agents::versions))
        .route("/environments", get(environments::list).post(environments::create))
        .route("/environments/{id}", get(environments::retrieve).post(environments::update).delete(environments::delete))
        .route("/environments/{id}/archive", post(environments::archive))
        .route("/environments/{id}/work", get(work::list))
        .route("/environments/{id}/work/poll", get(work::poll))
        .route("/environments/{id}/work/stats", get(work::stats))
        .route("/environments/{id}/work/{wid}", get(work::retrieve).post(work::update))
        .route("/environments/{id}/work/{wid}/ack", post(work::ack))
        .route("/environments/{id}/work/{wid}/heartbeat", post(work::heartbeat))
        .route("/environments/{id}/work/{wid}/stop", post(work::stop))
        .route("/sessions", get(sessions::list).post(sessions::create))
        .route("/sessions/{id}", get(sessions::retrieve).post(sessions::update).delete(sessions::delete))
        .route("/sessions/{id}/archive", post(sessions::archive))
        .route("/sessions/{id}/events", get(events::list).post(events::send))
        .route("/sessions/{id}/events/stream", get(events::stream))
        .route("/sessions/{id}/threads", get(threads::list))
        .route("/sessions/{id}/threads/{tid}", get(threads::retrieve))
        .route("/sessions/{id}/threads/{tid}/archive", post(threads::archive))
        .route("/sessions/{id}/threads/{tid}/events", get(threads::list_events))
        .route("/sessions/{id}/threads/{tid}/stream", get(threads::stream))
        .route("/sessions/{id}/resources", get(sessions::list_resources).post(sessions::fixed_resources))
        .route(
            "/sessions/{id}/resources/{rid}",
            get(sessions::retrieve_resource).post(sessions::fixed_resources).delete(sessions::fixed_resources),
        )
        .route("/memory_stores", get(memory::list).post(memory::create))
        .route("/memory_stores/{id}", get(memory::retrieve).post(memory::update).delete(memory::delete))
        .route("/memory_stores/{id}/archive", post(memory::archive))
        .route("/memory_stores/{id}/memories", get(memory::list_memories).post(memory::create_memory))
        .route("/memory_stores/{id}/memories/{mid}", get(memory::retrieve_memory).post(memory::update_memory).delete(memory::delete_memory))
        .route("/memory_stores/{id}/memory_versions", get(memory::list_versions))
        .route("/memory_stores/{id}/memory_versions/{vid}", get(memory::retrieve_version))
        .route("/memory_stores/{id}/memory_versions/{vid}/redact", post(memory::redact))
        .route(
            "/files",
            get(files::list).post(files::upload).layer(axum::extract::DefaultBodyLimit::max(crate::routes::uploads::MAX_FORM_BYTES + 1)),
        )
        .route("/files/{id}", get(files::retrieve).delete(files::delete))
        .route("/files/{id}/content", get(files::download))
        .route("/skills", get(skills::list).post(skills::create).layer(axum::extract::DefaultBodyLimit::max(12 << 20)))
        .route("/skills/{id}", get(skills::retrieve).delete(skills::delete))
        .route(
            "/skills/{id}/versions",
            get(skills::list_versions).post(skills::create_version).layer(axum::extract::DefaultBodyLimit::max(12 << 20)),
        )
        .route("/skills/{id}/versions/{n}", get(skills::retrieve_version).delete(skills::delete_version))
        .route("/skills/{id}/versions/{n}/content", get(skills::download_version))
        .route("/dreams", get(dreams::list).post(dreams::create))
        .route("/dreams/{id}", get(dreams::retrieve))
        .route("/dreams/{id}/cancel", post(dreams::cancel))
        .route("/dreams/{id}/archive", post(dreams::archive))
        .route("/vaults", get(vaults::list).post(vaults::create))
        .route("/vaults/{id}", get(vaults::retrieve).post(vaults::update).delete(vaults::delete))
        .route("/vaults/{id}/archive", post(vaults::archive))
        .route("/vaults/{id}/credentials", get(vaults::list_credentials).post(vaults::create_credential))
        .route(
            "/vaults/{id}/credentials/{cid}",
            get(vaults::retrieve_credential).post(vaults::update_credential).delete(vaults::delete_credential),
        )
        .route("/vaults/{id}/credentials/{cid}/archive", post(vaults::archive_credential))
        .route("/vaults/{id}/credentials/{cid}/mcp_oauth_validate", post(vaults::validate_credential))
        .route("/models", get(models))
        .route("/models/{id}", get(model))
        .route("/{family}", any(unsupported))
        .route("/{family}/{*rest}", any(unsupported))
        .fallback(not_found)
        .with_state(cma);
    Router::new()
        .nest(&format!("{}/v1", prefix.trim_end_matches('/')), v1)
        .layer(axum::middleware::from_fn_with_state(state, guard_worker_credentials))
        .layer(axum::middleware::from_fn(echo_workspace))
}

/// A worker's credentials (the environment key `crr_`, a delivery's token
/// `cwt_`) are checked by the sessions service, not by governance as API
/// keys are; they get the same address throttle and per-second limit
/// (`auth::guard_opaque_credential`). API keys pass to `Caller`, which
/// does this itself.
async fn guard_worker_credentials(axum::extract::State(state): axum::extract::State<AppState>, req: Request, next: Next) -> Response {
    let key = match cx::api_key(req.headers()) {
        Ok(k) if k.starts_with(checkfu_core::RUNNER_CREDENTIAL_PREFIX) || k.starts_with(checkfu_core::WORK_TOKEN_PREFIX) => k,
        _ => return next.run(req).await,
    };
    let client = req.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
    match crate::auth::guard_opaque_credential(&state, client, &key, next.run(req)).await {
        Ok(resp) => resp,
        Err(e) => CmaError::from(e).into_response(),
    }
}

/// Families CMA has and Checkfu serves natively instead (§17.1).
const NATIVE_INSTEAD: &[&str] = &["deployments", "deployment_runs", "tunnels", "user_profiles"];

/// `deployments`, `deployment_runs`, `tunnels`, `user_profiles` → 400
/// `unsupported`; any other unknown path → 404.
async fn unsupported(_cx: Cx, Path(params): Path<Vec<(String, String)>>) -> CmaError {
    let family = params.first().map(|(_, v)| v.as_str()).unwrap_or_default();
    if NATIVE_INSTEAD.contains(&family) {
        let why = if family.starts_with("deployment") {
            "CMA deployments are not served: Checkfu's Automations are the native kind (docs/automations.md)"
        } else {
            "this CMA family is not served by Checkfu"
        };
        return refuse("unsupported", why);
    }
    CmaError(Error::new(checkfu_core::Code::NotFound, "no such endpoint"))
}

async fn not_found() -> CmaError {
    CmaError(Error::new(checkfu_core::Code::NotFound, "no such endpoint"))
}

/// Echoes the workspace a request named (CMA clients read it back).
async fn echo_workspace(req: Request, next: Next) -> Response {
    let ws = req.headers().get("anthropic-workspace-id").cloned();
    let mut resp = next.run(req).await;
    if let Some(ws) = ws.filter(|v| HeaderValue::to_str(v).is_ok()) {
        resp.headers_mut().insert("anthropic-workspace-id", ws);
    }
    resp
}

/// `GET /v1/models`: the model names the workspace routes (`cma:<id>`
/// routing profiles), paged by `after_id`/`before_id` as CMA does.
async fn models(cx: Cx, axum::extract::RawQuery(raw): axum::extract::RawQuery) -> CmaResult<Response> {
    let q = wire::query_pairs(raw.as_deref())?;
    let limit = wire::limit(&q, 20, 1000)? as usize;
    let mut all: Vec<Value> = routed(&cx).await?;
    all.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let start = match wire::param(&q, "after_id") {
        Some(a) => all.iter().position(|m| m["id"] == a).map(|i| i + 1).unwrap_or(all.len()),
        None => 0,
    };
    let end = match wire::param(&q, "before_id") {
        Some(b) => all.iter().position(|m| m["id"] == b).unwrap_or(0),
        None => all.len(),
    };
    let slice: Vec<Value> = all.get(start..end.max(start)).unwrap_or_default().iter().take(limit).cloned().collect();
    let has_more = start + slice.len() < end;
    let body = json!({"data": slice, "has_more": has_more, "first_id": slice.first().map(|m| m["id"].clone()), "last_id": slice.last().map(|m| m["id"].clone())});
    Ok(axum::Json(body).into_response())
}

/// `GET /v1/models/{id}`.
async fn model(cx: Cx, Path(id): Path<String>) -> CmaResult<axum::Json<Value>> {
    routed(&cx).await?.into_iter().find(|m| m["id"] == id.as_str()).map(axum::Json).ok_or_else(|| CmaError(Error::not_found("model", &id)))
}

/// The models named by `cma:<id>` routing profiles (`cma:*` names none).
async fn routed(cx: &Cx) -> CmaResult<Vec<Value>> {
    let profiles: Vec<crate::views::ModelRoutingProfile> =
        cx.native.all(&format!("/v1/model-routing-profiles?environment_id={}", cx.env_id), 1000).await?;
    Ok(profiles
        .iter()
        .filter_map(|p| {
            let name = p.name.strip_prefix("cma:")?;
            (name != "*").then(|| json!({"type": "model", "id": name, "display_name": name, "created_at": p.created_at}))
        })
        .collect())
}
