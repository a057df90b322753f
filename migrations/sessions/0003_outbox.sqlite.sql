-- The transactional outbox (crates/bus/src/outbox.rs): events staged with
-- the change they describe, published in id order by one relay at a time.
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
