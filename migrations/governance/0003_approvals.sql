CREATE TABLE action_approvals (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    status TEXT NOT NULL,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    tool_use_id TEXT NOT NULL,
    frozen_json TEXT NOT NULL,
    response_token TEXT NOT NULL,
    expires_ms BIGINT NOT NULL,
    responder_principal_id TEXT NOT NULL DEFAULT '',
    responded_ms BIGINT,
    decision TEXT NOT NULL DEFAULT '',
    standing_approval_id TEXT NOT NULL DEFAULT '',
    settled BIGINT NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL,
    UNIQUE (session_id, tool_use_id)
);
CREATE INDEX action_approvals_env ON action_approvals(environment_id, id);
CREATE INDEX action_approvals_open ON action_approvals(status, expires_ms);
CREATE INDEX action_approvals_unsettled ON action_approvals(settled, status);
CREATE TABLE standing_approvals (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    connection_id TEXT NOT NULL,
    expires_ms BIGINT NOT NULL,
    created_from_approval_id TEXT NOT NULL,
    created_by TEXT NOT NULL,
    revoked_ms BIGINT,
    created_ms BIGINT NOT NULL
);
CREATE INDEX standing_approvals_env ON standing_approvals(environment_id, id);
CREATE INDEX standing_approvals_tuple ON standing_approvals(environment_id, principal_id, agent_id, tool, connection_id);
