//! Console sessions: a browser's sign-in, exchanged once for an API key.

use checkfu_core::id::{ConsoleSessionId, KeyId, PrincipalId};

/// How long a console session lasts at most, whatever its use.
pub const CONSOLE_SESSION_MAX_MS: i64 = 12 * 3600 * 1000;
/// How long a console session survives without a request.
pub const CONSOLE_SESSION_IDLE_MS: i64 = 3600 * 1000;
/// How stale `last_seen_ms` may grow before a request writes it again:
/// a busy console costs one write a minute, not one per request, and the
/// idle limit is kept to within this.
pub const CONSOLE_TOUCH_EVERY_MS: i64 = 60 * 1000;

/// One console session. Its token and CSRF token exist only in the
/// browser's cookies; the store keeps their digests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSession {
    pub id: ConsoleSessionId,
    pub key_id: KeyId,
    pub principal_id: PrincipalId,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub last_seen_ms: i64,
}

/// A console session that is live, as a request presenting its token sees
/// it: who it acts for and the digest its CSRF header must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveConsoleSession {
    pub session: ConsoleSession,
    pub csrf_sha256: String,
}
