CREATE TABLE principals (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    disabled BIGINT NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL
);
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    principal_id TEXT NOT NULL REFERENCES principals(id),
    name TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL UNIQUE,
    created_ms BIGINT NOT NULL,
    revoked_ms BIGINT
);
CREATE INDEX api_keys_principal ON api_keys(principal_id, id);
CREATE TABLE groups_ (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_ms BIGINT NOT NULL
);
CREATE TABLE group_members (
    group_id TEXT NOT NULL REFERENCES groups_(id),
    principal_id TEXT NOT NULL REFERENCES principals(id),
    PRIMARY KEY (group_id, principal_id)
);
CREATE INDEX group_members_principal ON group_members(principal_id);
CREATE TABLE environments (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    version BIGINT NOT NULL,
    disabled BIGINT NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL
);
CREATE TABLE permission_assignments (
    id TEXT PRIMARY KEY,
    subject_kind TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    permission TEXT NOT NULL,
    resource_kind TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    UNIQUE (subject_kind, subject_id, permission, resource_kind, resource_id)
);
CREATE INDEX pa_subject ON permission_assignments(subject_id);
CREATE INDEX pa_resource ON permission_assignments(resource_id);
CREATE TABLE audit_events (
    id TEXT PRIMARY KEY,
    actor_id TEXT NOT NULL,
    action TEXT NOT NULL,
    resource_kind TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    details_json TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX audit_resource ON audit_events(resource_id);
CREATE INDEX audit_actor ON audit_events(actor_id);
