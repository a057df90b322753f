//! Signed ingest `POST /v1/ingest/automations/{id}` (api.md §12.4). No
//! Principal: the Automation's ingest secret authenticates, so the checks
//! run here, where the secret is, in the spec's order:
//!
//! 1. a body over 1 MiB → 413;
//! 2. an unknown or deleted Automation, or one without a webhook trigger →
//!    401, the same answer as a bad signature (no existence oracle);
//! 3. a signature missing, malformed, more than 300 s from now, or not made
//!    with the current secret → 401 `auth.invalid_key`;
//! 4. version, content type, JSON and the dedupe value → 400;
//! 5. the dedupe identity: the same bytes again answer the original result
//!    (replayed), other bytes 409 `dedupe_key_conflict`;
//! 6. paused → 409;
//! 7. the admission filter: a stopped event is recorded as a
//!    FilteredAutomationDelivery (200);
//! 8. admission (201 with the firing).
//!
//! A 400, 401, 409 or 413 records nothing.

use crate::admission::Admission;
use crate::firing::Firing;
use crate::model::*;
use crate::predicates::first_failing;
use crate::service::SchedulerService;
use checkfu_core::id::{AutomationId, FilteredDeliveryId, FiringId, TypedId};
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result};
use serde_json::Value;

/// What a signed request carries.
#[derive(Debug, Clone, Default)]
pub struct Signed {
    pub automation_id: String,
    pub version: String,
    pub content_type: String,
    pub signature: String,
    pub body: Vec<u8>,
}

/// A delivery to take under its dedupe identity.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The identity (per Automation).
    pub key: String,
    /// As the firing shows it.
    pub dedupe_value: String,
    pub body_sha256: String,
    /// The firing's event, which the admission filter reads.
    pub event: Value,
    pub webhook_source_id: String,
}

/// What a delivery became.
#[derive(Debug, Clone)]
pub enum Ingested {
    Fired(Box<Firing>),
    Filtered(FilteredDelivery),
}

fn unauthenticated() -> Error {
    Error::new(Code::InvalidKey, "the request is not signed with this Automation's current ingest secret")
}

fn bad(reason: &str, why: &str) -> Error {
    Error::invalid(why).with_reason(reason)
}

/// `application/json`, optionally with `charset=utf-8`.
fn json_content_type(v: &str) -> bool {
    let mut parts = v.split(';').map(str::trim);
    if !parts.next().is_some_and(|m| m.eq_ignore_ascii_case("application/json")) {
        return false;
    }
    parts.all(|p| {
        p.split_once('=')
            .is_some_and(|(k, v)| k.trim().eq_ignore_ascii_case("charset") && v.trim().trim_matches('"').eq_ignore_ascii_case("utf-8"))
    })
}

/// The dedupe value at the pointer: a non-empty string or an integer, as
/// `(identity, shown)` — the identity is the value's JSON, so `"7"` and `7`
/// differ.
fn dedupe_value(body: &Value, pointer: &str) -> Result<(String, String)> {
    match body.pointer(pointer) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 1024 => Ok((Value::String(s.clone()).to_string(), s.clone())),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Ok((n.to_string(), n.to_string())),
        _ => Err(bad("dedupe_key_missing", &format!("the body has no non-empty string or integer at {pointer}"))),
    }
}

impl SchedulerService {
    pub async fn ingest(&self, req: Signed) -> Result<(Ingested, bool)> {
        if req.body.len() > MAX_EVENT_BYTES {
            return Err(Error::new(Code::PayloadTooLarge, "an ingest body is at most 1 MiB"));
        }
        let id = AutomationId::parse("id", &req.automation_id).map_err(|_| unauthenticated())?;
        let a = self.store.get_automation(&id).await?.filter(|a| a.deleted_ms == 0).ok_or_else(unauthenticated)?;
        let Some(hook) = a.webhook().cloned() else { return Err(unauthenticated()) };
        if a.ingest_secret.is_empty() {
            return Err(unauthenticated());
        }
        let secret = self.sealer.open(&a.ingest_secret)?;
        if !checkfu_core::signature::verify(&secret, &req.signature, &req.body, now_ms() / 1000) {
            return Err(unauthenticated());
        }
        if req.version != "1" {
            return Err(bad("unsupported_version", "Checkfu-Version is 1"));
        }
        if !json_content_type(&req.content_type) {
            return Err(bad("unsupported_content_type", "Content-Type is application/json (charset utf-8)"));
        }
        let body: Value = serde_json::from_slice(&req.body).map_err(|e| bad("invalid_json", &format!("the body is not JSON: {e}")))?;
        let (key, shown) = dedupe_value(&body, &hook.dedupe_key)?;
        let sha = checkfu_core::sha256_hex(&req.body);
        let claim = Claim { key, dedupe_value: shown, body_sha256: sha, event: body, webhook_source_id: String::new() };
        self.take_delivery(&a, &hook, claim).await
    }

    /// A webhook delivery under its dedupe identity (a signed event's, or a
    /// provider's delivery id): an identity seen before answers what it
    /// became (replayed); otherwise paused → 409, the trigger's admission
    /// filter over `event` → a FilteredDelivery, else a firing — each
    /// claiming the identity in the same write.
    pub(crate) async fn take_delivery(&self, a: &Automation, hook: &Webhook, c: Claim) -> Result<(Ingested, bool)> {
        // Twice at most: a delivery that lost a race for its identity reads
        // the winner's result.
        for _ in 0..2 {
            if let Some(d) = self.store.get_delivery(&a.id, &c.key).await? {
                return Ok((self.replay(&d, &c.body_sha256).await?, true));
            }
            if a.status == AutomationStatus::Paused {
                return Err(Error::conflict("the Automation is paused").with_details(serde_json::json!({"status": "paused"})));
            }
            let delivery = Delivery {
                automation_id: a.id.clone(),
                dedupe_key: c.key.clone(),
                body_sha256: c.body_sha256.clone(),
                firing_id: String::new(),
                filtered_id: String::new(),
                created_ms: now_ms(),
            };
            if let Some(index) = first_failing(&hook.filter, &c.event) {
                let f = FilteredDelivery {
                    id: FilteredDeliveryId::mint(),
                    automation_id: a.id.clone(),
                    dedupe_value: c.dedupe_value.clone(),
                    body_sha256: c.body_sha256.clone(),
                    predicate_index: index as i64,
                    created_ms: delivery.created_ms,
                };
                let delivery = Delivery { filtered_id: f.id.to_string(), ..delivery };
                if self.store.insert_filtered(&f, &delivery).await? {
                    return Ok((Ingested::Filtered(f), false));
                }
                continue;
            }
            let adm = Admission {
                source: FiringSource::Webhook,
                event: c.event.clone(),
                scheduled_for_ms: 0,
                dedupe_value: c.dedupe_value.clone(),
                actor: String::new(),
                delivery: Some(delivery),
                webhook_source_id: c.webhook_source_id.clone(),
            };
            if let Some(f) = self.admit(a, adm).await? {
                return Ok((Ingested::Fired(Box::new(f)), false));
            }
        }
        Err(Error::conflict("the event is being delivered concurrently; send it again").with_reason("dedupe_key_conflict"))
    }

    /// An identity seen before: the same bytes answer what they became.
    pub(crate) async fn replay(&self, d: &Delivery, sha: &str) -> Result<Ingested> {
        if d.body_sha256 != sha {
            return Err(Error::conflict("another event with this dedupe value was delivered").with_reason("dedupe_key_conflict"));
        }
        if !d.firing_id.is_empty() {
            let f = self.store.get_firing(&FiringId::stored(d.firing_id.clone())).await?;
            return f.map(|f| Ingested::Fired(Box::new(f))).ok_or_else(|| Error::internal("a delivery's firing is missing"));
        }
        let f = self.store.get_filtered(&d.filtered_id).await?;
        f.map(Ingested::Filtered).ok_or_else(|| Error::internal("a delivery's filtered record is missing"))
    }

    /// The Environment of an Automation (deleted ones too).
    pub async fn automation_environment(&self, id: &AutomationId) -> Result<String> {
        let a = self.store.get_automation(id).await?.ok_or_else(|| Error::not_found("automation", id))?;
        Ok(a.environment_id.to_string())
    }

    /// An Automation's filtered deliveries, newest first (its Environment
    /// too, for the caller's check).
    pub async fn filtered(&self, automation_id: &str, page: &checkfu_core::page::PageRequest) -> Result<(Vec<FilteredDelivery>, String)> {
        let id = AutomationId::parse("id", automation_id)?;
        let a = self.store.get_automation(&id).await?.ok_or_else(|| Error::not_found("automation", &id))?;
        Ok((self.store.list_filtered(&id, page).await?, a.environment_id.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_types_and_dedupe_values() {
        assert!(json_content_type("application/json"));
        assert!(json_content_type("Application/JSON; charset=UTF-8"));
        assert!(!json_content_type("application/json; charset=latin1"));
        assert!(!json_content_type("text/plain"));
        let body = json!({"id": "e1", "n": 7, "s": "7", "f": 1.5, "e": ""});
        assert_eq!(dedupe_value(&body, "/id").expect("string"), ("\"e1\"".to_string(), "e1".to_string()));
        assert_ne!(dedupe_value(&body, "/n").expect("int").0, dedupe_value(&body, "/s").expect("text").0, "7 and \"7\" differ");
        for missing in ["/f", "/e", "/nope"] {
            assert_eq!(dedupe_value(&body, missing).expect_err("missing").details["reason"], "dedupe_key_missing");
        }
    }
}
