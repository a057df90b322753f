-- Automation writes (api.md §18.7): a graph's Memory write is sent with the
-- key `<firing>/<step>`, so sending it again after a crash answers the
-- version (or the proposal) the first send made instead of writing twice.
ALTER TABLE memory_versions ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX memory_versions_key ON memory_versions (store_id, idempotency_key) WHERE idempotency_key <> '';
ALTER TABLE memory_proposals ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX memory_proposals_key ON memory_proposals (store_id, idempotency_key) WHERE idempotency_key <> '';
