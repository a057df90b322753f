-- Dreams (api.md §13.5): the Dream as its JSON, with the columns lists
-- and the worker's claim filter on.
CREATE TABLE memory_dreams (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    status TEXT NOT NULL,
    archived_ms BIGINT NOT NULL,
    lease_expires_ms BIGINT NOT NULL,
    version BIGINT NOT NULL,
    dream_json TEXT NOT NULL
);
CREATE INDEX memory_dreams_env ON memory_dreams(environment_id, id);
CREATE INDEX memory_dreams_claim ON memory_dreams(status, lease_expires_ms);
