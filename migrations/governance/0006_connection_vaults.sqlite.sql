-- ConnectionVaults (api.md §16.3) and the PermissionAssignments they
-- compile. A compiled row names its vault in via_kind/via_id ('' for a
-- direct row); uniqueness now includes it, so a vault's row and a direct
-- row (or two vaults' rows) for one tuple stand side by side and each goes
-- only with what made it. SQLite cannot drop a table constraint: the table
-- is rebuilt.
CREATE TABLE permission_assignments_v2 (
    id TEXT PRIMARY KEY,
    subject_kind TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    permission TEXT NOT NULL,
    resource_kind TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    via_kind TEXT NOT NULL DEFAULT '',
    via_id TEXT NOT NULL DEFAULT ''
);
INSERT INTO permission_assignments_v2 (id, subject_kind, subject_id, permission, resource_kind, resource_id, environment_id, created_by, created_ms)
    SELECT id, subject_kind, subject_id, permission, resource_kind, resource_id, environment_id, created_by, created_ms FROM permission_assignments;
DROP TABLE permission_assignments;
ALTER TABLE permission_assignments_v2 RENAME TO permission_assignments;
CREATE UNIQUE INDEX pa_tuple ON permission_assignments(subject_kind, subject_id, permission, resource_kind, resource_id, via_kind, via_id);
CREATE INDEX pa_subject ON permission_assignments(subject_id);
CREATE INDEX pa_resource ON permission_assignments(resource_id);
CREATE INDEX pa_via ON permission_assignments(via_id);

CREATE TABLE connection_vaults (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    name TEXT NOT NULL,
    connection_ids_json TEXT NOT NULL,
    grantees_json TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    version BIGINT NOT NULL,
    UNIQUE (environment_id, name)
);
