-- Refusals of the sandbox egress proxy (api.md §16.5): the first per host
-- and port in a Run, until its runner takes them as egress.denied events.
CREATE TABLE egress_denials (
    run_id TEXT NOT NULL,
    host TEXT NOT NULL,
    port BIGINT NOT NULL,
    session_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    taken BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (run_id, host, port)
);
