-- Files captured from a Session's outputs when its Runs settle: one row per
-- path (the newest capture), with why it was not kept when it was not.
CREATE TABLE session_files (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    path TEXT NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    status TEXT NOT NULL,
    run_id TEXT NOT NULL,
    captured_ms BIGINT NOT NULL,
    UNIQUE (session_id, path)
);
CREATE INDEX session_files_session ON session_files(session_id, id);
-- A Session's sandbox: its newest workspace snapshot (a manifest blob), when
-- it expires (fixed when it first materialised) and what the plane running
-- it does not enforce of its SandboxProfile.
CREATE TABLE session_sandboxes (
    session_id TEXT PRIMARY KEY,
    snapshot_sha256 TEXT NOT NULL,
    materialized_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    unenforced_json TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX session_sandboxes_expiry ON session_sandboxes(expires_ms);
