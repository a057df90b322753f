//! Outbound webhook endpoints. An endpoint in an Environment needs `manage`
//! there to create or change and `read` to see; an installation-wide one
//! (no `environment_id`) needs installation `admin`. The signing secret is
//! shown only when created or rotated.

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
use checkfu_proto::webhooks::v1 as wh;

type J<T> = ApiResult<Json<T>>;

async fn endpoint_for(st: &AppState, id: &str) -> ApiResult<wh::Endpoint> {
    checkfu_core::id::EndpointId::check("id", id)?;
    Ok(st.webhooks.clone().get_endpoint(wh::GetByIdRequest { id: id.into() }).await?.into_inner())
}

/// Writing an endpoint: `manage` on its Environment, or admin when it has none.
async fn require_write(st: &AppState, caller: &Caller, environment_id: &str) -> ApiResult<()> {
    if environment_id.is_empty() { st.require_admin(caller).await } else { st.require_manage(caller, environment_id).await }
}

async fn require_see(st: &AppState, caller: &Caller, environment_id: &str) -> ApiResult<()> {
    if environment_id.is_empty() { st.require_admin(caller).await } else { st.require_read(caller, environment_id).await }
}

#[utoipa::path(post, path = "/v1/webhook-endpoints", tag = "webhookEndpoints", operation_id = "webhookEndpoints.createWebhookEndpoint", params(crate::idempotency::IdempotencyKeyHeader), request_body = bodies::CreateWebhookEndpoint,
    responses((status = 201, description = "The endpoint with its signing secret (shown once)", body = views::WebhookEndpoint), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_endpoint(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let b: bodies::CreateWebhookEndpoint = parse(&body)?;
    let env = b.environment_id.clone().unwrap_or_default();
    require_write(&st, &caller, &env).await?;
    let req =
        wh::CreateEndpointRequest { environment_id: env, url: b.url, event_types: b.event_types, created_by: caller.principal_id.clone() };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/webhook-endpoints", &body, || async {
        let r = st.webhooks.clone().create_endpoint(req).await?.into_inner();
        created(views::webhook_endpoint(&r.endpoint.unwrap_or_default(), Some(r.secret)))
    })
    .await
}

#[utoipa::path(get, path = "/v1/webhook-endpoints", tag = "webhookEndpoints", operation_id = "webhookEndpoints.listWebhookEndpoints", params(Paging, InEnvironment),
    responses((status = 200, body = Page<views::WebhookEndpoint>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_endpoints(
    State(st): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(env): Query<InEnvironment>,
) -> J<Page<views::WebhookEndpoint>> {
    let envs = st.readable_envs(&caller, env.environment_id.as_deref()).await?;
    let include_installation = env.environment_id.is_none() && st.is_admin(&caller).await?;
    let req = wh::ListEndpointsRequest { environment_ids: envs, include_installation, limit: paging.limit(), page: paging.page() };
    let r = st.webhooks.clone().list_endpoints(req).await?.into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, |e| views::webhook_endpoint(e, None))))
}

#[utoipa::path(get, path = "/v1/webhook-endpoints/{id}", tag = "webhookEndpoints", operation_id = "webhookEndpoints.getWebhookEndpoint", params(("id" = String, Path)),
    responses((status = 200, body = views::WebhookEndpoint), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_endpoint(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::WebhookEndpoint> {
    let e = endpoint_for(&st, &id).await?;
    require_see(&st, &caller, &e.environment_id).await?;
    Ok(Json(views::webhook_endpoint(&e, None)))
}

#[utoipa::path(post, path = "/v1/webhook-endpoints/{id}", tag = "webhookEndpoints", operation_id = "webhookEndpoints.updateWebhookEndpoint", params(("id" = String, Path)), request_body = bodies::UpdateWebhookEndpoint,
    responses((status = 200, body = views::WebhookEndpoint), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_endpoint(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> J<views::WebhookEndpoint> {
    let e = endpoint_for(&st, &id).await?;
    require_write(&st, &caller, &e.environment_id).await?;
    let b: bodies::UpdateWebhookEndpoint = parse(&body)?;
    let req = wh::UpdateEndpointRequest {
        id,
        url: b.url,
        set_event_types: b.event_types.is_some(),
        event_types: b.event_types.unwrap_or_default(),
        disabled: b.disabled,
        expected_version: b.expected_version,
    };
    Ok(Json(views::webhook_endpoint(&st.webhooks.clone().update_endpoint(req).await?.into_inner(), None)))
}

#[utoipa::path(delete, path = "/v1/webhook-endpoints/{id}", tag = "webhookEndpoints", operation_id = "webhookEndpoints.deleteWebhookEndpoint", params(("id" = String, Path)),
    responses((status = 200, body = views::WebhookEndpoint), (status = "4XX", body = ErrorEnvelope)))]
pub async fn delete_endpoint(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::WebhookEndpoint> {
    let e = endpoint_for(&st, &id).await?;
    require_write(&st, &caller, &e.environment_id).await?;
    Ok(Json(views::webhook_endpoint(&st.webhooks.clone().delete_endpoint(wh::GetByIdRequest { id }).await?.into_inner(), None)))
}

/// Replaces the signing secret and shows the new one once; deliveries from
/// now on are signed with it.
#[utoipa::path(post, path = "/v1/webhook-endpoints/{id}/secret", tag = "webhookEndpoints", operation_id = "webhookEndpoints.rotateWebhookEndpointSecret", params(("id" = String, Path)),
    responses((status = 200, body = views::WebhookEndpoint), (status = "4XX", body = ErrorEnvelope)))]
pub async fn rotate_secret(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::WebhookEndpoint> {
    let e = endpoint_for(&st, &id).await?;
    require_write(&st, &caller, &e.environment_id).await?;
    let r = st.webhooks.clone().rotate_secret(wh::GetByIdRequest { id }).await?.into_inner();
    Ok(Json(views::webhook_endpoint(&r.endpoint.unwrap_or_default(), Some(r.secret))))
}

/// Each delivery with every attempt: status, response code, next attempt.
#[utoipa::path(get, path = "/v1/webhook-endpoints/{id}/deliveries", tag = "webhookEndpoints", operation_id = "webhookEndpoints.listWebhookEndpointDeliveries", params(("id" = String, Path), Paging),
    responses((status = 200, body = Page<views::WebhookDelivery>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_deliveries(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    paging: Paging,
) -> J<Page<views::WebhookDelivery>> {
    let e = endpoint_for(&st, &id).await?;
    require_see(&st, &caller, &e.environment_id).await?;
    let r = st
        .webhooks
        .clone()
        .list_deliveries(wh::ListDeliveriesRequest { endpoint_id: id, limit: paging.limit(), page: paging.page() })
        .await?
        .into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::webhook_delivery)))
}
