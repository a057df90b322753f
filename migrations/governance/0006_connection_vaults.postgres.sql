-- ConnectionVaults (api.md §16.3) and the PermissionAssignments they
-- compile. A compiled row names its vault in via_kind/via_id ('' for a
-- direct row); uniqueness now includes it, so a vault's row and a direct
-- row (or two vaults' rows) for one tuple stand side by side and each goes
-- only with what made it.
DO $$
DECLARE c text;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'permission_assignments'::regclass AND contype = 'u' LOOP
        EXECUTE 'ALTER TABLE permission_assignments DROP CONSTRAINT ' || quote_ident(c);
    END LOOP;
END $$;
ALTER TABLE permission_assignments ADD COLUMN via_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE permission_assignments ADD COLUMN via_id TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX pa_tuple ON permission_assignments(subject_kind, subject_id, permission, resource_kind, resource_id, via_kind, via_id);
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
