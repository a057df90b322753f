-- subscription triggers (api.md §18.10): which Automations read the
-- platform's events, so that an event of an Environment where none does
-- costs one index lookup, not a scan of its Automations' triggers.
ALTER TABLE automations ADD COLUMN subscribed BIGINT NOT NULL DEFAULT 0;
CREATE INDEX automations_subscribed ON automations(environment_id, subscribed);
