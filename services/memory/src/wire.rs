//! Memory resources as the typed messages the gateway renders (api.md
//! §13), made in one place from the domain types.

use crate::dreams::model::{Dream, DreamStatus};
use crate::model::*;
use checkfu_core::time::rfc3339;
use checkfu_proto::memory::v1 as pb;

/// A time as the mesh carries it: RFC 3339, empty for "not yet".
fn at(ms: i64) -> String {
    if ms == 0 { String::new() } else { rfc3339(ms) }
}

fn actor(a: &Actor) -> pb::MemoryActor {
    pb::MemoryActor { kind: a.kind.clone(), id: a.id.clone() }
}

pub fn store(s: &Store) -> pb::MemoryStore {
    pb::MemoryStore {
        id: s.id.to_string(),
        environment_id: s.environment_id.to_string(),
        name: s.name.clone(),
        description: s.description.clone(),
        metadata_json: s.metadata.to_string(),
        owner: Some(pb::StoreOwner { kind: s.owner.kind.clone(), id: s.owner.id.clone() }),
        review: s.review.as_str().into(),
        head_version: s.head_version,
        status: s.status.as_str().into(),
        created_from: s.created_from.as_ref().map(|c| pb::CreatedFrom {
            memory_store_id: c.memory_store_id.clone(),
            store_version: c.store_version,
            dream_id: c.dream_id.clone(),
        }),
        created_by: s.created_by.clone(),
        created_at: rfc3339(s.created_ms),
        updated_at: rfc3339(s.updated_ms),
        archived_at: at(s.archived_ms),
        version: s.version,
    }
}

/// A document; `content` only when read on its own.
pub fn document(d: &DocumentMeta, content: Option<&str>) -> pb::MemoryDocument {
    pb::MemoryDocument {
        path: d.path.clone(),
        content_sha256: d.sha256.clone(),
        size_bytes: d.size_bytes,
        updated_at: rfc3339(d.updated_ms),
        updated_in_version: d.updated_in_version,
        content: content.map(str::to_string),
    }
}

pub fn version_change(c: &Change) -> pb::VersionChange {
    pb::VersionChange {
        path: c.path.clone(),
        operation: c.operation.clone(),
        sha256_before: c.sha256_before.clone(),
        sha256_after: c.sha256_after.clone(),
    }
}

pub fn version(v: &Version) -> pb::MemoryVersion {
    pb::MemoryVersion {
        memory_store_id: v.store_id.to_string(),
        store_version: v.store_version,
        created_at: rfc3339(v.created_ms),
        actor: Some(actor(&v.actor)),
        via: v.via.as_str().into(),
        memory_proposal_id: v.memory_proposal_id.clone(),
        changes: v.changes.iter().map(version_change).collect(),
    }
}

/// A proposal with each change's text (`texts` in the order of its changes;
/// `None` for a deletion).
pub fn proposal(p: &Proposal, texts: &[Option<String>]) -> pb::MemoryProposal {
    pb::MemoryProposal {
        id: p.id.to_string(),
        memory_store_id: p.store_id.to_string(),
        status: p.status.as_str().into(),
        base_version: p.base_version,
        changes: p
            .changes
            .iter()
            .zip(texts)
            .map(|(c, t)| pb::ProposedChange {
                path: c.path.clone(),
                content: t.clone(),
                expected_sha256: match &c.expected {
                    Expect::Sha(s) => Some(s.clone()),
                    Expect::Absent => None,
                },
                expect_absent: c.expected == Expect::Absent,
            })
            .collect(),
        reason: p.reason.as_str().into(),
        source: Some(actor(&p.source)),
        rationale: p.rationale.clone(),
        created_at: rfc3339(p.created_ms),
        decided_by: p.decided_by.clone(),
        decided_at: at(p.decided_ms),
        decision_note: p.decision_note.clone(),
        applied_version: p.applied_version,
    }
}

/// The changes a caller proposed, as the service checks them.
pub fn proposed_edits(changes: Vec<pb::ProposedChange>) -> Vec<ProposedEdit> {
    changes
        .into_iter()
        .map(|c| ProposedEdit {
            path: c.path,
            content: c.content,
            expected: match (c.expect_absent, c.expected_sha256) {
                (true, _) => Some(Expect::Absent),
                (false, Some(s)) => Some(Expect::Sha(s)),
                (false, None) => None,
            },
        })
        .collect()
}

/// A Dream; its output store shows once it completed.
pub fn dream(d: &Dream) -> pb::Dream {
    let s = &d.stats;
    pb::Dream {
        id: d.id.clone(),
        environment_id: d.environment_id.clone(),
        status: d.status.as_str().into(),
        mode: d.mode.as_str().into(),
        input_store_id: d.input_store_id.clone(),
        input_store_version: d.input_store_version,
        session_ids: d.session_ids.clone(),
        model_routing_profile_id: d.routing_profile_id.clone(),
        instructions: d.instructions.clone(),
        review: d.review,
        output_store_id: if d.status == DreamStatus::Completed { d.output_store_id.clone() } else { String::new() },
        output_proposal_id: d.output_proposal_id.clone(),
        stats: Some(pb::DreamStats {
            documents_read: s.documents_read,
            sessions_read: s.sessions_read,
            messages_read: s.messages_read,
            documents_written: s.documents_written,
            documents_removed: s.documents_removed,
            duplicate_documents_removed: s.duplicate_documents_removed,
            duplicate_lines_removed: s.duplicate_lines_removed,
        }),
        usage: Some(pb::DreamUsage {
            input_tokens: d.usage.input_tokens,
            output_tokens: d.usage.output_tokens,
            cost_micro_usd: d.usage.cost_micro_usd,
        }),
        error: d.error.as_ref().map(|e| pb::DreamError { r#type: e.kind.clone(), message: e.message.clone() }),
        created_by: d.created_by.clone(),
        created_at: rfc3339(d.created_ms),
        started_at: at(d.started_ms),
        ended_at: at(d.ended_ms),
        archived_at: at(d.archived_ms),
    }
}
