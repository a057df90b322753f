//! [`MemoryDb`] over sqlx: PostgreSQL in production, SQLite embedded.

use super::*;
use checkfu_bus::outbox::stage;
use checkfu_core::Error;
use checkfu_core::id::TypedId;
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{Db, db_err};
use serde_json::Value;

#[derive(Clone, Debug)]
pub struct SqlMemoryDb {
    db: Db,
}

impl SqlMemoryDb {
    pub fn new(db: Db) -> Self {
        SqlMemoryDb { db }
    }
}

type Tx<'a> = sqlx::Transaction<'a, sqlx::Any>;

fn s(r: &AnyRow, c: &str) -> Result<String> {
    r.try_get(c).map_err(db_err)
}
fn i(r: &AnyRow, c: &str) -> Result<i64> {
    r.try_get(c).map_err(db_err)
}
fn json(r: &AnyRow, c: &str) -> Result<Value> {
    serde_json::from_str(&s(r, c)?).map_err(|e| Error::internal(format!("stored {c} unreadable: {e}")))
}
fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

const STORE_COLUMNS: &str = "id, environment_id, name, description, metadata_json, owner_kind, owner_id, review, head_version, status, \
     created_from_json, created_by, created_ms, updated_ms, archived_ms, version";

fn store(r: &AnyRow) -> Result<Store> {
    Ok(Store {
        id: TypedId::stored(s(r, "id")?),
        environment_id: TypedId::stored(s(r, "environment_id")?),
        name: s(r, "name")?,
        description: s(r, "description")?,
        metadata: json(r, "metadata_json")?,
        owner: Owner { kind: s(r, "owner_kind")?, id: s(r, "owner_id")? },
        review: Review::parse("review", &s(r, "review")?)?,
        head_version: i(r, "head_version")?,
        status: StoreStatus::parse("status", &s(r, "status")?)?,
        created_from: serde_json::from_value(json(r, "created_from_json")?).unwrap_or(None),
        created_by: s(r, "created_by")?,
        created_ms: i(r, "created_ms")?,
        updated_ms: i(r, "updated_ms")?,
        archived_ms: i(r, "archived_ms")?,
        version: i(r, "version")?,
    })
}

fn document(r: &AnyRow, version_column: &str) -> Result<DocumentMeta> {
    Ok(DocumentMeta {
        path: s(r, "path")?,
        sha256: s(r, "sha256")?,
        size_bytes: i(r, "size_bytes")?,
        updated_ms: i(r, "updated_ms")?,
        updated_in_version: i(r, version_column)?,
    })
}

fn version(r: &AnyRow) -> Result<Version> {
    let proposal = s(r, "proposal_id")?;
    Ok(Version {
        store_id: TypedId::stored(s(r, "store_id")?),
        store_version: i(r, "version")?,
        created_ms: i(r, "created_ms")?,
        actor: Actor { kind: s(r, "actor_kind")?, id: s(r, "actor_id")? },
        via: Via::parse("via", &s(r, "via")?)?,
        memory_proposal_id: (!proposal.is_empty()).then_some(proposal),
        changes: serde_json::from_value(json(r, "changes_json")?)
            .map_err(|e| Error::internal(format!("stored changes unreadable: {e}")))?,
    })
}

/// A proposal's changes as stored: content by digest, not the text.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredEdit {
    path: String,
    sha256: Option<String>,
    size_bytes: i64,
    in_blob: bool,
    expected: Option<String>,
}

fn stored_edits(changes: &[Staged]) -> String {
    let edits: Vec<StoredEdit> = changes
        .iter()
        .map(|c| StoredEdit {
            path: c.path.clone(),
            sha256: c.content.as_ref().map(|x| x.sha256.clone()),
            size_bytes: c.content.as_ref().map(|x| x.size_bytes).unwrap_or(0),
            in_blob: c.content.as_ref().is_some_and(|x| x.inline.is_none()),
            expected: match &c.expected {
                Expect::Absent => None,
                Expect::Sha(s) => Some(s.clone()),
            },
        })
        .collect();
    to_json(&edits)
}

fn proposal(r: &AnyRow) -> Result<Proposal> {
    let edits: Vec<StoredEdit> =
        serde_json::from_value(json(r, "changes_json")?).map_err(|e| Error::internal(format!("stored proposal unreadable: {e}")))?;
    Ok(Proposal {
        id: TypedId::stored(s(r, "id")?),
        store_id: TypedId::stored(s(r, "store_id")?),
        status: ProposalStatus::parse("status", &s(r, "status")?)?,
        base_version: i(r, "base_version")?,
        changes: edits
            .into_iter()
            .map(|e| Staged {
                path: e.path,
                // The text is read by digest when the proposal is shown or
                // applied.
                content: e.sha256.map(|sha256| Content { sha256, size_bytes: e.size_bytes, inline: (!e.in_blob).then(String::new) }),
                expected: e.expected.map(Expect::Sha).unwrap_or(Expect::Absent),
            })
            .collect(),
        reason: ProposalReason::parse("reason", &s(r, "reason")?)?,
        source: Actor { kind: s(r, "source_kind")?, id: s(r, "source_id")? },
        rationale: s(r, "rationale")?,
        created_ms: i(r, "created_ms")?,
        decided_by: s(r, "decided_by")?,
        decided_ms: i(r, "decided_ms")?,
        decision_note: s(r, "decision_note")?,
        applied_version: i(r, "applied_version")?,
    })
}

/// The first string after every string starting with `prefix` (paths are
/// ASCII, so the last byte plus one bounds the range).
fn prefix_end(prefix: &str) -> String {
    let mut b = prefix.as_bytes().to_vec();
    match b.last_mut() {
        Some(last) if *last < 0x7f => *last += 1,
        _ => b.push(0x7f),
    }
    String::from_utf8(b).unwrap_or_else(|_| "\u{7f}".into())
}

async fn put_contents(tx: &mut Tx<'_>, contents: &[&Content]) -> Result<()> {
    for c in contents {
        sqlx::query(
            "INSERT INTO memory_contents (sha256, size_bytes, body, in_blob) VALUES ($1, $2, $3, $4) ON CONFLICT (sha256) DO NOTHING",
        )
        .bind(&c.sha256)
        .bind(c.size_bytes)
        .bind(c.inline.clone().unwrap_or_default())
        .bind(i64::from(c.inline.is_none()))
        .execute(&mut **tx)
        .await
        .map_err(db_err)?;
    }
    Ok(())
}

async fn insert_store_row(tx: &mut Tx<'_>, st: &Store) -> Result<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO memory_stores ({STORE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
    )))
    .bind(&st.id)
    .bind(&st.environment_id)
    .bind(&st.name)
    .bind(&st.description)
    .bind(st.metadata.to_string())
    .bind(&st.owner.kind)
    .bind(&st.owner.id)
    .bind(st.review.as_str())
    .bind(st.head_version)
    .bind(st.status.as_str())
    .bind(to_json(&st.created_from))
    .bind(&st.created_by)
    .bind(st.created_ms)
    .bind(st.updated_ms)
    .bind(st.archived_ms)
    .bind(st.version)
    .execute(&mut **tx)
    .await
    .map_err(db_err)?;
    Ok(())
}

/// Commits a change set inside `tx`; the caller commits the transaction
/// when the answer is a version (dropping it otherwise rolls back).
async fn commit_in(tx: &mut Tx<'_>, c: &Commit) -> Result<Committed> {
    // Take the store's row first: a second writer waits here until this
    // transaction ends, then sees what it committed.
    let Some(row) = sqlx::query("UPDATE memory_stores SET head_version = head_version WHERE id = $1 RETURNING head_version, status")
        .bind(&c.store_id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_err)?
    else {
        return Ok(Committed::Archived);
    };
    let head = i(&row, "head_version")?;
    if !c.key.is_empty() {
        let sent = sqlx::query(
            "SELECT store_id, version, created_ms, actor_kind, actor_id, via, proposal_id, changes_json FROM memory_versions \
             WHERE store_id = $1 AND idempotency_key = $2",
        )
        .bind(&c.store_id)
        .bind(&c.key)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_err)?;
        if let Some(v) = sent {
            return Ok(Committed::Replayed(version(&v)?));
        }
    }
    if s(&row, "status")? != StoreStatus::Active.as_str() && !c.allow_archived {
        return Ok(Committed::Archived);
    }
    let mut changes = vec![];
    let mut applied: Vec<&Staged> = vec![];
    for st in &c.changes {
        let current: Option<String> = sqlx::query("SELECT sha256 FROM memory_documents WHERE store_id = $1 AND path = $2")
            .bind(&c.store_id)
            .bind(&st.path)
            .fetch_optional(&mut **tx)
            .await
            .map_err(db_err)?
            .map(|r| s(&r, "sha256"))
            .transpose()?;
        if !st.expected.matches(current.as_deref()) {
            return Ok(Committed::Mismatch { path: st.path.clone(), current, head_version: head });
        }
        let after = st.content.as_ref().map(|x| x.sha256.clone());
        if after == current {
            continue;
        }
        let operation = match (&current, &after) {
            (None, _) => Operation::Created,
            (Some(_), Some(_)) => Operation::Modified,
            (Some(_), None) => Operation::Deleted,
        };
        changes.push(Change { path: st.path.clone(), operation: operation.as_str().into(), sha256_before: current, sha256_after: after });
        applied.push(st);
    }
    // A Dream's copy is version 1 even of an empty store.
    if changes.is_empty() && c.approves.is_none() && c.via != Via::Copy {
        return Ok(Committed::Unchanged(head));
    }
    let n = head + 1;
    if !changes.is_empty() || c.via == Via::Copy {
        sqlx::query("UPDATE memory_stores SET head_version = $1, updated_ms = $2 WHERE id = $3")
            .bind(n)
            .bind(c.now_ms)
            .bind(&c.store_id)
            .execute(&mut **tx)
            .await
            .map_err(db_err)?;
    }
    put_contents(tx, &applied.iter().filter_map(|st| st.content.as_ref()).collect::<Vec<_>>()).await?;
    for st in &applied {
        match &st.content {
            Some(x) => {
                sqlx::query(
                    "INSERT INTO memory_documents (store_id, path, sha256, size_bytes, updated_ms, updated_in_version) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (store_id, path) DO UPDATE SET sha256 = excluded.sha256, \
                     size_bytes = excluded.size_bytes, updated_ms = excluded.updated_ms, updated_in_version = excluded.updated_in_version",
                )
                .bind(&c.store_id)
                .bind(&st.path)
                .bind(&x.sha256)
                .bind(x.size_bytes)
                .bind(c.now_ms)
                .bind(n)
                .execute(&mut **tx)
                .await
                .map_err(db_err)?;
            }
            None => {
                sqlx::query("DELETE FROM memory_documents WHERE store_id = $1 AND path = $2")
                    .bind(&c.store_id)
                    .bind(&st.path)
                    .execute(&mut **tx)
                    .await
                    .map_err(db_err)?;
            }
        }
        sqlx::query(
            "INSERT INTO memory_document_versions (store_id, path, version, sha256, size_bytes, updated_ms) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&c.store_id)
        .bind(&st.path)
        .bind(n)
        .bind(st.content.as_ref().map(|x| x.sha256.clone()).unwrap_or_default())
        .bind(st.content.as_ref().map(|x| x.size_bytes).unwrap_or(0))
        .bind(c.now_ms)
        .execute(&mut **tx)
        .await
        .map_err(db_err)?;
    }
    let applied_version = if changes.is_empty() { 0 } else { n };
    if let Some(d) = &c.approves {
        let r = sqlx::query(
            "UPDATE memory_proposals SET status = 'approved', decided_by = $1, decided_ms = $2, decision_note = $3, applied_version = $4 \
             WHERE id = $5 AND status = 'open'",
        )
        .bind(&d.decided_by)
        .bind(c.now_ms)
        .bind(&d.note)
        .bind(applied_version)
        .bind(&d.proposal_id)
        .execute(&mut **tx)
        .await
        .map_err(db_err)?;
        if r.rows_affected() == 0 {
            return Ok(Committed::Decided);
        }
    }
    if changes.is_empty() && c.via != Via::Copy {
        // An approval whose changes were all already so.
        return Ok(Committed::Unchanged(head));
    }
    let v = Version {
        store_id: c.store_id.clone(),
        store_version: n,
        created_ms: c.now_ms,
        actor: c.actor.clone(),
        via: c.via,
        memory_proposal_id: c.approves.as_ref().map(|d| d.proposal_id.to_string()),
        changes,
    };
    sqlx::query(
        "INSERT INTO memory_versions (store_id, version, created_ms, actor_kind, actor_id, via, proposal_id, changes_json, idempotency_key) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&v.store_id)
    .bind(n)
    .bind(v.created_ms)
    .bind(&v.actor.kind)
    .bind(&v.actor.id)
    .bind(v.via.as_str())
    .bind(v.memory_proposal_id.clone().unwrap_or_default())
    .bind(to_json(&v.changes))
    .bind(&c.key)
    .execute(&mut **tx)
    .await
    .map_err(db_err)?;
    Ok(Committed::Version(v))
}

async fn insert_proposal_in(tx: &mut Tx<'_>, p: &Proposal, key: &str) -> Result<()> {
    put_contents(tx, &p.changes.iter().filter_map(|c| c.content.as_ref()).collect::<Vec<_>>()).await?;
    sqlx::query(
        "INSERT INTO memory_proposals (id, store_id, status, base_version, changes_json, reason, source_kind, source_id, rationale, \
         created_ms, decided_by, decided_ms, decision_note, applied_version, idempotency_key) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    )
    .bind(&p.id)
    .bind(&p.store_id)
    .bind(p.status.as_str())
    .bind(p.base_version)
    .bind(stored_edits(&p.changes))
    .bind(p.reason.as_str())
    .bind(&p.source.kind)
    .bind(&p.source.id)
    .bind(&p.rationale)
    .bind(p.created_ms)
    .bind(&p.decided_by)
    .bind(p.decided_ms)
    .bind(&p.decision_note)
    .bind(p.applied_version)
    .bind(key)
    .execute(&mut **tx)
    .await
    .map_err(db_err)?;
    Ok(())
}

#[async_trait::async_trait]
impl MemoryDb for SqlMemoryDb {
    async fn insert_store(&self, st: &Store, events: &[Record]) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        insert_store_row(&mut tx, st).await?;
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)
    }

    async fn update_store(&self, st: &Store, expected_version: i64, events: &[Record]) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let r = sqlx::query(
            "UPDATE memory_stores SET name = $1, description = $2, metadata_json = $3, status = $4, updated_ms = $5, archived_ms = $6, \
             version = $7 WHERE id = $8 AND version = $9",
        )
        .bind(&st.name)
        .bind(&st.description)
        .bind(st.metadata.to_string())
        .bind(st.status.as_str())
        .bind(st.updated_ms)
        .bind(st.archived_ms)
        .bind(st.version)
        .bind(&st.id)
        .bind(expected_version)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        if r.rows_affected() == 0 {
            return Ok(false);
        }
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn get_store(&self, id: &str) -> Result<Option<Store>> {
        sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {STORE_COLUMNS} FROM memory_stores WHERE id = $1")))
            .bind(id)
            .fetch_optional(&self.db.pool)
            .await
            .map_err(db_err)?
            .as_ref()
            .map(store)
            .transpose()
    }

    async fn list_stores(&self, f: &StoreFilter, page: &PageRequest) -> Result<Vec<Store>> {
        let mut sql = format!("SELECT {STORE_COLUMNS} FROM memory_stores WHERE id < $1");
        let mut binds: Vec<String> = vec![page.before()];
        for (col, v) in [("environment_id", &f.environment_id), ("owner_kind", &f.owner_kind), ("owner_id", &f.owner_id)] {
            if let Some(v) = v {
                binds.push(v.clone());
                sql.push_str(&format!(" AND {col} = ${}", binds.len()));
            }
        }
        if !f.include_archived {
            sql.push_str(" AND status = 'active'");
        }
        sql.push_str(&format!(" ORDER BY id DESC LIMIT {}", page.fetch_limit()));
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for b in &binds {
            q = q.bind(b);
        }
        q.fetch_all(&self.db.pool).await.map_err(db_err)?.iter().map(store).collect()
    }

    async fn delete_store(&self, id: &str, expected_version: i64, events: &[Record]) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let r = sqlx::query("DELETE FROM memory_stores WHERE id = $1 AND version = $2 AND status = 'archived'")
            .bind(id)
            .bind(expected_version)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        if r.rows_affected() == 0 {
            return Ok(false);
        }
        for table in ["memory_documents", "memory_document_versions", "memory_versions", "memory_proposals", "memory_mounts"] {
            sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM {table} WHERE store_id = $1")))
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(db_err)?;
        }
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn document(&self, store_id: &str, path: &str, at: Option<i64>) -> Result<Option<DocumentMeta>> {
        let row = match at {
            None => sqlx::query(
                "SELECT path, sha256, size_bytes, updated_ms, updated_in_version FROM memory_documents WHERE store_id = $1 AND path = $2",
            )
            .bind(store_id)
            .bind(path)
            .fetch_optional(&self.db.pool)
            .await
            .map_err(db_err)?
            .map(|r| document(&r, "updated_in_version"))
            .transpose()?,
            Some(n) => sqlx::query(
                "SELECT path, sha256, size_bytes, updated_ms, version FROM memory_document_versions \
                 WHERE store_id = $1 AND path = $2 AND version <= $3 ORDER BY version DESC LIMIT 1",
            )
            .bind(store_id)
            .bind(path)
            .bind(n)
            .fetch_optional(&self.db.pool)
            .await
            .map_err(db_err)?
            .map(|r| document(&r, "version"))
            .transpose()?,
        };
        // A deletion is recorded with an empty digest.
        Ok(row.filter(|d| !d.sha256.is_empty()))
    }

    async fn documents(&self, store_id: &str, prefix: &str, at: Option<i64>, after: &str, limit: i64) -> Result<Vec<DocumentMeta>> {
        let (from, to) = if prefix.is_empty() { (String::new(), "\u{7f}".to_string()) } else { (prefix.to_string(), prefix_end(prefix)) };
        let rows = match at {
            None => sqlx::query(
                "SELECT path, sha256, size_bytes, updated_ms, updated_in_version FROM memory_documents \
                 WHERE store_id = $1 AND path >= $2 AND path < $3 AND path > $4 ORDER BY path LIMIT $5",
            )
            .bind(store_id)
            .bind(&from)
            .bind(&to)
            .bind(after)
            .bind(limit)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(|r| document(r, "updated_in_version"))
            .collect::<Result<Vec<_>>>()?,
            Some(n) => sqlx::query(
                "SELECT d.path, d.sha256, d.size_bytes, d.updated_ms, d.version FROM memory_document_versions d \
                 WHERE d.store_id = $1 AND d.path >= $2 AND d.path < $3 AND d.path > $4 AND d.sha256 <> '' AND d.version = \
                 (SELECT MAX(v.version) FROM memory_document_versions v WHERE v.store_id = d.store_id AND v.path = d.path AND v.version <= $5) \
                 ORDER BY d.path LIMIT $6",
            )
            .bind(store_id)
            .bind(&from)
            .bind(&to)
            .bind(after)
            .bind(n)
            .bind(limit)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(|r| document(r, "version"))
            .collect::<Result<Vec<_>>>()?,
        };
        Ok(rows)
    }

    async fn content(&self, sha256: &str) -> Result<Option<Option<String>>> {
        let row = sqlx::query("SELECT body, in_blob FROM memory_contents WHERE sha256 = $1")
            .bind(sha256)
            .fetch_optional(&self.db.pool)
            .await
            .map_err(db_err)?;
        row.map(|r| Ok(if i(&r, "in_blob")? == 1 { None } else { Some(s(&r, "body")?) })).transpose()
    }

    async fn put_contents(&self, contents: &[Content]) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        put_contents(&mut tx, &contents.iter().collect::<Vec<_>>()).await?;
        tx.commit().await.map_err(db_err)
    }

    async fn commit(&self, c: &Commit) -> Result<Committed> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let done = commit_in(&mut tx, c).await?;
        if matches!(done, Committed::Version(_) | Committed::Unchanged(_)) {
            tx.commit().await.map_err(db_err)?;
        }
        Ok(done)
    }

    async fn versions(&self, store_id: &str, before: Option<i64>, limit: i64) -> Result<Vec<Version>> {
        sqlx::query(
            "SELECT store_id, version, created_ms, actor_kind, actor_id, via, proposal_id, changes_json FROM memory_versions \
             WHERE store_id = $1 AND version < $2 ORDER BY version DESC LIMIT $3",
        )
        .bind(store_id)
        .bind(before.unwrap_or(i64::MAX))
        .bind(limit)
        .fetch_all(&self.db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(version)
        .collect()
    }

    async fn version(&self, store_id: &str, n: i64) -> Result<Option<Version>> {
        sqlx::query(
            "SELECT store_id, version, created_ms, actor_kind, actor_id, via, proposal_id, changes_json FROM memory_versions \
             WHERE store_id = $1 AND version = $2",
        )
        .bind(store_id)
        .bind(n)
        .fetch_optional(&self.db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(version)
        .transpose()
    }

    async fn insert_proposal(&self, p: &Proposal) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        insert_proposal_in(&mut tx, p, "").await?;
        tx.commit().await.map_err(db_err)
    }

    async fn propose_once(&self, p: &Proposal, key: &str) -> Result<Proposal> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        // Taking the store's row orders two sends of one key.
        sqlx::query("UPDATE memory_stores SET head_version = head_version WHERE id = $1")
            .bind(&p.store_id)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        let sent = sqlx::query("SELECT * FROM memory_proposals WHERE store_id = $1 AND idempotency_key = $2")
            .bind(&p.store_id)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err)?;
        if let Some(r) = sent {
            return proposal(&r);
        }
        insert_proposal_in(&mut tx, p, key).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(p.clone())
    }

    async fn get_proposal(&self, id: &str) -> Result<Option<Proposal>> {
        sqlx::query("SELECT * FROM memory_proposals WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.db.pool)
            .await
            .map_err(db_err)?
            .as_ref()
            .map(proposal)
            .transpose()
    }

    async fn list_proposals(&self, store_id: &str, status: &str, page: &PageRequest) -> Result<Vec<Proposal>> {
        sqlx::query("SELECT * FROM memory_proposals WHERE store_id = $1 AND ($2 = '' OR status = $2) AND id < $3 ORDER BY id DESC LIMIT $4")
            .bind(store_id)
            .bind(status)
            .bind(page.before())
            .bind(page.fetch_limit())
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(proposal)
            .collect()
    }

    async fn reject_proposal(&self, d: &Decision, now_ms: i64) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE memory_proposals SET status = 'rejected', decided_by = $1, decided_ms = $2, decision_note = $3 WHERE id = $4 AND status = 'open'",
        )
        .bind(&d.decided_by)
        .bind(now_ms)
        .bind(&d.note)
        .bind(&d.proposal_id)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(r.rows_affected() > 0)
    }

    async fn record_mount(&self, store_id: &str, session_id: &str) -> Result<()> {
        sqlx::query("INSERT INTO memory_mounts (store_id, session_id) VALUES ($1, $2) ON CONFLICT (store_id, session_id) DO NOTHING")
            .bind(store_id)
            .bind(session_id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn mounting_sessions(&self, store_id: &str) -> Result<Vec<String>> {
        sqlx::query("SELECT session_id FROM memory_mounts WHERE store_id = $1 ORDER BY session_id")
            .bind(store_id)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(|r| s(r, "session_id"))
            .collect()
    }

    async fn insert_dream(&self, d: &Dream) -> Result<()> {
        sqlx::query(
            "INSERT INTO memory_dreams (id, environment_id, status, archived_ms, lease_expires_ms, version, dream_json) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&d.id)
        .bind(&d.environment_id)
        .bind(d.status.as_str())
        .bind(d.archived_ms)
        .bind(d.lease_expires_ms)
        .bind(d.version)
        .bind(to_json(d))
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn get_dream(&self, id: &str) -> Result<Option<Dream>> {
        sqlx::query("SELECT dream_json FROM memory_dreams WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.db.pool)
            .await
            .map_err(db_err)?
            .as_ref()
            .map(dream)
            .transpose()
    }

    async fn list_dreams(&self, f: &DreamFilter, page: &PageRequest) -> Result<Vec<Dream>> {
        let mut sql =
            String::from("SELECT dream_json FROM memory_dreams WHERE id < $1 AND ($2 = '' OR status = $2) AND ($3 = 1 OR archived_ms = 0)");
        if !f.environment_ids.is_empty() {
            let ids: Vec<String> = (0..f.environment_ids.len()).map(|i| format!("${}", i + 5)).collect();
            sql.push_str(&format!(" AND environment_id IN ({})", ids.join(", ")));
        }
        sql.push_str(" ORDER BY id DESC LIMIT $4");
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(page.before())
            .bind(f.status.map_or("", |s| s.as_str()))
            .bind(i64::from(f.include_archived))
            .bind(page.fetch_limit());
        for e in &f.environment_ids {
            q = q.bind(e);
        }
        q.fetch_all(&self.db.pool).await.map_err(db_err)?.iter().map(dream).collect()
    }

    async fn update_dream(&self, d: &Dream, expected_version: i64) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let moved = !update_dream_in(&mut tx, d, expected_version).await?;
        if moved {
            return Ok(false);
        }
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn next_dream(&self, now_ms: i64) -> Result<Option<Dream>> {
        sqlx::query(
            "SELECT dream_json FROM memory_dreams WHERE status = 'pending' OR (status = 'running' AND lease_expires_ms < $1) \
             ORDER BY id LIMIT 1",
        )
        .bind(now_ms)
        .fetch_optional(&self.db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(dream)
        .transpose()
    }

    async fn complete_dream(&self, out: &DreamOutput) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        if !update_dream_in(&mut tx, &out.dream, out.expected_version).await? {
            return Ok(false);
        }
        insert_store_row(&mut tx, &out.store).await?;
        for c in std::iter::once(&out.copy).chain(out.changes.as_ref()) {
            if !matches!(commit_in(&mut tx, c).await?, Committed::Version(_)) {
                return Err(Error::internal("a Dream's output store did not take its version"));
            }
        }
        if let Some(p) = &out.proposal {
            insert_proposal_in(&mut tx, p, "").await?;
        }
        stage(&mut tx, &out.events).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }
}

fn dream(r: &AnyRow) -> Result<Dream> {
    serde_json::from_str(&s(r, "dream_json")?).map_err(|e| Error::internal(format!("an unreadable stored Dream: {e}")))
}

async fn update_dream_in(tx: &mut Tx<'_>, d: &Dream, expected_version: i64) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE memory_dreams SET status = $1, archived_ms = $2, lease_expires_ms = $3, version = $4, dream_json = $5 \
         WHERE id = $6 AND version = $7",
    )
    .bind(d.status.as_str())
    .bind(d.archived_ms)
    .bind(d.lease_expires_ms)
    .bind(d.version)
    .bind(to_json(d))
    .bind(&d.id)
    .bind(expected_version)
    .execute(&mut **tx)
    .await
    .map_err(db_err)?;
    Ok(r.rows_affected() == 1)
}
