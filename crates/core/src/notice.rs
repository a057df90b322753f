//! A platform event as the outside may see it (api.md §8): its webhook
//! type, its Environment and a thin `data` — ids only, never content. The
//! webhooks service delivers these; an Automation's `subscription` trigger
//! fires on them (api.md §18.10). One reading for both, so what a
//! subscription sees is exactly what a webhook endpoint could.

use crate::events::SUBSCRIBABLE;
use serde_json::{Value, json};

/// What an event may be known by.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// Its webhook type (a child thread's own idle is `session.thread_idled`).
    pub event_type: String,
    pub environment_id: String,
    /// `{environment_id, session_id?, session_thread_id?, resource_id?, vault_id?}`.
    pub data: Value,
    pub created_at: Value,
}

impl Notice {
    /// The notice of a platform event (a bus record's payload); `None` for
    /// one no webhook may carry.
    pub fn of(p: &Value) -> Option<Notice> {
        let ty = lifecycle_type(p);
        if !SUBSCRIBABLE.contains(&ty) {
            return None;
        }
        let environment_id = p["environment_id"].as_str().unwrap_or_default().to_string();
        let mut data = json!({"environment_id": environment_id});
        for k in ["session_id", "session_thread_id", "resource_id", "vault_id"] {
            if let Some(v) = p.get(k).filter(|v| v.is_string()) {
                data[k] = v.clone();
            }
        }
        // A thread's lifecycle names the thread it is about.
        if ty.starts_with("session.thread_")
            && let Some(t) = p.get("resource_id").filter(|v| v.is_string())
        {
            data["session_thread_id"] = t.clone();
        }
        Some(Notice { event_type: ty.to_string(), environment_id, data, created_at: p["created_at"].clone() })
    }

    /// The thin envelope `{id, type, created_at, data}`.
    pub fn envelope(&self, id: &str) -> Value {
        json!({"id": id, "type": self.event_type, "created_at": self.created_at, "data": self.data})
    }
}

/// The webhook type of a platform event: a child thread's own (not
/// cross-posted) idle and terminated statuses keep the lifecycle spelling
/// `session.thread_idled` / `session.thread_terminated` (api.md §15.5).
fn lifecycle_type(p: &Value) -> &str {
    let ty = p["type"].as_str().unwrap_or_default();
    let own = p.get("origin_event_id").is_none_or(Value::is_null);
    match lifecycle_spelling(ty) {
        Some(lifecycle) if own => lifecycle,
        _ => ty,
    }
}

/// The lifecycle spelling of a thread status type, when it has one.
fn lifecycle_spelling(ty: &str) -> Option<&'static str> {
    match ty {
        "session.thread_status_idle" => Some("session.thread_idled"),
        "session.thread_status_terminated" => Some("session.thread_terminated"),
        _ => None,
    }
}

/// Whether an event of platform type `ty` (a record's `type` header) may
/// be known under some spelling: it, or its lifecycle spelling (whose
/// payload tells whether it is the thread's own), is subscribable. Spares
/// reading the payloads of the events nobody outside can see — most of a
/// Session's, and the large ones.
pub fn deliverable(ty: &str) -> bool {
    SUBSCRIBABLE.contains(&ty) || lifecycle_spelling(ty).is_some_and(|l| SUBSCRIBABLE.contains(&l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_own_idle_and_termination_keep_the_lifecycle_spelling() {
        let of = |p: Value| Notice::of(&p).map(|n| n.event_type);
        assert_eq!(of(json!({"type": "session.thread_status_idle", "origin_event_id": null})).as_deref(), Some("session.thread_idled"));
        assert_eq!(of(json!({"type": "session.thread_status_terminated"})).as_deref(), Some("session.thread_terminated"));
        assert_eq!(of(json!({"type": "session.thread_status_idle", "origin_event_id": "evt_1"})), None, "a cross-post is not known again");
        assert_eq!(of(json!({"type": "session.thread_created"})).as_deref(), Some("session.thread_created"));
        assert_eq!(of(json!({"type": "agent.message"})), None);
    }

    #[test]
    fn a_notice_carries_ids_only() {
        let p = json!({"type": "memory_store.created", "environment_id": "env_1", "resource_id": "memstore_1",
            "created_at": "2026-12-07T00:00:00Z", "payload": {"secret": "x"}});
        let n = Notice::of(&p).expect("known");
        assert_eq!(
            n.envelope("evt_1"),
            json!({"id": "evt_1", "type": "memory_store.created", "created_at": "2026-12-07T00:00:00Z",
                "data": {"environment_id": "env_1", "resource_id": "memstore_1"}})
        );
    }

    #[test]
    fn only_types_some_spelling_of_which_is_subscribable_are_read() {
        assert!(deliverable("session.thread_status_idle"), "read for its lifecycle spelling");
        assert!(deliverable("session.thread_status_terminated"));
        assert!(deliverable("session.status_idle"));
        assert!(!deliverable("agent.message") && !deliverable("span.model_request_start") && !deliverable("user.message"));
    }
}
