-- Automations (api.md §12.2): the nested documents (triggers, target,
-- metadata, pause reason, managed_by) as JSON checked on the way in.
CREATE TABLE automations (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    name TEXT NOT NULL,
    service_principal_id TEXT NOT NULL,
    status TEXT NOT NULL,
    pause_reason_json TEXT NOT NULL,
    triggers_json TEXT NOT NULL,
    target_json TEXT NOT NULL,
    managed_by_json TEXT NOT NULL,
    metadata_json TEXT NOT NULL,
    ingest_secret TEXT NOT NULL,
    version BIGINT NOT NULL,
    deleted_ms BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
-- A name is unique among an Environment's Automations that exist.
CREATE UNIQUE INDEX automations_name ON automations(environment_id, name) WHERE deleted_ms = 0;
CREATE INDEX automations_environment ON automations(environment_id, id);
-- AutomationFirings (§12.5): readable after their Automation is deleted.
CREATE TABLE automation_firings (
    id TEXT PRIMARY KEY,
    automation_id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    source TEXT NOT NULL,
    event_json TEXT NOT NULL,
    scheduled_for_ms BIGINT NOT NULL,
    dedupe_value TEXT NOT NULL,
    actor_principal_id TEXT NOT NULL,
    automation_version BIGINT NOT NULL,
    state TEXT NOT NULL,
    usage_json TEXT NOT NULL,
    error_json TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    settled_ms BIGINT NOT NULL
);
CREATE INDEX automation_firings_automation ON automation_firings(automation_id, id);
-- A firing's child Sessions, found by Session when one settles.
CREATE TABLE automation_children (
    session_id TEXT PRIMARY KEY,
    firing_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX automation_children_firing ON automation_children(firing_id);
-- The transactional outbox (crates/bus/src/outbox.rs): automation.* events
-- staged with the change they describe.
CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL,
    msg_key TEXT NOT NULL,
    event_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    headers_json TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE TABLE outbox_relay (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);
