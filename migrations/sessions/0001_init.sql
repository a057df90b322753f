CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    name TEXT NOT NULL,
    draft_json TEXT NOT NULL,
    latest_version BIGINT NOT NULL DEFAULT 0,
    version BIGINT NOT NULL,
    archived BIGINT NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX agents_env ON agents(environment_id, id);
CREATE TABLE agent_versions (
    agent_id TEXT NOT NULL REFERENCES agents(id),
    version BIGINT NOT NULL,
    environment_id TEXT NOT NULL,
    release_sha256 TEXT NOT NULL,
    definition_json TEXT NOT NULL,
    published_by TEXT NOT NULL,
    published_ms BIGINT NOT NULL,
    PRIMARY KEY (agent_id, version)
);
CREATE TABLE sandbox_profiles (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    name TEXT NOT NULL,
    latest_revision BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    UNIQUE (environment_id, name)
);
CREATE TABLE sandbox_revisions (
    profile_id TEXT NOT NULL REFERENCES sandbox_profiles(id),
    revision BIGINT NOT NULL,
    spec_json TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (profile_id, revision)
);
CREATE TABLE deployments (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    key TEXT NOT NULL,
    agent_id TEXT NOT NULL REFERENCES agents(id),
    revision BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    UNIQUE (environment_id, key)
);
CREATE TABLE deployment_revisions (
    deployment_id TEXT NOT NULL REFERENCES deployments(id),
    revision BIGINT NOT NULL,
    pins_json TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (deployment_id, revision)
);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    deployment_id TEXT NOT NULL,
    deployment_revision BIGINT NOT NULL,
    principal_id TEXT NOT NULL,
    status TEXT NOT NULL,
    stop_reason_json TEXT,
    title TEXT NOT NULL,
    metadata_json TEXT NOT NULL,
    budget_id TEXT NOT NULL,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    spend_micro_usd BIGINT NOT NULL DEFAULT 0,
    selection_json TEXT NOT NULL,
    pins_json TEXT NOT NULL,
    last_seq BIGINT NOT NULL DEFAULT 0,
    last_user_message_seq BIGINT NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    version BIGINT NOT NULL
);
CREATE INDEX sessions_env ON sessions(environment_id, id);
CREATE INDEX sessions_deployment ON sessions(deployment_id, id);
CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    seq BIGINT NOT NULL,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    run_id TEXT,
    thread_id TEXT,
    authored_by_json TEXT NOT NULL,
    caused_by_json TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    status TEXT NOT NULL,
    stop_reason_json TEXT,
    pins_json TEXT NOT NULL,
    input_tokens BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    spend_micro_usd BIGINT NOT NULL DEFAULT 0,
    start_seq BIGINT NOT NULL,
    lease_id TEXT NOT NULL,
    generation BIGINT NOT NULL,
    lease_expires_ms BIGINT NOT NULL,
    runner_id TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    completed_ms BIGINT
);
CREATE INDEX runs_session ON runs(session_id, id);
CREATE INDEX runs_open ON runs(status, lease_expires_ms);
