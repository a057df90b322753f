CREATE TABLE action_policies (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    name TEXT NOT NULL,
    rules_json TEXT NOT NULL,
    version BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    UNIQUE (environment_id, name)
);
CREATE INDEX action_policies_env ON action_policies(environment_id, id);
