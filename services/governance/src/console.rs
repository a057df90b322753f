//! Console sessions: a person pastes an API key into the console once, and
//! the browser holds a session token instead (an `HttpOnly` cookie the
//! gateway sets). The session acts as the key's Principal and lives only
//! as long as the key does: every request re-checks the key and the
//! Principal, so revoking either ends it at once. It also ends after
//! [`CONSOLE_SESSION_MAX_MS`], after [`CONSOLE_SESSION_IDLE_MS`] unused, or
//! when signed out. Only digests of the tokens are stored.

use crate::model::*;
use crate::service::GovernanceService;
use checkfu_core::id::ConsoleSessionId;
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result, sha256_hex};
use serde_json::json;

/// A console session just opened: the only time its tokens exist outside
/// the browser.
#[derive(Debug, Clone)]
pub struct OpenedConsoleSession {
    pub session: ConsoleSession,
    /// The cookie's value (`cks_…`).
    pub token: String,
    /// The CSRF token the console sends back as `Checkfu-CSRF`.
    pub csrf_token: String,
}

fn ended() -> Error {
    Error::new(Code::InvalidKey, "the console session has ended; sign in again")
}

impl GovernanceService {
    /// Exchanges an API key for a console session bound to it; an invalid
    /// key fails exactly as it does on any request.
    pub async fn open_console_session(&self, secret: &str) -> Result<OpenedConsoleSession> {
        let (principal_id, key_id) = self.authenticate(secret).await?;
        let now = now_ms();
        let session = ConsoleSession {
            id: ConsoleSessionId::mint(),
            key_id: checkfu_core::id::TypedId::stored(key_id),
            principal_id: checkfu_core::id::TypedId::stored(principal_id),
            created_ms: now,
            expires_ms: now + CONSOLE_SESSION_MAX_MS,
            last_seen_ms: now,
        };
        let token = checkfu_core::new_secret("cks_");
        let csrf_token = checkfu_core::new_secret("csrf_");
        self.store.insert_console_session(&session, &sha256_hex(&token), &sha256_hex(&csrf_token)).await?;
        self.audit(&session.principal_id, "console_session.opened", "api_key", &session.key_id, json!({"console_session_id": session.id}))
            .await?;
        Ok(OpenedConsoleSession { session, token, csrf_token })
    }

    /// The live session a console token names, with its CSRF digest; an
    /// unknown, ended, expired or idle session, or one whose key or
    /// Principal no longer authenticates, is `auth.invalid_key`.
    pub async fn resolve_console_session(&self, token: &str) -> Result<LiveConsoleSession> {
        if !token.starts_with("cks_") || token.len() > 200 {
            return Err(ended());
        }
        let now = now_ms();
        let live = self.store.live_console_session(&sha256_hex(token), now, CONSOLE_SESSION_IDLE_MS).await?.ok_or_else(ended)?;
        if now - live.session.last_seen_ms >= CONSOLE_TOUCH_EVERY_MS {
            self.store.touch_console_session(&live.session.id, now).await?;
        }
        Ok(live)
    }

    /// Signs a console session out; signing out twice is not an error.
    pub async fn close_console_session(&self, token: &str) -> Result<()> {
        if token.starts_with("cks_") && token.len() <= 200 {
            self.store.end_console_session(&sha256_hex(token), now_ms()).await?;
        }
        Ok(())
    }

    /// Forgets sessions that ended or expired more than a day ago.
    pub async fn purge_console_sessions(&self) -> Result<u64> {
        self.store.purge_console_sessions(now_ms() - 24 * 3600 * 1000).await
    }
}
