//! The capability gateway's storage: the narrow trait its service needs and
//! the SQL behind it (one text for both dialects). Credentials arrive here
//! already sealed; nothing in this module can open one.

#[cfg(test)]
mod conformance;

use crate::model::*;
use checkfu_bus::Record;
use checkfu_bus::outbox::stage;
use checkfu_core::id::{ConnectionId, ToolSourceId};
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

    /// Replaces the credential's sealed secret and state (an OAuth refresh)
    /// if it is still the one sealed as `expected_sealed`, staging `events`;
    /// no version bump (nothing a client wrote changed).
    async fn replace_credential(
        &self,
        id: &ConnectionId,
        expected_sealed: &str,
        next: &StoredCredential,
        events: &[Record],
    ) -> Result<bool>;

    /// Records an egress refusal; false when the Run already has one for
    /// that host and port.
    async fn record_denial(&self, d: &crate::egress::Denial) -> Result<bool>;
    /// A Run's refusals not yet taken, marked taken.
    async fn take_denials(&self, run_id: &str) -> Result<Vec<crate::egress::Denial>>;

    async fn insert_tool_source(&self, t: &ToolSource) -> Result<()>;
    async fn get_tool_source(&self, id: &ToolSourceId) -> Result<Option<ToolSource>>;
    async fn list_tool_sources(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<ToolSource>>;
    /// Compare-and-set on `version`.
    async fn update_tool_source(&self, t: &ToolSource, expected_version: i64) -> Result<bool>;
    /// Active ToolSources whose automatic sync is due at `now_ms`.
    async fn due_tool_sources(&self, now_ms: i64, limit: i64) -> Result<Vec<ToolSource>>;
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

fn tool_source(r: &AnyRow) -> Result<ToolSource> {
    let s = |c: &str| r.try_get::<String, _>(c).map_err(db_err);
    let i = |c: &str| r.try_get::<i64, _>(c).map_err(db_err);
    let unreadable = |_| Error::internal("a stored tool source is unreadable");
    let sync_status = s("sync_status")?;
    let sync_error = s("sync_error_json")?;
    Ok(ToolSource {
        id: r.try_get("id").map_err(db_err)?,
        environment_id: r.try_get("environment_id").map_err(db_err)?,
        name: s("name")?,
        description: s("description")?,
        connection_id: r.try_get("connection_id").map_err(db_err)?,
        default_enabled: i("default_enabled")? != 0,
        call_timeout_seconds: i("call_timeout_seconds")?,
        sync_interval_seconds: i("sync_interval_seconds")?,
        tools: serde_json::from_str(&s("tools_json")?).map_err(unreadable)?,
        overrides: serde_json::from_str(&s("overrides_json")?).map_err(unreadable)?,
        sync_status: (!sync_status.is_empty()).then(|| SyncStatus::parse("sync_status", &sync_status)).transpose()?,
        sync_error: (!sync_error.is_empty()).then(|| serde_json::from_str(&sync_error)).transpose().map_err(unreadable)?,
        synced_ms: r.try_get::<Option<i64>, _>("synced_ms").map_err(db_err)?,
        status: ToolSourceStatus::parse("status", &s("status")?)?,
        created_by: s("created_by")?,
        created_ms: i("created_ms")?,
        updated_ms: i("updated_ms")?,
        version: i("version")?,
    })
}

/// The JSON columns of a ToolSource: tools, overrides, sync error.
fn tool_source_json(t: &ToolSource) -> Result<(String, String, String)> {
    let enc = |_| Error::internal("a tool source could not be encoded");
    Ok((
        serde_json::to_string(&t.tools).map_err(enc)?,
        serde_json::to_string(&t.overrides).map_err(enc)?,
        t.sync_error.as_ref().map(serde_json::to_string).transpose().map_err(enc)?.unwrap_or_default(),
    ))
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

    async fn replace_credential(
        &self,
        id: &ConnectionId,
        expected_sealed: &str,
        next: &StoredCredential,
        events: &[Record],
    ) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let n = sqlx::query(
            "UPDATE connections SET cred_key_id = $1, cred_wrapped_key = $2, cred_sealed = $3, cred_state = $4 WHERE id = $5 AND cred_sealed = $6",
        )
        .bind(&next.envelope.key_id)
        .bind(&next.envelope.wrapped_key)
        .bind(&next.envelope.sealed)
        .bind(next.state.as_str())
        .bind(id.to_string())
        .bind(expected_sealed)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?
        .rows_affected();
        if n != 1 {
            return Ok(false);
        }
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn record_denial(&self, d: &crate::egress::Denial) -> Result<bool> {
        let r = sqlx::query(
            "INSERT INTO egress_denials (run_id, host, port, session_id, reason, taken, created_ms) VALUES ($1, $2, $3, $4, $5, 0, $6) \
             ON CONFLICT (run_id, host, port) DO NOTHING",
        )
        .bind(&d.run_id)
        .bind(&d.host)
        .bind(i64::from(d.port))
        .bind(&d.session_id)
        .bind(d.reason.as_str())
        .bind(checkfu_core::time::now_ms())
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }

    async fn take_denials(&self, run_id: &str) -> Result<Vec<crate::egress::Denial>> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let rows = sqlx::query("SELECT * FROM egress_denials WHERE run_id = $1 AND taken = 0 ORDER BY created_ms LIMIT 100")
            .bind(run_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_err)?;
        let mut out = vec![];
        for r in &rows {
            let host: String = r.try_get("host").map_err(db_err)?;
            let port: i64 = r.try_get("port").map_err(db_err)?;
            sqlx::query("UPDATE egress_denials SET taken = 1 WHERE run_id = $1 AND host = $2 AND port = $3")
                .bind(run_id)
                .bind(&host)
                .bind(port)
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
            let reason = match r.try_get::<String, _>("reason").map_err(db_err)?.as_str() {
                "non_public_address" => crate::egress::Refusal::NonPublicAddress,
                "unsupported_request" => crate::egress::Refusal::UnsupportedRequest,
                _ => crate::egress::Refusal::NotAllowlisted,
            };
            out.push(crate::egress::Denial {
                session_id: r.try_get("session_id").map_err(db_err)?,
                run_id: run_id.to_string(),
                host,
                port: u16::try_from(port).unwrap_or(0),
                reason,
            });
        }
        tx.commit().await.map_err(db_err)?;
        Ok(out)
    }

    async fn insert_tool_source(&self, t: &ToolSource) -> Result<()> {
        let (tools, overrides, error) = tool_source_json(t)?;
        sqlx::query(
            "INSERT INTO tool_sources (id, environment_id, name, description, connection_id, default_enabled, call_timeout_seconds, \
             sync_interval_seconds, tools_json, overrides_json, sync_status, sync_error_json, synced_ms, next_sync_ms, status, \
             created_by, created_ms, updated_ms, version) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)",
        )
        .bind(t.id.to_string())
        .bind(t.environment_id.to_string())
        .bind(&t.name)
        .bind(&t.description)
        .bind(t.connection_id.to_string())
        .bind(checkfu_store::flag(t.default_enabled))
        .bind(t.call_timeout_seconds)
        .bind(t.sync_interval_seconds)
        .bind(tools)
        .bind(overrides)
        .bind(t.sync_status.map_or("", |s| s.as_str()))
        .bind(error)
        .bind(t.synced_ms)
        .bind(t.next_sync_ms())
        .bind(t.status.as_str())
        .bind(&t.created_by)
        .bind(t.created_ms)
        .bind(t.updated_ms)
        .bind(t.version)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn get_tool_source(&self, id: &ToolSourceId) -> Result<Option<ToolSource>> {
        find_one(&self.db, "SELECT * FROM tool_sources WHERE id = $1", id, tool_source).await
    }

    async fn list_tool_sources(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<ToolSource>> {
        let sql = "SELECT * FROM tool_sources WHERE environment_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3";
        checkfu_store::list_in_envs(&self.db, sql, environment_ids, page, tool_source, |t| &t.id).await
    }

    async fn update_tool_source(&self, t: &ToolSource, expected_version: i64) -> Result<bool> {
        let (tools, overrides, error) = tool_source_json(t)?;
        let n = sqlx::query(
            "UPDATE tool_sources SET name = $1, description = $2, call_timeout_seconds = $3, sync_interval_seconds = $4, \
             tools_json = $5, overrides_json = $6, sync_status = $7, sync_error_json = $8, synced_ms = $9, next_sync_ms = $10, \
             status = $11, updated_ms = $12, version = $13 WHERE id = $14 AND version = $15",
        )
        .bind(&t.name)
        .bind(&t.description)
        .bind(t.call_timeout_seconds)
        .bind(t.sync_interval_seconds)
        .bind(tools)
        .bind(overrides)
        .bind(t.sync_status.map_or("", |s| s.as_str()))
        .bind(error)
        .bind(t.synced_ms)
        .bind(t.next_sync_ms())
        .bind(t.status.as_str())
        .bind(t.updated_ms)
        .bind(t.version)
        .bind(t.id.to_string())
        .bind(expected_version)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?
        .rows_affected();
        Ok(n == 1)
    }

    async fn due_tool_sources(&self, now_ms: i64, limit: i64) -> Result<Vec<ToolSource>> {
        sqlx::query("SELECT * FROM tool_sources WHERE next_sync_ms IS NOT NULL AND next_sync_ms <= $1 ORDER BY next_sync_ms LIMIT $2")
            .bind(now_ms)
            .bind(limit)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(tool_source)
            .collect()
    }
}
