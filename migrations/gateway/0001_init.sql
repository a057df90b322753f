-- Durable idempotency records: a replay must survive a gateway restart.
CREATE TABLE idempotency_keys (
    principal_id TEXT NOT NULL,
    key TEXT NOT NULL,
    request_sha256 TEXT NOT NULL,
    -- 0 while the first request is in flight.
    status BIGINT NOT NULL,
    body TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (principal_id, key)
);
CREATE INDEX idempotency_created ON idempotency_keys(created_ms);
