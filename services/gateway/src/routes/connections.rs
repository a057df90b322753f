//! Connections and their credentials (api.md §16.1–16.2), and capability
//! status (§16.8).
//!
//! A Connection is seen by its owner, `manage` holders on its Environment
//! and `use_connection` holders (others get 404), and written by its owner
//! or `manage` (`manage` never implies `use_connection`). A personal
//! Connection (`owner:{kind:"principal", id:<caller>}`) needs only `read`
//! and mints an audited `use_connection` row for its owner. Credentials go
//! in and never come out: every response carries the read form only.

use super::Paging;
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
use checkfu_proto::governance::v1 as gov;
use serde::Deserialize;
use utoipa::IntoParams;

type J<T> = ApiResult<Json<T>>;

pub(crate) async fn connection_for(st: &AppState, id: &str) -> ApiResult<cap::Connection> {
    checkfu_core::id::ConnectionId::check("id", id)?;
    Ok(st.connections.clone().get_connection(cap::GetConnectionRequest { id: id.into() }).await?.into_inner())
}

fn owns(caller: &Caller, c: &cap::Connection) -> bool {
    c.owner_kind == "principal" && c.owner_id == caller.principal_id
}

/// Its owner, `manage` on its Environment.
async fn may_write(st: &AppState, caller: &Caller, c: &cap::Connection) -> ApiResult<bool> {
    Ok(owns(caller, c) || st.allowed(&caller.principal_id, "manage", "environment", &c.environment_id, &c.environment_id).await?)
}

/// Its owner, `manage`, or `use_connection` on it.
async fn may_see(st: &AppState, caller: &Caller, c: &cap::Connection) -> ApiResult<bool> {
    Ok(may_write(st, caller, c).await?
        || st.allowed(&caller.principal_id, "use_connection", "connection", &c.id, &c.environment_id).await?)
}

async fn require_see(st: &AppState, caller: &Caller, c: &cap::Connection) -> ApiResult<()> {
    if may_see(st, caller, c).await? { Ok(()) } else { Err(Error::not_found("connection", &c.id).into()) }
}

async fn require_write(st: &AppState, caller: &Caller, c: &cap::Connection) -> ApiResult<()> {
    if may_write(st, caller, c).await? {
        return Ok(());
    }
    require_see(st, caller, c).await?;
    Err(Error::denied(format!("{} may not change connection {}: it needs to own it or hold manage", caller.principal_id, c.id))
        .with_details(serde_json::json!({"permission": "manage", "resource": {"kind": "environment", "id": c.environment_id}}))
        .into())
}

#[utoipa::path(post, path = "/v1/connections", tag = "connections", operation_id = "connections.createConnection", params(crate::idempotency::IdempotencyKeyHeader), request_body = wire::CreateConnection,
    responses((status = 201, body = wire::Connection), (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn create_connection(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let b: wire::CreateConnection = parse(&body)?;
    let (owner_kind, owner_id) = match &b.owner {
        None => (String::new(), String::new()),
        Some(o) => (o.kind.clone(), o.id.clone().unwrap_or_default()),
    };
    let personal = owner_kind == "principal";
    if personal {
        if owner_id != caller.principal_id {
            return Err(
                Error::invalid_field("owner.id", "a personal Connection belongs to the caller: owner.id must be your own id").into()
            );
        }
        checkfu_core::id::EnvironmentId::check("environment_id", &b.environment_id)?;
        st.require_read(&caller, &b.environment_id).await?;
    } else {
        st.require_manage(&caller, &b.environment_id).await?;
    }
    // `credential_json` too, for a 0.1.0 capability gateway until the release after it.
    #[allow(deprecated)]
    let req = cap::CreateConnectionRequest {
        environment_id: b.environment_id.clone(),
        name: b.name,
        description: b.description.unwrap_or_default(),
        metadata_json: b.metadata.map(|m| m.to_string()).unwrap_or_default(),
        kind: b.kind,
        url: b.endpoint.url,
        owner_kind,
        owner_id,
        credential: b.credential.as_ref().map(cap::CredentialInput::from_json).transpose()?,
        credential_json: b.credential.map(|c| c.to_string()).unwrap_or_default(),
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/connections", &body, || async {
        let c = st.connections.clone().create_connection(req).await?.into_inner();
        if personal {
            // Its owner may use it; the row is audited like any grant.
            let grant = gov::CreatePermissionAssignmentRequest {
                subject: Some(gov::ResourceRef { kind: "principal".into(), id: caller.principal_id.clone() }),
                permission: "use_connection".into(),
                resource: Some(gov::ResourceRef { kind: "connection".into(), id: c.id.clone() }),
                environment_id: c.environment_id.clone(),
                actor_id: caller.principal_id.clone(),
            };
            st.gov.clone().create_permission_assignment(grant).await?;
        }
        super::created(wire::connection(&c))
    })
    .await
}

/// `?environment_id=&kind=&status=&limit=&page=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ConnectionQuery {
    /// Only this Environment.
    #[serde(default)]
    pub environment_id: Option<String>,
    /// `mcp` or `http`.
    #[serde(default)]
    pub kind: Option<String>,
    /// `active`, `disabled` or `revoked`.
    #[serde(default)]
    pub status: Option<String>,
}

/// The Connections the caller may see, in the named Environment or in
/// every Environment it can read. A page holds at most `limit` and may hold
/// fewer: rows the caller may not see are left out of it.
#[utoipa::path(get, path = "/v1/connections", tag = "connections", operation_id = "connections.listConnections", params(Paging, ConnectionQuery),
    responses((status = 200, body = Page<wire::Connection>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_connections(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<ConnectionQuery>,
    paging: Paging,
) -> J<Page<wire::Connection>> {
    let envs = match q.environment_id.as_deref().filter(|e| !e.is_empty()) {
        // Named: a use_connection holder may list without `read` there.
        Some(env) => {
            checkfu_core::id::EnvironmentId::check("environment_id", env)?;
            vec![env.to_string()]
        }
        None => st.readable_envs(&caller, None).await?,
    };
    let req = cap::ListConnectionsRequest {
        environment_ids: envs,
        kind: q.kind.unwrap_or_default(),
        status: q.status.unwrap_or_default(),
        limit: paging.limit(),
        page: paging.page(),
    };
    let r = st.connections.clone().list_connections(req).await?.into_inner();
    let mut seen = vec![];
    for c in r.data {
        if may_see(&st, &caller, &c).await? {
            seen.push(c);
        }
    }
    Ok(Json(page(&seen, &r.next_page, wire::connection)))
}

#[utoipa::path(get, path = "/v1/connections/{id}", tag = "connections", operation_id = "connections.getConnection", params(("id" = String, Path)),
    responses((status = 200, body = wire::Connection), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_connection(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<wire::Connection> {
    let c = connection_for(&st, &id).await?;
    require_see(&st, &caller, &c).await?;
    Ok(Json(wire::connection(&c)))
}

#[utoipa::path(post, path = "/v1/connections/{id}", tag = "connections", operation_id = "connections.updateConnection", params(("id" = String, Path)), request_body = wire::UpdateConnection,
    responses((status = 200, body = wire::Connection), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_connection(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> J<wire::Connection> {
    let c = connection_for(&st, &id).await?;
    require_write(&st, &caller, &c).await?;
    let b: wire::UpdateConnection = parse(&body)?;
    let req = cap::UpdateConnectionRequest {
        id,
        name: b.name,
        description: b.description,
        metadata_json: b.metadata.map(|m| m.to_string()),
        disabled: b.disabled,
        expected_version: b.expected_version,
        actor_id: caller.principal_id,
    };
    Ok(Json(wire::connection(&st.connections.clone().update_connection(req).await?.into_inner())))
}

/// Terminal: the credential is destroyed at once, the record stays
/// readable, and later writes answer 409 `connection_revoked`.
#[utoipa::path(post, path = "/v1/connections/{id}/revoke", tag = "connections", operation_id = "connections.revokeConnection", params(("id" = String, Path)),
    responses((status = 200, body = wire::Connection), (status = "4XX", body = ErrorEnvelope)))]
pub async fn revoke_connection(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<wire::Connection> {
    let c = connection_for(&st, &id).await?;
    require_write(&st, &caller, &c).await?;
    let req = cap::ConnectionActorRequest { id, actor_id: caller.principal_id };
    Ok(Json(wire::connection(&st.connections.clone().revoke_connection(req).await?.into_inner())))
}

/// Sets the credential, or replaces (rotates) the one held. The body is
/// the credential itself.
#[utoipa::path(post, path = "/v1/connections/{id}/credential", tag = "connections", operation_id = "connections.setConnectionCredential", params(("id" = String, Path)), request_body = wire::CredentialInput,
    responses((status = 200, body = wire::Connection), (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn set_credential(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> J<wire::Connection> {
    let c = connection_for(&st, &id).await?;
    require_write(&st, &caller, &c).await?;
    // `credential_json` too, for a 0.1.0 capability gateway until the release after it.
    #[allow(deprecated)]
    let req = cap::SetCredentialRequest {
        id,
        credential: Some(cap::CredentialInput::from_json(&body)?),
        credential_json: body.to_string(),
        actor_id: caller.principal_id,
    };
    Ok(Json(wire::connection(&st.connections.clone().set_credential(req).await?.into_inner())))
}

#[utoipa::path(delete, path = "/v1/connections/{id}/credential", tag = "connections", operation_id = "connections.deleteConnectionCredential", params(("id" = String, Path)),
    responses((status = 200, body = wire::Connection), (status = "4XX", body = ErrorEnvelope)))]
pub async fn delete_credential(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<wire::Connection> {
    let c = connection_for(&st, &id).await?;
    require_write(&st, &caller, &c).await?;
    let req = cap::ConnectionActorRequest { id, actor_id: caller.principal_id };
    Ok(Json(wire::connection(&st.connections.clone().delete_credential(req).await?.into_inner())))
}

/// Which optional features this installation offers, why not, and their
/// limits. Any key may ask.
#[utoipa::path(get, path = "/v1/capabilities", tag = "capabilities", operation_id = "capabilities.listCapabilities",
    responses((status = 200, body = Page<wire::Capability>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_capabilities(State(st): State<AppState>, _caller: Caller) -> J<Page<wire::Capability>> {
    let r = st.connections.clone().list_capabilities(cap::ListCapabilitiesRequest {}).await?.into_inner();
    Ok(Json(page(&r.data, "", wire::capability)))
}
