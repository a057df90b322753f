//! Storage of console sessions. Whether a session is live is one statement
//! that joins its key and Principal, so revoking the key or disabling the
//! Principal ends every console session bound to it at the next request.

use super::SqlGovernanceStore;
use crate::model::{ConsoleSession, LiveConsoleSession};
use checkfu_core::Result;
use checkfu_store::db_err;
use checkfu_store::sqlx::{self, Row, any::AnyRow};

#[async_trait::async_trait]
pub trait ConsoleSessionStore: Send + Sync + 'static {
    async fn insert_console_session(&self, s: &ConsoleSession, token_sha256: &str, csrf_sha256: &str) -> Result<()>;
    /// The session with this token digest if it is live at `now_ms`: not
    /// ended, before its expiry, seen within `idle_ms`, and its key not
    /// revoked nor its Principal disabled.
    async fn live_console_session(&self, token_sha256: &str, now_ms: i64, idle_ms: i64) -> Result<Option<LiveConsoleSession>>;
    async fn touch_console_session(&self, id: &str, now_ms: i64) -> Result<()>;
    /// Ends the session with this token digest; false when there was none
    /// still open.
    async fn end_console_session(&self, token_sha256: &str, now_ms: i64) -> Result<bool>;
    /// Deletes sessions that ended or expired before `before_ms`; how many.
    async fn purge_console_sessions(&self, before_ms: i64) -> Result<u64>;
}

fn live(r: &AnyRow) -> Result<LiveConsoleSession> {
    Ok(LiveConsoleSession {
        session: ConsoleSession {
            id: r.try_get("id").map_err(db_err)?,
            key_id: r.try_get("key_id").map_err(db_err)?,
            principal_id: r.try_get("principal_id").map_err(db_err)?,
            created_ms: r.try_get("created_ms").map_err(db_err)?,
            expires_ms: r.try_get("expires_ms").map_err(db_err)?,
            last_seen_ms: r.try_get("last_seen_ms").map_err(db_err)?,
        },
        csrf_sha256: r.try_get("csrf_sha256").map_err(db_err)?,
    })
}

#[async_trait::async_trait]
impl ConsoleSessionStore for SqlGovernanceStore {
    async fn insert_console_session(&self, s: &ConsoleSession, token_sha256: &str, csrf_sha256: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO console_sessions (id, token_sha256, csrf_sha256, key_id, principal_id, created_ms, expires_ms, last_seen_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(s.id.to_string())
        .bind(token_sha256)
        .bind(csrf_sha256)
        .bind(s.key_id.to_string())
        .bind(s.principal_id.to_string())
        .bind(s.created_ms)
        .bind(s.expires_ms)
        .bind(s.last_seen_ms)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn live_console_session(&self, token_sha256: &str, now_ms: i64, idle_ms: i64) -> Result<Option<LiveConsoleSession>> {
        sqlx::query(
            "SELECT s.* FROM console_sessions s \
             JOIN api_keys k ON k.id = s.key_id AND k.principal_id = s.principal_id AND k.revoked_ms IS NULL \
             JOIN principals p ON p.id = s.principal_id AND p.disabled = 0 \
             WHERE s.token_sha256 = $1 AND s.ended_ms IS NULL AND s.expires_ms > $2 AND s.last_seen_ms > $3",
        )
        .bind(token_sha256)
        .bind(now_ms)
        .bind(now_ms - idle_ms)
        .fetch_optional(&self.db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(live)
        .transpose()
    }

    async fn touch_console_session(&self, id: &str, now_ms: i64) -> Result<()> {
        sqlx::query("UPDATE console_sessions SET last_seen_ms = $1 WHERE id = $2 AND last_seen_ms < $1")
            .bind(now_ms)
            .bind(id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn end_console_session(&self, token_sha256: &str, now_ms: i64) -> Result<bool> {
        let done = sqlx::query("UPDATE console_sessions SET ended_ms = $1 WHERE token_sha256 = $2 AND ended_ms IS NULL")
            .bind(now_ms)
            .bind(token_sha256)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(done.rows_affected() > 0)
    }

    async fn purge_console_sessions(&self, before_ms: i64) -> Result<u64> {
        let done = sqlx::query("DELETE FROM console_sessions WHERE expires_ms < $1 OR ended_ms < $1")
            .bind(before_ms)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(done.rows_affected())
    }
}
