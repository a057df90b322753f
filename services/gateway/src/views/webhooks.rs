//! Webhook endpoints and deliveries.

use super::common::opt;
use checkfu_proto::webhooks::v1 as wh;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookEndpoint {
    pub id: String,
    /// `null` for an installation-wide endpoint.
    pub environment_id: Option<String>,
    pub url: String,
    pub event_types: Vec<String>,
    pub disabled: bool,
    pub version: i64,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    /// Only when created or rotated: the signing secret, shown once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

pub fn webhook_endpoint(e: &wh::Endpoint, secret: Option<String>) -> WebhookEndpoint {
    WebhookEndpoint {
        id: e.id.clone(),
        environment_id: opt(&e.environment_id),
        url: e.url.clone(),
        event_types: e.event_types.clone(),
        disabled: e.disabled,
        version: e.version,
        created_by: e.created_by.clone(),
        created_at: e.created_at.clone(),
        updated_at: e.updated_at.clone(),
        secret,
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookAttempt {
    pub number: i32,
    pub at: String,
    /// `null` when no response arrived.
    pub response_code: Option<i32>,
    pub error: Option<String>,
    pub duration_ms: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookDelivery {
    pub id: String,
    pub endpoint_id: String,
    /// The `id` every attempt carries.
    pub event_id: String,
    pub event_type: String,
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    pub attempts: i32,
    pub last_response_code: Option<i32>,
    /// When the next attempt is due (pending deliveries only).
    pub next_attempt_at: Option<String>,
    pub created_at: String,
    pub history: Vec<WebhookAttempt>,
}

pub fn webhook_delivery(d: &wh::Delivery) -> WebhookDelivery {
    WebhookDelivery {
        id: d.id.clone(),
        endpoint_id: d.endpoint_id.clone(),
        event_id: d.event_id.clone(),
        event_type: d.event_type.clone(),
        status: d.status.clone(),
        attempts: d.attempts,
        last_response_code: (d.last_response_code != 0).then_some(d.last_response_code),
        next_attempt_at: opt(&d.next_attempt_at),
        created_at: d.created_at.clone(),
        history: d
            .history
            .iter()
            .map(|a| WebhookAttempt {
                number: a.number,
                at: a.at.clone(),
                response_code: (a.response_code != 0).then_some(a.response_code),
                error: opt(&a.error),
                duration_ms: a.duration_ms,
            })
            .collect(),
    }
}
