//! What the sessions service publishes, staged in the outbox in the same
//! transaction as the change: every persisted session event (keyed by
//! session, so one Session's events stay in order); catalog lifecycle
//! events are [`checkfu_bus::resource_record`]s.

use crate::model::{Event, Session};
use checkfu_bus::{Record, SESSION_EVENTS};
use checkfu_core::time::rfc3339;
use serde_json::{Value, json};

/// `traceparent` is the trace of the change: it travels with its events as
/// a Kafka header.
/// The resource a session event is about, for webhooks: an Outcome, or a
/// child thread (`session.thread_created` is the primary's event, naming
/// the child in its payload).
fn resource_id(e: &Event) -> Option<Value> {
    if e.event_type.starts_with("outcome.") {
        return e.payload.get("outcome_id").cloned();
    }
    if e.event_type.starts_with("session.thread_") {
        return e.payload.get("session_thread_id").cloned().or_else(|| e.thread_id.clone().map(Value::String));
    }
    None
}

pub fn session_records(session: &Session, events: &[Event], traceparent: &str) -> Vec<Record> {
    events
        .iter()
        .map(|e| Record {
            topic: SESSION_EVENTS.into(),
            key: session.id.clone().into(),
            id: e.id.clone().into(),
            payload: json!({
                "id": e.id,
                "type": e.event_type,
                "created_at": rfc3339(e.created_ms),
                "environment_id": session.environment_id,
                "session_id": session.id,
                "session_thread_id": e.thread_id,
                "origin_event_id": e.origin_event_id,
                "seq": e.seq,
                "run_id": e.run_id,
                "payload": e.payload,
                // An Outcome's events name it for webhooks, a thread's
                // lifecycle events the thread.
                "resource_id": resource_id(e),
            })
            .to_string(),
            headers: vec![("type".into(), e.event_type.clone()), ("traceparent".into(), traceparent.to_string())],
        })
        .collect()
}
