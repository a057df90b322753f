//! The shapes memory routes answer (api.md §13): MemoryStores, their
//! documents and versions, proposals and Dreams — rendered here from the
//! memory service's typed answers (or read from a 0.1.0 service's JSON
//! text), described for the OpenAPI document, and read back by the CMA
//! projection.

use crate::json_text::doc;
use crate::views::{Page, opt};
use checkfu_core::Error;
use checkfu_proto::memory::v1 as pb;
use pb::answer::Resource;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A MemoryStore: a versioned tree of documents.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryStore {
    pub id: String,
    /// `memory_store`.
    #[serde(rename = "type")]
    pub kind: String,
    pub environment_id: String,
    pub name: String,
    pub description: String,
    #[schema(value_type = Object)]
    pub metadata: Value,
    /// `{kind: "environment"|"principal"|"agent"|"session", id?}`.
    #[schema(value_type = Object)]
    pub owner: Owner,
    /// `direct` or `proposals`: how writes other than the owner's land.
    pub review: String,
    pub head_version: i64,
    /// `active` or `archived`.
    pub status: String,
    /// What made it (a Dream's output names the Dream); null when made directly.
    #[schema(value_type = Option<Object>)]
    pub created_from: Option<CreatedFrom>,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
    pub version: i64,
}

// The parts of the views; the OpenAPI document shows them as objects.

#[derive(Debug, Serialize, Deserialize)]
pub struct Owner {
    pub kind: String,
    pub id: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct CreatedFrom {
    pub memory_store_id: String,
    pub store_version: i64,
    pub dream_id: String,
}

/// Who committed a version or proposed a change.
#[derive(Debug, Serialize, Deserialize)]
pub struct Actor {
    pub kind: String,
    pub id: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct VersionChange {
    pub path: String,
    pub operation: String,
    pub sha256_before: Option<String>,
    pub sha256_after: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ProposedChange {
    pub path: String,
    /// Null: a deletion.
    pub content: Option<String>,
    /// Null: the path must not exist.
    pub expected_sha256: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DreamInputs {
    pub memory_store_id: String,
    pub store_version: i64,
    pub session_ids: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DreamOutputs {
    pub memory_store_id: Option<String>,
    pub memory_proposal_id: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DreamStats {
    pub documents_read: i64,
    pub sessions_read: i64,
    pub messages_read: i64,
    pub documents_written: i64,
    pub documents_removed: i64,
    pub duplicate_documents_removed: i64,
    pub duplicate_lines_removed: i64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DreamUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_micro_usd: i64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DreamError {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

/// A document as of a version; `content` only when read on its own.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryDocument {
    pub path: String,
    pub content_sha256: String,
    pub size_bytes: i64,
    pub updated_at: String,
    pub updated_in_version: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// A document read or written, with the store version it is of.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryDocumentAnswer {
    pub memory_store_id: String,
    pub store_version: i64,
    pub document: MemoryDocument,
}

/// What a delete removed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryDocumentDeletion {
    pub path: String,
    pub content_sha256: String,
}

/// A document deleted, as of the version the deletion made.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryDocumentDeleted {
    pub memory_store_id: String,
    pub store_version: i64,
    pub deleted: MemoryDocumentDeletion,
}

/// A page of a store's documents (without content), by path, as of one version.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryDocumentPage {
    pub memory_store_id: String,
    pub store_version: i64,
    pub data: Vec<MemoryDocument>,
    pub next_page: Option<String>,
}

/// One version of a store: who changed which paths, and how.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryVersion {
    pub memory_store_id: String,
    pub store_version: i64,
    pub created_at: String,
    /// `{kind, id}` of who committed it.
    #[schema(value_type = Object)]
    pub actor: Actor,
    /// `api`, `writeback`, `proposal`, `dream`, `copy` or `automation` (a
    /// graph's Memory write).
    pub via: String,
    pub memory_proposal_id: Option<String>,
    /// `{path, op, content_sha256?}` for each path it changed.
    #[schema(value_type = Vec<Object>)]
    pub changes: Vec<VersionChange>,
}

/// A proposed change to a store, waiting for review or decided.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct MemoryProposal {
    pub id: String,
    /// `memory_proposal`.
    #[serde(rename = "type")]
    pub kind: String,
    pub memory_store_id: String,
    /// `open`, `approved`, `rejected` or `superseded`.
    pub status: String,
    pub base_version: i64,
    /// `{path, content (null: a deletion), expected_sha256}` for each change.
    #[schema(value_type = Vec<Object>)]
    pub changes: Vec<ProposedChange>,
    pub reason: String,
    /// `{kind, id}` of who proposed it.
    #[schema(value_type = Object)]
    pub source: Actor,
    pub rationale: String,
    pub created_at: String,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub decision_note: Option<String>,
    pub applied_version: Option<i64>,
}

/// A Dream: a curation run over one store version (and Sessions), whose
/// output is a new store (or a proposal to review).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Dream {
    pub id: String,
    /// `dream`.
    #[serde(rename = "type")]
    pub kind: String,
    pub environment_id: String,
    /// `pending`, `running`, `completed`, `failed` or `canceled`.
    pub status: String,
    pub mode: String,
    /// `{memory_store_id, store_version, session_ids}`.
    #[schema(value_type = Object)]
    pub inputs: DreamInputs,
    pub model_routing_profile_id: Option<String>,
    pub instructions: String,
    pub review: bool,
    /// `{memory_store_id, memory_proposal_id}` (the store once completed).
    #[schema(value_type = Object)]
    pub outputs: DreamOutputs,
    #[schema(value_type = Object)]
    pub stats: DreamStats,
    #[schema(value_type = Object)]
    pub usage: DreamUsage,
    #[schema(value_type = Option<Object>)]
    pub error: Option<DreamError>,
    pub created_by: String,
    pub created_at: String,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub archived_at: Option<String>,
}

/// A view a memory answer carries: made from its typed resource, or read
/// from a 0.1.0 service's JSON text.
pub trait FromAnswer: DeserializeOwned {
    /// The view of `r`; `None` when it is another kind of resource.
    fn typed(r: Resource, store_id: &str) -> Option<Self>;
}

/// A view a memory page carries.
pub trait FromList: DeserializeOwned {
    /// The list of this kind `l` carries.
    fn typed(l: pb::ListAnswer) -> Vec<Self>;
}

fn unreadable(e: serde_json::Error) -> Error {
    Error::internal(format!("a 0.1.0 memory answer is unreadable: {e}"))
}

/// The resource of a memory answer, as the view `T`.
#[allow(deprecated)] // json: a 0.1.0 memory service's
pub fn one<T: FromAnswer>(a: pb::Answer) -> Result<T, Error> {
    match a.resource {
        Some(r) => T::typed(r, &a.memory_store_id).ok_or_else(|| Error::internal("the memory service answered another kind of resource")),
        None => serde_json::from_str(&a.json).map_err(unreadable),
    }
}

/// The page of a memory list answer, as views `T`.
#[allow(deprecated)] // json: a 0.1.0 memory service's
pub fn page<T: FromList>(l: pb::ListAnswer) -> Result<Page<T>, Error> {
    let next_page = opt(&l.next_page);
    let data =
        if l.typed { T::typed(l) } else { l.json.iter().map(|j| serde_json::from_str(j).map_err(unreadable)).collect::<Result<_, _>>()? };
    Ok(Page { data, next_page })
}

/// A page of documents of the store `store_id`; a 0.1.0 service sends the
/// version read as its text's first entry.
#[allow(deprecated)] // json: a 0.1.0 memory service's
pub fn document_page(mut l: pb::ListAnswer, store_id: String) -> Result<MemoryDocumentPage, Error> {
    let store_version = if l.typed {
        l.store_version
    } else if l.json.is_empty() {
        0
    } else {
        doc(&l.json.remove(0))["store_version"].as_i64().unwrap_or_default()
    };
    let Page { data, next_page } = page::<MemoryDocument>(l)?;
    Ok(MemoryDocumentPage { memory_store_id: store_id, store_version, data, next_page })
}

fn actor(a: Option<pb::MemoryActor>) -> Actor {
    let a = a.unwrap_or_default();
    Actor { kind: a.kind, id: a.id }
}

impl From<pb::MemoryStore> for MemoryStore {
    fn from(s: pb::MemoryStore) -> Self {
        let owner = s.owner.unwrap_or_default();
        MemoryStore {
            id: s.id,
            kind: "memory_store".into(),
            environment_id: s.environment_id,
            name: s.name,
            description: s.description,
            metadata: doc(&s.metadata_json),
            owner: Owner { kind: owner.kind, id: owner.id },
            review: s.review,
            head_version: s.head_version,
            status: s.status,
            created_from: s.created_from.map(|c| CreatedFrom {
                memory_store_id: c.memory_store_id,
                store_version: c.store_version,
                dream_id: c.dream_id,
            }),
            created_by: s.created_by,
            created_at: s.created_at,
            updated_at: s.updated_at,
            archived_at: opt(&s.archived_at),
            version: s.version,
        }
    }
}

impl From<pb::MemoryDocument> for MemoryDocument {
    fn from(d: pb::MemoryDocument) -> Self {
        MemoryDocument {
            path: d.path,
            content_sha256: d.content_sha256,
            size_bytes: d.size_bytes,
            updated_at: d.updated_at,
            updated_in_version: d.updated_in_version,
            content: d.content,
        }
    }
}

impl From<pb::MemoryVersion> for MemoryVersion {
    fn from(v: pb::MemoryVersion) -> Self {
        MemoryVersion {
            memory_store_id: v.memory_store_id,
            store_version: v.store_version,
            created_at: v.created_at,
            actor: actor(v.actor),
            via: v.via,
            memory_proposal_id: v.memory_proposal_id,
            changes: v
                .changes
                .into_iter()
                .map(|c| VersionChange {
                    path: c.path,
                    operation: c.operation,
                    sha256_before: c.sha256_before,
                    sha256_after: c.sha256_after,
                })
                .collect(),
        }
    }
}

impl From<pb::MemoryProposal> for MemoryProposal {
    fn from(p: pb::MemoryProposal) -> Self {
        MemoryProposal {
            id: p.id,
            kind: "memory_proposal".into(),
            memory_store_id: p.memory_store_id,
            status: p.status,
            base_version: p.base_version,
            changes: p
                .changes
                .into_iter()
                .map(|c| ProposedChange { path: c.path, content: c.content, expected_sha256: c.expected_sha256 })
                .collect(),
            reason: p.reason,
            source: actor(p.source),
            rationale: p.rationale,
            created_at: p.created_at,
            decided_by: opt(&p.decided_by),
            decided_at: opt(&p.decided_at),
            decision_note: opt(&p.decision_note),
            applied_version: (p.applied_version != 0).then_some(p.applied_version),
        }
    }
}

impl From<pb::Dream> for Dream {
    fn from(d: pb::Dream) -> Self {
        let s = d.stats.unwrap_or_default();
        let u = d.usage.unwrap_or_default();
        Dream {
            id: d.id,
            kind: "dream".into(),
            environment_id: d.environment_id,
            status: d.status,
            mode: d.mode,
            inputs: DreamInputs { memory_store_id: d.input_store_id, store_version: d.input_store_version, session_ids: d.session_ids },
            model_routing_profile_id: d.model_routing_profile_id,
            instructions: d.instructions,
            review: d.review,
            outputs: DreamOutputs { memory_store_id: opt(&d.output_store_id), memory_proposal_id: d.output_proposal_id },
            stats: DreamStats {
                documents_read: s.documents_read,
                sessions_read: s.sessions_read,
                messages_read: s.messages_read,
                documents_written: s.documents_written,
                documents_removed: s.documents_removed,
                duplicate_documents_removed: s.duplicate_documents_removed,
                duplicate_lines_removed: s.duplicate_lines_removed,
            },
            usage: DreamUsage { input_tokens: u.input_tokens, output_tokens: u.output_tokens, cost_micro_usd: u.cost_micro_usd },
            error: d.error.map(|e| DreamError { kind: e.r#type, message: e.message }),
            created_by: d.created_by,
            created_at: d.created_at,
            started_at: opt(&d.started_at),
            ended_at: opt(&d.ended_at),
            archived_at: opt(&d.archived_at),
        }
    }
}

macro_rules! views {
    ($($view:ident: $arm:ident, $list:ident;)*) => {$(
        impl FromAnswer for $view {
            fn typed(r: Resource, _: &str) -> Option<Self> {
                match r {
                    Resource::$arm(x) => Some(x.into()),
                    _ => None,
                }
            }
        }
        impl FromList for $view {
            fn typed(l: pb::ListAnswer) -> Vec<Self> {
                l.$list.into_iter().map(Into::into).collect()
            }
        }
    )*};
}

views! {
    MemoryStore: Store, stores;
    MemoryVersion: Version, versions;
    MemoryProposal: Proposal, proposals;
    Dream: Dream, dreams;
}

impl FromList for MemoryDocument {
    fn typed(l: pb::ListAnswer) -> Vec<Self> {
        l.documents.into_iter().map(Into::into).collect()
    }
}

impl FromAnswer for MemoryDocumentAnswer {
    fn typed(r: Resource, store_id: &str) -> Option<Self> {
        let Resource::Document(d) = r else { return None };
        Some(MemoryDocumentAnswer {
            memory_store_id: store_id.into(),
            store_version: d.store_version,
            document: d.document.unwrap_or_default().into(),
        })
    }
}

impl FromAnswer for MemoryDocumentDeleted {
    fn typed(r: Resource, store_id: &str) -> Option<Self> {
        let Resource::Deleted(d) = r else { return None };
        Some(MemoryDocumentDeleted {
            memory_store_id: store_id.into(),
            store_version: d.store_version,
            deleted: MemoryDocumentDeletion { path: d.path, content_sha256: d.content_sha256 },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(resource: Option<Resource>, text: &Value) -> pb::Answer {
        #[allow(deprecated)] // json: a 0.1.0 memory service's
        pb::Answer { json: text.to_string(), environment_id: "env_1".into(), memory_store_id: "mstr_1".into(), resource }
    }

    /// `T` rendered from `typed` and read from the 0.1.0 `text` are both `text`.
    fn same<T: FromAnswer + Serialize>(typed: Resource, text: Value) {
        assert_eq!(json!(one::<T>(answer(Some(typed), &Value::Null)).expect("typed")), text);
        assert_eq!(json!(one::<T>(answer(None, &text)).expect("0.1.0 text")), text);
    }

    #[test]
    fn stores_and_versions_render_the_same_typed_or_from_a_0_1_0_services_text() {
        let text = json!({"id": "mstr_1", "type": "memory_store", "environment_id": "env_1", "name": "notes", "description": "",
            "metadata": {"team": "a"}, "owner": {"kind": "principal", "id": "prin_1"}, "review": "direct", "head_version": 2,
            "status": "active", "created_from": {"memory_store_id": "mstr_0", "store_version": 4, "dream_id": "drm_1"},
            "created_by": "prin_1", "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:01Z",
            "archived_at": null, "version": 3});
        let typed = pb::MemoryStore {
            id: "mstr_1".into(),
            environment_id: "env_1".into(),
            name: "notes".into(),
            metadata_json: r#"{"team":"a"}"#.into(),
            owner: Some(pb::StoreOwner { kind: "principal".into(), id: "prin_1".into() }),
            review: "direct".into(),
            head_version: 2,
            status: "active".into(),
            created_from: Some(pb::CreatedFrom { memory_store_id: "mstr_0".into(), store_version: 4, dream_id: "drm_1".into() }),
            created_by: "prin_1".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:01Z".into(),
            version: 3,
            ..Default::default()
        };
        same::<MemoryStore>(Resource::Store(typed), text);

        let text = json!({"memory_store_id": "mstr_1", "store_version": 2, "created_at": "2026-01-01T00:00:00Z",
            "actor": {"kind": "session", "id": "sess_1"}, "via": "writeback", "memory_proposal_id": null,
            "changes": [{"path": "/a.md", "operation": "created", "sha256_before": null, "sha256_after": "ab"}]});
        let typed = pb::MemoryVersion {
            memory_store_id: "mstr_1".into(),
            store_version: 2,
            created_at: "2026-01-01T00:00:00Z".into(),
            actor: Some(pb::MemoryActor { kind: "session".into(), id: "sess_1".into() }),
            via: "writeback".into(),
            memory_proposal_id: None,
            changes: vec![pb::VersionChange {
                path: "/a.md".into(),
                operation: "created".into(),
                sha256_before: None,
                sha256_after: Some("ab".into()),
            }],
        };
        same::<MemoryVersion>(Resource::Version(typed), text);
    }

    #[test]
    fn documents_render_the_same_typed_or_from_a_0_1_0_services_text() {
        let doc_text = json!({"path": "/a.md", "content_sha256": "ab", "size_bytes": 5, "updated_at": "2026-01-01T00:00:00Z", "updated_in_version": 2});
        let doc = pb::MemoryDocument {
            path: "/a.md".into(),
            content_sha256: "ab".into(),
            size_bytes: 5,
            updated_at: "2026-01-01T00:00:00Z".into(),
            updated_in_version: 2,
            content: None,
        };
        let mut read = doc_text.clone();
        read["content"] = json!("hello");
        let typed =
            pb::DocumentRead { store_version: 3, document: Some(pb::MemoryDocument { content: Some("hello".into()), ..doc.clone() }) };
        same::<MemoryDocumentAnswer>(Resource::Document(typed), json!({"memory_store_id": "mstr_1", "store_version": 3, "document": read}));
        let typed = pb::DocumentDeleted { store_version: 4, path: "/a.md".into(), content_sha256: "ab".into() };
        same::<MemoryDocumentDeleted>(
            Resource::Deleted(typed),
            json!({"memory_store_id": "mstr_1", "store_version": 4, "deleted": {"path": "/a.md", "content_sha256": "ab"}}),
        );

        // A page: listed documents carry no content; the version read rides
        // beside them (first in a 0.1.0 service's text).
        let want = json!({"memory_store_id": "mstr_1", "store_version": 3, "data": [doc_text], "next_page": "p2"});
        let typed = pb::ListAnswer { next_page: "p2".into(), store_version: 3, documents: vec![doc], typed: true, ..Default::default() };
        assert_eq!(json!(document_page(typed, "mstr_1".into()).expect("typed")), want);
        #[allow(deprecated)] // json: a 0.1.0 memory service's
        let old = pb::ListAnswer {
            json: vec![json!({"store_version": 3}).to_string(), doc_text.to_string()],
            next_page: "p2".into(),
            ..Default::default()
        };
        assert_eq!(json!(document_page(old, "mstr_1".into()).expect("0.1.0 text")), want);
        let empty = pb::ListAnswer { store_version: 7, typed: true, ..Default::default() };
        assert_eq!(
            json!(document_page(empty, "mstr_1".into()).expect("typed")),
            json!({"memory_store_id": "mstr_1", "store_version": 7, "data": [], "next_page": null})
        );
    }

    #[test]
    fn proposals_and_dreams_render_the_same_typed_or_from_a_0_1_0_services_text() {
        let text = json!({"id": "mprop_1", "type": "memory_proposal", "memory_store_id": "mstr_1", "status": "approved", "base_version": 1,
            "changes": [{"path": "/a.md", "content": "x", "expected_sha256": null}, {"path": "/b.md", "content": null, "expected_sha256": "cd"}],
            "reason": "requested", "source": {"kind": "principal", "id": "prin_1"}, "rationale": "tidy", "created_at": "2026-01-01T00:00:00Z",
            "decided_by": "prin_2", "decided_at": "2026-01-01T00:00:02Z", "decision_note": null, "applied_version": 2});
        let typed = pb::MemoryProposal {
            id: "mprop_1".into(),
            memory_store_id: "mstr_1".into(),
            status: "approved".into(),
            base_version: 1,
            changes: vec![
                pb::ProposedChange { path: "/a.md".into(), content: Some("x".into()), expected_sha256: None, expect_absent: true },
                pb::ProposedChange { path: "/b.md".into(), content: None, expected_sha256: Some("cd".into()), expect_absent: false },
            ],
            reason: "requested".into(),
            source: Some(pb::MemoryActor { kind: "principal".into(), id: "prin_1".into() }),
            rationale: "tidy".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            decided_by: "prin_2".into(),
            decided_at: "2026-01-01T00:00:02Z".into(),
            decision_note: String::new(),
            applied_version: 2,
        };
        same::<MemoryProposal>(Resource::Proposal(typed), text);

        let text = json!({"id": "drm_1", "type": "dream", "environment_id": "env_1", "status": "failed", "mode": "model",
            "inputs": {"memory_store_id": "mstr_1", "store_version": 2, "session_ids": ["sess_1"]},
            "model_routing_profile_id": "mrp_1", "instructions": "merge", "review": false,
            "outputs": {"memory_store_id": null, "memory_proposal_id": null},
            "stats": {"documents_read": 1, "sessions_read": 1, "messages_read": 4, "documents_written": 0, "documents_removed": 0,
                "duplicate_documents_removed": 0, "duplicate_lines_removed": 0},
            "usage": {"input_tokens": 10, "output_tokens": 2, "cost_micro_usd": 1},
            "error": {"type": "model_error", "message": "no"}, "created_by": "prin_1", "created_at": "2026-01-01T00:00:00Z",
            "started_at": "2026-01-01T00:00:01Z", "ended_at": "2026-01-01T00:00:02Z", "archived_at": null});
        let typed = pb::Dream {
            id: "drm_1".into(),
            environment_id: "env_1".into(),
            status: "failed".into(),
            mode: "model".into(),
            input_store_id: "mstr_1".into(),
            input_store_version: 2,
            session_ids: vec!["sess_1".into()],
            model_routing_profile_id: Some("mrp_1".into()),
            instructions: "merge".into(),
            review: false,
            output_store_id: String::new(),
            output_proposal_id: None,
            stats: Some(pb::DreamStats { documents_read: 1, sessions_read: 1, messages_read: 4, ..Default::default() }),
            usage: Some(pb::DreamUsage { input_tokens: 10, output_tokens: 2, cost_micro_usd: 1 }),
            error: Some(pb::DreamError { r#type: "model_error".into(), message: "no".into() }),
            created_by: "prin_1".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            started_at: "2026-01-01T00:00:01Z".into(),
            ended_at: "2026-01-01T00:00:02Z".into(),
            archived_at: String::new(),
        };
        same::<Dream>(Resource::Dream(typed), text);
    }

    #[test]
    fn a_page_is_typed_even_empty_and_another_kind_is_an_error() {
        let empty = pb::ListAnswer { typed: true, ..Default::default() };
        assert_eq!(json!(page::<Dream>(empty).expect("typed")), json!({"data": [], "next_page": null}));
        let wrong = answer(Some(Resource::Deleted(pb::DocumentDeleted::default())), &Value::Null);
        assert!(one::<MemoryStore>(wrong).is_err(), "a deletion is not a store");
        assert!(one::<MemoryStore>(answer(None, &json!("not a store"))).is_err(), "an unreadable answer is an error");
    }
}
