//! Agents and versions, SandboxProfiles, ModelRoutingProfiles, Deployments
//! and the price catalog. Writes need `manage` on the Environment, reads
//! need `read`.

use super::{InEnvironment, Paging, created};
use crate::AppState;
use crate::auth::Caller;
use crate::bodies::{self, parse};
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query};
use crate::idempotency::once;
use crate::views::{self, ErrorEnvelope, Page};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use checkfu_core::Error;
use checkfu_proto::agent_definition;
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::sessions::v1 as ss;
use serde_json::{Value, json};

type J<T> = ApiResult<Json<T>>;

fn json_text(v: &Option<Value>) -> String {
    v.as_ref().map(Value::to_string).unwrap_or_default()
}

async fn agent_for(st: &AppState, id: &str) -> ApiResult<ss::Agent> {
    checkfu_core::id::AgentId::check("id", id)?;
    Ok(st.sessions.clone().get_agent(ss::GetByIdRequest { id: id.into() }).await?.into_inner())
}

#[utoipa::path(post, path = "/v1/agents", tag = "agents", operation_id = "agents.createAgent", params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::CreateAgent,
    responses((status = 201, body = views::Agent), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_agent(State(st): State<AppState>, caller: Caller, headers: HeaderMap, JsonBody(body): JsonBody) -> ApiResult<Response> {
    let b: bodies::CreateAgent = parse(&body)?;
    st.require_manage(&caller, &b.environment_id).await?;
    let draft_json = json_text(&b.draft);
    let draft = agent_definition::read(b.draft.unwrap_or_else(|| json!({})))?;
    #[allow(deprecated)] // draft_json: for a 0.1.0 sessions service
    let req = ss::CreateAgentRequest { draft_json, draft: Some(draft), environment_id: b.environment_id, name: b.name };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/agents", &body, || async {
        created(views::agent(&st.sessions.clone().create_agent(req).await?.into_inner()))
    })
    .await
}

#[utoipa::path(get, path = "/v1/agents", tag = "agents", operation_id = "agents.listAgents", params(Paging, InEnvironment),
    responses((status = 200, body = Page<views::Agent>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_agents(
    State(st): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(env): Query<InEnvironment>,
) -> J<Page<views::Agent>> {
    let envs = st.readable_envs(&caller, env.environment_id.as_deref()).await?;
    let r = st
        .sessions
        .clone()
        .list_agents(ss::ListInEnvironmentsRequest { environment_ids: envs, limit: paging.limit(), page: paging.page() })
        .await?
        .into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::agent)))
}

#[utoipa::path(get, path = "/v1/agents/{id}", tag = "agents", operation_id = "agents.getAgent", params(("id" = String, Path)),
    responses((status = 200, body = views::Agent), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_agent(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Agent> {
    let a = agent_for(&st, &id).await?;
    st.require_read(&caller, &a.environment_id).await?;
    Ok(Json(views::agent(&a)))
}

#[utoipa::path(post, path = "/v1/agents/{id}", tag = "agents", operation_id = "agents.updateAgent", params(("id" = String, Path)), request_body = bodies::UpdateAgent,
    responses((status = 200, body = views::Agent), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_agent(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, JsonBody(body): JsonBody) -> J<views::Agent> {
    let a = agent_for(&st, &id).await?;
    st.require_manage(&caller, &a.environment_id).await?;
    let b: bodies::UpdateAgent = parse(&body)?;
    #[allow(deprecated)] // draft_json: for a 0.1.0 sessions service
    let req = ss::UpdateAgentRequest {
        id,
        name: b.name,
        draft_json: b.draft.as_ref().map(Value::to_string),
        draft: b.draft.map(agent_definition::read).transpose()?,
        expected_version: b.expected_version,
    };
    Ok(Json(views::agent(&st.sessions.clone().update_agent(req).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/agents/{id}/archive", tag = "agents", operation_id = "agents.archiveAgent", params(("id" = String, Path)),
    responses((status = 200, body = views::Agent), (status = "4XX", body = ErrorEnvelope)))]
pub async fn archive_agent(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Agent> {
    let a = agent_for(&st, &id).await?;
    st.require_manage(&caller, &a.environment_id).await?;
    Ok(Json(views::agent(&st.sessions.clone().archive_agent(ss::GetByIdRequest { id }).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/agents/{id}/versions", tag = "agents", operation_id = "agents.publishAgentVersion", params(crate::idempotency::IdempotencyKeyHeader, ("id" = String, Path)), request_body = bodies::PublishVersion,
    responses((status = 201, description = "The draft frozen as the next immutable version", body = views::AgentVersion), (status = "4XX", body = ErrorEnvelope)))]
pub async fn publish_version(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let a = agent_for(&st, &id).await?;
    st.require_manage(&caller, &a.environment_id).await?;
    let b: bodies::PublishVersion = parse(&body)?;
    let req = ss::PublishAgentVersionRequest {
        agent_id: id.clone(),
        published_by: caller.principal_id.clone(),
        expected_version: b.expected_version,
    };
    let route = format!("POST /v1/agents/{id}/versions");
    once(&st.idem, &caller.principal_id, &headers, &route, &body, || async {
        created(views::agent_version(&st.sessions.clone().publish_agent_version(req).await?.into_inner()))
    })
    .await
}

#[utoipa::path(get, path = "/v1/agents/{id}/versions", tag = "agents", operation_id = "agents.listAgentVersions", params(("id" = String, Path), Paging),
    responses((status = 200, body = Page<views::AgentVersion>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_versions(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    paging: Paging,
) -> J<Page<views::AgentVersion>> {
    let a = agent_for(&st, &id).await?;
    st.require_read(&caller, &a.environment_id).await?;
    let r = st
        .sessions
        .clone()
        .list_agent_versions(ss::ListAgentVersionsRequest { agent_id: id, limit: paging.limit(), page: paging.page() })
        .await?
        .into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::agent_version)))
}

#[utoipa::path(get, path = "/v1/agents/{id}/versions/{n}", tag = "agents", operation_id = "agents.getAgentVersion", params(("id" = String, Path), ("n" = i64, Path)),
    responses((status = 200, body = views::AgentVersion), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_version(State(st): State<AppState>, caller: Caller, Path((id, n)): Path<(String, String)>) -> J<views::AgentVersion> {
    let a = agent_for(&st, &id).await?;
    st.require_read(&caller, &a.environment_id).await?;
    let version: i64 = n.parse().map_err(|_| Error::invalid_field("version", "the version must be a positive integer"))?;
    Ok(Json(views::agent_version(
        &st.sessions.clone().get_agent_version(ss::GetAgentVersionRequest { agent_id: id, version }).await?.into_inner(),
    )))
}

async fn profile_for(st: &AppState, id: &str) -> ApiResult<ss::SandboxProfile> {
    checkfu_core::id::SandboxProfileId::check("id", id)?;
    Ok(st.sessions.clone().get_sandbox_profile(ss::GetByIdRequest { id: id.into() }).await?.into_inner())
}

pub(crate) async fn profile_view(st: &AppState, p: &ss::SandboxProfile) -> ApiResult<views::SandboxProfile> {
    let rev = st
        .sessions
        .clone()
        .get_sandbox_revision(ss::GetSandboxRevisionRequest { profile_id: p.id.clone(), revision: p.latest_revision })
        .await?
        .into_inner();
    let mut v = views::sandbox_profile(p);
    v.latest = Some(views::sandbox_revision(&rev));
    Ok(v)
}

#[utoipa::path(post, path = "/v1/sandbox-profiles", tag = "sandboxProfiles", operation_id = "sandboxProfiles.createSandboxProfile", params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::CreateSandboxProfile,
    responses((status = 201, description = "The profile with revision 1 as `latest`", body = views::SandboxProfile), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_sandbox_profile(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let b: bodies::CreateSandboxProfile = parse(&body)?;
    st.require_manage(&caller, &b.environment_id).await?;
    let (environment_id, name, revision) = b.split();
    // `spec_json` too, for a 0.1.0 sessions service until the release after it.
    #[allow(deprecated)]
    let req = ss::CreateSandboxProfileRequest {
        environment_id,
        name,
        spec_json: serde_json::to_string(&revision).unwrap_or_default(),
        spec: Some(revision.spec()),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/sandbox-profiles", &body, || async {
        let p = st.sessions.clone().create_sandbox_profile(req).await?.into_inner();
        created(profile_view(&st, &p).await?)
    })
    .await
}

#[utoipa::path(get, path = "/v1/sandbox-profiles", tag = "sandboxProfiles", operation_id = "sandboxProfiles.listSandboxProfiles", params(Paging, InEnvironment),
    responses((status = 200, body = Page<views::SandboxProfile>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_sandbox_profiles(
    State(st): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(env): Query<InEnvironment>,
) -> J<Page<views::SandboxProfile>> {
    let envs = st.readable_envs(&caller, env.environment_id.as_deref()).await?;
    let r = st
        .sessions
        .clone()
        .list_sandbox_profiles(ss::ListInEnvironmentsRequest { environment_ids: envs, limit: paging.limit(), page: paging.page() })
        .await?
        .into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::sandbox_profile)))
}

#[utoipa::path(get, path = "/v1/sandbox-profiles/{id}", tag = "sandboxProfiles", operation_id = "sandboxProfiles.getSandboxProfile", params(("id" = String, Path)),
    responses((status = 200, body = views::SandboxProfile), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_sandbox_profile(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::SandboxProfile> {
    let p = profile_for(&st, &id).await?;
    st.require_read(&caller, &p.environment_id).await?;
    Ok(Json(profile_view(&st, &p).await?))
}

/// Archives the profile: no new revision or deployment pins it (409
/// `archived`); Sessions already running keep theirs. Idempotent.
#[utoipa::path(post, path = "/v1/sandbox-profiles/{id}/archive", tag = "sandboxProfiles", operation_id = "sandboxProfiles.archiveSandboxProfile", params(("id" = String, Path)),
    responses((status = 200, body = views::SandboxProfile), (status = "4XX", body = ErrorEnvelope)))]
pub async fn archive_sandbox_profile(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::SandboxProfile> {
    let p = profile_for(&st, &id).await?;
    st.require_manage(&caller, &p.environment_id).await?;
    let p = st.sessions.clone().archive_sandbox_profile(ss::GetByIdRequest { id }).await?.into_inner();
    Ok(Json(profile_view(&st, &p).await?))
}

#[utoipa::path(post, path = "/v1/sandbox-profiles/{id}/revisions", tag = "sandboxProfiles", operation_id = "sandboxProfiles.publishSandboxProfileRevision", params(crate::idempotency::IdempotencyKeyHeader, ("id" = String, Path)), request_body = bodies::PublishSandboxRevision,
    responses((status = 201, body = views::SandboxRevision), (status = "4XX", body = ErrorEnvelope)))]
pub async fn publish_sandbox_revision(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let p = profile_for(&st, &id).await?;
    st.require_manage(&caller, &p.environment_id).await?;
    let b: bodies::PublishSandboxRevision = parse(&body)?;
    // `spec_json` too, for a 0.1.0 sessions service until the release after it.
    #[allow(deprecated)]
    let req = ss::PublishSandboxRevisionRequest {
        profile_id: id.clone(),
        spec_json: serde_json::to_string(&b).unwrap_or_default(),
        spec: Some(b.spec()),
    };
    let route = format!("POST /v1/sandbox-profiles/{id}/revisions");
    once(&st.idem, &caller.principal_id, &headers, &route, &body, || async {
        created(views::sandbox_revision(&st.sessions.clone().publish_sandbox_revision(req).await?.into_inner()))
    })
    .await
}

#[utoipa::path(get, path = "/v1/sandbox-profiles/{id}/revisions/{n}", tag = "sandboxProfiles", operation_id = "sandboxProfiles.getSandboxProfileRevision", params(("id" = String, Path), ("n" = i64, Path)),
    responses((status = 200, body = views::SandboxRevision), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_sandbox_revision(
    State(st): State<AppState>,
    caller: Caller,
    Path((id, n)): Path<(String, String)>,
) -> J<views::SandboxRevision> {
    let p = profile_for(&st, &id).await?;
    st.require_read(&caller, &p.environment_id).await?;
    let revision: i64 = n.parse().map_err(|_| Error::invalid_field("revision", "the revision must be a positive integer"))?;
    Ok(Json(views::sandbox_revision(
        &st.sessions.clone().get_sandbox_revision(ss::GetSandboxRevisionRequest { profile_id: id, revision }).await?.into_inner(),
    )))
}

#[utoipa::path(post, path = "/v1/model-routing-profiles", tag = "modelRoutingProfiles", operation_id = "modelRoutingProfiles.createModelRoutingProfile", params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::CreateRoutingProfile,
    responses((status = 201, body = views::ModelRoutingProfile), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_routing_profile(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let b: bodies::CreateRoutingProfile = parse(&body)?;
    st.require_manage(&caller, &b.environment_id).await?;
    let candidates = b
        .candidates
        .into_iter()
        .map(|c| mg::Candidate {
            provider: c.provider,
            model: c.model,
            effort: c.effort.unwrap_or_else(|| "medium".into()),
            connection_id: c.connection_id.unwrap_or_default(),
            endpoint: c.endpoint.unwrap_or_default(),
        })
        .collect();
    let req = mg::CreateRoutingProfileRequest { environment_id: b.environment_id, name: b.name, candidates };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/model-routing-profiles", &body, || async {
        created(views::routing_profile(&st.models.clone().create_routing_profile(req).await?.into_inner()))
    })
    .await
}

#[utoipa::path(get, path = "/v1/model-routing-profiles", tag = "modelRoutingProfiles", operation_id = "modelRoutingProfiles.listModelRoutingProfiles", params(Paging, InEnvironment),
    responses((status = 200, body = Page<views::ModelRoutingProfile>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_routing_profiles(
    State(st): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(env): Query<InEnvironment>,
) -> J<Page<views::ModelRoutingProfile>> {
    let envs = st.readable_envs(&caller, env.environment_id.as_deref()).await?;
    let req =
        mg::ListRoutingProfilesRequest { environment_id: String::new(), environment_ids: envs, limit: paging.limit(), page: paging.page() };
    let r = st.models.clone().list_routing_profiles(req).await?.into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::routing_profile)))
}

#[utoipa::path(get, path = "/v1/model-routing-profiles/{id}", tag = "modelRoutingProfiles", operation_id = "modelRoutingProfiles.getModelRoutingProfile", params(("id" = String, Path)),
    responses((status = 200, body = views::ModelRoutingProfile), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_routing_profile(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::ModelRoutingProfile> {
    checkfu_core::id::RoutingProfileId::check("id", &id)?;
    let p = st.models.clone().get_routing_profile(mg::GetRoutingProfileRequest { id }).await?.into_inner();
    st.require_read(&caller, &p.environment_id).await?;
    Ok(Json(views::routing_profile(&p)))
}

/// The provider endpoints the installation configured: what a routing
/// profile's candidate may name as `endpoint`. Never a key.
#[utoipa::path(get, path = "/v1/model-endpoints", tag = "models", operation_id = "models.listModelEndpoints",
    responses((status = 200, body = Page<views::ModelEndpoint>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn model_endpoints(State(st): State<AppState>, _caller: Caller) -> J<Page<views::ModelEndpoint>> {
    let r = st.models.clone().list_endpoints(mg::ListEndpointsRequest {}).await?.into_inner();
    let data = r
        .data
        .into_iter()
        .map(|e| views::ModelEndpoint {
            name: e.name,
            provider: e.provider,
            base_url: e.base_url,
            key_configured: e.key_configured,
            default: e.is_default,
        })
        .collect();
    Ok(Json(Page { data, next_page: None }))
}

#[utoipa::path(get, path = "/v1/price-catalog", tag = "models", operation_id = "models.getModelPriceCatalog",
    responses((status = 200, description = "Integer micro-USD per million tokens", body = Page<views::PriceEntry>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn price_catalog(State(st): State<AppState>, _caller: Caller) -> J<Page<views::PriceEntry>> {
    let c = st.models.clone().get_price_catalog(mg::GetPriceCatalogRequest {}).await?.into_inner();
    let data = c
        .entries
        .into_iter()
        .map(|p| views::PriceEntry {
            provider: p.provider,
            model: p.model,
            input_micro_usd_per_mtok: p.input_micro_usd_per_mtok,
            output_micro_usd_per_mtok: p.output_micro_usd_per_mtok,
        })
        .collect();
    Ok(Json(Page { data, next_page: None }))
}

/// The pins of a deployment body; the routing profile must exist in the
/// same Environment (the model gateway owns it).
async fn pins(st: &AppState, env: &str, b: bodies::DeploymentRevision) -> ApiResult<ss::DeploymentInput> {
    let mrp = b.model_routing_profile_id;
    checkfu_core::id::RoutingProfileId::check("model_routing_profile_id", &mrp)?;
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
    // `execution_json` too, for a 0.1.0 sessions service until the release
    // after it.
    #[allow(deprecated)]
    Ok(ss::DeploymentInput {
        execution: crate::execution_wire::to_wire(&b.execution)?,
        agent_version: b.agent_version,
        model_routing_profile_id: mrp,
        sandbox_profile_id: b.sandbox_profile_id,
        sandbox_profile_revision: b.sandbox_profile_revision,
        harness: b.harness.unwrap_or_default(),
        execution_json: json_text(&b.execution),
    })
}

#[utoipa::path(post, path = "/v1/agent-deployments", tag = "agentDeployments", operation_id = "agentDeployments.createAgentDeployment", params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::CreateDeployment,
    responses((status = 201, body = views::AgentDeployment), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_deployment(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let b: bodies::CreateDeployment = parse(&body)?;
    st.require_manage(&caller, &b.environment_id).await?;
    let revision = bodies::DeploymentRevision {
        agent_version: b.agent_version,
        model_routing_profile_id: b.model_routing_profile_id,
        sandbox_profile_id: b.sandbox_profile_id,
        sandbox_profile_revision: b.sandbox_profile_revision,
        harness: b.harness,
        execution: b.execution,
    };
    let input = pins(&st, &b.environment_id, revision).await?;
    let req = ss::CreateDeploymentRequest { environment_id: b.environment_id, key: b.key, agent_id: b.agent_id, input: Some(input) };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/agent-deployments", &body, || async {
        let d = st.sessions.clone().create_deployment(req).await?.into_inner();
        audit_deployment(&st, &caller, "agent_deployment.created", &d).await;
        created(views::deployment(&d))
    })
    .await
}

/// Deployments decide what runs for whoever invokes them, so creating or
/// revising one is audited, with the caller as actor.
async fn audit_deployment(st: &AppState, caller: &Caller, action: &str, d: &ss::Deployment) {
    let details = serde_json::json!({"key": d.key, "revision": d.revision, "agent_version": d.pins.as_ref().map(|p| p.agent_version)});
    st.audit(caller, action, "agent_deployment", &d.id, details).await;
}

async fn deployment_for(st: &AppState, id: &str) -> ApiResult<ss::Deployment> {
    checkfu_core::id::DeploymentId::check("id", id)?;
    Ok(st.sessions.clone().get_deployment(ss::GetByIdRequest { id: id.into() }).await?.into_inner())
}

#[utoipa::path(post, path = "/v1/agent-deployments/{id}/revisions", tag = "agentDeployments", operation_id = "agentDeployments.createAgentDeploymentRevision", params(crate::idempotency::IdempotencyKeyHeader, ("id" = String, Path)), request_body = bodies::DeploymentRevision,
    responses((status = 201, description = "New pins for new Sessions; running Sessions keep theirs", body = views::AgentDeployment), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_deployment_revision(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let d = deployment_for(&st, &id).await?;
    st.require_manage(&caller, &d.environment_id).await?;
    let input = pins(&st, &d.environment_id, parse(&body)?).await?;
    let route = format!("POST /v1/agent-deployments/{id}/revisions");
    once(&st.idem, &caller.principal_id, &headers, &route, &body, || async {
        let d = st
            .sessions
            .clone()
            .create_deployment_revision(ss::CreateDeploymentRevisionRequest { id, input: Some(input) })
            .await?
            .into_inner();
        audit_deployment(&st, &caller, "agent_deployment.revised", &d).await;
        created(views::deployment(&d))
    })
    .await
}

#[utoipa::path(get, path = "/v1/agent-deployments/{id}", tag = "agentDeployments", operation_id = "agentDeployments.getAgentDeployment", params(("id" = String, Path)),
    responses((status = 200, body = views::AgentDeployment), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_deployment(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::AgentDeployment> {
    let d = deployment_for(&st, &id).await?;
    st.require_read(&caller, &d.environment_id).await?;
    Ok(Json(views::deployment(&d)))
}

#[utoipa::path(get, path = "/v1/agent-deployments", tag = "agentDeployments", operation_id = "agentDeployments.listAgentDeployments", params(Paging, InEnvironment),
    responses((status = 200, body = Page<views::AgentDeployment>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_deployments(
    State(st): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(env): Query<InEnvironment>,
) -> J<Page<views::AgentDeployment>> {
    let envs = st.readable_envs(&caller, env.environment_id.as_deref()).await?;
    let r = st
        .sessions
        .clone()
        .list_deployments(ss::ListInEnvironmentsRequest { environment_ids: envs, limit: paging.limit(), page: paging.page() })
        .await?
        .into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::deployment)))
}
