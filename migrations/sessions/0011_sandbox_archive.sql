-- A SandboxProfile may be archived: no new revision, deployment or Session
-- pins it; what already runs keeps its revision.
ALTER TABLE sandbox_profiles ADD COLUMN archived_ms BIGINT;
