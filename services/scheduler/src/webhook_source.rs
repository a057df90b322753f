//! Provider events' resources (api.md §18.9): a WebhookSource — an
//! Automation's events from one resource at a provider, reached through
//! one Connection — and its ProviderWebhookRegistration, the hook at the
//! provider with its sealed signing secret and how it fares.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Registration modes: registered through the Connection, or by a person
/// with the callback and secret shown once (`polling` is in the vocabulary
/// but no adapter here offers it).
pub const MODES: &[&str] = &["automatic", "polling", "manual"];

/// At most this many event types a source selects.
pub const MAX_EVENTS: usize = 32;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookSource {
    pub id: String,
    pub environment_id: String,
    pub automation_id: String,
    pub provider: String,
    pub connection_id: String,
    /// The provider's resource, as written (`{kind:"repository", owner, name}`).
    pub resource: Value,
    pub events: Vec<String>,
    pub registration_id: String,
    /// Whose `use_connection` every provider call re-checks.
    pub created_by: String,
    pub created_ms: i64,
    /// 0 while it exists; set by DELETE, which revokes the registration.
    #[serde(default)]
    pub deleted_ms: i64,
}

/// Why a registration is not `active`, from its last check or call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Health {
    pub checked_ms: i64,
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registration {
    pub id: String,
    pub webhook_source_id: String,
    pub environment_id: String,
    pub provider: String,
    /// `automatic`, `polling` or `manual`.
    pub mode: String,
    /// `pending`, `active`, `degraded` or `revoked` (terminal).
    pub status: String,
    pub provider_hook_id: Option<String>,
    pub callback_url: String,
    /// The signing secret, sealed with the installation key.
    pub sealed_secret: String,
    pub health: Health,
    pub created_ms: i64,
    pub updated_ms: i64,
}

impl Registration {
    pub fn revoked(&self) -> bool {
        self.status == "revoked"
    }

    /// Moves to `status` with `health`; the webhook event the move emits
    /// (`provider_webhook_registration.activated|degraded|revoked`), if it
    /// is one.
    pub fn transition(&mut self, status: &str, health: Health, now: i64) -> Option<&'static str> {
        let before = std::mem::replace(&mut self.status, status.to_string());
        self.health = health;
        self.updated_ms = now;
        match status {
            _ if before == status => None,
            "active" => Some("provider_webhook_registration.activated"),
            "degraded" => Some("provider_webhook_registration.degraded"),
            "revoked" => Some("provider_webhook_registration.revoked"),
            _ => None,
        }
    }
}

/// A source and its registration as stored, with the row's version (a
/// compare-and-set for every change).
#[derive(Debug, Clone, PartialEq)]
pub struct SourceRow {
    pub source: WebhookSource,
    pub registration: Registration,
    pub version: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_emits_its_event_once() {
        let mut r = Registration {
            id: "pwreg_1".into(),
            webhook_source_id: "whsrc_1".into(),
            environment_id: "env_1".into(),
            provider: "github".into(),
            mode: "automatic".into(),
            status: "pending".into(),
            provider_hook_id: None,
            callback_url: String::new(),
            sealed_secret: String::new(),
            health: Health::default(),
            created_ms: 1,
            updated_ms: 1,
        };
        assert_eq!(r.transition("active", Health::default(), 2), Some("provider_webhook_registration.activated"));
        assert_eq!(r.transition("active", Health::default(), 3), None, "already active");
        let missing = Health { checked_ms: 4, code: "hook_missing".into(), message: "gone".into() };
        assert_eq!(r.transition("degraded", missing.clone(), 4), Some("provider_webhook_registration.degraded"));
        assert_eq!((r.health.clone(), r.updated_ms), (missing, 4));
        assert_eq!(r.transition("revoked", Health::default(), 5), Some("provider_webhook_registration.revoked"));
        assert!(r.revoked());
    }
}
