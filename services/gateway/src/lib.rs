//! The public gateway: the REST and SSE API of api.md under `/v1`. It owns
//! authentication, the error envelope, request ids and idempotency, and
//! reaches every other service only through its tonic client.

pub mod auth;
pub mod authz;
pub mod error;
pub mod extract;
pub mod idempotency;
pub mod routes;
pub mod views;

use crate::error::{ApiError, REQUEST_ID};
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use checkfu_core::{Code, Error, Result};
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::governance::v1::governance_service_client::GovernanceServiceClient;
use checkfu_proto::modelgateway::v1::model_gateway_service_client::ModelGatewayServiceClient;
use checkfu_proto::sessions::v1::sessions_service_client::SessionsServiceClient;
use checkfu_store::{Db, Location, Migrations};
use idempotency::IdempotencyStore;
use std::sync::Arc;
use tonic::transport::Channel;

static SQLITE: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite/gateway");
static POSTGRES: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres/gateway");

pub const MIGRATIONS: Migrations = Migrations { sqlite: &SQLITE, postgres: &POSTGRES };

/// Clients of the services behind the gateway, and its own store.
#[derive(Clone)]
pub struct AppState {
    pub gov: GovernanceServiceClient<Channel>,
    pub sessions: SessionsServiceClient<Channel>,
    pub models: ModelGatewayServiceClient<Channel>,
    pub idem: Arc<IdempotencyStore>,
    /// Cancelled when the node drains: long-lived streams end with it.
    pub shutdown: tokio_util::sync::CancellationToken,
}

/// Channels to the services the gateway calls.
pub struct Upstreams {
    pub governance: Channel,
    pub sessions: Channel,
    pub model_gateway: Channel,
}

impl AppState {
    pub async fn open(location: &Location, up: Upstreams, shutdown: tokio_util::sync::CancellationToken) -> Result<AppState> {
        let db = Db::open(location, "gateway", &MIGRATIONS).await?;
        let idem = Arc::new(IdempotencyStore::new(db));
        let purge = idem.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = purge.purge_expired().await {
                    tracing::warn!(error = %e, "purging idempotency records failed");
                }
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            }
        });
        const MAX: usize = 64 * 1024 * 1024;
        Ok(AppState {
            gov: GovernanceServiceClient::new(up.governance).max_decoding_message_size(MAX),
            sessions: SessionsServiceClient::new(up.sessions).max_decoding_message_size(MAX),
            models: ModelGatewayServiceClient::new(up.model_gateway).max_decoding_message_size(MAX),
            idem,
            shutdown,
        })
    }

    /// Every Environment id (for callers whose reach is their own Sessions).
    pub async fn all_envs(&self) -> Result<Vec<String>, ApiError> {
        let mut out = vec![];
        let mut page = String::new();
        loop {
            let r = self.gov.clone().list_environments(gov::ListRequest { limit: 100, page: page.clone() }).await?.into_inner();
            out.extend(r.data.into_iter().map(|e| e.id));
            if r.next_page.is_empty() {
                return Ok(out);
            }
            page = r.next_page;
        }
    }
}

/// Gives every request an id (`request-id` header, and `request_id` in error
/// envelopes) and keeps it in scope for the handler.
async fn request_id(req: Request, next: Next) -> Response {
    let id = checkfu_core::id::new_id("req");
    let mut resp = REQUEST_ID.scope(id.clone(), next.run(req)).await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("request-id", v);
    }
    resp
}

async fn not_found() -> Response {
    ApiError(Error::new(Code::NotFound, "no such endpoint")).into_response()
}

async fn method_not_allowed(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    if resp.status() == axum::http::StatusCode::METHOD_NOT_ALLOWED {
        let mut e = ApiError(Error::invalid("this method is not allowed on this endpoint")).into_response();
        *e.status_mut() = axum::http::StatusCode::METHOD_NOT_ALLOWED;
        return e;
    }
    resp
}

/// The `/v1` API (without fallback: see [`finish`]).
pub fn router(state: AppState) -> Router {
    use routes::{catalog as c, identity as i, sessions as s};
    let v1 = Router::new()
        .route("/principals", post(i::create_principal).get(i::list_principals))
        .route("/principals/{id}", get(i::get_principal).post(i::update_principal))
        .route("/principals/{id}/api-keys", post(i::create_api_key).get(i::list_api_keys))
        .route("/api-keys/{id}", delete(i::revoke_api_key))
        .route("/groups", post(i::create_group).get(i::list_groups))
        .route("/groups/{id}", get(i::get_group))
        .route("/groups/{id}/members", post(i::add_member))
        .route("/groups/{id}/members/{principal_id}", delete(i::remove_member))
        .route("/environments", post(i::create_environment).get(i::list_environments))
        .route("/environments/{id}", get(i::get_environment).post(i::update_environment))
        .route("/permission-assignments", post(i::create_assignment).get(i::list_assignments))
        .route("/permission-assignments/{id}", get(i::get_assignment).delete(i::delete_assignment))
        .route("/agents", post(c::create_agent).get(c::list_agents))
        .route("/agents/{id}", get(c::get_agent).post(c::update_agent))
        .route("/agents/{id}/archive", post(c::archive_agent))
        .route("/agents/{id}/versions", post(c::publish_version).get(c::list_versions))
        .route("/agents/{id}/versions/{n}", get(c::get_version))
        .route("/sandbox-profiles", post(c::create_sandbox_profile).get(c::list_sandbox_profiles))
        .route("/sandbox-profiles/{id}", get(c::get_sandbox_profile))
        .route("/sandbox-profiles/{id}/revisions", post(c::publish_sandbox_revision))
        .route("/sandbox-profiles/{id}/revisions/{n}", get(c::get_sandbox_revision))
        .route("/model-routing-profiles", post(c::create_routing_profile).get(c::list_routing_profiles))
        .route("/model-routing-profiles/{id}", get(c::get_routing_profile))
        .route("/agent-deployments", post(c::create_deployment).get(c::list_deployments))
        .route("/agent-deployments/{id}", get(c::get_deployment))
        .route("/agent-deployments/{id}/revisions", post(c::create_deployment_revision))
        .route("/price-catalog", get(c::price_catalog))
        .route("/sessions", post(s::create_session).get(s::list_sessions))
        .route("/sessions/{id}", get(s::get_session))
        .route("/sessions/{id}/archive", post(s::archive_session))
        .route("/sessions/{id}/selection", post(s::update_selection))
        .route("/sessions/{id}/events", post(s::post_event).get(s::list_events))
        .route("/sessions/{id}/events/stream", get(s::stream_events))
        .route("/sessions/{id}/runs", get(s::list_runs))
        .route("/runs/{id}", get(s::get_run))
        .with_state(state);
    Router::new().nest("/v1", v1)
}

/// Wraps the node's whole router (API, gRPC, health) with the edge
/// behaviour: request ids, the body limit, and envelopes for unknown paths
/// and methods. Applied once, last, because a router has one fallback.
pub fn finish(app: Router) -> Router {
    app.fallback(not_found)
        .layer(axum::middleware::from_fn(method_not_allowed))
        .layer(DefaultBodyLimit::max(extract::MAX_BODY_BYTES + 1))
        .layer(axum::middleware::from_fn(request_id))
}
