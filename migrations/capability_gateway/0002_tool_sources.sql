-- ToolSources (api.md §16.4): an MCP server reached through a Connection.
-- tools_json is the last good listing (a failed sync keeps it);
-- overrides_json the per-tool enablement, which no sync changes.
CREATE TABLE tool_sources (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    connection_id TEXT NOT NULL,
    default_enabled BIGINT NOT NULL,
    call_timeout_seconds BIGINT NOT NULL,
    sync_interval_seconds BIGINT NOT NULL,
    tools_json TEXT NOT NULL,
    overrides_json TEXT NOT NULL,
    sync_status TEXT NOT NULL,
    sync_error_json TEXT NOT NULL,
    synced_ms BIGINT,
    -- When the next automatic sync is due (NULL: manual only).
    next_sync_ms BIGINT,
    status TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    version BIGINT NOT NULL
);
CREATE INDEX tool_sources_env ON tool_sources(environment_id, id);
CREATE INDEX tool_sources_due ON tool_sources(next_sync_ms);
