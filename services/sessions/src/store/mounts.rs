//! The MemoryStores a Session mounts and what each mount shows.

use super::SqlSessionsStore;
use super::rows::{i, s};
use crate::model::MemoryMount;
use checkfu_core::Result;
use checkfu_core::id::SessionId;
use checkfu_store::db_err;
use checkfu_store::sqlx::{self, any::AnyRow};
use std::collections::BTreeMap;

#[async_trait::async_trait]
pub trait MountsStore: Send + Sync + 'static {
    /// Records a new Session's mounts (again: no change).
    async fn insert_mounts(&self, session_id: &SessionId, mounts: &[MemoryMount]) -> Result<()>;
    /// In the order the Session listed them.
    async fn mounts(&self, session_id: &SessionId) -> Result<Vec<MemoryMount>>;
    /// Writes a mount's files and base.
    async fn put_mount_state(&self, session_id: &SessionId, m: &MemoryMount) -> Result<()>;
}

fn map<T: serde::de::DeserializeOwned>(r: &AnyRow, c: &str) -> Result<BTreeMap<String, T>> {
    Ok(serde_json::from_str(&s(r, c)?).unwrap_or_default())
}

fn mount(r: &AnyRow) -> Result<MemoryMount> {
    Ok(MemoryMount {
        mount_name: s(r, "mount_name")?,
        store_id: s(r, "store_id")?,
        access: s(r, "access")?,
        store_version: i(r, "store_version")?,
        materialized: i(r, "materialized")? == 1,
        files: map(r, "files_json")?,
        base: map(r, "base_json")?,
    })
}

fn json<T: serde::Serialize>(m: &BTreeMap<String, T>) -> String {
    serde_json::to_string(m).unwrap_or_else(|_| "{}".into())
}

#[async_trait::async_trait]
impl MountsStore for SqlSessionsStore {
    async fn insert_mounts(&self, session_id: &SessionId, mounts: &[MemoryMount]) -> Result<()> {
        // Most Sessions mount nothing: no empty transaction for them.
        if mounts.is_empty() {
            return Ok(());
        }
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        for (n, m) in mounts.iter().enumerate() {
            sqlx::query(
                "INSERT INTO session_memory_mounts (session_id, mount_name, position, store_id, access, store_version, materialized, \
                 files_json, base_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (session_id, mount_name) DO NOTHING",
            )
            .bind(session_id)
            .bind(&m.mount_name)
            .bind(n as i64)
            .bind(&m.store_id)
            .bind(&m.access)
            .bind(m.store_version)
            .bind(i64::from(m.materialized))
            .bind(json(&m.files))
            .bind(json(&m.base))
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        }
        tx.commit().await.map_err(db_err)
    }

    async fn mounts(&self, session_id: &SessionId) -> Result<Vec<MemoryMount>> {
        sqlx::query("SELECT * FROM session_memory_mounts WHERE session_id = $1 ORDER BY position")
            .bind(session_id)
            .fetch_all(&self.db.reads)
            .await
            .map_err(db_err)?
            .iter()
            .map(mount)
            .collect()
    }

    async fn put_mount_state(&self, session_id: &SessionId, m: &MemoryMount) -> Result<()> {
        sqlx::query(
            "UPDATE session_memory_mounts SET materialized = $1, files_json = $2, base_json = $3 WHERE session_id = $4 AND mount_name = $5",
        )
        .bind(i64::from(m.materialized))
        .bind(json(&m.files))
        .bind(json(&m.base))
        .bind(session_id)
        .bind(&m.mount_name)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }
}
