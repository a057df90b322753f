//! Storage of ConnectionVaults: the vault and the rows it compiles change
//! in one transaction, so a vault and its grants never disagree.

use super::SqlGovernanceStore;
use super::sql::{INSERT_ASSIGNMENT, assignment};
use crate::model::{Assignment, ConnectionVault, VAULT_KIND};
use checkfu_core::id::AssignmentId;
use checkfu_core::page::PageRequest;
use checkfu_core::{Code, Error, Result};
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{db_err, find_one, list_in_envs};

#[async_trait::async_trait]
pub trait VaultStore: Send + Sync + 'static {
    /// The vault and its rows; a name taken in its Environment is a conflict.
    async fn insert_vault(&self, v: &ConnectionVault, rows: &[Assignment]) -> Result<()>;
    async fn get_vault(&self, id: &str) -> Result<Option<ConnectionVault>>;
    async fn list_vaults(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<ConnectionVault>>;
    /// Compare-and-set on `version` (every field, `archived_ms` too),
    /// adding and removing exactly these rows with it; false when the vault
    /// moved.
    async fn update_vault(&self, v: &ConnectionVault, expected_version: i64, add: &[Assignment], remove: &[AssignmentId]) -> Result<bool>;
    /// The vault and every row it compiled; false when it was gone.
    async fn delete_vault(&self, id: &str) -> Result<bool>;
    /// The rows a vault compiled.
    async fn rows_via(&self, vault_id: &str) -> Result<Vec<Assignment>>;
    /// The live (not archived) vaults listing a Connection, oldest first.
    async fn vaults_holding(&self, connection_id: &str) -> Result<Vec<String>>;
}

fn vault(r: &AnyRow) -> Result<ConnectionVault> {
    let s = |c: &str| r.try_get::<String, _>(c).map_err(db_err);
    let unreadable = |_| Error::internal("a stored vault is unreadable");
    Ok(ConnectionVault {
        id: r.try_get("id").map_err(db_err)?,
        environment_id: r.try_get("environment_id").map_err(db_err)?,
        name: s("name")?,
        connection_ids: serde_json::from_str(&s("connection_ids_json")?).map_err(unreadable)?,
        grantees: serde_json::from_str(&s("grantees_json")?).map_err(unreadable)?,
        metadata: serde_json::from_str(&s("metadata_json")?).map_err(unreadable)?,
        archived_ms: r.try_get("archived_ms").map_err(db_err)?,
        created_by: s("created_by")?,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
        updated_ms: r.try_get("updated_ms").map_err(db_err)?,
        version: r.try_get("version").map_err(db_err)?,
    })
}

/// The JSON columns: connection ids, grantees, metadata.
fn lists(v: &ConnectionVault) -> Result<(String, String, String)> {
    let enc = |_| Error::internal("a vault could not be encoded");
    Ok((
        serde_json::to_string(&v.connection_ids).map_err(enc)?,
        serde_json::to_string(&v.grantees).map_err(enc)?,
        serde_json::to_string(&v.metadata).map_err(enc)?,
    ))
}

fn name_taken(e: Error, name: &str) -> Error {
    if e.code == Code::Conflict {
        Error::conflict(format!("a connection vault named {name:?} already exists in this environment")).with_reason("name_taken")
    } else {
        e
    }
}

async fn insert_rows(tx: &mut sqlx::AnyConnection, rows: &[Assignment]) -> Result<()> {
    for a in rows {
        crate::store::sql::bind_assignment(sqlx::query(INSERT_ASSIGNMENT), a).execute(&mut *tx).await.map_err(db_err)?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl VaultStore for SqlGovernanceStore {
    async fn insert_vault(&self, v: &ConnectionVault, rows: &[Assignment]) -> Result<()> {
        let (conns, grantees, metadata) = lists(v)?;
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        sqlx::query(
            "INSERT INTO connection_vaults (id, environment_id, name, connection_ids_json, grantees_json, created_by, created_ms, \
             updated_ms, version, metadata_json, archived_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(v.id.to_string())
        .bind(v.environment_id.to_string())
        .bind(&v.name)
        .bind(conns)
        .bind(grantees)
        .bind(&v.created_by)
        .bind(v.created_ms)
        .bind(v.updated_ms)
        .bind(v.version)
        .bind(metadata)
        .bind(v.archived_ms)
        .execute(&mut *tx)
        .await
        .map_err(|e| name_taken(db_err(e), &v.name))?;
        insert_rows(&mut tx, rows).await?;
        tx.commit().await.map_err(db_err)
    }

    async fn get_vault(&self, id: &str) -> Result<Option<ConnectionVault>> {
        find_one(&self.db, "SELECT * FROM connection_vaults WHERE id = $1", id, vault).await
    }

    async fn list_vaults(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<ConnectionVault>> {
        let sql = "SELECT * FROM connection_vaults WHERE environment_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3";
        list_in_envs(&self.db, sql, environment_ids, page, vault, |v| &v.id).await
    }

    async fn update_vault(&self, v: &ConnectionVault, expected_version: i64, add: &[Assignment], remove: &[AssignmentId]) -> Result<bool> {
        let (conns, grantees, metadata) = lists(v)?;
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let moved = sqlx::query(
            "UPDATE connection_vaults SET name = $1, connection_ids_json = $2, grantees_json = $3, updated_ms = $4, version = $5, \
             metadata_json = $6, archived_ms = $7 WHERE id = $8 AND version = $9",
        )
        .bind(&v.name)
        .bind(conns)
        .bind(grantees)
        .bind(v.updated_ms)
        .bind(v.version)
        .bind(metadata)
        .bind(v.archived_ms)
        .bind(v.id.to_string())
        .bind(expected_version)
        .execute(&mut *tx)
        .await
        .map_err(|e| name_taken(db_err(e), &v.name))?
        .rows_affected()
            == 0;
        if moved {
            return Ok(false);
        }
        for id in remove {
            sqlx::query("DELETE FROM permission_assignments WHERE id = $1 AND via_kind = $2 AND via_id = $3")
                .bind(id.to_string())
                .bind(VAULT_KIND)
                .bind(v.id.to_string())
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
        }
        insert_rows(&mut tx, add).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn delete_vault(&self, id: &str) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        sqlx::query("DELETE FROM permission_assignments WHERE via_kind = $1 AND via_id = $2")
            .bind(VAULT_KIND)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        let gone =
            sqlx::query("DELETE FROM connection_vaults WHERE id = $1").bind(id).execute(&mut *tx).await.map_err(db_err)?.rows_affected();
        tx.commit().await.map_err(db_err)?;
        Ok(gone > 0)
    }

    async fn vaults_holding(&self, connection_id: &str) -> Result<Vec<String>> {
        // Connection ids are unique tokens, so their quoted JSON form
        // appears in a list only as that member.
        let needle = format!("%{}%", serde_json::Value::String(connection_id.to_string()));
        let rows = sqlx::query("SELECT id FROM connection_vaults WHERE connection_ids_json LIKE $1 AND archived_ms IS NULL ORDER BY id")
            .bind(needle)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?;
        rows.iter().map(|r| r.try_get::<String, _>("id").map_err(db_err)).collect()
    }

    async fn rows_via(&self, vault_id: &str) -> Result<Vec<Assignment>> {
        sqlx::query("SELECT * FROM permission_assignments WHERE via_id = $1 AND via_kind = $2 ORDER BY id")
            .bind(vault_id)
            .bind(VAULT_KIND)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(assignment)
            .collect()
    }
}
