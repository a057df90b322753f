//! Sessions, their events, Runs and files on the mesh, with a Session's
//! sandbox and mounted MemoryStores typed. Until the release after 0.1.0
//! the JSON text fields they replace are written too (docs/architecture.md,
//! "JSON on the mesh").

use super::{json_or_null, to_json};
use crate::input::Input;
use crate::model::*;
use checkfu_core::time::{rfc3339, rfc3339_opt};
use checkfu_core::{Error, Result};
use checkfu_proto::sessions::v1 as pb;
use serde_json::{Value, json};

pub fn sandbox(x: &SandboxState) -> pb::SandboxSummary {
    pb::SandboxSummary {
        expires_at_ms: x.expires_ms,
        unenforced: x.unenforced.iter().map(|u| pb::UnenforcedField { field: u.field.clone(), reason: u.reason.clone() }).collect(),
    }
}

/// The sandbox as the 0.1.0 text carried it; empty before it materialised.
pub fn sandbox_json(x: Option<&SandboxState>) -> String {
    x.map(|x| json!({"expires_at_ms": x.expires_ms, "unenforced": x.unenforced}).to_string()).unwrap_or_default()
}

pub fn memory_resource(m: &MemoryMount) -> pb::MemoryResource {
    pb::MemoryResource {
        memory_store_id: m.store_id.clone(),
        access: m.access.clone(),
        mount_name: m.mount_name.clone(),
        store_version: m.store_version,
    }
}

/// The mounts as the 0.1.0 text carried them; empty for none.
pub fn resources_json(mounts: &[MemoryMount]) -> String {
    if mounts.is_empty() {
        return String::new();
    }
    let list: Vec<Value> = mounts
        .iter()
        .map(|m| {
            json!({"type": "memory_store", "memory_store_id": m.store_id, "access": m.access, "mount_name": m.mount_name,
                "store_version": m.store_version})
        })
        .collect();
    Value::Array(list).to_string()
}

pub(crate) fn usage(u: Usage) -> pb::Usage {
    pb::Usage { input_tokens: u.input_tokens, output_tokens: u.output_tokens, model_spend_micro_usd: u.model_spend_micro_usd }
}

// Writes the deprecated JSON text for 0.1.0 peers (run_state.rs).
#[allow(deprecated)]
pub(crate) fn session(s: Session) -> pb::Session {
    pb::Session {
        budget_id: s.budget_id().to_string(),
        stop_reason_json: super::run_state::stop_reason_json(s.stop_reason.as_ref()),
        stop_reason: s.stop_reason.as_ref().map(super::run_state::stop_reason),
        metadata_json: s.metadata.to_string(),
        usage: Some(usage(s.usage)),
        id: s.id.into(),
        environment_id: s.environment_id.into(),
        agent_deployment_id: s.deployment_id.into(),
        deployment_revision: s.deployment_revision,
        principal_id: s.principal_id.into(),
        status: s.status.as_str().into(),
        title: s.title,
        created_at: rfc3339(s.created_ms),
        updated_at: rfc3339(s.updated_ms),
        version: s.version,
        agent_id: s.agent_id.into(),
        execution_json: to_json(&s.pins.execution),
        execution: Some(super::execution::execution(&s.pins.execution)),
        queued_for_pool: false,
        sandbox_json: String::new(),
        sandbox: None,
        connection_ids: vec![],
        resources_json: String::new(),
        memory_resources: vec![],
        connection_vault_ids: s.connection_vault_ids,
        last_seq: s.last_seq,
        delivery_screen: s.delivery_screen.as_ref().map(pb::DeliveryScreen::of),
    }
}

// Writes `authored_by_json` and `caused_by_json` for 0.1.0 readers too.
#[allow(deprecated)]
pub(crate) fn event(e: Event) -> pb::Event {
    pb::Event {
        authored_by: pb::Author::from_json(&e.authored_by),
        caused_by: pb::Cause::from_json(&e.caused_by),
        id: e.id.into(),
        session_id: e.session_id.into(),
        seq: e.seq,
        r#type: e.event_type,
        created_at: rfc3339(e.created_ms),
        run_id: e.run_id.map(String::from).unwrap_or_default(),
        session_thread_id: e.thread_id.unwrap_or_default(),
        origin_event_id: e.origin_event_id.map(String::from).unwrap_or_default(),
        authored_by_json: e.authored_by.to_string(),
        caused_by_json: e.caused_by.to_string(),
        payload_json: e.payload.to_string(),
    }
}

// Writes the deprecated JSON text for 0.1.0 peers (run_state.rs).
#[allow(deprecated)]
pub(crate) fn run(r: Run) -> pb::Run {
    pb::Run {
        stop_reason_json: super::run_state::stop_reason_json(r.stop_reason.as_ref()),
        stop_reason: r.stop_reason.as_ref().map(super::run_state::stop_reason),
        execution_pins_json: super::run_state::execution_pins_json(&r.execution_pins),
        execution_pins: Some(super::run_state::execution_pins(&r.execution_pins)),
        usage: Some(usage(r.usage)),
        id: r.id.into(),
        session_id: r.session_id.into(),
        status: r.status.as_str().into(),
        created_at: rfc3339(r.created_ms),
        completed_at: rfc3339_opt(r.completed_ms),
    }
}

// Reads a 0.1.0 caller's `caused_by_json` when the typed cause is absent.
#[allow(deprecated)]
pub(crate) fn input(e: pb::InputEvent) -> Result<Input> {
    let payload = json_or_null("payload", &e.payload_json)?;
    let caused_by = match &e.caused_by {
        Some(c) => pb::Cause::json(Some(c)),
        None => json_or_null("caused_by", &e.caused_by_json)?,
    };
    Input::parse(&e.r#type, payload, &e.authored_by, caused_by)
}

/// A selection: the typed one, else a 0.1.0 caller's JSON array; `None`
/// when neither is given (nothing narrowed or changed).
pub(crate) fn names(field: &str, typed: Option<pb::Selection>, json: &Option<String>) -> Result<Option<Vec<String>>> {
    if let Some(t) = typed {
        return Ok(Some(t.names));
    }
    json.as_deref()
        .map(|raw| {
            let v: Value = serde_json::from_str(raw).map_err(|e| Error::invalid_field(field, e.to_string()))?;
            let arr = v.as_array().ok_or_else(|| Error::invalid_field(field, format!("{field} must be an array of names")))?;
            Ok(pb::Selection::from_json(field, arr)?.names)
        })
        .transpose()
}

pub(crate) fn session_file(f: SessionFile) -> pb::SessionFile {
    pb::SessionFile {
        id: f.id.into(),
        path: f.path,
        size: f.size,
        sha256: f.sha256,
        status: f.status.as_str().into(),
        run_id: f.run_id.into(),
        captured_at: rfc3339(f.captured_ms),
    }
}
