//! Sessions, their files, Runners, events and Runs.

use super::common::{doc, opt};
use checkfu_proto::sessions::v1 as ss;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub model_spend_micro_usd: i64,
}

fn usage(u: &Option<ss::Usage>) -> Usage {
    let u = u.unwrap_or_default();
    Usage { input_tokens: u.input_tokens, output_tokens: u.output_tokens, model_spend_micro_usd: u.model_spend_micro_usd }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Session {
    pub id: String,
    pub environment_id: String,
    pub agent_deployment_id: String,
    pub deployment_revision: i64,
    pub principal_id: String,
    /// `idle`, `running`, `rescheduling` or `terminated`.
    pub status: String,
    /// `{type: "end_turn" | "requires_action" | "budget_reached" | "retries_exhausted", ...}`.
    #[schema(value_type = Option<Object>)]
    pub stop_reason: Value,
    pub title: String,
    #[schema(value_type = Object)]
    pub metadata: Value,
    pub budget_id: Option<String>,
    pub usage: Usage,
    /// The execution plane its deployment pinned: `{kind: "managed"}`, or
    /// `{kind: "runner", pool, queued_for_pool}` where `queued_for_pool`
    /// says its Run waits for a Runner of that pool to claim it.
    #[schema(value_type = Object)]
    pub execution: Value,
    /// When the Session's sandbox (its workspace) expires: fixed when it
    /// first materialised, never extended; null before. A turn after it
    /// starts with a fresh filesystem.
    pub sandbox_expires_at: Option<String>,
    /// `{expires_at, unenforced: [{field, reason}]}`: the SandboxProfile
    /// fields the plane running it does not enforce; null before the
    /// sandbox materialised.
    #[schema(value_type = Option<Object>)]
    pub sandbox: Value,
    /// The Connections its release pins (ids only, never a secret).
    pub connection_ids: Vec<String>,
    /// The ConnectionVaults it was created with: recorded, never a source of
    /// credentials (calls use `connection_ids`).
    pub connection_vault_ids: Vec<String>,
    /// MemoryStores it mounts: `{type: "memory_store", memory_store_id,
    /// access, mount_name, store_version}` (the head when it was created).
    #[schema(value_type = Vec<Object>)]
    pub resources: Vec<SessionResource>,
    /// The seq of its newest event (0: none yet). The log is gapless from
    /// 1, so `GET …/events?after_seq={last_seq - n}` is its newest `n`
    /// events: a reader opens a long log at its end without reading it all.
    pub last_seq: i64,
    /// `{model_routing_profile_id, tier?, instructions, on_failure}`: the
    /// screen every `agent.message` is held for (an Automation's child,
    /// §18.8), null for none.
    #[schema(value_type = Option<Object>)]
    pub delivery_screen: Value,
    pub created_at: String,
    pub updated_at: String,
    pub version: i64,
}

// Reads the deprecated JSON text of a 0.1.0 sessions service.
#[allow(deprecated)]
fn execution(s: &ss::Session) -> Value {
    let mut e = crate::execution_wire::view(s.execution.as_ref(), &s.execution_json);
    if e.is_null() {
        e = serde_json::json!({"kind": "managed"});
    }
    if e.get("kind").and_then(Value::as_str) == Some("runner") {
        e["queued_for_pool"] = Value::Bool(s.queued_for_pool);
    }
    e
}

/// `{expires_at, unenforced}` once the sandbox materialised, else null:
/// from the typed summary, or a 0.1.0 sessions service's JSON text.
#[allow(deprecated)]
fn sandbox(s: &ss::Session) -> Value {
    if let Some(x) = &s.sandbox {
        let unenforced: Vec<Value> = x.unenforced.iter().map(|u| serde_json::json!({"field": u.field, "reason": u.reason})).collect();
        return serde_json::json!({"expires_at": checkfu_core::time::rfc3339(x.expires_at_ms), "unenforced": unenforced});
    }
    let v = doc(&s.sandbox_json);
    let Some(at) = v.get("expires_at_ms").and_then(Value::as_i64) else { return Value::Null };
    serde_json::json!({"expires_at": checkfu_core::time::rfc3339(at), "unenforced": v.get("unenforced").cloned().unwrap_or(Value::Array(vec![]))})
}

/// A MemoryStore a Session mounts; the OpenAPI document shows it as an
/// object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionResource {
    /// `memory_store`.
    #[serde(rename = "type")]
    pub kind: String,
    pub memory_store_id: String,
    /// `read_only` or `read_write`.
    pub access: String,
    pub mount_name: String,
    /// The store's head when the Session was created.
    pub store_version: i64,
}

/// The MemoryStores a Session mounts, as its `resources`: from the typed
/// list, or a 0.1.0 sessions service's JSON text (whose entries are
/// memory stores too).
#[allow(deprecated)]
fn resources(s: &ss::Session) -> Vec<SessionResource> {
    if s.memory_resources.is_empty() && !s.resources_json.is_empty() {
        let entries: Vec<Value> = serde_json::from_str(&s.resources_json).unwrap_or_default();
        return entries.into_iter().filter_map(|e| serde_json::from_value(e).ok()).collect();
    }
    s.memory_resources
        .iter()
        .map(|m| SessionResource {
            kind: "memory_store".into(),
            memory_store_id: m.memory_store_id.clone(),
            access: m.access.clone(),
            mount_name: m.mount_name.clone(),
            store_version: m.store_version,
        })
        .collect()
}

// Reads the deprecated JSON text of a 0.1.0 sessions service.
#[allow(deprecated)]
pub fn session(s: &ss::Session) -> Session {
    let sandbox = sandbox(s);
    Session {
        id: s.id.clone(),
        environment_id: s.environment_id.clone(),
        agent_deployment_id: s.agent_deployment_id.clone(),
        deployment_revision: s.deployment_revision,
        principal_id: s.principal_id.clone(),
        status: s.status.clone(),
        stop_reason: checkfu_proto::views::stop_reason(s.stop_reason.as_ref(), &s.stop_reason_json),
        title: s.title.clone(),
        metadata: doc(&s.metadata_json),
        budget_id: opt(&s.budget_id),
        usage: usage(&s.usage),
        execution: execution(s),
        sandbox_expires_at: sandbox.get("expires_at").and_then(Value::as_str).map(str::to_string),
        sandbox,
        connection_ids: s.connection_ids.clone(),
        connection_vault_ids: s.connection_vault_ids.clone(),
        resources: resources(s),
        last_seq: s.last_seq,
        delivery_screen: s.delivery_screen.as_ref().map_or(Value::Null, ss::DeliveryScreen::view),
        created_at: s.created_at.clone(),
        updated_at: s.updated_at.clone(),
        version: s.version,
    }
}

/// A file captured from a Session's outputs folder.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SessionFile {
    pub id: String,
    /// Relative to the outputs folder (`/mnt/session/outputs`).
    pub path: String,
    pub size: i64,
    /// Empty when the file was `too_large` to be read.
    pub sha256: String,
    /// `captured`, `too_large` (over 64 MiB) or `over_capacity` (past the
    /// Session's 64 files or 256 MiB).
    pub status: String,
    pub run_id: String,
    pub captured_at: String,
}

pub fn session_file(f: &ss::SessionFile) -> SessionFile {
    SessionFile {
        id: f.id.clone(),
        path: f.path.clone(),
        size: f.size,
        sha256: f.sha256.clone(),
        status: f.status.clone(),
        run_id: f.run_id.clone(),
        captured_at: f.captured_at.clone(),
    }
}

/// A single-use pairing code; `code` is shown once.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunnerPairing {
    pub id: String,
    pub environment_id: String,
    pub principal_id: String,
    pub pool: String,
    /// Redeem it with `checkfu runner --pairing-code`; shown once.
    pub code: Option<String>,
    pub expires_at: String,
    pub created_at: String,
}

pub fn runner_pairing(p: ss::RunnerPairing) -> RunnerPairing {
    RunnerPairing {
        id: p.id,
        environment_id: p.environment_id,
        principal_id: p.principal_id,
        pool: p.pool,
        code: Some(p.code),
        expires_at: p.expires_at,
        created_at: p.created_at,
    }
}

/// A self-hosted Runner.
#[derive(Debug, Serialize, ToSchema)]
pub struct Runner {
    pub id: String,
    pub environment_id: String,
    pub pool: String,
    pub principal_id: String,
    pub name: String,
    /// `active` or `revoked`.
    pub status: String,
    pub last_seen_at: Option<String>,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

pub fn runner(r: &ss::Runner) -> Runner {
    Runner {
        id: r.id.clone(),
        environment_id: r.environment_id.clone(),
        pool: r.pool.clone(),
        principal_id: r.principal_id.clone(),
        name: r.name.clone(),
        status: r.status.clone(),
        last_seen_at: opt(&r.last_seen_at),
        created_at: r.created_at.clone(),
        revoked_at: opt(&r.revoked_at),
    }
}

/// A persisted event of a Session's log.
#[derive(Debug, Serialize, ToSchema)]
pub struct Event {
    pub id: String,
    pub session_id: String,
    /// Starts at 1 and grows by exactly 1 per event of the Session (a
    /// thread's view skips the other threads' seqs).
    pub seq: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub created_at: String,
    pub run_id: Option<String>,
    /// The child thread the event belongs to; null for the primary.
    pub session_thread_id: Option<String>,
    /// A cross-post's original event (the copy in the primary view of a
    /// child's event); null elsewhere.
    pub origin_event_id: Option<String>,
    /// The input's `authored_by`, `{kind: "agent", id}` for agent output, null for system events.
    #[schema(value_type = Object)]
    pub authored_by: Value,
    #[schema(value_type = Object)]
    pub caused_by: Value,
    #[schema(value_type = Object)]
    pub payload: Value,
}

// Reads a 0.1.0 sessions service's author and cause text when the typed
// ones are absent (a system event has neither: its text says null).
#[allow(deprecated)]
pub fn event(e: &ss::Event) -> Event {
    Event {
        id: e.id.clone(),
        session_id: e.session_id.clone(),
        seq: e.seq,
        kind: e.r#type.clone(),
        created_at: e.created_at.clone(),
        run_id: opt(&e.run_id),
        session_thread_id: opt(&e.session_thread_id),
        origin_event_id: opt(&e.origin_event_id),
        authored_by: match &e.authored_by {
            Some(a) => ss::Author::json(Some(a)),
            None => doc(&e.authored_by_json),
        },
        caused_by: match &e.caused_by {
            Some(c) => ss::Cause::json(Some(c)),
            None => doc(&e.caused_by_json),
        },
        payload: doc(&e.payload_json),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Run {
    pub id: String,
    pub session_id: String,
    /// `queued`, `running` or `completed`.
    pub status: String,
    #[schema(value_type = Option<Object>)]
    pub stop_reason: Value,
    #[schema(value_type = Object)]
    pub execution_pins: Value,
    pub usage: Usage,
    pub created_at: String,
    pub completed_at: Option<String>,
}

// Reads the deprecated JSON text of a 0.1.0 sessions service.
#[allow(deprecated)]
pub fn run(r: &ss::Run) -> Run {
    Run {
        id: r.id.clone(),
        session_id: r.session_id.clone(),
        status: r.status.clone(),
        stop_reason: checkfu_proto::views::stop_reason(r.stop_reason.as_ref(), &r.stop_reason_json),
        execution_pins: checkfu_proto::views::execution_pins(r.execution_pins.as_ref(), &r.execution_pins_json),
        usage: usage(&r.usage),
        created_at: r.created_at.clone(),
        completed_at: opt(&r.completed_at),
    }
}

#[cfg(test)]
#[allow(deprecated)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resources_read_the_same_typed_or_from_a_0_1_0_services_text() {
        let want = json!([{"type": "memory_store", "memory_store_id": "mstr_1", "access": "read_write", "mount_name": "notes", "store_version": 3}]);
        let typed = ss::Session {
            memory_resources: vec![ss::MemoryResource {
                memory_store_id: "mstr_1".into(),
                access: "read_write".into(),
                mount_name: "notes".into(),
                store_version: 3,
            }],
            ..Default::default()
        };
        assert_eq!(json!(resources(&typed)), want);
        let old = ss::Session { resources_json: want.to_string(), ..Default::default() };
        assert_eq!(json!(resources(&old)), want);
        let other = ss::Session { resources_json: json!([{"type": "file", "file_id": "file_1"}]).to_string(), ..Default::default() };
        assert!(resources(&other).is_empty(), "a Session's resources are the stores it mounts");
        assert!(resources(&ss::Session::default()).is_empty());
    }
}
