//! Provider ingest `POST /v1/ingest/providers/{provider}/{webhook_source_id}`
//! (api.md §18.9), a registration's `callback_url`. No Principal: the
//! registration's signing secret authenticates, checked here where it is
//! sealed, in signed ingest's order (§12.4):
//!
//! 1. a body over 1 MiB → 413;
//! 2. an unknown, deleted or revoked source (or another provider's path)
//!    → 401, the same answer as a bad signature;
//! 3. the provider's signature → 401 `auth.invalid_key`;
//! 4. its headers and the JSON body → 400;
//! 5. the delivery id: the same bytes again answer the original result
//!    (replayed), other bytes 409 `dedupe_key_conflict`;
//! 6. a ping → 200, nothing; an event type the source does not select →
//!    200 `event_not_selected`, nothing;
//! 7. paused → 409; the webhook trigger's admission filter (over the
//!    firing's event) → 200 with the filtered delivery;
//! 8. admission: 201, `source:"webhook"`, `webhook_source_id`, the
//!    delivery id as `dedupe_value`, the event `{provider, type, action,
//!    delivery_id, payload}`.
//!
//! A manual registration's first valid delivery or ping makes it `active`.

use crate::ingest::Ingested;
use crate::model::*;
use crate::service::SchedulerService;
use crate::webhook_source::{Health, SourceRow};
use checkfu_core::id::{AutomationId, TypedId, WebhookSourceId};
use checkfu_core::{Code, Error, Result};
use serde_json::{Value, json};
use std::collections::HashMap;

/// A provider delivery as the gateway passes it.
#[derive(Debug, Clone, Default)]
pub struct ProviderDelivery {
    pub provider: String,
    pub webhook_source_id: String,
    /// Names lowercase.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

/// What a provider delivery became.
#[derive(Debug, Clone)]
pub enum Received {
    Ingested(Ingested),
    /// Answered 200 and recorded nothing: `ping` or `event_not_selected`.
    Ignored(&'static str),
}

/// The most headers a delivery may carry.
const MAX_HEADERS: usize = 64;

fn unauthenticated() -> Error {
    Error::new(Code::InvalidKey, "the delivery is not signed with this source's current secret")
}

fn bad(reason: &str, why: impl Into<String>) -> Error {
    Error::invalid(why).with_reason(reason)
}

impl SchedulerService {
    pub async fn provider_ingest(&self, d: ProviderDelivery) -> Result<(Received, bool)> {
        self.features_disabled.require("provider_triggers")?;
        if d.body.len() > MAX_EVENT_BYTES {
            return Err(Error::new(Code::PayloadTooLarge, "a provider delivery is at most 1 MiB"));
        }
        if d.headers.len() > MAX_HEADERS {
            return Err(bad("provider_headers_invalid", "a delivery carries at most 64 headers"));
        }
        WebhookSourceId::check("webhook_source_id", &d.webhook_source_id).map_err(|_| unauthenticated())?;
        let row = self.store.get_webhook_source(&d.webhook_source_id).await?.ok_or_else(unauthenticated)?;
        if row.source.deleted_ms != 0 || row.registration.revoked() || row.source.provider != d.provider {
            return Err(unauthenticated());
        }
        let provider = self.providers.get(&d.provider).cloned().ok_or_else(unauthenticated)?;
        let secret = self.sealer.open(&row.registration.sealed_secret)?;
        if !provider.verify(&d.headers, &d.body, &secret) {
            return Err(unauthenticated());
        }
        let body: Value = serde_json::from_slice(&d.body).map_err(|e| bad("invalid_json", format!("the body is not JSON: {e}")))?;
        let delivery = provider.delivery(&d.headers, &body).map_err(|why| bad("provider_headers_invalid", why))?;
        let a = self
            .store
            .get_automation(&AutomationId::stored(row.source.automation_id.clone()))
            .await?
            .filter(|a| a.deleted_ms == 0)
            .ok_or_else(unauthenticated)?;
        let key = format!("provider:{}:{}", row.source.id, delivery.id);
        let sha = checkfu_core::sha256_hex(&d.body);
        if let Some(seen) = self.store.get_delivery(&a.id, &key).await? {
            return Ok((Received::Ingested(self.replay(&seen, &sha).await?), true));
        }
        self.activate_on_delivery(row.clone()).await;
        if delivery.ping {
            return Ok((Received::Ignored("ping"), false));
        }
        if !row.source.events.contains(&delivery.event_type) {
            return Ok((Received::Ignored("event_not_selected"), false));
        }
        let Some(hook) = a.webhook().cloned() else { return Err(unauthenticated()) };
        let event = json!({"provider": row.source.provider, "type": delivery.event_type, "action": delivery.action,
            "delivery_id": delivery.id, "payload": body});
        let claim = crate::ingest::Claim { key, dedupe_value: delivery.id, body_sha256: sha, event, webhook_source_id: row.source.id };
        let (ingested, replayed) = self.take_delivery(&a, &hook, claim).await?;
        Ok((Received::Ingested(ingested), replayed))
    }

    /// A manual registration waiting for its first valid delivery (or
    /// ping) becomes `active`, recorded as any registration change is; a
    /// failure to record it only waits for the next one.
    async fn activate_on_delivery(&self, row: SourceRow) {
        if row.registration.status != "pending" {
            return;
        }
        // The provider's signed delivery did it.
        let actor = format!("provider:{}", row.source.provider);
        let id = row.registration.id.clone();
        let activated = self
            .record_registration(row, &actor, "provider_webhook_registration.activated", |r, now| match r.status.as_str() {
                "pending" => r.transition("active", Health { checked_ms: now, ..Health::default() }, now),
                _ => None,
            })
            .await;
        if let Err(e) = activated {
            tracing::warn!(registration = %id, error = %e.message, "a registration's activation was not recorded");
        }
    }
}
