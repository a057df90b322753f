-- Self-hosted Runners: a pairing code (stored as its digest) is redeemed
-- once for a Runner credential (stored as its digest).
CREATE TABLE runner_pairings (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    pool TEXT NOT NULL,
    code_sha256 TEXT NOT NULL UNIQUE,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    redeemed_ms BIGINT,
    runner_id TEXT
);
CREATE TABLE runners (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    pool TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    pairing_id TEXT NOT NULL,
    name TEXT NOT NULL,
    credential_sha256 TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    last_seen_ms BIGINT,
    revoked_ms BIGINT
);
CREATE INDEX runners_environment ON runners(environment_id, id);
-- Where a Run may execute: '' on the managed plane, else
-- '<environment_id>/<pool>' (only an active Runner of that pool claims it).
ALTER TABLE runs ADD COLUMN placement TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_placement ON runs(placement, status);
