//! Work items and their delivery tokens: the part of the sessions store the
//! Environment Work API (api.md §17.13) keeps its leases in.

use super::SqlSessionsStore;
use super::rows::{id, s};
use crate::model::*;
use checkfu_core::Result;
use checkfu_core::id::{SessionId, WorkId};
use checkfu_core::page::PageRequest;
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{db_err, find_one};

#[async_trait::async_trait]
pub trait WorkStore: Send + Sync + 'static {
    /// Inserts `w` (queued) unless its Session already has a live item;
    /// answers the live item either way.
    async fn enqueue_work(&self, w: &Work) -> Result<Work>;
    async fn get_work(&self, id: &WorkId) -> Result<Option<Work>>;
    /// The Session's item that is not stopped, if any.
    async fn live_work(&self, session_id: &SessionId) -> Result<Option<Work>>;
    /// Queued items of a profile a poll may deliver (never delivered, or
    /// delivered before `delivered_before_ms` and not acknowledged), oldest
    /// first.
    async fn claimable_work(&self, profile_id: &str, delivered_before_ms: i64, limit: i64) -> Result<Vec<Work>>;
    /// Writes `w` if the stored row is still at `expected_rev`; `w.rev` must
    /// be `expected_rev + 1`. False when another write came first.
    async fn update_work(&self, w: &Work, expected_rev: i64) -> Result<bool>;
    /// As [`WorkStore::update_work`], recording the delivery's token digest
    /// for `w.generation` in the same transaction.
    async fn deliver_work(&self, w: &Work, expected_rev: i64, token_sha256: &str) -> Result<bool>;
    /// The item and generation a token was delivered for.
    async fn work_token(&self, token_sha256: &str) -> Result<Option<(WorkId, i64)>>;
    /// A profile's items, newest first.
    async fn list_work(&self, profile_id: &str, page: &PageRequest) -> Result<Vec<Work>>;
    /// Held items whose lease ended before `now_ms`.
    async fn lapsed_work(&self, now_ms: i64, limit: i64) -> Result<Vec<Work>>;
}

fn work(r: &AnyRow) -> Result<Work> {
    let metadata: String = s(r, "metadata_json")?;
    Ok(Work {
        id: id(r, "id")?,
        profile_id: id(r, "profile_id")?,
        environment_id: id(r, "environment_id")?,
        session_id: id(r, "session_id")?,
        state: WorkState::parse("state", &s(r, "state")?)?,
        rev: r.try_get("rev").map_err(db_err)?,
        generation: r.try_get("generation").map_err(db_err)?,
        runner_id: r.try_get("runner_id").map_err(db_err)?,
        metadata: serde_json::from_str(&metadata).unwrap_or_default(),
        created_ms: r.try_get("created_ms").map_err(db_err)?,
        delivered_ms: r.try_get("delivered_ms").map_err(db_err)?,
        acked_ms: r.try_get("acked_ms").map_err(db_err)?,
        started_ms: r.try_get("started_ms").map_err(db_err)?,
        heartbeat_ms: r.try_get("heartbeat_ms").map_err(db_err)?,
        ttl_seconds: r.try_get("ttl_seconds").map_err(db_err)?,
        lease_expires_ms: r.try_get("lease_expires_ms").map_err(db_err)?,
        stop_requested_ms: r.try_get("stop_requested_ms").map_err(db_err)?,
        stopped_ms: r.try_get("stopped_ms").map_err(db_err)?,
    })
}

const UPDATE: &str = "UPDATE work_items SET state = $1, rev = $2, generation = $3, runner_id = $4, metadata_json = $5, delivered_ms = $6, \
     acked_ms = $7, started_ms = $8, heartbeat_ms = $9, ttl_seconds = $10, lease_expires_ms = $11, stop_requested_ms = $12, \
     stopped_ms = $13 WHERE id = $14 AND rev = $15";

fn update(w: &Work, expected_rev: i64) -> sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments> {
    sqlx::query(UPDATE)
        .bind(w.state.as_str())
        .bind(w.rev)
        .bind(w.generation)
        .bind(w.runner_id.clone())
        .bind(serde_json::to_string(&w.metadata).unwrap_or_else(|_| "{}".into()))
        .bind(w.delivered_ms)
        .bind(w.acked_ms)
        .bind(w.started_ms)
        .bind(w.heartbeat_ms)
        .bind(w.ttl_seconds)
        .bind(w.lease_expires_ms)
        .bind(w.stop_requested_ms)
        .bind(w.stopped_ms)
        .bind(w.id.to_string())
        .bind(expected_rev)
}

#[async_trait::async_trait]
impl WorkStore for SqlSessionsStore {
    async fn enqueue_work(&self, w: &Work) -> Result<Work> {
        let inserted = sqlx::query(
            "INSERT INTO work_items (id, profile_id, environment_id, session_id, state, rev, generation, metadata_json, created_ms, ttl_seconds) \
             SELECT $1, $2, $3, $4, $5, 0, 0, $6, $7, $8 WHERE NOT EXISTS \
             (SELECT 1 FROM work_items WHERE session_id = $4 AND state <> 'stopped')",
        )
        .bind(&w.id)
        .bind(&w.profile_id)
        .bind(&w.environment_id)
        .bind(&w.session_id)
        .bind(w.state.as_str())
        .bind(serde_json::to_string(&w.metadata).unwrap_or_else(|_| "{}".into()))
        .bind(w.created_ms)
        .bind(w.ttl_seconds)
        .execute(&self.db.pool)
        .await;
        match inserted {
            Ok(_) => {}
            // Two enqueues raced past the NOT EXISTS: the unique index
            // keeps one, and that one is the answer.
            Err(e) if matches!(&e, sqlx::Error::Database(d) if d.is_unique_violation()) => {}
            Err(e) => return Err(db_err(e)),
        }
        self.live_work(&w.session_id).await?.ok_or_else(|| checkfu_core::Error::unavailable("the work item was stopped as it was queued"))
    }

    async fn get_work(&self, id: &WorkId) -> Result<Option<Work>> {
        find_one(&self.db, "SELECT * FROM work_items WHERE id = $1", id, work).await
    }

    async fn live_work(&self, session_id: &SessionId) -> Result<Option<Work>> {
        find_one(&self.db, "SELECT * FROM work_items WHERE session_id = $1 AND state <> 'stopped'", session_id, work).await
    }

    async fn claimable_work(&self, profile_id: &str, delivered_before_ms: i64, limit: i64) -> Result<Vec<Work>> {
        let rows = sqlx::query(
            "SELECT * FROM work_items WHERE profile_id = $1 AND state = 'queued' \
             AND (delivered_ms IS NULL OR delivered_ms < $2) ORDER BY created_ms, id LIMIT $3",
        )
        .bind(profile_id)
        .bind(delivered_before_ms)
        .bind(limit)
        .fetch_all(&self.db.reads)
        .await
        .map_err(db_err)?;
        rows.iter().map(work).collect()
    }

    async fn update_work(&self, w: &Work, expected_rev: i64) -> Result<bool> {
        Ok(update(w, expected_rev).execute(&self.db.pool).await.map_err(db_err)?.rows_affected() == 1)
    }

    async fn deliver_work(&self, w: &Work, expected_rev: i64, token_sha256: &str) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        if update(w, expected_rev).execute(&mut *tx).await.map_err(db_err)?.rows_affected() != 1 {
            return Ok(false);
        }
        sqlx::query("INSERT INTO work_tokens (token_sha256, work_id, generation, created_ms) VALUES ($1, $2, $3, $4)")
            .bind(token_sha256)
            .bind(&w.id)
            .bind(w.generation)
            .bind(w.delivered_ms.unwrap_or_default())
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn work_token(&self, token_sha256: &str) -> Result<Option<(WorkId, i64)>> {
        let row = sqlx::query("SELECT work_id, generation FROM work_tokens WHERE token_sha256 = $1")
            .bind(token_sha256)
            .fetch_optional(&self.db.reads)
            .await
            .map_err(db_err)?;
        row.map(|r| Ok((id(&r, "work_id")?, r.try_get("generation").map_err(db_err)?))).transpose()
    }

    async fn list_work(&self, profile_id: &str, page: &PageRequest) -> Result<Vec<Work>> {
        let rows = sqlx::query("SELECT * FROM work_items WHERE profile_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3")
            .bind(profile_id)
            .bind(page.before())
            .bind(page.fetch_limit())
            .fetch_all(&self.db.reads)
            .await
            .map_err(db_err)?;
        rows.iter().map(work).collect()
    }

    async fn lapsed_work(&self, now_ms: i64, limit: i64) -> Result<Vec<Work>> {
        let rows = sqlx::query(
            "SELECT * FROM work_items WHERE state IN ('starting', 'active', 'stopping') AND lease_expires_ms < $1 \
             ORDER BY lease_expires_ms LIMIT $2",
        )
        .bind(now_ms)
        .bind(limit)
        .fetch_all(&self.db.reads)
        .await
        .map_err(db_err)?;
        rows.iter().map(work).collect()
    }
}
