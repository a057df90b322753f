CREATE TABLE evaluator_qualifications (
    id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    purpose TEXT NOT NULL,
    evidence TEXT NOT NULL,
    reviewed_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    status TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    revoked_ms BIGINT NOT NULL
);
CREATE INDEX evaluator_qualifications_by_model ON evaluator_qualifications(provider, model, purpose, status);
