-- Connections (api.md §16.1) and the one credential each may hold (§16.2).
-- The credential's secret is only ever stored sealed: a data key of its own
-- seals it (bound to the Connection id), and an installation credential key
-- (named by cred_key_id) wraps the data key. cred_meta_json is the read
-- form's non-secret fields.
CREATE TABLE connections (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    metadata_json TEXT NOT NULL,
    kind TEXT NOT NULL,
    url TEXT NOT NULL,
    owner_kind TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    status TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    revoked_ms BIGINT,
    version BIGINT NOT NULL,
    cred_meta_json TEXT,
    cred_key_id TEXT,
    cred_wrapped_key TEXT,
    cred_sealed TEXT,
    cred_state TEXT,
    cred_created_ms BIGINT,
    cred_rotated_ms BIGINT,
    cred_last_used_ms BIGINT
);
-- Names are unique among an Environment's Connections that are not revoked.
CREATE UNIQUE INDEX connections_live_name ON connections(environment_id, name) WHERE status <> 'revoked';
CREATE INDEX connections_env ON connections(environment_id, id);

-- The transactional outbox (crates/bus/src/outbox.rs): events staged with
-- the change they describe, published in id order by one relay at a time.
CREATE TABLE outbox (
    id BIGSERIAL PRIMARY KEY,
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
