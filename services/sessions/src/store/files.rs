//! Session files and sandboxes: the part of the sessions store that
//! records what a Run left behind.

use super::SqlSessionsStore;
use super::rows::{i, id, s};
use crate::model::*;
use checkfu_core::Result;
use checkfu_core::id::SessionId;
use checkfu_core::page::PageRequest;
use checkfu_store::db_err;
use checkfu_store::sqlx::{self, any::AnyRow};

#[async_trait::async_trait]
pub trait FilesStore: Send + Sync + 'static {
    /// A Session's files, newest capture first.
    async fn list_files(&self, session_id: &SessionId, page: &PageRequest) -> Result<Vec<SessionFile>>;
    /// Every file a Session keeps (at most the capture limits, plus
    /// refused entries), for deciding a capture.
    async fn all_files(&self, session_id: &SessionId) -> Result<Vec<SessionFile>>;
    async fn get_file(&self, session_id: &SessionId, path: &str) -> Result<Option<SessionFile>>;
    /// Records a capture: each file replaces the row of its path.
    async fn put_files(&self, files: &[SessionFile]) -> Result<()>;
    async fn get_sandbox(&self, session_id: &SessionId) -> Result<Option<SandboxState>>;
    /// The sandboxes of several Sessions (a page of a list) in one query.
    async fn get_sandboxes(&self, session_ids: &[SessionId]) -> Result<Vec<SandboxState>>;
    async fn put_sandbox(&self, s: &SandboxState) -> Result<()>;
    /// Sandboxes that expired before `now_ms` and still hold a snapshot.
    async fn expired_sandboxes(&self, now_ms: i64, limit: i64) -> Result<Vec<SandboxState>>;
}

fn file(r: &AnyRow) -> Result<SessionFile> {
    Ok(SessionFile {
        id: id(r, "id")?,
        session_id: id(r, "session_id")?,
        path: s(r, "path")?,
        size: i(r, "size")?,
        sha256: s(r, "sha256")?,
        status: FileStatus::parse("status", &s(r, "status")?)?,
        run_id: id(r, "run_id")?,
        captured_ms: i(r, "captured_ms")?,
    })
}

fn sandbox(r: &AnyRow) -> Result<SandboxState> {
    Ok(SandboxState {
        session_id: id(r, "session_id")?,
        snapshot_sha256: s(r, "snapshot_sha256")?,
        materialized_ms: i(r, "materialized_ms")?,
        expires_ms: i(r, "expires_ms")?,
        unenforced: serde_json::from_str(&s(r, "unenforced_json")?).unwrap_or_default(),
        updated_ms: i(r, "updated_ms")?,
    })
}

#[async_trait::async_trait]
impl FilesStore for SqlSessionsStore {
    async fn list_files(&self, session_id: &SessionId, page: &PageRequest) -> Result<Vec<SessionFile>> {
        let before = page.before();
        let rows = sqlx::query("SELECT * FROM session_files WHERE session_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3")
            .bind(session_id)
            .bind(before)
            .bind(page.fetch_limit())
            .fetch_all(&self.db.reads)
            .await
            .map_err(db_err)?;
        rows.iter().map(file).collect()
    }

    async fn all_files(&self, session_id: &SessionId) -> Result<Vec<SessionFile>> {
        let rows = sqlx::query("SELECT * FROM session_files WHERE session_id = $1 ORDER BY path")
            .bind(session_id)
            .fetch_all(&self.db.reads)
            .await
            .map_err(db_err)?;
        rows.iter().map(file).collect()
    }

    async fn get_file(&self, session_id: &SessionId, path: &str) -> Result<Option<SessionFile>> {
        let row = sqlx::query("SELECT * FROM session_files WHERE session_id = $1 AND path = $2")
            .bind(session_id)
            .bind(path)
            .fetch_optional(&self.db.reads)
            .await
            .map_err(db_err)?;
        row.as_ref().map(file).transpose()
    }

    async fn put_files(&self, files: &[SessionFile]) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        for f in files {
            sqlx::query("DELETE FROM session_files WHERE session_id = $1 AND path = $2")
                .bind(&f.session_id)
                .bind(&f.path)
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
            sqlx::query(
                "INSERT INTO session_files (id, session_id, path, size, sha256, status, run_id, captured_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .bind(&f.id)
            .bind(&f.session_id)
            .bind(&f.path)
            .bind(f.size)
            .bind(&f.sha256)
            .bind(f.status.as_str())
            .bind(&f.run_id)
            .bind(f.captured_ms)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        }
        tx.commit().await.map_err(db_err)
    }

    async fn get_sandbox(&self, session_id: &SessionId) -> Result<Option<SandboxState>> {
        let row = sqlx::query("SELECT * FROM session_sandboxes WHERE session_id = $1")
            .bind(session_id)
            .fetch_optional(&self.db.reads)
            .await
            .map_err(db_err)?;
        row.as_ref().map(sandbox).transpose()
    }

    async fn get_sandboxes(&self, session_ids: &[SessionId]) -> Result<Vec<SandboxState>> {
        if session_ids.is_empty() {
            return Ok(vec![]);
        }
        let marks: Vec<String> = (1..=session_ids.len()).map(|n| format!("${n}")).collect();
        let sql = format!("SELECT * FROM session_sandboxes WHERE session_id IN ({})", marks.join(", "));
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for id in session_ids {
            q = q.bind(id);
        }
        let rows = q.fetch_all(&self.db.reads).await.map_err(db_err)?;
        rows.iter().map(sandbox).collect()
    }

    async fn put_sandbox(&self, x: &SandboxState) -> Result<()> {
        sqlx::query(
            "INSERT INTO session_sandboxes (session_id, snapshot_sha256, materialized_ms, expires_ms, unenforced_json, updated_ms) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (session_id) DO UPDATE SET snapshot_sha256 = excluded.snapshot_sha256, \
             materialized_ms = excluded.materialized_ms, expires_ms = excluded.expires_ms, unenforced_json = excluded.unenforced_json, \
             updated_ms = excluded.updated_ms",
        )
        .bind(&x.session_id)
        .bind(&x.snapshot_sha256)
        .bind(x.materialized_ms)
        .bind(x.expires_ms)
        .bind(serde_json::to_string(&x.unenforced).unwrap_or_else(|_| "[]".into()))
        .bind(x.updated_ms)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn expired_sandboxes(&self, now_ms: i64, limit: i64) -> Result<Vec<SandboxState>> {
        let rows =
            sqlx::query("SELECT * FROM session_sandboxes WHERE expires_ms < $1 AND snapshot_sha256 <> '' ORDER BY expires_ms LIMIT $2")
                .bind(now_ms)
                .bind(limit)
                .fetch_all(&self.db.reads)
                .await
                .map_err(db_err)?;
        rows.iter().map(sandbox).collect()
    }
}
