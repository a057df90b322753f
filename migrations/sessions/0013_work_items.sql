-- The Environment Work API (api.md §17.13): each external_tools Session
-- has at most one live work item, claimed by a Runner of its profile's
-- pool. Each delivery is a new generation with a new token (stored as its
-- digest in work_tokens); a lapsed lease puts the item back in the queue.
CREATE TABLE work_items (
    id TEXT PRIMARY KEY,
    profile_id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    state TEXT NOT NULL,
    -- Bumped by every write: each change is a compare-and-set on it.
    rev BIGINT NOT NULL DEFAULT 0,
    generation BIGINT NOT NULL DEFAULT 0,
    runner_id TEXT,
    metadata_json TEXT NOT NULL DEFAULT '{}',
    created_ms BIGINT NOT NULL,
    delivered_ms BIGINT,
    acked_ms BIGINT,
    started_ms BIGINT,
    heartbeat_ms BIGINT,
    ttl_seconds BIGINT NOT NULL DEFAULT 90,
    lease_expires_ms BIGINT,
    stop_requested_ms BIGINT,
    stopped_ms BIGINT
);
CREATE UNIQUE INDEX work_items_live ON work_items(session_id) WHERE state <> 'stopped';
CREATE INDEX work_items_queue ON work_items(profile_id, state, created_ms);
-- Every delivery's token, so a superseded one is told apart from a
-- forged one (409, not 401).
CREATE TABLE work_tokens (
    token_sha256 TEXT PRIMARY KEY,
    work_id TEXT NOT NULL,
    generation BIGINT NOT NULL,
    created_ms BIGINT NOT NULL
);
