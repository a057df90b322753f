//! Durable domain events. A service writes its events to an outbox table in
//! the same transaction as the state change ([`outbox`]); a relay publishes
//! them, in order, to the bus and only then removes them. The bus is Kafka
//! in production ([`kafka`]) and an in-process log embedded ([`memory`]);
//! both pass one conformance suite. Delivery is at least once: consumers
//! dedupe on the record id.

mod consume;
pub use consume::consume;
pub mod kafka;
pub mod memory;
pub mod outbox;

#[cfg(test)]
mod conformance;

use checkfu_core::Result;

/// Session events, keyed by session id so one Session's events stay in order.
pub const SESSION_EVENTS: &str = "checkfu.session-events";
/// Resource lifecycle events (agents, environments, sandbox profiles), keyed
/// by resource id.
pub const RESOURCE_EVENTS: &str = "checkfu.resource-events";
/// Every topic the platform publishes, with its partition count.
pub const TOPICS: &[(&str, i32)] = &[(SESSION_EVENTS, 8), (RESOURCE_EVENTS, 2)];

/// One published event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub topic: String,
    /// Records with the same key keep their order.
    pub key: String,
    /// The event id: consumers dedupe on it.
    pub id: String,
    pub payload: String,
    /// Carried as Kafka headers (trace context, event type).
    pub headers: Vec<(String, String)>,
}

impl Record {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// A resource lifecycle event (`agent.created`, `environment.updated`, ...)
/// on [`RESOURCE_EVENTS`], keyed by the resource, in the one envelope every
/// service publishes and the webhooks consumer reads.
pub fn resource_record(event_type: &str, environment_id: &str, resource_id: &str) -> Record {
    resource_record_with(event_type, environment_id, resource_id, serde_json::Map::new())
}

/// [`resource_record`] with more fields beside the resource (a vault
/// credential's `vault_id`, say).
pub fn resource_record_with(
    event_type: &str,
    environment_id: &str,
    resource_id: &str,
    extra: serde_json::Map<String, serde_json::Value>,
) -> Record {
    use checkfu_core::time::{now_ms, rfc3339};
    let id = checkfu_core::id::new_id("evt");
    let mut payload = serde_json::json!({
        "id": id, "type": event_type, "created_at": rfc3339(now_ms()), "environment_id": environment_id, "resource_id": resource_id,
    });
    for (k, v) in extra {
        payload[k] = v;
    }
    Record {
        topic: RESOURCE_EVENTS.into(),
        key: resource_id.into(),
        payload: payload.to_string(),
        id,
        headers: vec![("type".into(), event_type.into())],
    }
}

/// A record handed to a consumer, with where it sits in its topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub record: Record,
    pub partition: i32,
    pub offset: i64,
}

/// The bus: publish in order, consume in groups.
#[async_trait::async_trait]
pub trait Bus: Send + Sync + 'static {
    /// Publishes `records` in order and returns once the bus has durably
    /// accepted every one of them; an error means some may not have been.
    async fn publish(&self, records: &[Record]) -> Result<()>;
    /// Joins consumer `group` on `topic`. Members of one group share the
    /// records; separate groups each see all of them.
    async fn subscribe(&self, topic: &str, group: &str) -> Result<Box<dyn Subscription>>;
    /// Whether the bus answers (for readiness).
    async fn ready(&self) -> bool;
}

/// A group member's view of a topic.
#[async_trait::async_trait]
pub trait Subscription: Send {
    /// The next record, waiting for one.
    async fn next(&mut self) -> Result<Delivery>;
    /// Marks `d` (and everything before it in its partition) done for the
    /// group; after a restart consumption resumes after it.
    async fn commit(&mut self, d: &Delivery) -> Result<()>;
}
