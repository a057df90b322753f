-- Timers (api.md §12.3): an Automation's pending occurrence, and later a
-- step's wait. One row per timer; a replica takes a due row by moving
-- `due_ms` to the end of its lease in one statement, so two replicas never
-- hold one timer, and a crashed holder's timer is due again when its lease
-- ends. `scheduled_for_ms` is the nominal time (what `next_at` shows); a
-- paused one-time occurrence is kept dormant (`due_ms` far in the future).
CREATE TABLE timers (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    automation_id TEXT NOT NULL,
    scheduled_for_ms BIGINT NOT NULL,
    due_ms BIGINT NOT NULL,
    holder TEXT NOT NULL
);
CREATE INDEX timers_due ON timers(due_ms);
-- At most one firing per occurrence, across restarts and replicas.
CREATE UNIQUE INDEX automation_firings_occurrence ON automation_firings(automation_id, scheduled_for_ms) WHERE source = 'schedule';
-- A child Session is recorded (with what creating it takes) before it is
-- asked for, and confirmed once it exists: a crash between the two leaves
-- a pending row that recovery completes with the same Session id.
ALTER TABLE automation_children ADD COLUMN confirmed BIGINT NOT NULL DEFAULT 1;
ALTER TABLE automation_children ADD COLUMN request_json TEXT NOT NULL DEFAULT '';
CREATE INDEX automation_children_pending ON automation_children(confirmed, created_ms);
-- Signed ingest's dedupe identities (§12.4), kept at least 30 days: the
-- stored value is the dedupe value's JSON (so "1" and 1 differ), with the
-- body's digest and what the delivery became (a firing or a filtered one).
CREATE TABLE automation_deliveries (
    automation_id TEXT NOT NULL,
    dedupe_key TEXT NOT NULL,
    body_sha256 TEXT NOT NULL,
    firing_id TEXT NOT NULL,
    filtered_id TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (automation_id, dedupe_key)
);
CREATE INDEX automation_deliveries_created ON automation_deliveries(created_ms);
-- FilteredAutomationDelivery (afdl_): an event the admission filter stopped.
CREATE TABLE filtered_deliveries (
    id TEXT PRIMARY KEY,
    automation_id TEXT NOT NULL,
    dedupe_value TEXT NOT NULL,
    body_sha256 TEXT NOT NULL,
    reason TEXT NOT NULL,
    predicate_index BIGINT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX filtered_deliveries_automation ON filtered_deliveries(automation_id, id);
