CREATE TABLE routing_profiles (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    name TEXT NOT NULL,
    candidates_json TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    UNIQUE (environment_id, name)
);
CREATE INDEX routing_profiles_env ON routing_profiles(environment_id, id);
