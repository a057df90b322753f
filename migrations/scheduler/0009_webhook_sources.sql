-- Provider events (api.md §18.9): a WebhookSource ties an Automation to a
-- provider's events on one resource, read through one Connection; its
-- ProviderWebhookRegistration is the hook at the provider (or the callback
-- a person registered by hand), with its sealed signing secret. One live
-- source per Automation; a deleted one stays for its registration's record.
CREATE TABLE automation_webhook_sources (
    id TEXT PRIMARY KEY,
    registration_id TEXT NOT NULL UNIQUE,
    automation_id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    provider TEXT NOT NULL,
    -- The registration's status (pending, active, degraded, revoked).
    status TEXT NOT NULL,
    deleted_ms BIGINT NOT NULL,
    source_json TEXT NOT NULL,
    registration_json TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    version BIGINT NOT NULL
);
CREATE UNIQUE INDEX automation_webhook_sources_live ON automation_webhook_sources(automation_id) WHERE deleted_ms = 0;
CREATE INDEX automation_webhook_sources_env ON automation_webhook_sources(environment_id, id);
-- The source a provider delivery fired through (empty for any other).
ALTER TABLE automation_firings ADD COLUMN webhook_source_id TEXT NOT NULL DEFAULT '';
