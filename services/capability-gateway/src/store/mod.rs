//! The capability gateway's storage: the narrow trait its service needs and
//! the SQL behind it (one text for both dialects). Credentials arrive here
//! already sealed; nothing in this module can open one.

#[cfg(test)]
mod conformance;

use crate::model::*;
use checkfu_bus::Record;
use checkfu_bus::outbox::stage;
use checkfu_core::id::ConnectionId;
use checkfu_core::page::PageRequest;
use checkfu_core::{Code, Error, Result};
use checkfu_store::envelope::Envelope;
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{Db, db_err, find_one};

#[async_trait::async_trait]
pub trait ReachStore: Send + Sync + 'static {
    /// Inserts a Connection and stages `events` with it; a live name taken
    /// in its Environment is a conflict.
    async fn insert_connection(&self, c: &Connection, events: &[Record]) -> Result<()>;
    async fn get_connection(&self, id: &ConnectionId) -> Result<Option<Connection>>;
    /// Connections of these Environments, newest first, optionally of one
    /// kind and status.
    async fn list_connections(
        &self,
        environment_ids: &[String],
        kind: Option<ConnectionKind>,
        status: Option<ConnectionStatus>,
        page: &PageRequest,
    ) -> Result<Vec<Connection>>;
    /// Compare-and-set on `version` (the whole row, credential included),
    /// staging `events` with the change.
    async fn update_connection(&self, c: &Connection, expected_version: i64, events: &[Record]) -> Result<bool>;
    /// Notes a use, at most once a minute (no version bump: a use changes
    /// nothing a client wrote).
    async fn touch_credential(&self, id: &ConnectionId, now_ms: i64) -> Result<()>;
    /// Connections holding a credential, in id order after `after_id`, at
    /// most `limit` (a walk over every stored credential).
    async fn with_credentials_after(&self, after_id: &str, limit: i64) -> Result<Vec<Connection>>;
}

pub struct SqlReachStore {
    db: Db,
}

impl SqlReachStore {
    pub fn new(db: Db) -> Self {
        SqlReachStore { db }
    }
}

fn connection(r: &AnyRow) -> Result<Connection> {
    let s = |c: &str| r.try_get::<String, _>(c).map_err(db_err);
    let os = |c: &str| r.try_get::<Option<String>, _>(c).map_err(db_err);
    let oi = |c: &str| r.try_get::<Option<i64>, _>(c).map_err(db_err);
    let unreadable = |what: &str| Error::internal(format!("a stored connection's {what} is unreadable"));
    let credential = match (os("cred_meta_json")?, os("cred_key_id")?, os("cred_wrapped_key")?, os("cred_sealed")?) {
        (Some(meta), Some(key_id), Some(wrapped_key), Some(sealed)) => Some(StoredCredential {
            meta: serde_json::from_str(&meta).map_err(|_| unreadable("credential"))?,
            envelope: Envelope { key_id, wrapped_key, sealed },
            state: CredentialState::parse("cred_state", &os("cred_state")?.unwrap_or_default())?,
            created_ms: oi("cred_created_ms")?.unwrap_or_default(),
            rotated_ms: oi("cred_rotated_ms")?,
            last_used_ms: oi("cred_last_used_ms")?,
        }),
        _ => None,
    };
    Ok(Connection {
        id: r.try_get("id").map_err(db_err)?,
        environment_id: r.try_get("environment_id").map_err(db_err)?,
        name: s("name")?,
        description: s("description")?,
        metadata: serde_json::from_str(&s("metadata_json")?).map_err(|_| unreadable("metadata"))?,
        kind: ConnectionKind::parse("kind", &s("kind")?)?,
        url: s("url")?,
        owner: Owner::parse(&s("owner_kind")?, &s("owner_id")?)?,
        status: ConnectionStatus::parse("status", &s("status")?)?,
        credential,
        created_by: s("created_by")?,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
        updated_ms: r.try_get("updated_ms").map_err(db_err)?,
        revoked_ms: oi("revoked_ms")?,
        version: r.try_get("version").map_err(db_err)?,
    })
}

/// The credential columns of `c`, in table order (all `None` without one).
type CredentialColumns =
    (Option<String>, Option<String>, Option<String>, Option<String>, Option<String>, Option<i64>, Option<i64>, Option<i64>);

fn credential_columns(c: &Connection) -> Result<CredentialColumns> {
    Ok(match &c.credential {
        None => (None, None, None, None, None, None, None, None),
        Some(k) => (
            Some(serde_json::to_string(&k.meta).map_err(|_| Error::internal("a credential could not be encoded"))?),
            Some(k.envelope.key_id.clone()),
            Some(k.envelope.wrapped_key.clone()),
            Some(k.envelope.sealed.clone()),
            Some(k.state.as_str().to_string()),
            Some(k.created_ms),
            k.rotated_ms,
            k.last_used_ms,
        ),
    })
}

fn name_taken(e: Error, name: &str) -> Error {
    if e.code == Code::Conflict {
        Error::conflict(format!("a connection named {name:?} already exists in this environment")).with_reason("name_taken")
    } else {
        e
    }
}

#[async_trait::async_trait]
impl ReachStore for SqlReachStore {
    async fn insert_connection(&self, c: &Connection, events: &[Record]) -> Result<()> {
        let k = credential_columns(c)?;
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        sqlx::query(
            "INSERT INTO connections (id, environment_id, name, description, metadata_json, kind, url, owner_kind, owner_id, status, \
             created_by, created_ms, updated_ms, revoked_ms, version, cred_meta_json, cred_key_id, cred_wrapped_key, cred_sealed, \
             cred_state, cred_created_ms, cred_rotated_ms, cred_last_used_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)",
        )
        .bind(c.id.to_string())
        .bind(c.environment_id.to_string())
        .bind(&c.name)
        .bind(&c.description)
        .bind(c.metadata.to_string())
        .bind(c.kind.as_str())
        .bind(&c.url)
        .bind(c.owner.kind())
        .bind(c.owner.id())
        .bind(c.status.as_str())
        .bind(&c.created_by)
        .bind(c.created_ms)
        .bind(c.updated_ms)
        .bind(c.revoked_ms)
        .bind(c.version)
        .bind(k.0)
        .bind(k.1)
        .bind(k.2)
        .bind(k.3)
        .bind(k.4)
        .bind(k.5)
        .bind(k.6)
        .bind(k.7)
        .execute(&mut *tx)
        .await
        .map_err(|e| name_taken(db_err(e), &c.name))?;
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)
    }

    async fn get_connection(&self, id: &ConnectionId) -> Result<Option<Connection>> {
        find_one(&self.db, "SELECT * FROM connections WHERE id = $1", id, connection).await
    }

    async fn list_connections(
        &self,
        environment_ids: &[String],
        kind: Option<ConnectionKind>,
        status: Option<ConnectionStatus>,
        page: &PageRequest,
    ) -> Result<Vec<Connection>> {
        // '' matches every kind and status.
        let sql = "SELECT * FROM connections WHERE environment_id = $1 AND id < $2 AND ($4 = '' OR kind = $4) \
                   AND ($5 = '' OR status = $5) ORDER BY id DESC LIMIT $3";
        let filters = [kind.map(|k| k.as_str()).unwrap_or(""), status.map(|s| s.as_str()).unwrap_or("")];
        checkfu_store::list_in_envs_with(&self.db, sql, environment_ids, &filters, page, connection, |c| &c.id).await
    }

    async fn update_connection(&self, c: &Connection, expected_version: i64, events: &[Record]) -> Result<bool> {
        let k = credential_columns(c)?;
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let done = sqlx::query(
            "UPDATE connections SET name = $1, description = $2, metadata_json = $3, status = $4, updated_ms = $5, revoked_ms = $6, \
             version = $7, cred_meta_json = $8, cred_key_id = $9, cred_wrapped_key = $10, cred_sealed = $11, cred_state = $12, \
             cred_created_ms = $13, cred_rotated_ms = $14, cred_last_used_ms = $15 WHERE id = $16 AND version = $17",
        )
        .bind(&c.name)
        .bind(&c.description)
        .bind(c.metadata.to_string())
        .bind(c.status.as_str())
        .bind(c.updated_ms)
        .bind(c.revoked_ms)
        .bind(c.version)
        .bind(k.0)
        .bind(k.1)
        .bind(k.2)
        .bind(k.3)
        .bind(k.4)
        .bind(k.5)
        .bind(k.6)
        .bind(k.7)
        .bind(c.id.to_string())
        .bind(expected_version)
        .execute(&mut *tx)
        .await
        .map_err(|e| name_taken(db_err(e), &c.name))?
        .rows_affected()
            == 1;
        if !done {
            return Ok(false);
        }
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn touch_credential(&self, id: &ConnectionId, now_ms: i64) -> Result<()> {
        sqlx::query(
            "UPDATE connections SET cred_last_used_ms = $1 WHERE id = $2 AND cred_sealed IS NOT NULL \
             AND (cred_last_used_ms IS NULL OR cred_last_used_ms < $3)",
        )
        .bind(now_ms)
        .bind(id.to_string())
        .bind(now_ms - 60_000)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn with_credentials_after(&self, after_id: &str, limit: i64) -> Result<Vec<Connection>> {
        sqlx::query("SELECT * FROM connections WHERE cred_key_id IS NOT NULL AND id > $1 ORDER BY id LIMIT $2")
            .bind(after_id)
            .bind(limit)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(connection)
            .collect()
    }
}
