//! Provider events' writes (api.md §18.9): making a WebhookSource and
//! registering its hook, checking, repairing and revoking the
//! registration, and the catalog. Every call to a provider goes through
//! the source's Connection via the capability gateway, and re-checks first
//! that the source's creator still holds `use_connection` on it — the
//! registration never lends the platform's reach to someone who lost it.
//! Every change is audited on the registration and emits
//! `provider_webhook_registration.activated|degraded|revoked` when its
//! status moves.

use crate::model::{Automation, Check};
use crate::providers::{Api, Failure, Provider};
use crate::service::SchedulerService;
use crate::webhook_source::{Health, MAX_EVENTS, MODES, Registration, SourceRow, WebhookSource};
use checkfu_bus::resource_record;
use checkfu_core::id::{AutomationId, ConnectionId, ProviderRegistrationId, WebhookSourceId};
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use serde_json::{Value, json};
use std::sync::Arc;

/// A WebhookSource as asked for (the gateway checked the caller may manage
/// the Automation and use the Connection, an `http` one in its Environment).
#[derive(Debug, Clone)]
pub struct NewSource {
    pub automation_id: String,
    pub provider: String,
    pub connection_id: String,
    pub resource: Value,
    pub events: Vec<String>,
    /// Empty: `automatic`.
    pub mode: String,
    pub actor: String,
}

/// One provider in the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct Offered {
    pub provider: &'static str,
    pub modes: Vec<&'static str>,
    pub events: Vec<&'static str>,
    pub resource_kinds: Vec<&'static str>,
}

fn invalid(field: &str, reason: &str, why: impl Into<String>) -> Error {
    Error::invalid_field(field, why).with_reason(reason)
}

impl SchedulerService {
    /// `GET /v1/provider-triggers`: each provider offered here.
    pub fn provider_triggers(&self) -> Vec<Offered> {
        self.providers
            .all()
            .iter()
            .map(|p| Offered {
                provider: p.name(),
                modes: p.modes().to_vec(),
                events: p.events().to_vec(),
                resource_kinds: p.resource_kinds().to_vec(),
            })
            .collect()
    }

    fn provider(&self, name: &str) -> Result<Arc<dyn Provider>> {
        self.providers
            .get(name)
            .cloned()
            .ok_or_else(|| invalid("provider", "provider_unsupported", format!("{name:?} is not a provider this installation offers")))
    }

    /// Makes a source and its registration: `automatic` registers the hook
    /// now (`active`, or `degraded` with why); `manual` stays `pending`
    /// until a valid delivery or ping, and its signing secret is answered
    /// here, once.
    pub async fn create_webhook_source(&self, n: NewSource) -> Result<(SourceRow, Option<String>)> {
        self.features_disabled.require("provider_triggers")?;
        let provider = self.provider(&n.provider)?;
        let mode = if n.mode.is_empty() { "automatic".to_string() } else { n.mode.clone() };
        if !MODES.contains(&mode.as_str()) {
            return Err(invalid("mode", "mode_invalid", "mode is automatic, polling or manual"));
        }
        if !provider.modes().contains(&mode.as_str()) {
            return Err(invalid("mode", "mode_unsupported", format!("{} offers {}", provider.name(), provider.modes().join(", "))));
        }
        provider.check_resource(&n.resource).map_err(|why| invalid("resource", "resource_invalid", why))?;
        let mut events = n.events.clone();
        events.sort();
        events.dedup();
        if events.is_empty() || events.len() > MAX_EVENTS {
            return Err(invalid("events", "events_invalid", format!("events names 1 to {MAX_EVENTS} event types")));
        }
        if let Some(e) = events.iter().find(|e| !provider.events().contains(&e.as_str())) {
            return Err(invalid("events", "events_invalid", format!("{e:?} is not a {} event type", provider.name())));
        }
        ConnectionId::check("connection_id", &n.connection_id)?;
        let a = self.automation(&n.automation_id).await?;
        if a.webhook().is_none() {
            return Err(invalid(
                "automation_id",
                "webhook_trigger_missing",
                "the Automation has no webhook trigger for provider deliveries to fire",
            ));
        }
        if self.public_url.is_empty() {
            return Err(Error::conflict("the installation has no public_url for providers to call back").with_reason("public_url_unset"));
        }
        if self.store.webhook_source_of_automation(a.id.as_str()).await?.is_some() {
            return Err(exists(&a.id));
        }
        let now = now_ms();
        let id = WebhookSourceId::mint().to_string();
        let secret = checkfu_core::signature::new_secret();
        let source = WebhookSource {
            id: id.clone(),
            environment_id: a.environment_id.to_string(),
            automation_id: a.id.to_string(),
            provider: provider.name().into(),
            connection_id: n.connection_id.clone(),
            resource: n.resource.clone(),
            events,
            registration_id: ProviderRegistrationId::mint().to_string(),
            created_by: n.actor.clone(),
            created_ms: now,
            deleted_ms: 0,
        };
        let registration = Registration {
            id: source.registration_id.clone(),
            webhook_source_id: id.clone(),
            environment_id: source.environment_id.clone(),
            provider: source.provider.clone(),
            mode: mode.clone(),
            status: "pending".into(),
            provider_hook_id: None,
            callback_url: format!("{}/v1/ingest/providers/{}/{id}", self.public_url, provider.name()),
            sealed_secret: self.sealer.seal(&secret)?,
            health: Health::default(),
            created_ms: now,
            updated_ms: now,
        };
        let row = SourceRow { source, registration, version: 1 };
        if !self.store.insert_webhook_source(&row, &[]).await? {
            return Err(exists(&a.id));
        }
        self.audit_registration(&n.actor, "webhook_source.created", &row, json!({"mode": mode})).await;
        if mode != "automatic" {
            return Ok((row, Some(secret)));
        }
        let row = self.register(row, &provider, &secret, &n.actor).await?;
        Ok((row, None))
    }

    /// Registers the hook through the Connection and records how it went.
    async fn register(&self, row: SourceRow, provider: &Arc<dyn Provider>, secret: &str, actor: &str) -> Result<SourceRow> {
        let outcome = match self.may_call(&row.source).await {
            Err(f) => Err(f),
            Ok(api) => provider.register(&api, &row.source.resource, &row.source.events, &row.registration.callback_url, secret).await,
        };
        let action = "provider_webhook_registration.registered";
        self.record_registration(row, actor, action, |r, now| match &outcome {
            Ok(hook) => {
                r.provider_hook_id = Some(hook.clone());
                r.transition("active", Health { checked_ms: now, ..Health::default() }, now)
            }
            Err(f) => r.transition("degraded", health(f.clone(), now), now),
        })
        .await
    }

    /// The Connection's API for `source`, if its creator still holds
    /// `use_connection` on it.
    async fn may_call(&self, source: &WebhookSource) -> std::result::Result<Api, Failure> {
        match self.allowed(&source.created_by, "use_connection", "connection", &source.connection_id, &source.environment_id).await {
            Ok(true) => Ok(Api {
                capability: self.capability.clone(),
                environment_id: source.environment_id.clone(),
                connection_id: source.connection_id.clone(),
            }),
            Ok(false) => Err(Failure::new(
                "permission_denied",
                format!("{} no longer holds use_connection on {}", source.created_by, source.connection_id),
            )),
            Err(s) => Err(Failure::new("governance_unavailable", s.message().to_string())),
        }
    }

    /// Applies `change` to the registration and writes it (a
    /// compare-and-set, read again when another write won), with the event
    /// a status move emits and an audit record.
    pub(crate) async fn record_registration(
        &self,
        mut row: SourceRow,
        actor: &str,
        action: &str,
        change: impl Fn(&mut Registration, i64) -> Option<&'static str>,
    ) -> Result<SourceRow> {
        for _ in 0..3 {
            let now = now_ms();
            let mut next = row.clone();
            let moved = change(&mut next.registration, now);
            next.version += 1;
            let events: Vec<_> =
                moved.iter().map(|kind| resource_record(kind, &next.source.environment_id, &next.registration.id)).collect();
            if self.store.update_webhook_source(&next, row.version, &events).await? {
                self.woke();
                let details = json!({"status": next.registration.status, "health": next.registration.health.code});
                self.audit_registration(actor, action, &next, details).await;
                return Ok(next);
            }
            row = self.store.get_webhook_source(&row.source.id).await?.ok_or_else(|| Error::not_found("webhook_source", &row.source.id))?;
        }
        Err(Error::conflict("the registration changed meanwhile; ask again"))
    }

    async fn audit_registration(&self, actor: &str, action: &str, row: &SourceRow, details: Value) {
        self.audit_resource(actor, action, "provider_webhook_registration", &row.registration.id, details).await
    }

    pub async fn webhook_source(&self, id: &str) -> Result<SourceRow> {
        WebhookSourceId::check("id", id)?;
        self.store.get_webhook_source(id).await?.filter(|x| x.source.deleted_ms == 0).ok_or_else(|| Error::not_found("webhook_source", id))
    }

    pub async fn provider_registration(&self, id: &str) -> Result<SourceRow> {
        ProviderRegistrationId::check("id", id)?;
        self.store.webhook_source_of_registration(id).await?.ok_or_else(|| Error::not_found("provider_webhook_registration", id))
    }

    /// `check`, `repair` or `revoke`, by `actor`; a manual registration's
    /// repair also answers its new signing secret, once.
    pub async fn act_on_registration(&self, id: &str, action: &str, actor: &str) -> Result<(SourceRow, Option<String>)> {
        self.features_disabled.require("provider_triggers")?;
        let row = self.provider_registration(id).await?;
        if row.registration.revoked() {
            return Err(Error::conflict("the registration is revoked").with_reason("registration_revoked"));
        }
        let provider = self.provider(&row.source.provider)?;
        match action {
            "check" => Ok((self.check(row, &provider, actor).await?, None)),
            "repair" => self.repair(row, &provider, actor).await,
            "revoke" => Ok((self.revoke(row, &provider, actor).await?, None)),
            _ => Err(Error::invalid_field("action", "check, repair or revoke")),
        }
    }

    /// Asks the provider whether the hook is still there: `active`, else
    /// `degraded` with why (`hook_missing`, `provider_forbidden`, …). A
    /// manual registration has no hook to ask about and stays as it is.
    async fn check(&self, row: SourceRow, provider: &Arc<dyn Provider>, actor: &str) -> Result<SourceRow> {
        if row.registration.mode != "automatic" {
            return Ok(row);
        }
        let hook = row.registration.provider_hook_id.clone().unwrap_or_default();
        let outcome = match self.may_call(&row.source).await {
            Err(f) => Err(f),
            Ok(api) => provider.hook_exists(&api, &row.source.resource, &hook).await,
        };
        self.record_registration(row, actor, "provider_webhook_registration.checked", |r, now| match &outcome {
            Ok(true) => r.transition("active", Health { checked_ms: now, ..Health::default() }, now),
            Ok(false) => r.transition("degraded", health(Failure::new("hook_missing", "the provider has no such hook any more"), now), now),
            Err(f) => r.transition("degraded", health(f.clone(), now), now),
        })
        .await
    }

    /// A new secret and, for `automatic`, a new hook (the old one removed
    /// first, if it is still there): the old secret signs nothing from now
    /// on. A manual registration answers its new secret once, `pending`.
    async fn repair(&self, row: SourceRow, provider: &Arc<dyn Provider>, actor: &str) -> Result<(SourceRow, Option<String>)> {
        let secret = checkfu_core::signature::new_secret();
        let sealed = self.sealer.seal(&secret)?;
        if row.registration.mode != "automatic" {
            let row = self
                .record_registration(row, actor, "provider_webhook_registration.repaired", |r, now| {
                    r.sealed_secret = sealed.clone();
                    r.transition("pending", Health { checked_ms: now, ..Health::default() }, now)
                })
                .await?;
            return Ok((row, Some(secret)));
        }
        let api = self.may_call(&row.source).await;
        if let (Ok(api), Some(old)) = (&api, &row.registration.provider_hook_id)
            && let Err(f) = provider.unregister(api, &row.source.resource, old).await
        {
            tracing::warn!(registration = %row.registration.id, code = %f.code, "the old hook could not be removed before a repair");
        }
        let outcome = match api {
            Err(f) => Err(f),
            Ok(api) => provider.register(&api, &row.source.resource, &row.source.events, &row.registration.callback_url, &secret).await,
        };
        let row = self
            .record_registration(row, actor, "provider_webhook_registration.repaired", |r, now| {
                r.sealed_secret = sealed.clone();
                match &outcome {
                    Ok(hook) => {
                        r.provider_hook_id = Some(hook.clone());
                        r.transition("active", Health { checked_ms: now, ..Health::default() }, now)
                    }
                    Err(f) => {
                        r.provider_hook_id = None;
                        r.transition("degraded", health(f.clone(), now), now)
                    }
                }
            })
            .await?;
        Ok((row, None))
    }

    /// Removes the hook at the provider (when its creator may still use
    /// the Connection) and revokes the registration for good: its
    /// deliveries are refused from now on. A hook that could not be removed
    /// is named in `health`.
    async fn revoke(&self, row: SourceRow, provider: &Arc<dyn Provider>, actor: &str) -> Result<SourceRow> {
        let removed = match (&row.registration.provider_hook_id, self.may_call(&row.source).await) {
            (None, _) => Ok(()),
            (Some(hook), Ok(api)) => provider.unregister(&api, &row.source.resource, hook).await,
            (Some(_), Err(f)) => Err(f),
        };
        self.record_registration(row, actor, "provider_webhook_registration.revoked", |r, now| {
            let h = match &removed {
                Ok(()) => Health { checked_ms: now, ..Health::default() },
                Err(f) => {
                    Health { checked_ms: now, code: "hook_left".into(), message: format!("the hook could not be removed: {}", f.message) }
                }
            };
            r.transition("revoked", h, now)
        })
        .await
    }

    /// DELETE: revokes the registration (removing the hook) and deletes the
    /// source; the registration stays listed, `revoked`.
    pub async fn delete_webhook_source(&self, id: &str, actor: &str) -> Result<SourceRow> {
        let row = self.webhook_source(id).await?;
        let provider = self.provider(&row.source.provider)?;
        let row = if row.registration.revoked() { row } else { self.revoke(row, &provider, actor).await? };
        let mut next = row.clone();
        next.source.deleted_ms = now_ms();
        next.version += 1;
        if !self.store.update_webhook_source(&next, row.version, &[]).await? {
            return Err(Error::conflict("the source changed meanwhile; ask again"));
        }
        self.audit_registration(actor, "webhook_source.deleted", &next, json!({"webhook_source_id": next.source.id})).await;
        Ok(next)
    }

    /// Readiness `webhook`: the trigger has its ingest secret, and a
    /// provider registration is not revoked (`fail`) or still waiting for
    /// its first delivery (`unknown`).
    pub(crate) async fn webhook_readiness(&self, a: &Automation) -> Check {
        if a.webhook().is_none() {
            // Only a webhook trigger's Automation has a source.
            return Check::pass("webhook");
        }
        if a.ingest_secret.is_empty() {
            return Check::fail("webhook", "the webhook trigger has no ingest secret", None);
        }
        match self.store.webhook_source_of_automation(a.id.as_str()).await {
            Ok(Some(x)) if x.registration.revoked() => {
                Check::fail("webhook", "its provider registration is revoked", Some(x.registration.id.clone()))
            }
            Ok(Some(x)) if x.registration.status == "pending" => {
                Check::unknown("webhook", format!("provider registration {} waits for its first delivery", x.registration.id))
            }
            Ok(_) => Check::pass("webhook"),
            Err(e) => Check::unknown("webhook", e.message),
        }
    }
}

fn exists(automation: &AutomationId) -> Error {
    Error::conflict(format!("automation {automation} already has a webhook source")).with_reason("webhook_source_exists")
}

fn health(f: Failure, now: i64) -> Health {
    Health { checked_ms: now, code: f.code, message: f.message }
}
