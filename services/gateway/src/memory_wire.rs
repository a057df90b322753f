//! The shapes memory routes answer (api.md §13): MemoryStores, their
//! documents and versions, proposals and Dreams. The memory service renders
//! them as JSON (`checkfu_memory::view`) and the gateway passes that on;
//! these types describe the answer for the OpenAPI document (checked against
//! every answer by schemathesis in CI), and so for the SDK's types.

#![allow(dead_code, reason = "response shapes for the OpenAPI document; the memory service renders the JSON")]

use serde_json::Value;
use utoipa::ToSchema;

/// A MemoryStore: a versioned tree of documents.
#[derive(ToSchema)]
pub struct MemoryStore {
    pub id: String,
    /// `memory_store`.
    #[schema(rename = "type")]
    pub kind: String,
    pub environment_id: String,
    pub name: String,
    pub description: String,
    #[schema(value_type = Object)]
    pub metadata: Value,
    /// `{kind: "environment"|"principal"|"agent"|"session", id?}`.
    #[schema(value_type = Object)]
    pub owner: Value,
    /// `direct` or `proposals`: how writes other than the owner's land.
    pub review: String,
    pub head_version: i64,
    /// `active` or `archived`.
    pub status: String,
    /// What made it (a Dream's output names the Dream); null when made directly.
    #[schema(value_type = Option<Object>)]
    pub created_from: Option<Value>,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
    pub version: i64,
}

/// A document as of a version; `content` only when read on its own.
#[derive(ToSchema)]
pub struct MemoryDocument {
    pub path: String,
    pub content_sha256: String,
    pub size_bytes: i64,
    pub updated_at: String,
    pub updated_in_version: i64,
    pub content: Option<String>,
}

/// A document read or written, with the store version it is of.
#[derive(ToSchema)]
pub struct MemoryDocumentAnswer {
    pub memory_store_id: String,
    pub store_version: i64,
    pub document: MemoryDocument,
}

/// What a delete removed.
#[derive(ToSchema)]
pub struct MemoryDocumentDeletion {
    pub path: String,
    pub content_sha256: String,
}

/// A document deleted, as of the version the deletion made.
#[derive(ToSchema)]
pub struct MemoryDocumentDeleted {
    pub memory_store_id: String,
    pub store_version: i64,
    pub deleted: MemoryDocumentDeletion,
}

/// A page of a store's documents (without content), by path, as of one version.
#[derive(ToSchema)]
pub struct MemoryDocumentPage {
    pub memory_store_id: String,
    pub store_version: i64,
    pub data: Vec<MemoryDocument>,
    pub next_page: Option<String>,
}

/// One version of a store: who changed which paths, and how.
#[derive(ToSchema)]
pub struct MemoryVersion {
    pub memory_store_id: String,
    pub store_version: i64,
    pub created_at: String,
    /// `{kind, id}` of who committed it.
    #[schema(value_type = Object)]
    pub actor: Value,
    /// `direct`, `proposal`, `mount` or `dream`.
    pub via: String,
    pub memory_proposal_id: Option<String>,
    /// `{path, op, content_sha256?}` for each path it changed.
    #[schema(value_type = Vec<Object>)]
    pub changes: Vec<Value>,
}

/// A proposed change to a store, waiting for review or decided.
#[derive(ToSchema)]
pub struct MemoryProposal {
    pub id: String,
    /// `memory_proposal`.
    #[schema(rename = "type")]
    pub kind: String,
    pub memory_store_id: String,
    /// `open`, `approved`, `rejected` or `superseded`.
    pub status: String,
    pub base_version: i64,
    /// `{path, content (null: a deletion), expected_sha256}` for each change.
    #[schema(value_type = Vec<Object>)]
    pub changes: Vec<Value>,
    pub reason: String,
    /// `{kind, id}` of who proposed it.
    #[schema(value_type = Object)]
    pub source: Value,
    pub rationale: String,
    pub created_at: String,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub decision_note: Option<String>,
    pub applied_version: Option<i64>,
}

/// A Dream: a curation run over one store version (and Sessions), whose
/// output is a new store (or a proposal to review).
#[derive(ToSchema)]
pub struct Dream {
    pub id: String,
    /// `dream`.
    #[schema(rename = "type")]
    pub kind: String,
    pub environment_id: String,
    /// `pending`, `running`, `completed`, `failed` or `canceled`.
    pub status: String,
    pub mode: String,
    /// `{memory_store_id, store_version, session_ids}`.
    #[schema(value_type = Object)]
    pub inputs: Value,
    pub model_routing_profile_id: Option<String>,
    pub instructions: String,
    pub review: bool,
    /// `{memory_store_id, memory_proposal_id}` (the store once completed).
    #[schema(value_type = Object)]
    pub outputs: Value,
    #[schema(value_type = Object)]
    pub stats: Value,
    #[schema(value_type = Object)]
    pub usage: Value,
    #[schema(value_type = Option<Object>)]
    pub error: Option<Value>,
    pub created_by: String,
    pub created_at: String,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub archived_at: Option<String>,
}
