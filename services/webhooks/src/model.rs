//! Webhook domain types and the catalog of what can be subscribed to.

use checkfu_core::id::{DeliveryId, EndpointId, EnvironmentId};
use checkfu_core::{Error, Result, string_enum};

pub use checkfu_core::events::SUBSCRIBABLE;

/// Waits between attempts: 7 attempts in all, about 17 h.
pub const RETRY_WAITS_MS: [i64; 6] = [30_000, 300_000, 1_800_000, 3_600_000, 10_800_000, 43_200_000];
pub const MAX_ATTEMPTS: i64 = RETRY_WAITS_MS.len() as i64 + 1;

string_enum!(DeliveryStatus { Pending = "pending", Delivered = "delivered", Failed = "failed" });

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub id: EndpointId,
    /// `None`: installation-wide.
    pub environment_id: Option<EnvironmentId>,
    pub url: String,
    pub event_types: Vec<String>,
    pub secret: String,
    pub disabled: bool,
    pub version: i64,
    pub created_by: String,
    pub created_ms: i64,
    pub updated_ms: i64,
}

impl Endpoint {
    /// Whether this endpoint wants `event_type` from `environment_id`.
    pub fn wants(&self, event_type: &str, environment_id: &str) -> bool {
        !self.disabled
            && self.environment_id.as_deref().is_none_or(|e| e == environment_id)
            && self.event_types.iter().any(|p| checkfu_core::glob::glob(p, event_type))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: DeliveryId,
    pub endpoint_id: EndpointId,
    pub source_event_id: String,
    /// `wevt_...`: the same on every attempt.
    pub event_id: String,
    pub event_type: String,
    pub body: String,
    pub status: DeliveryStatus,
    pub attempts: i64,
    pub next_attempt_ms: i64,
    pub last_response_code: i64,
    pub created_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub delivery_id: DeliveryId,
    pub number: i64,
    pub at_ms: i64,
    pub response_code: i64,
    pub error: String,
    pub duration_ms: i64,
}

/// Checks a subscription list: 1 to 50 entries, each an exact catalog type
/// or a glob matching at least one.
pub fn check_event_types(types: &[String]) -> Result<()> {
    if types.is_empty() || types.len() > 50 {
        return Err(Error::invalid_field("event_types", "subscribe to 1 to 50 event types"));
    }
    for (i, t) in types.iter().enumerate() {
        if t.len() > 100 || !SUBSCRIBABLE.iter().any(|s| checkfu_core::glob::glob(t, s)) {
            return Err(Error::invalid_field(
                &format!("event_types[{i}]"),
                format!("{t:?} matches no subscribable event type; subscribable: {}", SUBSCRIBABLE.join(", ")),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_core::testing::tid;

    #[test]
    fn subscriptions_name_catalog_types_or_globs_over_them() {
        assert!(check_event_types(&["session.status_*".into(), "agent.created".into()]).is_ok());
        assert!(check_event_types(&["agent.message".into()]).is_err(), "content events are never delivered");
        assert!(check_event_types(&[]).is_err());
        let e = Endpoint {
            id: tid("whep_1"),
            environment_id: Some(tid("env_a")),
            url: "https://x".into(),
            event_types: vec!["session.status_*".into()],
            secret: "whsec_x".into(),
            disabled: false,
            version: 1,
            created_by: "prin_1".into(),
            created_ms: 0,
            updated_ms: 0,
        };
        assert!(e.wants("session.status_idle", "env_a"));
        assert!(!e.wants("session.status_idle", "env_b"), "another environment");
        assert!(!e.wants("run.created", "env_a"));
        assert!(Endpoint { environment_id: None, ..e.clone() }.wants("session.status_idle", "env_b"), "installation-wide");
        assert!(!Endpoint { disabled: true, ..e }.wants("session.status_idle", "env_a"));
    }
}
