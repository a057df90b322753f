-- ConnectionVaults carry caller-defined metadata and may be archived: an
-- archived vault keeps its record, compiles no rows and takes no edits.
ALTER TABLE connection_vaults ADD COLUMN metadata_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE connection_vaults ADD COLUMN archived_ms BIGINT;
