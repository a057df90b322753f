//! The API JSON of memory resources (api.md §13) as a 0.1.0 gateway reads
//! it from the deprecated `json` fields; a 0.2.0 gateway renders the typed
//! answers (`wire.rs`) itself. Goes with those fields in the release after
//! 0.1.0.

use crate::model::*;
use checkfu_core::time::rfc3339;
use serde_json::{Value, json};

fn at(ms: i64) -> Value {
    if ms == 0 { Value::Null } else { Value::String(rfc3339(ms)) }
}

pub fn store(s: &Store) -> Value {
    json!({
        "id": s.id,
        "type": "memory_store",
        "environment_id": s.environment_id,
        "name": s.name,
        "description": s.description,
        "metadata": s.metadata,
        "owner": s.owner,
        "review": s.review.as_str(),
        "head_version": s.head_version,
        "status": s.status.as_str(),
        "created_from": s.created_from,
        "created_by": s.created_by,
        "created_at": rfc3339(s.created_ms),
        "updated_at": rfc3339(s.updated_ms),
        "archived_at": at(s.archived_ms),
        "version": s.version,
    })
}

/// A document; `content` only when read on its own.
pub fn document(d: &DocumentMeta, content: Option<&str>) -> Value {
    let mut v = json!({
        "path": d.path,
        "content_sha256": d.sha256,
        "size_bytes": d.size_bytes,
        "updated_at": rfc3339(d.updated_ms),
        "updated_in_version": d.updated_in_version,
    });
    if let Some(c) = content {
        v["content"] = Value::String(c.to_string());
    }
    v
}

pub fn version(v: &Version) -> Value {
    json!({
        "memory_store_id": v.store_id,
        "store_version": v.store_version,
        "created_at": rfc3339(v.created_ms),
        "actor": v.actor,
        "via": v.via.as_str(),
        "memory_proposal_id": v.memory_proposal_id,
        "changes": v.changes,
    })
}

/// A proposal with each change's text (`texts` in the order of its changes;
/// `None` for a deletion).
pub fn proposal(p: &Proposal, texts: &[Option<String>]) -> Value {
    let changes: Vec<Value> =
        p.changes.iter().zip(texts).map(|(c, t)| json!({"path": c.path, "content": t, "expected_sha256": c.expected.to_json()})).collect();
    json!({
        "id": p.id,
        "type": "memory_proposal",
        "memory_store_id": p.store_id,
        "status": p.status.as_str(),
        "base_version": p.base_version,
        "changes": changes,
        "reason": p.reason.as_str(),
        "source": p.source,
        "rationale": p.rationale,
        "created_at": rfc3339(p.created_ms),
        "decided_by": if p.decided_by.is_empty() { Value::Null } else { Value::String(p.decided_by.clone()) },
        "decided_at": at(p.decided_ms),
        "decision_note": if p.decision_note.is_empty() { Value::Null } else { Value::String(p.decision_note.clone()) },
        "applied_version": if p.applied_version == 0 { Value::Null } else { json!(p.applied_version) },
    })
}

/// A Dream; its output shows once it completed.
pub fn dream(d: &crate::dreams::model::Dream) -> Value {
    use crate::dreams::model::DreamStatus;
    let completed = d.status == DreamStatus::Completed;
    json!({
        "id": d.id,
        "type": "dream",
        "environment_id": d.environment_id,
        "status": d.status.as_str(),
        "mode": d.mode,
        "inputs": {
            "memory_store_id": d.input_store_id,
            "store_version": d.input_store_version,
            "session_ids": d.session_ids,
        },
        "model_routing_profile_id": d.routing_profile_id,
        "instructions": d.instructions,
        "review": d.review,
        "outputs": {
            "memory_store_id": completed.then_some(&d.output_store_id),
            "memory_proposal_id": d.output_proposal_id,
        },
        "stats": d.stats,
        "usage": d.usage,
        "error": d.error,
        "created_by": d.created_by,
        "created_at": rfc3339(d.created_ms),
        "started_at": at(d.started_ms),
        "ended_at": at(d.ended_ms),
        "archived_at": at(d.archived_ms),
    })
}
