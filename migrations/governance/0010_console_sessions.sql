-- Console sessions: a browser's sign-in, exchanged once for an API key and
-- bound to it. Only digests of the cookie's token and of its CSRF token are
-- kept; the key's secret is never stored. A session is valid while it is not
-- ended, not past its absolute expiry or idle limit, and its key and
-- Principal still authenticate (checked by a join on every request).
CREATE TABLE console_sessions (
    id TEXT PRIMARY KEY,
    token_sha256 TEXT NOT NULL UNIQUE,
    csrf_sha256 TEXT NOT NULL,
    key_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    last_seen_ms BIGINT NOT NULL,
    ended_ms BIGINT
);
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_ms);
