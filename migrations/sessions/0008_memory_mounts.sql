-- MemoryStores a Session mounts (api.md §13.4). `files_json` is what the
-- mount shows ({path: sha256}: the pinned version plus the Session's own
-- changes), `base_json` what it last took from the store (the expectations
-- of its next writeback); both empty until it first materialises.
CREATE TABLE session_memory_mounts (
    session_id TEXT NOT NULL,
    mount_name TEXT NOT NULL,
    position BIGINT NOT NULL,
    store_id TEXT NOT NULL,
    access TEXT NOT NULL,
    store_version BIGINT NOT NULL,
    materialized BIGINT NOT NULL,
    files_json TEXT NOT NULL,
    base_json TEXT NOT NULL,
    PRIMARY KEY (session_id, mount_name)
);
