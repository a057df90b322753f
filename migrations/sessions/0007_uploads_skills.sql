-- Files people upload (api.md §16.7): the row describes the bytes, which
-- live in the blob store under `uploads/<id>`. `expires_ms` 0 never expires.
CREATE TABLE uploaded_files (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);
CREATE INDEX uploaded_files_environment ON uploaded_files(environment_id, id);
CREATE INDEX uploaded_files_expiry ON uploaded_files(expires_ms) WHERE expires_ms > 0;
-- A Session's copies of the Files it was given (resources and message
-- blocks): the Session keeps its own bytes (`sessions/<id>/uploads/<sha>`),
-- so deleting the File never recalls them.
CREATE TABLE session_uploads (
    session_id TEXT NOT NULL,
    file_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    added_ms BIGINT NOT NULL,
    PRIMARY KEY (session_id, file_id)
);
-- Skills (api.md §16.6): a name unique among an Environment's active
-- skills, and immutable versions whose files live in the blob store by
-- content (`skills/<sha256>`).
CREATE TABLE skills (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    latest_version BIGINT NOT NULL,
    status TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE UNIQUE INDEX skills_active_name ON skills(environment_id, name) WHERE status = 'active';
CREATE INDEX skills_environment ON skills(environment_id, id);
CREATE TABLE skill_versions (
    skill_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (skill_id, version)
);
CREATE TABLE skill_files (
    skill_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    path TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (skill_id, version, path)
);
CREATE INDEX skill_files_sha ON skill_files(sha256);
