//! The scheduler's store: Automations (a compare-and-set on `version`),
//! firings and their child Sessions, with `automation.*` events staged in
//! the outbox in the same transaction as the change they describe.

use crate::model::*;
use checkfu_bus::Record;
use checkfu_bus::outbox::stage;
use checkfu_core::id::{AutomationId, FiringId, TypedId};
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{Db, db_err, find_one, is_unique_violation, list_in_envs_with};
use serde_json::Value;

#[async_trait::async_trait]
pub trait SchedulerStore: Send + Sync + 'static {
    /// 409 `name_taken` when a live Automation of its Environment has the name.
    async fn insert_automation(&self, a: &Automation, events: &[Record]) -> Result<()>;
    /// Writes `a` if the stored row is at `expected_version`; false when it moved.
    async fn update_automation(&self, a: &Automation, expected_version: i64, events: &[Record]) -> Result<bool>;
    /// Deleted ones too (their firings stay readable).
    async fn get_automation(&self, id: &AutomationId) -> Result<Option<Automation>>;
    /// Live ones, newest first; `status` empty for every status.
    async fn list_automations(&self, environment_ids: &[String], status: &str, page: &PageRequest) -> Result<Vec<Automation>>;

    async fn insert_firing(&self, f: &Firing) -> Result<()>;
    /// Records a child Session of a firing (and the firing's new list).
    async fn add_child(&self, f: &Firing, session_id: &str, step_id: &str) -> Result<()>;
    async fn update_firing(&self, f: &Firing) -> Result<()>;
    async fn get_firing(&self, id: &FiringId) -> Result<Option<Firing>>;
    async fn list_firings(&self, automation_id: &AutomationId, source: &str, state: &str, page: &PageRequest) -> Result<Vec<Firing>>;
    /// The firing a child Session belongs to.
    async fn firing_of_child(&self, session_id: &str) -> Result<Option<FiringId>>;
}

#[derive(Clone, Debug)]
pub struct SqlSchedulerStore {
    db: Db,
}

impl SqlSchedulerStore {
    pub fn new(db: Db) -> Self {
        SqlSchedulerStore { db }
    }
}

fn s(r: &AnyRow, c: &str) -> Result<String> {
    r.try_get(c).map_err(db_err)
}
fn i(r: &AnyRow, c: &str) -> Result<i64> {
    r.try_get(c).map_err(db_err)
}
fn json(r: &AnyRow, c: &str) -> Result<Value> {
    serde_json::from_str(&s(r, c)?).map_err(|e| Error::internal(format!("stored {c} unreadable: {e}")))
}

fn automation(r: &AnyRow) -> Result<Automation> {
    let target = json(r, "target_json")?;
    Ok(Automation {
        id: TypedId::stored(s(r, "id")?),
        environment_id: TypedId::stored(s(r, "environment_id")?),
        name: s(r, "name")?,
        service_principal_id: TypedId::stored(s(r, "service_principal_id")?),
        status: AutomationStatus::parse("status", &s(r, "status")?)?,
        pause_reason: serde_json::from_value(json(r, "pause_reason_json")?).unwrap_or(None),
        triggers: serde_json::from_value(json(r, "triggers_json")?).unwrap_or_default(),
        target: AgentTarget::parse(&target)?,
        managed_by: json(r, "managed_by_json")?,
        metadata: json(r, "metadata_json")?,
        ingest_secret: s(r, "ingest_secret")?,
        version: i(r, "version")?,
        deleted_ms: i(r, "deleted_ms")?,
        created_ms: i(r, "created_ms")?,
        updated_ms: i(r, "updated_ms")?,
    })
}

fn firing(r: &AnyRow, children: Vec<String>) -> Result<Firing> {
    let error = json(r, "error_json")?;
    Ok(Firing {
        id: TypedId::stored(s(r, "id")?),
        automation_id: TypedId::stored(s(r, "automation_id")?),
        environment_id: TypedId::stored(s(r, "environment_id")?),
        source: FiringSource::parse("source", &s(r, "source")?)?,
        event: json(r, "event_json")?,
        scheduled_for_ms: i(r, "scheduled_for_ms")?,
        dedupe_value: s(r, "dedupe_value")?,
        actor_principal_id: s(r, "actor_principal_id")?,
        automation_version: i(r, "automation_version")?,
        state: FiringState::parse("state", &s(r, "state")?)?,
        child_session_ids: children,
        usage: serde_json::from_value(json(r, "usage_json")?).unwrap_or_default(),
        error: (!error.is_null()).then_some(error),
        created_ms: i(r, "created_ms")?,
        settled_ms: i(r, "settled_ms")?,
    })
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

fn name_taken(a: &Automation) -> Error {
    Error::conflict(format!("an Automation named {:?} already exists in environment {}", a.name, a.environment_id))
        .with_reason("name_taken")
}

impl SqlSchedulerStore {
    async fn children(&self, firing_id: &str) -> Result<Vec<String>> {
        sqlx::query("SELECT session_id FROM automation_children WHERE firing_id = $1 ORDER BY created_ms, session_id")
            .bind(firing_id)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(|r| s(r, "session_id"))
            .collect()
    }

    async fn firings(&self, rows: Vec<AnyRow>) -> Result<Vec<Firing>> {
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let children = self.children(&s(r, "id")?).await?;
            out.push(firing(r, children)?);
        }
        Ok(out)
    }
}

#[async_trait::async_trait]
impl SchedulerStore for SqlSchedulerStore {
    async fn insert_automation(&self, a: &Automation, events: &[Record]) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let r = sqlx::query(
            "INSERT INTO automations (id, environment_id, name, service_principal_id, status, pause_reason_json, triggers_json, target_json, \
             managed_by_json, metadata_json, ingest_secret, version, deleted_ms, created_ms, updated_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
        )
        .bind(&a.id)
        .bind(&a.environment_id)
        .bind(&a.name)
        .bind(&a.service_principal_id)
        .bind(a.status.as_str())
        .bind(to_json(&a.pause_reason))
        .bind(to_json(&a.triggers))
        .bind(a.target.to_json().to_string())
        .bind(a.managed_by.to_string())
        .bind(a.metadata.to_string())
        .bind(&a.ingest_secret)
        .bind(a.version)
        .bind(a.deleted_ms)
        .bind(a.created_ms)
        .bind(a.updated_ms)
        .execute(&mut *tx)
        .await;
        match r {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => return Err(name_taken(a)),
            Err(e) => return Err(db_err(e)),
        }
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)
    }

    async fn update_automation(&self, a: &Automation, expected_version: i64, events: &[Record]) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let r = sqlx::query(
            "UPDATE automations SET name = $1, status = $2, pause_reason_json = $3, triggers_json = $4, target_json = $5, \
             managed_by_json = $6, metadata_json = $7, ingest_secret = $8, version = $9, deleted_ms = $10, updated_ms = $11 \
             WHERE id = $12 AND version = $13 AND deleted_ms = 0",
        )
        .bind(&a.name)
        .bind(a.status.as_str())
        .bind(to_json(&a.pause_reason))
        .bind(to_json(&a.triggers))
        .bind(a.target.to_json().to_string())
        .bind(a.managed_by.to_string())
        .bind(a.metadata.to_string())
        .bind(&a.ingest_secret)
        .bind(a.version)
        .bind(a.deleted_ms)
        .bind(a.updated_ms)
        .bind(&a.id)
        .bind(expected_version)
        .execute(&mut *tx)
        .await;
        let moved = match r {
            Ok(r) => r.rows_affected(),
            Err(e) if is_unique_violation(&e) => return Err(name_taken(a)),
            Err(e) => return Err(db_err(e)),
        };
        if moved != 1 {
            return Ok(false);
        }
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn get_automation(&self, id: &AutomationId) -> Result<Option<Automation>> {
        find_one(&self.db, "SELECT * FROM automations WHERE id = $1", id, automation).await
    }

    async fn list_automations(&self, environment_ids: &[String], status: &str, page: &PageRequest) -> Result<Vec<Automation>> {
        list_in_envs_with(
            &self.db,
            "SELECT * FROM automations WHERE environment_id = $1 AND id < $2 AND deleted_ms = 0 AND ($4 = '' OR status = $4) \
             ORDER BY id DESC LIMIT $3",
            environment_ids,
            &[status],
            page,
            automation,
            |a| &a.id,
        )
        .await
    }

    async fn insert_firing(&self, f: &Firing) -> Result<()> {
        sqlx::query(
            "INSERT INTO automation_firings (id, automation_id, environment_id, source, event_json, scheduled_for_ms, dedupe_value, \
             actor_principal_id, automation_version, state, usage_json, error_json, created_ms, settled_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        )
        .bind(&f.id)
        .bind(&f.automation_id)
        .bind(&f.environment_id)
        .bind(f.source.as_str())
        .bind(f.event.to_string())
        .bind(f.scheduled_for_ms)
        .bind(&f.dedupe_value)
        .bind(&f.actor_principal_id)
        .bind(f.automation_version)
        .bind(f.state.as_str())
        .bind(to_json(&f.usage))
        .bind(to_json(&f.error))
        .bind(f.created_ms)
        .bind(f.settled_ms)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn add_child(&self, f: &Firing, session_id: &str, step_id: &str) -> Result<()> {
        sqlx::query("INSERT INTO automation_children (session_id, firing_id, step_id, created_ms) VALUES ($1, $2, $3, $4)")
            .bind(session_id)
            .bind(&f.id)
            .bind(step_id)
            .bind(checkfu_core::time::now_ms())
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn update_firing(&self, f: &Firing) -> Result<()> {
        sqlx::query("UPDATE automation_firings SET state = $1, usage_json = $2, error_json = $3, settled_ms = $4 WHERE id = $5")
            .bind(f.state.as_str())
            .bind(to_json(&f.usage))
            .bind(to_json(&f.error))
            .bind(f.settled_ms)
            .bind(&f.id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn get_firing(&self, id: &FiringId) -> Result<Option<Firing>> {
        let rows = sqlx::query("SELECT * FROM automation_firings WHERE id = $1").bind(id).fetch_all(&self.db.pool).await.map_err(db_err)?;
        Ok(self.firings(rows).await?.pop())
    }

    async fn list_firings(&self, automation_id: &AutomationId, source: &str, state: &str, page: &PageRequest) -> Result<Vec<Firing>> {
        let before = page.before_id.clone().unwrap_or_else(|| "~".into());
        let rows = sqlx::query(
            "SELECT * FROM automation_firings WHERE automation_id = $1 AND id < $2 AND ($3 = '' OR source = $3) \
             AND ($4 = '' OR state = $4) ORDER BY id DESC LIMIT $5",
        )
        .bind(automation_id)
        .bind(before)
        .bind(source)
        .bind(state)
        .bind(page.fetch_limit())
        .fetch_all(&self.db.pool)
        .await
        .map_err(db_err)?;
        self.firings(rows).await
    }

    async fn firing_of_child(&self, session_id: &str) -> Result<Option<FiringId>> {
        let row = sqlx::query("SELECT firing_id FROM automation_children WHERE session_id = $1")
            .bind(session_id)
            .fetch_optional(&self.db.pool)
            .await
            .map_err(db_err)?;
        row.map(|r| s(&r, "firing_id").map(TypedId::stored)).transpose()
    }
}

#[cfg(test)]
mod conformance;
