//! ConnectionVaults (api.md §16.3): `manage` on the Environment for every
//! call. Each Connection and agent a vault names must belong to its
//! Environment (400 otherwise); governance checks Principals and Groups and
//! compiles the rows.

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
use checkfu_core::{Code, Error};
use checkfu_proto::capability::v1 as cap;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::sessions::v1 as ss;

type J<T> = ApiResult<Json<T>>;

/// Every Connection and agent named lives in `environment_id`.
async fn check_members(st: &AppState, environment_id: &str, connection_ids: &[String], grantees: &[wire::VaultGrantee]) -> ApiResult<()> {
    let outside = |field: String, what: &str, id: &str| {
        Error::invalid_field(&field, format!("{what} {id} is not in environment {environment_id}")).with_reason("other_environment")
    };
    for (i, id) in connection_ids.iter().enumerate().take(wire_limit()) {
        let field = format!("connection_ids[{i}]");
        checkfu_core::id::ConnectionId::check(&field, id)?;
        let c = st.connections.clone().get_connection(cap::GetConnectionRequest { id: id.clone() }).await;
        match c {
            Ok(c) if c.get_ref().environment_id == environment_id => {}
            Ok(_) => return Err(outside(field, "connection", id).into()),
            Err(s) if Error::from(s.clone()).code == Code::NotFound => return Err(outside(field, "connection", id).into()),
            Err(s) => return Err(Error::from(s).into()),
        }
    }
    for (i, g) in grantees.iter().enumerate().take(wire_limit()).filter(|(_, g)| g.kind == "agent_definition") {
        let field = format!("grantees[{i}].id");
        checkfu_core::id::AgentId::check(&field, &g.id)?;
        match st.sessions.clone().get_agent(ss::GetByIdRequest { id: g.id.clone() }).await {
            Ok(a) if a.get_ref().environment_id == environment_id => {}
            Ok(_) => return Err(outside(field, "agent", &g.id).into()),
            Err(s) if Error::from(s.clone()).code == Code::NotFound => return Err(outside(field, "agent", &g.id).into()),
            Err(s) => return Err(Error::from(s).into()),
        }
    }
    Ok(())
}

/// Beyond this governance refuses the list anyway; no need to look further.
fn wire_limit() -> usize {
    101
}

fn grantees(g: &[wire::VaultGrantee]) -> Vec<gov::Grantee> {
    g.iter().map(|g| gov::Grantee { kind: g.kind.clone(), id: g.id.clone() }).collect()
}

/// The vaults a Session is created with: each readable by the caller
/// (else 404, as if absent), of its Environment and not archived (400).
pub async fn check_session_vaults(st: &AppState, caller: &Caller, environment_id: &str, ids: &[String]) -> ApiResult<()> {
    if ids.len() > 20 {
        return Err(Error::invalid_field("connection_vault_ids", "at most 20 connection vaults").into());
    }
    for (i, id) in ids.iter().enumerate() {
        let field = format!("connection_vault_ids[{i}]");
        checkfu_core::id::VaultId::check(&field, id)?;
        let v = st.gov.clone().get_connection_vault(gov::GetByIdRequest { id: id.clone() }).await?.into_inner();
        if !st.allowed(&caller.principal_id, "manage", "environment", &v.environment_id, &v.environment_id).await? {
            return Err(Error::not_found("connection_vault", id).into());
        }
        if v.environment_id != environment_id {
            return Err(Error::invalid_field(&field, format!("connection vault {id} is not in environment {environment_id}"))
                .with_reason("other_environment")
                .into());
        }
        if !v.archived_at.is_empty() {
            return Err(Error::invalid_field(&field, format!("connection vault {id} is archived")).with_reason("vault_archived").into());
        }
    }
    Ok(())
}

async fn vault_for(st: &AppState, caller: &Caller, id: &str) -> ApiResult<gov::ConnectionVault> {
    checkfu_core::id::VaultId::check("id", id)?;
    let v = st.gov.clone().get_connection_vault(gov::GetByIdRequest { id: id.into() }).await?.into_inner();
    st.require_manage(caller, &v.environment_id).await?;
    Ok(v)
}

#[utoipa::path(post, path = "/v1/connection-vaults", tag = "connectionVaults", operation_id = "connectionVaults.createConnectionVault", params(crate::idempotency::IdempotencyKeyHeader), request_body = wire::CreateConnectionVault,
    responses((status = 201, body = wire::ConnectionVault), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_vault(State(st): State<AppState>, caller: Caller, headers: HeaderMap, JsonBody(body): JsonBody) -> ApiResult<Response> {
    let b: wire::CreateConnectionVault = parse(&body)?;
    st.require_manage(&caller, &b.environment_id).await?;
    check_members(&st, &b.environment_id, &b.connection_ids, &b.grantees).await?;
    let req = gov::CreateConnectionVaultRequest {
        environment_id: b.environment_id,
        name: b.name,
        connection_ids: b.connection_ids,
        grantees: grantees(&b.grantees),
        actor_id: caller.principal_id.clone(),
        metadata: b.metadata.into_iter().collect(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/connection-vaults", &body, || async {
        created(wire::vault(&st.gov.clone().create_connection_vault(req).await?.into_inner()))
    })
    .await
}

#[utoipa::path(get, path = "/v1/connection-vaults", tag = "connectionVaults", operation_id = "connectionVaults.listConnectionVaults", params(Paging, InEnvironment),
    responses((status = 200, body = Page<wire::ConnectionVault>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_vaults(
    State(st): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(env): Query<InEnvironment>,
) -> J<Page<wire::ConnectionVault>> {
    let mut envs = vec![];
    for env in st.readable_envs(&caller, env.environment_id.as_deref()).await? {
        if st.allowed(&caller.principal_id, "manage", "environment", &env, &env).await? {
            envs.push(env);
        }
    }
    let req = gov::ListConnectionVaultsRequest { environment_ids: envs, limit: paging.limit(), page: paging.page() };
    let r = st.gov.clone().list_connection_vaults(req).await?.into_inner();
    Ok(Json(page(&r.data, &r.next_page, wire::vault)))
}

#[utoipa::path(get, path = "/v1/connection-vaults/{id}", tag = "connectionVaults", operation_id = "connectionVaults.getConnectionVault", params(("id" = String, Path)),
    responses((status = 200, body = wire::ConnectionVault), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_vault(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<wire::ConnectionVault> {
    Ok(Json(wire::vault(&vault_for(&st, &caller, &id).await?)))
}

/// Lists replace; the compiled rows change by exactly the difference.
#[utoipa::path(post, path = "/v1/connection-vaults/{id}", tag = "connectionVaults", operation_id = "connectionVaults.updateConnectionVault", params(("id" = String, Path)), request_body = wire::UpdateConnectionVault,
    responses((status = 200, body = wire::ConnectionVault), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_vault(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> J<wire::ConnectionVault> {
    let v = vault_for(&st, &caller, &id).await?;
    let b: wire::UpdateConnectionVault = parse(&body)?;
    check_members(&st, &v.environment_id, b.connection_ids.as_deref().unwrap_or(&[]), b.grantees.as_deref().unwrap_or(&[])).await?;
    let req = gov::UpdateConnectionVaultRequest {
        id,
        name: b.name,
        set_connection_ids: b.connection_ids.is_some(),
        connection_ids: b.connection_ids.unwrap_or_default(),
        set_grantees: b.grantees.is_some(),
        grantees: grantees(b.grantees.as_deref().unwrap_or(&[])),
        set_metadata: b.metadata.is_some(),
        metadata: b.metadata.unwrap_or_default().into_iter().collect(),
        expected_version: b.expected_version,
        actor_id: caller.principal_id,
    };
    Ok(Json(wire::vault(&st.gov.clone().update_connection_vault(req).await?.into_inner())))
}

/// Deletes the vault and every row it compiled; direct rows stay.
#[utoipa::path(delete, path = "/v1/connection-vaults/{id}", tag = "connectionVaults", operation_id = "connectionVaults.deleteConnectionVault", params(("id" = String, Path)),
    responses((status = 200, body = wire::ConnectionVault), (status = "4XX", body = ErrorEnvelope)))]
pub async fn delete_vault(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<wire::ConnectionVault> {
    vault_for(&st, &caller, &id).await?;
    let req = gov::ActorRequest { id, actor_id: caller.principal_id };
    Ok(Json(wire::vault(&st.gov.clone().delete_connection_vault(req).await?.into_inner())))
}

/// Keeps the record and deletes its rows; later edits → 409
/// `vault_archived`. Again → the archived vault.
#[utoipa::path(post, path = "/v1/connection-vaults/{id}/archive", tag = "connectionVaults", operation_id = "connectionVaults.archiveConnectionVault", params(("id" = String, Path)),
    responses((status = 200, body = wire::ConnectionVault), (status = "4XX", body = ErrorEnvelope)))]
pub async fn archive_vault(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<wire::ConnectionVault> {
    vault_for(&st, &caller, &id).await?;
    let req = gov::ArchiveConnectionVaultRequest { id, expected_version: None, actor_id: caller.principal_id };
    Ok(Json(wire::vault(&st.gov.clone().archive_connection_vault(req).await?.into_inner())))
}
