-- MemoryStores (api.md §13): stores, their documents as of the head, every
-- document version, committed change sets, content by digest, proposals.
CREATE TABLE memory_stores (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    metadata_json TEXT NOT NULL,
    owner_kind TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    review TEXT NOT NULL,
    head_version BIGINT NOT NULL,
    status TEXT NOT NULL,
    created_from_json TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    archived_ms BIGINT NOT NULL,
    version BIGINT NOT NULL
);
CREATE INDEX memory_stores_env ON memory_stores(environment_id, id);
CREATE INDEX memory_stores_owner ON memory_stores(owner_id, id);
-- The head: one row per live path.
CREATE TABLE memory_documents (
    store_id TEXT NOT NULL,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    updated_in_version BIGINT NOT NULL,
    PRIMARY KEY (store_id, path)
);
-- Every version of every path; a deletion has an empty sha256.
CREATE TABLE memory_document_versions (
    store_id TEXT NOT NULL,
    path TEXT NOT NULL,
    version BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (store_id, path, version)
);
CREATE TABLE memory_versions (
    store_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    actor_kind TEXT NOT NULL,
    actor_id TEXT NOT NULL,
    via TEXT NOT NULL,
    proposal_id TEXT NOT NULL,
    changes_json TEXT NOT NULL,
    PRIMARY KEY (store_id, version)
);
-- Content by digest: inline, or in the blob store (`in_blob`, body empty).
CREATE TABLE memory_contents (
    sha256 TEXT PRIMARY KEY,
    size_bytes BIGINT NOT NULL,
    body TEXT NOT NULL,
    in_blob BIGINT NOT NULL
);
CREATE TABLE memory_proposals (
    id TEXT PRIMARY KEY,
    store_id TEXT NOT NULL,
    status TEXT NOT NULL,
    base_version BIGINT NOT NULL,
    changes_json TEXT NOT NULL,
    reason TEXT NOT NULL,
    source_kind TEXT NOT NULL,
    source_id TEXT NOT NULL,
    rationale TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    decided_by TEXT NOT NULL,
    decided_ms BIGINT NOT NULL,
    decision_note TEXT NOT NULL,
    applied_version BIGINT NOT NULL
);
CREATE INDEX memory_proposals_store ON memory_proposals(store_id, id);
-- Sessions that mounted a store: a store is deleted only when none of
-- them is live.
CREATE TABLE memory_mounts (
    store_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    PRIMARY KEY (store_id, session_id)
);
-- The transactional outbox (crates/bus/src/outbox.rs): memory_store.*
-- events staged with the change they describe.
CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL,
    msg_key TEXT NOT NULL,
    event_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    headers_json TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE TABLE outbox_relay (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);
