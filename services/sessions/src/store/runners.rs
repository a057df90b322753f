//! Runner pairings and Runners: the part of the sessions store the runner
//! protocol's identity lives in.

use super::SqlSessionsStore;
use super::rows::{id, s};
use crate::model::*;
use checkfu_core::Result;
use checkfu_core::id::{RunId, RunnerId, SessionId};
use checkfu_core::page::PageRequest;
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{db_err, find_one, list_in_envs};

#[async_trait::async_trait]
pub trait RunnersStore: Send + Sync + 'static {
    async fn insert_pairing(&self, p: &Pairing) -> Result<()>;
    /// Spends the pairing whose code has `code_sha256` and makes `runner`
    /// from it (its environment, pool and principal), in one transaction.
    /// `None` when no unspent, unexpired pairing has that code.
    async fn redeem_pairing(&self, code_sha256: &str, now_ms: i64, runner: Runner) -> Result<Option<Runner>>;
    async fn runner_by_credential(&self, credential_sha256: &str) -> Result<Option<Runner>>;
    async fn get_runner(&self, id: &RunnerId) -> Result<Option<Runner>>;
    async fn list_runners(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Runner>>;
    /// Marks an active Runner revoked; false when it already was.
    async fn revoke_runner(&self, id: &RunnerId, now_ms: i64) -> Result<bool>;
    async fn touch_runner(&self, id: &RunnerId, now_ms: i64) -> Result<()>;
    /// The Runs a runner holds (running, whatever their lease's age).
    async fn runs_held_by(&self, runner_id: &str) -> Result<Vec<(RunId, SessionId)>>;
}

fn runner(r: &AnyRow) -> Result<Runner> {
    Ok(Runner {
        id: id(r, "id")?,
        environment_id: id(r, "environment_id")?,
        pool: s(r, "pool")?,
        principal_id: id(r, "principal_id")?,
        pairing_id: id(r, "pairing_id")?,
        name: s(r, "name")?,
        credential_sha256: s(r, "credential_sha256")?,
        status: RunnerStatus::parse("status", &s(r, "status")?)?,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
        last_seen_ms: r.try_get("last_seen_ms").map_err(db_err)?,
        revoked_ms: r.try_get("revoked_ms").map_err(db_err)?,
    })
}

#[async_trait::async_trait]
impl RunnersStore for SqlSessionsStore {
    async fn insert_pairing(&self, p: &Pairing) -> Result<()> {
        sqlx::query(
            "INSERT INTO runner_pairings (id, environment_id, principal_id, pool, code_sha256, created_by, created_ms, expires_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&p.id)
        .bind(&p.environment_id)
        .bind(&p.principal_id)
        .bind(&p.pool)
        .bind(&p.code_sha256)
        .bind(&p.created_by)
        .bind(p.created_ms)
        .bind(p.expires_ms)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn redeem_pairing(&self, code_sha256: &str, now_ms: i64, runner: Runner) -> Result<Option<Runner>> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let spent = sqlx::query(
            "UPDATE runner_pairings SET redeemed_ms = $1, runner_id = $2 WHERE code_sha256 = $3 AND redeemed_ms IS NULL AND expires_ms > $1",
        )
        .bind(now_ms)
        .bind(&runner.id)
        .bind(code_sha256)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        if spent.rows_affected() != 1 {
            return Ok(None);
        }
        let row = sqlx::query("SELECT id, environment_id, principal_id, pool FROM runner_pairings WHERE code_sha256 = $1")
            .bind(code_sha256)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err)?;
        let made = Runner {
            pairing_id: id(&row, "id")?,
            environment_id: id(&row, "environment_id")?,
            principal_id: id(&row, "principal_id")?,
            pool: s(&row, "pool")?,
            ..runner
        };
        sqlx::query(
            "INSERT INTO runners (id, environment_id, pool, principal_id, pairing_id, name, credential_sha256, status, created_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&made.id)
        .bind(&made.environment_id)
        .bind(&made.pool)
        .bind(&made.principal_id)
        .bind(&made.pairing_id)
        .bind(&made.name)
        .bind(&made.credential_sha256)
        .bind(made.status.as_str())
        .bind(made.created_ms)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        tx.commit().await.map_err(db_err)?;
        Ok(Some(made))
    }

    async fn runner_by_credential(&self, credential_sha256: &str) -> Result<Option<Runner>> {
        find_one(&self.db, "SELECT * FROM runners WHERE credential_sha256 = $1", credential_sha256, runner).await
    }

    async fn get_runner(&self, id: &RunnerId) -> Result<Option<Runner>> {
        find_one(&self.db, "SELECT * FROM runners WHERE id = $1", id, runner).await
    }

    async fn list_runners(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Runner>> {
        let sql = "SELECT * FROM runners WHERE environment_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3";
        list_in_envs(&self.db, sql, environment_ids, page, runner, |r| &r.id).await
    }

    async fn revoke_runner(&self, id: &RunnerId, now_ms: i64) -> Result<bool> {
        let r = sqlx::query("UPDATE runners SET status = 'revoked', revoked_ms = $1 WHERE id = $2 AND status = 'active'")
            .bind(now_ms)
            .bind(id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }

    async fn touch_runner(&self, id: &RunnerId, now_ms: i64) -> Result<()> {
        sqlx::query("UPDATE runners SET last_seen_ms = $1 WHERE id = $2")
            .bind(now_ms)
            .bind(id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn runs_held_by(&self, runner_id: &str) -> Result<Vec<(RunId, SessionId)>> {
        let rows = sqlx::query("SELECT id, session_id FROM runs WHERE runner_id = $1 AND status = 'running'")
            .bind(runner_id)
            .fetch_all(&self.db.reads)
            .await
            .map_err(db_err)?;
        rows.iter().map(|r| Ok((id(r, "id")?, id(r, "session_id")?))).collect()
    }
}
