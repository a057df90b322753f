//! Agents and versions, SandboxProfiles, ModelRoutingProfiles, Deployments
//! and the price catalog. Writes need `manage` on the Environment, reads
//! need `read`.

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
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::sessions::v1 as ss;
use serde_json::{Value, json};

type JsonResult = ApiResult<Json<Value>>;

async fn agent_for(st: &AppState, id: &str) -> ApiResult<ss::Agent> {
    checkfu_core::id::check("id", "agt", id)?;
    Ok(st.sessions.clone().get_agent(ss::GetByIdRequest { id: id.into() }).await?.into_inner())
}

pub async fn create_agent(State(st): State<AppState>, caller: Caller, headers: HeaderMap, JsonBody(body): JsonBody) -> ApiResult<Response> {
    let f = Fields(&body);
    f.only(&["environment_id", "name", "draft"])?;
    let env = f.str("environment_id")?.to_string();
    st.require_manage(&caller, &env).await?;
    let req = ss::CreateAgentRequest {
        environment_id: env,
        name: f.str("name")?.into(),
        draft_json: f.obj("draft")?.map(Value::to_string).unwrap_or_default(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/agents", &body, || async {
        let a = st.sessions.clone().create_agent(req).await?.into_inner();
        Ok((StatusCode::CREATED, views::agent(&a)))
    })
    .await
}

pub async fn list_agents(State(st): State<AppState>, caller: Caller, Query(q): Query<ListQuery>) -> JsonResult {
    let envs = st.readable_envs(&caller, q.environment_id.as_deref()).await?;
    let r = st
        .sessions
        .clone()
        .list_agents(ss::ListInEnvironmentsRequest { environment_ids: envs, limit: q.limit(), page: q.page() })
        .await?
        .into_inner();
    Ok(Json(views::list(r.data.iter().map(views::agent).collect(), &r.next_page)))
}

pub async fn get_agent(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    let a = agent_for(&st, &id).await?;
    st.require_read(&caller, &a.environment_id).await?;
    Ok(Json(views::agent(&a)))
}

pub async fn update_agent(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, JsonBody(body): JsonBody) -> JsonResult {
    let a = agent_for(&st, &id).await?;
    st.require_manage(&caller, &a.environment_id).await?;
    let f = Fields(&body);
    f.only(&["name", "draft", "expected_version"])?;
    let req = ss::UpdateAgentRequest {
        id,
        name: f.opt_str("name")?.map(str::to_string),
        draft_json: f.obj("draft")?.map(Value::to_string),
        expected_version: f.opt_i64("expected_version")?,
    };
    Ok(Json(views::agent(&st.sessions.clone().update_agent(req).await?.into_inner())))
}

pub async fn archive_agent(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    let a = agent_for(&st, &id).await?;
    st.require_manage(&caller, &a.environment_id).await?;
    Ok(Json(views::agent(&st.sessions.clone().archive_agent(ss::GetByIdRequest { id }).await?.into_inner())))
}

pub async fn publish_version(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let a = agent_for(&st, &id).await?;
    st.require_manage(&caller, &a.environment_id).await?;
    let f = Fields(&body);
    f.only(&["expected_version"])?;
    let req = ss::PublishAgentVersionRequest {
        agent_id: id.clone(),
        published_by: caller.principal_id.clone(),
        expected_version: f.opt_i64("expected_version")?,
    };
    let route = format!("POST /v1/agents/{id}/versions");
    once(&st.idem, &caller.principal_id, &headers, &route, &body, || async {
        let v = st.sessions.clone().publish_agent_version(req).await?.into_inner();
        Ok((StatusCode::CREATED, views::agent_version(&v)))
    })
    .await
}

pub async fn list_versions(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, Query(q): Query<ListQuery>) -> JsonResult {
    let a = agent_for(&st, &id).await?;
    st.require_read(&caller, &a.environment_id).await?;
    let r = st
        .sessions
        .clone()
        .list_agent_versions(ss::ListAgentVersionsRequest { agent_id: id, limit: q.limit(), page: q.page() })
        .await?
        .into_inner();
    Ok(Json(views::list(r.data.iter().map(views::agent_version).collect(), &r.next_page)))
}

pub async fn get_version(State(st): State<AppState>, caller: Caller, Path((id, n)): Path<(String, String)>) -> JsonResult {
    let a = agent_for(&st, &id).await?;
    st.require_read(&caller, &a.environment_id).await?;
    let version: i64 = n.parse().map_err(|_| Error::invalid_field("version", "the version must be a positive integer"))?;
    let v = st.sessions.clone().get_agent_version(ss::GetAgentVersionRequest { agent_id: id, version }).await?.into_inner();
    Ok(Json(views::agent_version(&v)))
}

/// The revision fields of a sandbox profile body, as the spec document.
fn sandbox_spec(body: &Value) -> Value {
    let mut spec = serde_json::Map::new();
    for k in ["image", "packages", "network", "resources", "retention_days"] {
        if let Some(v) = body.get(k).filter(|v| !v.is_null()) {
            spec.insert(k.into(), v.clone());
        }
    }
    Value::Object(spec)
}

async fn profile_for(st: &AppState, id: &str) -> ApiResult<ss::SandboxProfile> {
    checkfu_core::id::check("id", "sbp", id)?;
    Ok(st.sessions.clone().get_sandbox_profile(ss::GetByIdRequest { id: id.into() }).await?.into_inner())
}

async fn profile_view(st: &AppState, p: &ss::SandboxProfile) -> ApiResult<Value> {
    let rev = st
        .sessions
        .clone()
        .get_sandbox_revision(ss::GetSandboxRevisionRequest { profile_id: p.id.clone(), revision: p.latest_revision })
        .await?
        .into_inner();
    let mut v = views::sandbox_profile(p);
    v["latest"] = views::sandbox_revision(&rev);
    Ok(v)
}

pub async fn create_sandbox_profile(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let f = Fields(&body);
    f.only(&["environment_id", "name", "image", "packages", "network", "resources", "retention_days"])?;
    let env = f.str("environment_id")?.to_string();
    st.require_manage(&caller, &env).await?;
    let req =
        ss::CreateSandboxProfileRequest { environment_id: env, name: f.str("name")?.into(), spec_json: sandbox_spec(&body).to_string() };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/sandbox-profiles", &body, || async {
        let p = st.sessions.clone().create_sandbox_profile(req).await?.into_inner();
        Ok((StatusCode::CREATED, profile_view(&st, &p).await?))
    })
    .await
}

pub async fn list_sandbox_profiles(State(st): State<AppState>, caller: Caller, Query(q): Query<ListQuery>) -> JsonResult {
    let envs = st.readable_envs(&caller, q.environment_id.as_deref()).await?;
    let r = st
        .sessions
        .clone()
        .list_sandbox_profiles(ss::ListInEnvironmentsRequest { environment_ids: envs, limit: q.limit(), page: q.page() })
        .await?
        .into_inner();
    Ok(Json(views::list(r.data.iter().map(views::sandbox_profile).collect(), &r.next_page)))
}

pub async fn get_sandbox_profile(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    let p = profile_for(&st, &id).await?;
    st.require_read(&caller, &p.environment_id).await?;
    Ok(Json(profile_view(&st, &p).await?))
}

pub async fn publish_sandbox_revision(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let p = profile_for(&st, &id).await?;
    st.require_manage(&caller, &p.environment_id).await?;
    Fields(&body).only(&["image", "packages", "network", "resources", "retention_days"])?;
    let req = ss::PublishSandboxRevisionRequest { profile_id: id.clone(), spec_json: sandbox_spec(&body).to_string() };
    let route = format!("POST /v1/sandbox-profiles/{id}/revisions");
    once(&st.idem, &caller.principal_id, &headers, &route, &body, || async {
        let r = st.sessions.clone().publish_sandbox_revision(req).await?.into_inner();
        Ok((StatusCode::CREATED, views::sandbox_revision(&r)))
    })
    .await
}

pub async fn get_sandbox_revision(State(st): State<AppState>, caller: Caller, Path((id, n)): Path<(String, String)>) -> JsonResult {
    let p = profile_for(&st, &id).await?;
    st.require_read(&caller, &p.environment_id).await?;
    let revision: i64 = n.parse().map_err(|_| Error::invalid_field("revision", "the revision must be a positive integer"))?;
    let r = st.sessions.clone().get_sandbox_revision(ss::GetSandboxRevisionRequest { profile_id: id, revision }).await?.into_inner();
    Ok(Json(views::sandbox_revision(&r)))
}

pub async fn create_routing_profile(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let f = Fields(&body);
    f.only(&["environment_id", "name", "candidates"])?;
    let env = f.str("environment_id")?.to_string();
    st.require_manage(&caller, &env).await?;
    let raw = f.arr("candidates")?.ok_or_else(|| Error::invalid_field("candidates", "candidates is required"))?;
    let mut candidates = vec![];
    for (i, c) in raw.iter().enumerate() {
        if !c.is_object() {
            return Err(Error::invalid_field(&format!("candidates[{i}]"), "each candidate must be an object").into());
        }
        let cf = Fields(c);
        cf.only(&["provider", "model", "effort", "connection_id", "base_url"])
            .map_err(|e| Error { message: format!("candidates[{i}]: {}", e.message), ..e })?;
        candidates.push(mg::Candidate {
            provider: cf.str("provider")?.into(),
            model: cf.str("model")?.into(),
            effort: cf.opt_str("effort")?.unwrap_or("medium").into(),
            connection_id: cf.opt_str("connection_id")?.unwrap_or_default().into(),
            base_url: cf.opt_str("base_url")?.unwrap_or_default().into(),
        });
    }
    let req = mg::CreateRoutingProfileRequest { environment_id: env, name: f.str("name")?.into(), candidates };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/model-routing-profiles", &body, || async {
        let p = st.models.clone().create_routing_profile(req).await?.into_inner();
        Ok((StatusCode::CREATED, views::routing_profile(&p)))
    })
    .await
}

pub async fn list_routing_profiles(State(st): State<AppState>, caller: Caller, Query(q): Query<ListQuery>) -> JsonResult {
    let envs = st.readable_envs(&caller, q.environment_id.as_deref()).await?;
    let req = mg::ListRoutingProfilesRequest { environment_id: String::new(), environment_ids: envs, limit: q.limit(), page: q.page() };
    let r = st.models.clone().list_routing_profiles(req).await?.into_inner();
    Ok(Json(views::list(r.data.iter().map(views::routing_profile).collect(), &r.next_page)))
}

pub async fn get_routing_profile(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    checkfu_core::id::check("id", "mrp", &id)?;
    let p = st.models.clone().get_routing_profile(mg::GetRoutingProfileRequest { id }).await?.into_inner();
    st.require_read(&caller, &p.environment_id).await?;
    Ok(Json(views::routing_profile(&p)))
}

pub async fn price_catalog(State(st): State<AppState>, _caller: Caller) -> JsonResult {
    let c = st.models.clone().get_price_catalog(mg::GetPriceCatalogRequest {}).await?.into_inner();
    let data: Vec<Value> = c
        .entries
        .iter()
        .map(|p| json!({"provider": p.provider, "model": p.model, "input_micro_usd_per_mtok": p.input_micro_usd_per_mtok, "output_micro_usd_per_mtok": p.output_micro_usd_per_mtok}))
        .collect();
    Ok(Json(json!({"data": data, "next_page": null})))
}

/// Reads the pin fields of a deployment body; the routing profile must
/// exist in the same Environment (the model gateway owns it).
async fn deployment_input(st: &AppState, env: &str, f: &Fields<'_>) -> ApiResult<ss::DeploymentInput> {
    let mrp = f.str("model_routing_profile_id")?.to_string();
    checkfu_core::id::check("model_routing_profile_id", "mrp", &mrp)?;
    let profile = st.models.clone().get_routing_profile(mg::GetRoutingProfileRequest { id: mrp.clone() }).await.map_err(|s| {
        let e = Error::from(s);
        if e.code == checkfu_core::Code::NotFound {
            Error::invalid_field("model_routing_profile_id", format!("routing profile {mrp} does not exist"))
        } else {
            e
        }
    })?;
    if profile.into_inner().environment_id != env {
        return Err(Error::invalid_field("model_routing_profile_id", "the routing profile belongs to another environment").into());
    }
    Ok(ss::DeploymentInput {
        agent_version: f.i64("agent_version")?,
        model_routing_profile_id: mrp,
        sandbox_profile_id: f.str("sandbox_profile_id")?.into(),
        sandbox_profile_revision: f.opt_i64("sandbox_profile_revision")?,
        harness: f.opt_str("harness")?.unwrap_or_default().into(),
        execution_json: f.obj("execution")?.map(Value::to_string).unwrap_or_default(),
    })
}

const DEPLOYMENT_PINS: [&str; 6] =
    ["agent_version", "model_routing_profile_id", "sandbox_profile_id", "sandbox_profile_revision", "harness", "execution"];

pub async fn create_deployment(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let f = Fields(&body);
    let mut allowed = vec!["environment_id", "key", "agent_id"];
    allowed.extend(DEPLOYMENT_PINS);
    f.only(&allowed)?;
    let env = f.str("environment_id")?.to_string();
    st.require_manage(&caller, &env).await?;
    let input = deployment_input(&st, &env, &f).await?;
    let req = ss::CreateDeploymentRequest {
        environment_id: env,
        key: f.str("key")?.into(),
        agent_id: f.str("agent_id")?.into(),
        input: Some(input),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/agent-deployments", &body, || async {
        let d = st.sessions.clone().create_deployment(req).await?.into_inner();
        Ok((StatusCode::CREATED, views::deployment(&d)))
    })
    .await
}

async fn deployment_for(st: &AppState, id: &str) -> ApiResult<ss::Deployment> {
    checkfu_core::id::check("id", "dep", id)?;
    Ok(st.sessions.clone().get_deployment(ss::GetByIdRequest { id: id.into() }).await?.into_inner())
}

pub async fn create_deployment_revision(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let d = deployment_for(&st, &id).await?;
    st.require_manage(&caller, &d.environment_id).await?;
    let f = Fields(&body);
    f.only(&DEPLOYMENT_PINS)?;
    let input = deployment_input(&st, &d.environment_id, &f).await?;
    let route = format!("POST /v1/agent-deployments/{id}/revisions");
    once(&st.idem, &caller.principal_id, &headers, &route, &body, || async {
        let d = st
            .sessions
            .clone()
            .create_deployment_revision(ss::CreateDeploymentRevisionRequest { id, input: Some(input) })
            .await?
            .into_inner();
        Ok((StatusCode::CREATED, views::deployment(&d)))
    })
    .await
}

pub async fn get_deployment(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    let d = deployment_for(&st, &id).await?;
    st.require_read(&caller, &d.environment_id).await?;
    Ok(Json(views::deployment(&d)))
}

pub async fn list_deployments(State(st): State<AppState>, caller: Caller, Query(q): Query<ListQuery>) -> JsonResult {
    let envs = st.readable_envs(&caller, q.environment_id.as_deref()).await?;
    let r = st
        .sessions
        .clone()
        .list_deployments(ss::ListInEnvironmentsRequest { environment_ids: envs, limit: q.limit(), page: q.page() })
        .await?
        .into_inner();
    Ok(Json(views::list(r.data.iter().map(views::deployment).collect(), &r.next_page)))
}
