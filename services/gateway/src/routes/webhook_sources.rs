//! Provider events (api.md §18.9): WebhookSources (`manage` on the
//! Automation's Environment and the caller's own `use_connection` on an
//! `http` Connection there), their ProviderWebhookRegistrations (read with
//! `read`; check, repair and revoke with `manage`), the provider catalog,
//! and provider ingest — no API key: the registration's signing secret
//! authenticates, checked by the scheduler.

use super::Paging;
use super::automations::Firing;
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query, RawBody};
use crate::views::{ErrorEnvelope, Page, page};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use checkfu_core::Error;
use checkfu_proto::scheduler::v1 as pb;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

type J<T> = ApiResult<Json<T>>;

/// How a registration fares: why it is degraded, from its last check or call.
#[derive(Debug, Serialize, ToSchema)]
pub struct RegistrationHealth {
    pub checked_at: Option<String>,
    /// `hook_missing`, `provider_forbidden`, `provider_error`,
    /// `provider_unreachable`, `permission_denied`, `hook_left`, …; null
    /// when healthy.
    pub code: Option<String>,
    pub message: Option<String>,
}

/// A WebhookSource's hook at its provider.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderWebhookRegistration {
    pub id: String,
    pub webhook_source_id: String,
    pub environment_id: String,
    pub provider: String,
    /// `automatic`, `polling` or `manual`.
    pub mode: String,
    /// `pending`, `active`, `degraded` or `revoked`.
    pub status: String,
    pub provider_hook_id: Option<String>,
    /// Where the provider delivers: `POST` signed events here.
    pub callback_url: String,
    pub health: RegistrationHealth,
    /// Only in the answer that made it (a manual registration's create or
    /// repair): never shown again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// An Automation's events from a provider's resource.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookSource {
    pub id: String,
    pub automation_id: String,
    pub environment_id: String,
    pub provider: String,
    pub connection_id: String,
    /// github: `{kind:"repository", owner, name}`.
    #[schema(value_type = Object)]
    pub resource: Value,
    pub events: Vec<String>,
    pub registration_id: String,
    pub registration: ProviderWebhookRegistration,
    pub created_by: String,
    pub created_at: String,
}

/// A provider this installation offers triggers from.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderTrigger {
    pub provider: String,
    /// ⊆ `automatic`, `polling`, `manual`.
    pub modes: Vec<String>,
    pub events: Vec<String>,
    pub resource_kinds: Vec<String>,
    pub available: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderTriggers {
    pub data: Vec<ProviderTrigger>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhookSource {
    pub automation_id: String,
    /// `github` (or `fake` where test providers are enabled).
    pub provider: String,
    /// An `http` Connection in the Automation's Environment to the
    /// provider's REST API, on which the caller holds `use_connection`.
    pub connection_id: String,
    /// github: `{kind:"repository", owner, name}`.
    #[schema(value_type = Object)]
    pub resource: Value,
    /// 1–32 of the provider's event types.
    pub events: Vec<String>,
    /// `automatic` (default), `polling` or `manual`.
    #[serde(default)]
    pub mode: Option<String>,
}

/// `?environment_id=&automation_id=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SourceQuery {
    #[serde(default)]
    pub environment_id: Option<String>,
    #[serde(default)]
    pub automation_id: Option<String>,
}

/// `?environment_id=&status=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RegistrationQuery {
    #[serde(default)]
    pub environment_id: Option<String>,
    /// `pending`, `active`, `degraded` or `revoked`.
    #[serde(default)]
    pub status: Option<String>,
}

fn at(ms: i64) -> Option<String> {
    (ms > 0).then(|| checkfu_core::time::rfc3339(ms))
}

fn registration_view(r: pb::ProviderRegistration) -> ProviderWebhookRegistration {
    let h = r.health.unwrap_or_default();
    let some = |s: String| (!s.is_empty()).then_some(s);
    ProviderWebhookRegistration {
        health: RegistrationHealth { checked_at: at(h.checked_ms), code: some(h.code), message: some(h.message) },
        created_at: checkfu_core::time::rfc3339(r.created_ms),
        updated_at: checkfu_core::time::rfc3339(r.updated_ms),
        id: r.id,
        webhook_source_id: r.webhook_source_id,
        environment_id: r.environment_id,
        provider: r.provider,
        mode: r.mode,
        status: r.status,
        provider_hook_id: r.provider_hook_id,
        callback_url: r.callback_url,
        signing_secret: r.signing_secret,
    }
}

fn source_view(s: pb::WebhookSource) -> WebhookSource {
    WebhookSource {
        resource: serde_json::from_str(&s.resource_json).unwrap_or(Value::Null),
        registration: registration_view(s.registration.unwrap_or_default()),
        created_at: checkfu_core::time::rfc3339(s.created_ms),
        id: s.id,
        automation_id: s.automation_id,
        environment_id: s.environment_id,
        provider: s.provider,
        connection_id: s.connection_id,
        events: s.events,
        registration_id: s.registration_id,
        created_by: s.created_by,
    }
}

#[utoipa::path(post, path = "/v1/webhook-sources", tag = "webhookSources", operation_id = "webhookSources.createWebhookSource",
    params(crate::idempotency::IdempotencyKeyHeader), request_body = CreateWebhookSource,
    responses((status = 201, description = "Made; an automatic registration is active or degraded, a manual one pending with its signing_secret shown once", body = WebhookSource),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn create(State(st): State<AppState>, caller: Caller, headers: HeaderMap, JsonBody(raw): JsonBody) -> ApiResult<Response> {
    let b: CreateWebhookSource = crate::bodies::parse(&raw)?;
    checkfu_core::id::AutomationId::check("automation_id", &b.automation_id)?;
    checkfu_core::id::ConnectionId::check("connection_id", &b.connection_id)?;
    let a = st.scheduler.clone().get_automation(pb::GetByIdRequest { id: b.automation_id.clone() }).await?.into_inner();
    if !st.allowed(&caller.principal_id, "read", "environment", &a.environment_id, &a.environment_id).await? {
        return Err(Error::not_found("automation", &b.automation_id).into());
    }
    st.require(&caller, "manage", "environment", &a.environment_id, &a.environment_id).await?;
    usable_connection(&st, &caller, &b.connection_id, &a.environment_id).await?;
    let req = pb::CreateWebhookSourceRequest {
        automation_id: b.automation_id,
        provider: b.provider,
        connection_id: b.connection_id,
        resource_json: b.resource.to_string(),
        events: b.events,
        mode: b.mode.unwrap_or_default(),
        actor_id: caller.principal_id.clone(),
    };
    crate::idempotency::once(&st.idem, &caller.principal_id, &headers, "POST /v1/webhook-sources", &raw, || async {
        super::created(source_view(st.scheduler.clone().create_webhook_source(req).await?.into_inner()))
    })
    .await
}

/// The Connection a source reads through: an active `http` Connection in
/// the Automation's Environment, on which the caller holds
/// `use_connection` (a source never lends reach its creator lacks).
async fn usable_connection(st: &AppState, caller: &Caller, id: &str, environment_id: &str) -> ApiResult<()> {
    let c = super::connections::connection_for(st, id).await?;
    if c.environment_id != environment_id {
        return Err(Error::not_found("connection", id).into());
    }
    st.require(caller, "use_connection", "connection", id, environment_id).await?;
    if c.kind != "http" {
        return Err(Error::invalid_field("connection_id", "a provider is reached through an http Connection to its REST API")
            .with_reason("connection_kind_mismatch")
            .into());
    }
    if c.status != "active" {
        return Err(Error::conflict(format!("connection {id} is {}", c.status)).with_reason("connection_unavailable").into());
    }
    Ok(())
}

/// The source, if the caller may read its Environment (else 404).
async fn readable(st: &AppState, caller: &Caller, id: &str) -> ApiResult<pb::WebhookSource> {
    checkfu_core::id::WebhookSourceId::check("id", id)?;
    let s = st.scheduler.clone().get_webhook_source(pb::GetByIdRequest { id: id.into() }).await?.into_inner();
    if !st.allowed(&caller.principal_id, "read", "environment", &s.environment_id, &s.environment_id).await? {
        return Err(Error::not_found("webhook_source", id).into());
    }
    Ok(s)
}

#[utoipa::path(get, path = "/v1/webhook-sources", tag = "webhookSources", operation_id = "webhookSources.listWebhookSources", params(SourceQuery, Paging),
    responses((status = 200, description = "Newest first", body = Page<WebhookSource>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list(State(st): State<AppState>, caller: Caller, Query(q): Query<SourceQuery>, paging: Paging) -> J<Page<WebhookSource>> {
    let environment_ids = st.readable_envs(&caller, q.environment_id.as_deref()).await?;
    if let Some(a) = &q.automation_id {
        checkfu_core::id::AutomationId::check("automation_id", a)?;
    }
    let req = pb::ListWebhookSourcesRequest {
        environment_ids,
        automation_id: q.automation_id.unwrap_or_default(),
        limit: paging.limit(),
        page: paging.page(),
    };
    let r = st.scheduler.clone().list_webhook_sources(req).await?.into_inner();
    Ok(Json(page(&r.data, &r.next_page, |s| source_view(s.clone()))))
}

#[utoipa::path(get, path = "/v1/webhook-sources/{id}", tag = "webhookSources", operation_id = "webhookSources.getWebhookSource", params(("id" = String, Path)),
    responses((status = 200, body = WebhookSource), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<WebhookSource> {
    Ok(Json(source_view(readable(&st, &caller, &id).await?)))
}

#[utoipa::path(delete, path = "/v1/webhook-sources/{id}", tag = "webhookSources", operation_id = "webhookSources.deleteWebhookSource", params(("id" = String, Path)),
    responses((status = 200, description = "Deleted: its registration revoked (the hook removed at the provider)", body = WebhookSource), (status = "4XX", body = ErrorEnvelope)))]
pub async fn delete(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<WebhookSource> {
    let s = readable(&st, &caller, &id).await?;
    st.require(&caller, "manage", "environment", &s.environment_id, &s.environment_id).await?;
    let gone = st.scheduler.clone().delete_webhook_source(pb::ActorRequest { id, actor_id: caller.principal_id }).await?.into_inner();
    Ok(Json(source_view(gone)))
}

#[utoipa::path(get, path = "/v1/provider-webhook-registrations", tag = "providerWebhookRegistrations", operation_id = "providerWebhookRegistrations.listProviderWebhookRegistrations",
    params(RegistrationQuery, Paging),
    responses((status = 200, description = "Newest first, revoked ones too", body = Page<ProviderWebhookRegistration>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_registrations(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<RegistrationQuery>,
    paging: Paging,
) -> J<Page<ProviderWebhookRegistration>> {
    let environment_ids = st.readable_envs(&caller, q.environment_id.as_deref()).await?;
    let req =
        pb::ListRegistrationsRequest { environment_ids, status: q.status.unwrap_or_default(), limit: paging.limit(), page: paging.page() };
    let r = st.scheduler.clone().list_provider_registrations(req).await?.into_inner();
    Ok(Json(page(&r.data, &r.next_page, |x| registration_view(x.clone()))))
}

/// The registration, if the caller may read its Environment (else 404).
async fn readable_registration(st: &AppState, caller: &Caller, id: &str) -> ApiResult<pb::ProviderRegistration> {
    checkfu_core::id::ProviderRegistrationId::check("id", id)?;
    let r = st.scheduler.clone().get_provider_registration(pb::GetByIdRequest { id: id.into() }).await?.into_inner();
    if !st.allowed(&caller.principal_id, "read", "environment", &r.environment_id, &r.environment_id).await? {
        return Err(Error::not_found("provider_webhook_registration", id).into());
    }
    Ok(r)
}

#[utoipa::path(get, path = "/v1/provider-webhook-registrations/{id}", tag = "providerWebhookRegistrations", operation_id = "providerWebhookRegistrations.getProviderWebhookRegistration",
    params(("id" = String, Path)), responses((status = 200, body = ProviderWebhookRegistration), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_registration(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<ProviderWebhookRegistration> {
    Ok(Json(registration_view(readable_registration(&st, &caller, &id).await?)))
}

async fn act(st: AppState, caller: Caller, id: String, action: &str) -> J<ProviderWebhookRegistration> {
    let r = readable_registration(&st, &caller, &id).await?;
    st.require(&caller, "manage", "environment", &r.environment_id, &r.environment_id).await?;
    let req = pb::RegistrationActionRequest { id, action: action.into(), actor_id: caller.principal_id };
    Ok(Json(registration_view(st.scheduler.clone().act_on_provider_registration(req).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/provider-webhook-registrations/{id}/check", tag = "providerWebhookRegistrations", operation_id = "providerWebhookRegistrations.checkProviderWebhookRegistration",
    params(("id" = String, Path)),
    responses((status = 200, description = "Asked the provider: active, or degraded with why (hook_missing, provider_forbidden, …)", body = ProviderWebhookRegistration),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn check(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<ProviderWebhookRegistration> {
    act(st, caller, id, "check").await
}

#[utoipa::path(post, path = "/v1/provider-webhook-registrations/{id}/repair", tag = "providerWebhookRegistrations", operation_id = "providerWebhookRegistrations.repairProviderWebhookRegistration",
    params(("id" = String, Path)),
    responses((status = 200, description = "A new secret and (automatic) a new hook; the old secret signs nothing from now on", body = ProviderWebhookRegistration),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn repair(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<ProviderWebhookRegistration> {
    act(st, caller, id, "repair").await
}

#[utoipa::path(post, path = "/v1/provider-webhook-registrations/{id}/revoke", tag = "providerWebhookRegistrations", operation_id = "providerWebhookRegistrations.revokeProviderWebhookRegistration",
    params(("id" = String, Path)),
    responses((status = 200, description = "Revoked for good: the hook removed at the provider, its deliveries refused", body = ProviderWebhookRegistration),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn revoke(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<ProviderWebhookRegistration> {
    act(st, caller, id, "revoke").await
}

#[utoipa::path(get, path = "/v1/provider-triggers", tag = "providerTriggers", operation_id = "providerTriggers.listProviderTriggers",
    responses((status = 200, body = ProviderTriggers), (status = "4XX", body = ErrorEnvelope)))]
pub async fn triggers(State(st): State<AppState>, _caller: Caller) -> J<ProviderTriggers> {
    let r = st.scheduler.clone().list_provider_triggers(pb::ProviderTriggersRequest {}).await?.into_inner();
    let data = r
        .data
        .into_iter()
        .map(|t| ProviderTrigger {
            provider: t.provider,
            modes: t.modes,
            events: t.events,
            resource_kinds: t.resource_kinds,
            available: t.available,
        })
        .collect();
    Ok(Json(ProviderTriggers { data }))
}

/// A provider's delivery to a registration's `callback_url`: no API key;
/// the provider's signature (github: `X-Hub-Signature-256`) made with the
/// registration's secret authenticates. 201 with the firing it admitted,
/// 200 with the delivery its admission filter stopped, or 200 `{ignored}`
/// for a ping or an event the source does not select; the same delivery id
/// again answers the same result with `Idempotent-Replayed: true`.
#[utoipa::path(post, path = "/v1/ingest/providers/{provider}/{webhook_source_id}", tag = "webhookSources", operation_id = "webhookSources.ingestWebhookSourceEvent",
    security(()), params(("provider" = String, Path), ("webhook_source_id" = String, Path)),
    request_body(content = Object, content_type = "application/json", description = "The provider's JSON event, at most 1 MiB, signed as sent"),
    responses((status = 201, description = "Admitted", body = Firing), (status = 200, description = "Filtered, a ping, or an event not selected", body = Object),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn ingest(
    State(st): State<AppState>,
    Path((provider, source)): Path<(String, String)>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> ApiResult<Response> {
    let headers = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_ascii_lowercase(), v.to_str().ok()?.to_string())))
        .filter(|(_, v)| v.len() <= 8 * 1024)
        .take(64)
        .collect();
    let req = pb::ProviderIngestRequest { provider, webhook_source_id: source, headers, body: body.to_vec() };
    let r = st.scheduler.clone().provider_ingest(req).await?.into_inner();
    let mut resp = match r.result {
        Some(pb::provider_ingest_response::Result::Firing(f)) => {
            (StatusCode::CREATED, Json(super::automations::firing(&f))).into_response()
        }
        Some(pb::provider_ingest_response::Result::Filtered(d)) => (StatusCode::OK, Json(super::automations::filtered(&d))).into_response(),
        Some(pb::provider_ingest_response::Result::Ignored(why)) => (StatusCode::OK, Json(json!({"ignored": why}))).into_response(),
        None => return Err(Error::internal("the scheduler answered nothing").into()),
    };
    if r.replayed {
        resp.headers_mut().insert("idempotent-replayed", axum::http::HeaderValue::from_static("true"));
    }
    Ok(resp)
}
