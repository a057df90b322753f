//! Principals, API keys, Groups, Environments and PermissionAssignments.

use super::{Paging, created};
use crate::AppState;
use crate::auth::Caller;
use crate::bodies::{self, parse};
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query};
use crate::idempotency::once;
use crate::views::{self, ErrorEnvelope, Page};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use checkfu_core::Error;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::sessions::v1 as ss;
use serde::Deserialize;
use utoipa::IntoParams;

type J<T> = ApiResult<Json<T>>;

#[utoipa::path(post, path = "/v1/principals", tag = "principals", operation_id = "principals.createPrincipal", params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::CreatePrincipal,
    responses((status = 201, body = views::Principal), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_principal(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    st.require_admin(&caller).await?;
    let b: bodies::CreatePrincipal = parse(&body)?;
    let req = gov::CreatePrincipalRequest { kind: b.kind, name: b.name, actor_id: caller.principal_id.clone() };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/principals", &body, || async {
        created(views::principal(&st.gov.clone().create_principal(req).await?.into_inner()))
    })
    .await
}

#[utoipa::path(get, path = "/v1/principals", tag = "principals", operation_id = "principals.listPrincipals", params(Paging),
    responses((status = 200, body = Page<views::Principal>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_principals(State(st): State<AppState>, caller: Caller, paging: Paging) -> J<Page<views::Principal>> {
    st.require_admin(&caller).await?;
    let r = st.gov.clone().list_principals(gov::ListRequest { limit: paging.limit(), page: paging.page() }).await?.into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::principal)))
}

#[utoipa::path(get, path = "/v1/principals/{id}", tag = "principals", operation_id = "principals.getPrincipal", params(("id" = String, Path)),
    responses((status = 200, body = views::Principal), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_principal(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Principal> {
    if id != caller.principal_id {
        st.require_admin(&caller).await?;
    }
    Ok(Json(views::principal(&st.gov.clone().get_principal(gov::GetByIdRequest { id }).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/principals/{id}", tag = "principals", operation_id = "principals.updatePrincipal", params(("id" = String, Path)), request_body = bodies::UpdatePrincipal,
    responses((status = 200, body = views::Principal), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_principal(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> J<views::Principal> {
    st.require_admin(&caller).await?;
    let b: bodies::UpdatePrincipal = parse(&body)?;
    if b.disabled == Some(true) && id == caller.principal_id {
        return Err(Error::conflict("a principal cannot disable itself").into());
    }
    let p = st
        .gov
        .clone()
        .update_principal(gov::UpdatePrincipalRequest { id, disabled: b.disabled, actor_id: caller.principal_id })
        .await?
        .into_inner();
    Ok(Json(views::principal(&p)))
}

#[utoipa::path(post, path = "/v1/principals/{id}/api-keys", tag = "apiKeys", operation_id = "apiKeys.createApiKey", params(crate::idempotency::IdempotencyKeyHeader, ("id" = String, Path)), request_body = bodies::CreateApiKey,
    responses((status = 201, description = "The key with its secret, shown once", body = views::ApiKey), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_api_key(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    if id != caller.principal_id {
        st.require_admin(&caller).await?;
    }
    let b: bodies::CreateApiKey = parse(&body)?;
    let name = b.name.unwrap_or_else(|| "default".into());
    let route = format!("POST /v1/principals/{id}/api-keys");
    once(&st.idem, &caller.principal_id, &headers, &route, &body, || async {
        let r = st
            .gov
            .clone()
            .create_api_key(gov::CreateApiKeyRequest { principal_id: id, name, actor_id: caller.principal_id.clone() })
            .await?
            .into_inner();
        let mut v = views::api_key(&r.key.unwrap_or_default());
        v.secret = Some(r.secret);
        created(v)
    })
    .await
}

#[utoipa::path(get, path = "/v1/principals/{id}/api-keys", tag = "apiKeys", operation_id = "apiKeys.listApiKeys", params(("id" = String, Path), Paging),
    responses((status = 200, body = Page<views::ApiKey>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_api_keys(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, paging: Paging) -> J<Page<views::ApiKey>> {
    if id != caller.principal_id {
        st.require_admin(&caller).await?;
    }
    let r = st
        .gov
        .clone()
        .list_api_keys(gov::ListApiKeysRequest { principal_id: id, limit: paging.limit(), page: paging.page() })
        .await?
        .into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::api_key)))
}

#[utoipa::path(delete, path = "/v1/api-keys/{id}", tag = "apiKeys", operation_id = "apiKeys.revokeApiKey", params(("id" = String, Path)),
    responses((status = 200, description = "Revoked at once", body = views::ApiKey), (status = "4XX", body = ErrorEnvelope)))]
pub async fn revoke_api_key(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::ApiKey> {
    checkfu_core::id::KeyId::check("id", &id)?;
    let key = st.gov.clone().get_api_key(gov::GetByIdRequest { id: id.clone() }).await?.into_inner();
    if key.principal_id != caller.principal_id {
        st.require_admin(&caller).await?;
    }
    Ok(Json(views::api_key(&st.gov.clone().revoke_api_key(gov::ActorRequest { id, actor_id: caller.principal_id }).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/groups", tag = "groups", operation_id = "groups.createGroup", params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::Named,
    responses((status = 201, body = views::Group), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_group(State(st): State<AppState>, caller: Caller, headers: HeaderMap, JsonBody(body): JsonBody) -> ApiResult<Response> {
    st.require_admin(&caller).await?;
    let b: bodies::Named = parse(&body)?;
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/groups", &body, || async {
        created(views::group(
            &st.gov
                .clone()
                .create_group(gov::CreateGroupRequest { name: b.name, actor_id: caller.principal_id.clone() })
                .await?
                .into_inner(),
        ))
    })
    .await
}

#[utoipa::path(get, path = "/v1/groups", tag = "groups", operation_id = "groups.listGroups", params(Paging),
    responses((status = 200, body = Page<views::Group>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_groups(State(st): State<AppState>, caller: Caller, paging: Paging) -> J<Page<views::Group>> {
    st.require_admin(&caller).await?;
    let r = st.gov.clone().list_groups(gov::ListRequest { limit: paging.limit(), page: paging.page() }).await?.into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::group)))
}

#[utoipa::path(get, path = "/v1/groups/{id}", tag = "groups", operation_id = "groups.getGroup", params(("id" = String, Path)),
    responses((status = 200, body = views::Group), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_group(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Group> {
    st.require_admin(&caller).await?;
    Ok(Json(views::group(&st.gov.clone().get_group(gov::GetByIdRequest { id }).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/groups/{id}/members", tag = "groups", operation_id = "groups.addGroupMember", params(("id" = String, Path)), request_body = bodies::AddMember,
    responses((status = 201, body = views::Group), (status = "4XX", body = ErrorEnvelope)))]
pub async fn add_member(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<(StatusCode, Json<views::Group>)> {
    st.require_admin(&caller).await?;
    let b: bodies::AddMember = parse(&body)?;
    let req = gov::GroupMemberRequest { group_id: id, principal_id: b.principal_id, actor_id: caller.principal_id };
    Ok((StatusCode::CREATED, Json(views::group(&st.gov.clone().add_group_member(req).await?.into_inner()))))
}

#[utoipa::path(delete, path = "/v1/groups/{id}/members/{principal_id}", tag = "groups", operation_id = "groups.removeGroupMember", params(("id" = String, Path), ("principal_id" = String, Path)),
    responses((status = 200, body = views::Group), (status = "4XX", body = ErrorEnvelope)))]
pub async fn remove_member(
    State(st): State<AppState>,
    caller: Caller,
    Path((id, principal_id)): Path<(String, String)>,
) -> J<views::Group> {
    st.require_admin(&caller).await?;
    let req = gov::GroupMemberRequest { group_id: id, principal_id, actor_id: caller.principal_id };
    Ok(Json(views::group(&st.gov.clone().remove_group_member(req).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/environments", tag = "environments", operation_id = "environments.createEnvironment", params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::Named,
    responses((status = 201, body = views::Environment), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_environment(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    st.require_admin(&caller).await?;
    let b: bodies::Named = parse(&body)?;
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/environments", &body, || async {
        created(views::environment(
            &st.gov
                .clone()
                .create_environment(gov::CreateEnvironmentRequest { name: b.name, actor_id: caller.principal_id.clone() })
                .await?
                .into_inner(),
        ))
    })
    .await
}

#[utoipa::path(get, path = "/v1/environments", tag = "environments", operation_id = "environments.listEnvironments", params(Paging),
    responses((status = 200, description = "The Environments the caller may read", body = Page<views::Environment>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_environments(State(st): State<AppState>, caller: Caller, paging: Paging) -> J<Page<views::Environment>> {
    let r = st.gov.clone().list_environments(gov::ListRequest { limit: paging.limit(), page: paging.page() }).await?.into_inner();
    let mut data = vec![];
    for e in &r.data {
        if st.allowed(&caller.principal_id, "read", "environment", &e.id, &e.id).await? {
            data.push(views::environment(e));
        }
    }
    Ok(Json(Page { data, next_page: (!r.next_page.is_empty()).then_some(r.next_page) }))
}

#[utoipa::path(get, path = "/v1/environments/{id}", tag = "environments", operation_id = "environments.getEnvironment", params(("id" = String, Path)),
    responses((status = 200, body = views::Environment), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_environment(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Environment> {
    checkfu_core::id::EnvironmentId::check("id", &id)?;
    st.require_read(&caller, &id).await?;
    Ok(Json(views::environment(&st.gov.clone().get_environment(gov::GetByIdRequest { id }).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/environments/{id}", tag = "environments", operation_id = "environments.updateEnvironment", params(("id" = String, Path)), request_body = bodies::UpdateEnvironment,
    responses((status = 200, body = views::Environment), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_environment(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> J<views::Environment> {
    st.require_admin(&caller).await?;
    let b: bodies::UpdateEnvironment = parse(&body)?;
    let req =
        gov::UpdateEnvironmentRequest { id, disabled: b.disabled, expected_version: b.expected_version, actor_id: caller.principal_id };
    Ok(Json(views::environment(&st.gov.clone().update_environment(req).await?.into_inner())))
}

/// The Environment holding an assignable resource, or `None` when only an
/// installation admin may grant on it.
async fn holding_environment(st: &AppState, caller: &Caller, kind: &str, id: &str) -> ApiResult<Option<String>> {
    Ok(match kind {
        "environment" => {
            checkfu_core::id::EnvironmentId::check("resource.id", id)?;
            Some(id.to_string())
        }
        "agent" => {
            checkfu_core::id::AgentId::check("resource.id", id)?;
            Some(st.sessions.clone().get_agent(ss::GetByIdRequest { id: id.into() }).await?.into_inner().environment_id)
        }
        "connection" => {
            checkfu_core::id::ConnectionId::check("resource.id", id)?;
            let req = checkfu_proto::capability::v1::GetConnectionRequest { id: id.into() };
            Some(st.connections.clone().get_connection(req).await?.into_inner().environment_id)
        }
        "memory_store" => {
            checkfu_core::id::MemoryStoreId::check("resource.id", id)?;
            let req = checkfu_proto::memory::v1::ActorRequest { id: id.into(), actor_id: caller.principal_id.clone(), note: String::new() };
            Some(st.memory.clone().get_store(req).await?.into_inner().environment_id)
        }
        _ => None,
    })
}

/// Only an installation admin grants `admin` or `manage`, or anything not
/// held in an Environment; otherwise `manage` on the holding Environment.
async fn require_grant_right(st: &AppState, caller: &Caller, permission: &str, env: Option<&str>) -> ApiResult<()> {
    if st.is_admin(caller).await? {
        return Ok(());
    }
    match env {
        Some(env) if permission != "admin" && permission != "manage" => st.require(caller, "manage", "environment", env, env).await,
        _ => Err(Error::denied(format!("only an installation admin may grant {permission} here")).into()),
    }
}

#[utoipa::path(post, path = "/v1/permission-assignments", tag = "permissionAssignments", operation_id = "permissionAssignments.createPermissionAssignment", params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::CreateAssignment,
    responses((status = 201, body = views::PermissionAssignment), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_assignment(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let b: bodies::CreateAssignment = parse(&body)?;
    let env = holding_environment(&st, &caller, &b.resource.kind, &b.resource.id).await?;
    require_grant_right(&st, &caller, &b.permission, env.as_deref()).await?;
    if b.subject.kind == "agent_definition" {
        checkfu_core::id::AgentId::check("subject.id", &b.subject.id)?;
        st.sessions.clone().get_agent(ss::GetByIdRequest { id: b.subject.id.clone() }).await?;
    }
    let req = gov::CreatePermissionAssignmentRequest {
        subject: Some(gov::ResourceRef { kind: b.subject.kind, id: b.subject.id }),
        permission: b.permission,
        resource: Some(gov::ResourceRef { kind: b.resource.kind, id: b.resource.id }),
        environment_id: env.unwrap_or_default(),
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/permission-assignments", &body, || async {
        created(views::assignment(&st.gov.clone().create_permission_assignment(req).await?.into_inner()))
    })
    .await
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AssignmentQuery {
    #[serde(default)]
    subject_id: String,
    #[serde(default)]
    resource_id: String,
    #[serde(default)]
    permission: String,
}

/// Admins list everything; others see their own grants, or the grants on a
/// resource whose Environment they manage.
#[utoipa::path(get, path = "/v1/permission-assignments", tag = "permissionAssignments", operation_id = "permissionAssignments.listPermissionAssignments", params(AssignmentQuery, Paging),
    responses((status = 200, body = Page<views::PermissionAssignment>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_assignments(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<AssignmentQuery>,
    paging: Paging,
) -> J<Page<views::PermissionAssignment>> {
    if !st.is_admin(&caller).await? {
        let own = !q.subject_id.is_empty() && q.subject_id == caller.principal_id;
        let managed = if q.resource_id.is_empty() || own {
            false
        } else {
            let kind = match checkfu_core::id::prefix_of(&q.resource_id) {
                Some("env") => "environment",
                Some("agt") => "agent",
                _ => "",
            };
            match holding_environment(&st, &caller, kind, &q.resource_id).await? {
                Some(env) => st.allowed(&caller.principal_id, "manage", "environment", &env, &env).await?,
                None => false,
            }
        };
        if !own && !managed {
            return Err(Error::denied("filter by your own subject_id, or by a resource_id in an environment you manage").into());
        }
    }
    let req = gov::ListPermissionAssignmentsRequest {
        subject_id: q.subject_id,
        resource_id: q.resource_id,
        permission: q.permission,
        limit: paging.limit(),
        page: paging.page(),
    };
    let r = st.gov.clone().list_permission_assignments(req).await?.into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::assignment)))
}

#[utoipa::path(get, path = "/v1/permission-assignments/{id}", tag = "permissionAssignments", operation_id = "permissionAssignments.getPermissionAssignment", params(("id" = String, Path)),
    responses((status = 200, body = views::PermissionAssignment), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_assignment(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::PermissionAssignment> {
    let a = st.gov.clone().get_permission_assignment(gov::GetByIdRequest { id }).await?.into_inner();
    let own = a.subject.as_ref().is_some_and(|s| s.id == caller.principal_id);
    if !own {
        let env = (!a.environment_id.is_empty()).then_some(a.environment_id.as_str());
        require_grant_right(&st, &caller, &a.permission, env).await?;
    }
    Ok(Json(views::assignment(&a)))
}

#[utoipa::path(delete, path = "/v1/permission-assignments/{id}", tag = "permissionAssignments", operation_id = "permissionAssignments.deletePermissionAssignment", params(("id" = String, Path)),
    responses((status = 200, description = "Revoked; effective at the next check", body = views::PermissionAssignment), (status = "4XX", body = ErrorEnvelope)))]
pub async fn delete_assignment(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::PermissionAssignment> {
    let a = st.gov.clone().get_permission_assignment(gov::GetByIdRequest { id: id.clone() }).await?.into_inner();
    let env = (!a.environment_id.is_empty()).then_some(a.environment_id.as_str());
    require_grant_right(&st, &caller, &a.permission, env).await?;
    Ok(Json(views::assignment(
        &st.gov.clone().delete_permission_assignment(gov::ActorRequest { id, actor_id: caller.principal_id }).await?.into_inner(),
    )))
}
