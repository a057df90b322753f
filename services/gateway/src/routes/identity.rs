//! Principals, API keys, Groups, Environments and PermissionAssignments.

use super::ListQuery;
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::extract::{Fields, JsonBody, Query};
use crate::idempotency::once;
use crate::views;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use checkfu_core::Error;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::sessions::v1 as ss;
use serde::Deserialize;
use serde_json::{Value, json};

type JsonResult = ApiResult<Json<Value>>;

pub async fn create_principal(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    st.require_admin(&caller).await?;
    let f = Fields(&body);
    f.only(&["kind", "name"])?;
    let req =
        gov::CreatePrincipalRequest { kind: f.str("kind")?.into(), name: f.str("name")?.into(), actor_id: caller.principal_id.clone() };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/principals", &body, || async {
        let p = st.gov.clone().create_principal(req).await?.into_inner();
        Ok((StatusCode::CREATED, views::principal(&p)))
    })
    .await
}

pub async fn list_principals(State(st): State<AppState>, caller: Caller, Query(q): Query<ListQuery>) -> JsonResult {
    st.require_admin(&caller).await?;
    let r = st.gov.clone().list_principals(gov::ListRequest { limit: q.limit(), page: q.page() }).await?.into_inner();
    Ok(Json(views::list(r.data.iter().map(views::principal).collect(), &r.next_page)))
}

pub async fn get_principal(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    if id != caller.principal_id {
        st.require_admin(&caller).await?;
    }
    let p = st.gov.clone().get_principal(gov::GetByIdRequest { id }).await?.into_inner();
    Ok(Json(views::principal(&p)))
}

pub async fn update_principal(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, JsonBody(body): JsonBody) -> JsonResult {
    st.require_admin(&caller).await?;
    let f = Fields(&body);
    f.only(&["disabled"])?;
    let disabled = f.opt_bool("disabled")?;
    if disabled == Some(true) && id == caller.principal_id {
        return Err(Error::conflict("a principal cannot disable itself").into());
    }
    let p =
        st.gov.clone().update_principal(gov::UpdatePrincipalRequest { id, disabled, actor_id: caller.principal_id }).await?.into_inner();
    Ok(Json(views::principal(&p)))
}

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
    let f = Fields(&body);
    f.only(&["name"])?;
    let name = f.opt_str("name")?.unwrap_or("default").to_string();
    let route = format!("POST /v1/principals/{id}/api-keys");
    once(&st.idem, &caller.principal_id, &headers, &route, &body, || async {
        let r = st
            .gov
            .clone()
            .create_api_key(gov::CreateApiKeyRequest { principal_id: id, name, actor_id: caller.principal_id.clone() })
            .await?
            .into_inner();
        let mut v = views::api_key(&r.key.unwrap_or_default());
        v["secret"] = json!(r.secret);
        Ok((StatusCode::CREATED, v))
    })
    .await
}

pub async fn list_api_keys(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, Query(q): Query<ListQuery>) -> JsonResult {
    if id != caller.principal_id {
        st.require_admin(&caller).await?;
    }
    let r =
        st.gov.clone().list_api_keys(gov::ListApiKeysRequest { principal_id: id, limit: q.limit(), page: q.page() }).await?.into_inner();
    Ok(Json(views::list(r.data.iter().map(views::api_key).collect(), &r.next_page)))
}

pub async fn revoke_api_key(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    checkfu_core::id::check("id", "key", &id)?;
    let key = st.gov.clone().get_api_key(gov::GetByIdRequest { id: id.clone() }).await?.into_inner();
    if key.principal_id != caller.principal_id {
        st.require_admin(&caller).await?;
    }
    let k = st.gov.clone().revoke_api_key(gov::ActorRequest { id, actor_id: caller.principal_id }).await?.into_inner();
    Ok(Json(views::api_key(&k)))
}

pub async fn create_group(State(st): State<AppState>, caller: Caller, headers: HeaderMap, JsonBody(body): JsonBody) -> ApiResult<Response> {
    st.require_admin(&caller).await?;
    let f = Fields(&body);
    f.only(&["name"])?;
    let name = f.str("name")?.to_string();
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/groups", &body, || async {
        let g = st.gov.clone().create_group(gov::CreateGroupRequest { name, actor_id: caller.principal_id.clone() }).await?.into_inner();
        Ok((StatusCode::CREATED, views::group(&g)))
    })
    .await
}

pub async fn list_groups(State(st): State<AppState>, caller: Caller, Query(q): Query<ListQuery>) -> JsonResult {
    st.require_admin(&caller).await?;
    let r = st.gov.clone().list_groups(gov::ListRequest { limit: q.limit(), page: q.page() }).await?.into_inner();
    Ok(Json(views::list(r.data.iter().map(views::group).collect(), &r.next_page)))
}

pub async fn get_group(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    st.require_admin(&caller).await?;
    Ok(Json(views::group(&st.gov.clone().get_group(gov::GetByIdRequest { id }).await?.into_inner())))
}

pub async fn add_member(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<(StatusCode, Json<Value>)> {
    st.require_admin(&caller).await?;
    let f = Fields(&body);
    f.only(&["principal_id"])?;
    let req = gov::GroupMemberRequest { group_id: id, principal_id: f.str("principal_id")?.into(), actor_id: caller.principal_id };
    Ok((StatusCode::CREATED, Json(views::group(&st.gov.clone().add_group_member(req).await?.into_inner()))))
}

pub async fn remove_member(State(st): State<AppState>, caller: Caller, Path((id, principal_id)): Path<(String, String)>) -> JsonResult {
    st.require_admin(&caller).await?;
    let req = gov::GroupMemberRequest { group_id: id, principal_id, actor_id: caller.principal_id };
    Ok(Json(views::group(&st.gov.clone().remove_group_member(req).await?.into_inner())))
}

pub async fn create_environment(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    st.require_admin(&caller).await?;
    let f = Fields(&body);
    f.only(&["name"])?;
    let name = f.str("name")?.to_string();
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/environments", &body, || async {
        let e = st
            .gov
            .clone()
            .create_environment(gov::CreateEnvironmentRequest { name, actor_id: caller.principal_id.clone() })
            .await?
            .into_inner();
        Ok((StatusCode::CREATED, views::environment(&e)))
    })
    .await
}

pub async fn list_environments(State(st): State<AppState>, caller: Caller, Query(q): Query<ListQuery>) -> JsonResult {
    let r = st.gov.clone().list_environments(gov::ListRequest { limit: q.limit(), page: q.page() }).await?.into_inner();
    let mut data = vec![];
    for e in &r.data {
        if st.allowed(&caller.principal_id, "read", "environment", &e.id, &e.id).await? {
            data.push(views::environment(e));
        }
    }
    Ok(Json(views::list(data, &r.next_page)))
}

pub async fn get_environment(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    checkfu_core::id::check("id", "env", &id)?;
    st.require_read(&caller, &id).await?;
    Ok(Json(views::environment(&st.gov.clone().get_environment(gov::GetByIdRequest { id }).await?.into_inner())))
}

pub async fn update_environment(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> JsonResult {
    st.require_admin(&caller).await?;
    let f = Fields(&body);
    f.only(&["disabled", "expected_version"])?;
    let req = gov::UpdateEnvironmentRequest {
        id,
        disabled: f.opt_bool("disabled")?,
        expected_version: f.opt_i64("expected_version")?,
        actor_id: caller.principal_id,
    };
    Ok(Json(views::environment(&st.gov.clone().update_environment(req).await?.into_inner())))
}

/// The Environment holding an assignable resource, or `None` when only an
/// installation admin may grant on it.
async fn holding_environment(st: &AppState, kind: &str, id: &str) -> ApiResult<Option<String>> {
    Ok(match kind {
        "environment" => {
            checkfu_core::id::check("resource.id", "env", id)?;
            Some(id.to_string())
        }
        "agent" => {
            checkfu_core::id::check("resource.id", "agt", id)?;
            Some(st.sessions.clone().get_agent(ss::GetByIdRequest { id: id.into() }).await?.into_inner().environment_id)
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

pub async fn create_assignment(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let f = Fields(&body);
    f.only(&["subject", "permission", "resource"])?;
    let subject = f.obj("subject")?.ok_or_else(|| Error::invalid_field("subject", "subject is required"))?;
    let resource = f.obj("resource")?.ok_or_else(|| Error::invalid_field("resource", "resource is required"))?;
    let (sf, rf) = (Fields(subject), Fields(resource));
    sf.only(&["kind", "id"])?;
    rf.only(&["kind", "id"])?;
    let permission = f.str("permission")?.to_string();
    let (rkind, rid) = (rf.str("kind")?.to_string(), rf.str("id")?.to_string());
    let (skind, sid) = (sf.str("kind")?.to_string(), sf.str("id")?.to_string());
    let env = holding_environment(&st, &rkind, &rid).await?;
    require_grant_right(&st, &caller, &permission, env.as_deref()).await?;
    if skind == "agent_definition" {
        checkfu_core::id::check("subject.id", "agt", &sid)?;
        st.sessions.clone().get_agent(ss::GetByIdRequest { id: sid.clone() }).await?;
    }
    let req = gov::CreatePermissionAssignmentRequest {
        subject: Some(gov::ResourceRef { kind: skind, id: sid }),
        permission,
        resource: Some(gov::ResourceRef { kind: rkind, id: rid }),
        environment_id: env.unwrap_or_default(),
        actor_id: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/permission-assignments", &body, || async {
        let a = st.gov.clone().create_permission_assignment(req).await?.into_inner();
        Ok((StatusCode::CREATED, views::assignment(&a)))
    })
    .await
}

#[derive(Debug, Default, Deserialize)]
pub struct AssignmentQuery {
    #[serde(default)]
    subject_id: String,
    #[serde(default)]
    resource_id: String,
    #[serde(default)]
    permission: String,
    #[serde(default)]
    limit: Option<u32>,
    #[serde(default)]
    page: Option<String>,
}

/// Admins list everything; others see their own grants, or the grants on
/// a resource whose Environment they manage.
pub async fn list_assignments(State(st): State<AppState>, caller: Caller, Query(q): Query<AssignmentQuery>) -> JsonResult {
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
            match holding_environment(&st, kind, &q.resource_id).await? {
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
        limit: super::explicit_limit(q.limit),
        page: q.page.unwrap_or_default(),
    };
    let r = st.gov.clone().list_permission_assignments(req).await?.into_inner();
    Ok(Json(views::list(r.data.iter().map(views::assignment).collect(), &r.next_page)))
}

pub async fn get_assignment(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    let a = st.gov.clone().get_permission_assignment(gov::GetByIdRequest { id }).await?.into_inner();
    let own = a.subject.as_ref().is_some_and(|s| s.id == caller.principal_id);
    if !own {
        let env = (!a.environment_id.is_empty()).then_some(a.environment_id.as_str());
        require_grant_right(&st, &caller, &a.permission, env).await?;
    }
    Ok(Json(views::assignment(&a)))
}

pub async fn delete_assignment(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    let a = st.gov.clone().get_permission_assignment(gov::GetByIdRequest { id: id.clone() }).await?.into_inner();
    let env = (!a.environment_id.is_empty()).then_some(a.environment_id.as_str());
    require_grant_right(&st, &caller, &a.permission, env).await?;
    let a = st.gov.clone().delete_permission_assignment(gov::ActorRequest { id, actor_id: caller.principal_id }).await?.into_inner();
    Ok(Json(views::assignment(&a)))
}
