CREATE TABLE endpoints (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    url TEXT NOT NULL,
    event_types_json TEXT NOT NULL,
    secret TEXT NOT NULL,
    disabled BIGINT NOT NULL DEFAULT 0,
    version BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX endpoints_env ON endpoints(environment_id, id);
-- One row per (endpoint, source event): the consumer's dedupe.
CREATE TABLE deliveries (
    id TEXT PRIMARY KEY,
    endpoint_id TEXT NOT NULL,
    source_event_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    next_attempt_ms BIGINT NOT NULL,
    last_response_code BIGINT NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL,
    UNIQUE (endpoint_id, source_event_id)
);
CREATE INDEX deliveries_due ON deliveries(status, next_attempt_ms);
CREATE INDEX deliveries_endpoint ON deliveries(endpoint_id, id);
CREATE TABLE attempts (
    delivery_id TEXT NOT NULL,
    number BIGINT NOT NULL,
    at_ms BIGINT NOT NULL,
    response_code BIGINT NOT NULL,
    error TEXT NOT NULL,
    duration_ms BIGINT NOT NULL,
    PRIMARY KEY (delivery_id, number)
);
