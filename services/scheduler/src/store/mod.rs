//! The scheduler's store: Automations (a compare-and-set on `version`),
//! firings and their child Sessions, with `automation.*` events staged in
//! the outbox in the same transaction as the change they describe; the
//! occurrence timers (`timers.rs`), signed-ingest deliveries
//! (`deliveries.rs`), `continue_selected` inputs (`inputs.rs`), history
//! frontiers (`frontiers.rs`), SkillProposals (`skill_proposals.rs`) and
//! WebhookSources with their registrations (`webhook_sources.rs`).

use crate::firing::Firing;
use crate::graph::{Application, Graph, Revision};
use crate::model::*;
use crate::session_input::{InputRecord, SessionInput};
use crate::skill_proposal::SkillProposal;
use checkfu_bus::Record;
use checkfu_bus::outbox::stage;
use checkfu_core::id::{AutomationId, FiringId, GraphId, TypedId};
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{Db, db_err, find_one, is_unique_violation, list_in_envs_with};
use serde_json::Value;

mod deliveries;
mod frontiers;
mod graphs;
mod inputs;
mod skill_proposals;
mod timers;
mod webhook_sources;

#[async_trait::async_trait]
pub trait SchedulerStore: Send + Sync + 'static {
    /// 409 `name_taken` when a live Automation of its Environment has the
    /// name. `arm` sets its occurrence timer in the same transaction.
    async fn insert_automation(&self, a: &Automation, events: &[Record], arm: Arm) -> Result<()>;
    /// Writes `a` (and `arm` to its timer) if the stored row is at
    /// `expected_version`; false when it moved.
    async fn update_automation(&self, a: &Automation, expected_version: i64, events: &[Record], arm: Arm) -> Result<bool>;
    /// Deleted ones too (their firings stay readable).
    async fn get_automation(&self, id: &AutomationId) -> Result<Option<Automation>>;
    /// Live ones, newest first; `status` empty for every status.
    async fn list_automations(&self, environment_ids: &[String], status: &str, page: &PageRequest) -> Result<Vec<Automation>>;

    /// Records a firing with its pending child and its delivery, if any, in
    /// one transaction; false (nothing written) when its occurrence or its
    /// dedupe identity already has one.
    async fn insert_firing(&self, f: &Firing, child: Option<&ChildRequest>, delivery: Option<&Delivery>) -> Result<bool>;
    /// Writes a steps firing's program and state if it is at
    /// `expected_version`, recording the pending children it admits in the
    /// same transaction; false when it moved.
    /// `waits` are `(timer id, due ms)` of `step_wait` timers to arm.
    async fn update_program(&self, f: &Firing, expected_version: i64, children: &[ChildRequest], waits: &[(String, i64)]) -> Result<bool>;
    /// Stages events in the outbox on their own (for changes that live
    /// elsewhere, such as an approval step's ActionApproval).
    async fn record_events(&self, events: &[Record]) -> Result<()>;
    /// Running steps firings (of one Automation, or all).
    async fn running_programs(&self, automation_id: Option<&AutomationId>) -> Result<Vec<FiringId>>;
    /// Marks a pending child as existing.
    async fn confirm_child(&self, session_id: &str) -> Result<()>;
    /// Forgets a pending child that was refused (no Session exists).
    async fn drop_child(&self, session_id: &str) -> Result<()>;
    /// Pending children recorded before `before_ms`, oldest first.
    async fn pending_children(&self, before_ms: i64, limit: i64) -> Result<Vec<ChildRequest>>;
    async fn update_firing(&self, f: &Firing) -> Result<()>;
    /// The firing of an occurrence, if one was recorded.
    async fn firing_for_occurrence(&self, automation_id: &AutomationId, scheduled_for_ms: i64) -> Result<Option<Firing>>;
    async fn get_firing(&self, id: &FiringId) -> Result<Option<Firing>>;
    async fn list_firings(&self, automation_id: &AutomationId, source: &str, state: &str, page: &PageRequest) -> Result<Vec<Firing>>;
    /// The firing a child Session belongs to.
    async fn firing_of_child(&self, session_id: &str) -> Result<Option<FiringId>>;
    /// Marks a pending `continue_selected` input accepted (§18.4).
    async fn accept_input(&self, key: &str, input: &SessionInput, event_seq: i64) -> Result<()>;
    /// Forgets a pending input that was refused (nothing was appended).
    async fn drop_input(&self, key: &str) -> Result<()>;
    /// Pending inputs recorded before `before_ms`, oldest first.
    async fn pending_inputs(&self, before_ms: i64, limit: i64) -> Result<Vec<ChildRequest>>;
    /// Inputs into a Session whose firings still run, with their requests.
    async fn open_inputs(&self, session_id: &str) -> Result<Vec<(InputRecord, ChildRequest)>>;
    /// A firing's inputs, in admission order.
    async fn firing_inputs(&self, firing_id: &str) -> Result<Vec<InputRecord>>;
    /// The active Automations of an Environment with a subscription
    /// trigger (§18.10).
    async fn subscribed_automations(&self, environment_id: &str) -> Result<Vec<Automation>>;
    /// The Automations whose firings started or continued a Session.
    async fn automations_of_session(&self, session_id: &str) -> Result<Vec<String>>;

    /// An Automation's history frontier (api.md §18.7), if it ever moved.
    async fn frontier(&self, automation_id: &str, name: &str) -> Result<Option<Frontier>>;
    /// Its frontiers, by name.
    async fn frontiers(&self, automation_id: &str) -> Result<Vec<Frontier>>;
    /// Moves a frontier from `base` (`""`: never moved) to `through` for
    /// `firing_id`, if it is still at `base`.
    async fn advance_frontier(
        &self,
        automation_id: &str,
        name: &str,
        base: &str,
        through: &str,
        firing_id: &str,
        now_ms: i64,
    ) -> Result<Moved>;

    /// Records a SkillProposal with its events unless its firing and step
    /// have one: the one that stands, and whether it is new.
    async fn propose_skill(&self, p: &SkillProposal, events: &[Record]) -> Result<(SkillProposal, bool)>;
    async fn get_skill_proposal(&self, id: &str) -> Result<Option<SkillProposal>>;
    /// Newest first; `status` empty for all.
    async fn list_skill_proposals(&self, environment_ids: &[String], status: &str, page: &PageRequest) -> Result<Vec<SkillProposal>>;
    /// Writes a decision (with its events) if `p` is still open at
    /// `expected_version`.
    async fn decide_skill_proposal(&self, p: &SkillProposal, expected_version: i64, events: &[Record]) -> Result<bool>;
    /// The latest version of a skill adopted from the Automation's
    /// proposals.
    async fn adopted_skill_version(&self, automation_id: &str, skill_id: &str) -> Result<Option<i64>>;
    /// Records a WebhookSource with its registration and events unless its
    /// Automation has a live one: whether it was recorded.
    async fn insert_webhook_source(&self, x: &crate::webhook_source::SourceRow, events: &[Record]) -> Result<bool>;
    /// Writes a source (and its registration) still at `expected_version`.
    async fn update_webhook_source(&self, x: &crate::webhook_source::SourceRow, expected_version: i64, events: &[Record]) -> Result<bool>;
    async fn get_webhook_source(&self, id: &str) -> Result<Option<crate::webhook_source::SourceRow>>;
    async fn webhook_source_of_registration(&self, registration_id: &str) -> Result<Option<crate::webhook_source::SourceRow>>;
    /// The Automation's live source.
    async fn webhook_source_of_automation(&self, automation_id: &str) -> Result<Option<crate::webhook_source::SourceRow>>;
    /// Newest first: live sources (`live`), or every registration; each
    /// filter narrows when not empty.
    async fn list_webhook_sources(
        &self,
        environment_ids: &[String],
        automation_id: &str,
        status: &str,
        live: bool,
        page: &PageRequest,
    ) -> Result<Vec<crate::webhook_source::SourceRow>>;

    /// Takes up to `limit` due timers for `holder` until `lease_until_ms`;
    /// a timer is never held by two holders at once.
    async fn claim_due(&self, holder: &str, now_ms: i64, lease_until_ms: i64, limit: i64) -> Result<Vec<Timer>>;
    /// Settles a held timer (`At` re-arms it, `Clear` consumes it), if
    /// `t.holder` still holds it at the same occurrence; false otherwise.
    async fn finish_timer(&self, t: &Timer, arm: Arm) -> Result<bool>;
    /// When the next timer is due, if any is.
    async fn next_due(&self) -> Result<Option<i64>>;

    /// A dedupe identity's delivery.
    async fn get_delivery(&self, automation_id: &AutomationId, dedupe_key: &str) -> Result<Option<Delivery>>;
    /// Records a filtered delivery with its dedupe identity; false when the
    /// identity already has a delivery.
    async fn insert_filtered(&self, d: &FilteredDelivery, delivery: &Delivery) -> Result<bool>;
    async fn get_filtered(&self, id: &str) -> Result<Option<FilteredDelivery>>;
    /// Newest first.
    async fn list_filtered(&self, automation_id: &AutomationId, page: &PageRequest) -> Result<Vec<FilteredDelivery>>;
    /// Forgets dedupe identities recorded before `before_ms`.
    async fn sweep_deliveries(&self, before_ms: i64) -> Result<u64>;

    /// A live Automation of the Environment by name.
    async fn automation_named(&self, environment_id: &str, name: &str) -> Result<Option<Automation>>;

    async fn insert_graph(&self, g: &Graph, first: &Revision) -> Result<()>;
    /// Writes `g` (with a new revision or a journal entry) if the stored
    /// row is at `expected_version`; false when it moved.
    async fn update_graph(&self, g: &Graph, expected_version: i64, revision: Option<&Revision>, app: Option<&Application>) -> Result<bool>;
    /// Deleted ones too.
    async fn get_graph(&self, id: &GraphId) -> Result<Option<Graph>>;
    /// Live ones, newest first.
    async fn list_graphs(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Graph>>;
    async fn get_revision(&self, id: &GraphId, n: i64) -> Result<Option<Revision>>;
    /// Newest first, below `before` (`None`: from the latest).
    async fn list_revisions(&self, id: &GraphId, before: Option<i64>, limit: i64) -> Result<Vec<Revision>>;
    /// Newest first.
    async fn list_applications(&self, id: &GraphId, page: &PageRequest) -> Result<Vec<Application>>;
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
    let next_ms: Option<i64> = r.try_get("next_ms").map_err(db_err)?;
    Ok(Automation {
        id: TypedId::stored(s(r, "id")?),
        environment_id: TypedId::stored(s(r, "environment_id")?),
        name: s(r, "name")?,
        service_principal_id: TypedId::stored(s(r, "service_principal_id")?),
        status: AutomationStatus::parse("status", &s(r, "status")?)?,
        pause_reason: serde_json::from_value(json(r, "pause_reason_json")?).unwrap_or(None),
        triggers: crate::triggers::parse_triggers(&json(r, "triggers_json")?)?,
        target: Target::stored(&target)?,
        managed_by: json(r, "managed_by_json")?,
        metadata: json(r, "metadata_json")?,
        ingest_secret: s(r, "ingest_secret")?,
        version: i(r, "version")?,
        deleted_ms: i(r, "deleted_ms")?,
        created_ms: i(r, "created_ms")?,
        updated_ms: i(r, "updated_ms")?,
        next_ms,
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
        program: serde_json::from_value(json(r, "program_json")?)
            .map_err(|e| Error::internal(format!("a stored program is unreadable: {e}")))?,
        graph: json(r, "graph_json")?,
        webhook_source_id: s(r, "webhook_source_id")?,
        version: i(r, "version")?,
    })
}

async fn insert_child(tx: &mut sqlx::Transaction<'_, sqlx::Any>, c: &ChildRequest, created_ms: i64) -> Result<()> {
    if let Some(k) = &c.continuation {
        return inputs::insert(tx, c, k, created_ms).await;
    }
    sqlx::query(
        "INSERT INTO automation_children (session_id, firing_id, step_id, created_ms, confirmed, request_json) VALUES ($1, $2, $3, $4, 0, $5)",
    )
    .bind(&c.session_id)
    .bind(&c.firing_id)
    .bind(&c.step_id)
    .bind(created_ms)
    .bind(to_json(c))
    .execute(&mut **tx)
    .await
    .map_err(db_err)?;
    Ok(())
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

fn name_taken(a: &Automation) -> Error {
    Error::conflict(format!("an Automation named {:?} already exists in environment {}", a.name, a.environment_id))
        .with_reason("name_taken")
}

impl SqlSchedulerStore {
    /// The firing's children that exist (pending ones are not listed),
    /// and the Sessions its accepted inputs continued.
    async fn children(&self, firing_id: &str) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT session_id, created_ms FROM automation_children WHERE firing_id = $1 AND confirmed = 1 \
             UNION ALL SELECT session_id, created_ms FROM automation_inputs WHERE firing_id = $1 AND run_id <> '' \
             ORDER BY created_ms, session_id",
        )
        .bind(firing_id)
        .fetch_all(&self.db.pool)
        .await
        .map_err(db_err)?;
        let mut out: Vec<String> = vec![];
        for r in &rows {
            let id = s(r, "session_id")?;
            if !out.contains(&id) {
                out.push(id);
            }
        }
        Ok(out)
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
    async fn insert_automation(&self, a: &Automation, events: &[Record], arm: Arm) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let r = sqlx::query(
            "INSERT INTO automations (id, environment_id, name, service_principal_id, status, pause_reason_json, triggers_json, target_json, \
             managed_by_json, metadata_json, ingest_secret, version, deleted_ms, created_ms, updated_ms, subscribed) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
        )
        .bind(&a.id)
        .bind(&a.environment_id)
        .bind(&a.name)
        .bind(&a.service_principal_id)
        .bind(a.status.as_str())
        .bind(to_json(&a.pause_reason))
        .bind(crate::triggers::to_json(&a.triggers).to_string())
        .bind(a.target.to_json().to_string())
        .bind(a.managed_by.to_string())
        .bind(a.metadata.to_string())
        .bind(&a.ingest_secret)
        .bind(a.version)
        .bind(a.deleted_ms)
        .bind(a.created_ms)
        .bind(a.updated_ms)
        .bind(i64::from(a.subscription().is_some()))
        .execute(&mut *tx)
        .await;
        match r {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => return Err(name_taken(a)),
            Err(e) => return Err(db_err(e)),
        }
        timers::arm(&mut tx, &a.id, arm).await?;
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)
    }

    async fn update_automation(&self, a: &Automation, expected_version: i64, events: &[Record], arm: Arm) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let r = sqlx::query(
            "UPDATE automations SET name = $1, status = $2, pause_reason_json = $3, triggers_json = $4, target_json = $5, \
             managed_by_json = $6, metadata_json = $7, ingest_secret = $8, version = $9, deleted_ms = $10, updated_ms = $11, \
             subscribed = $14 WHERE id = $12 AND version = $13 AND deleted_ms = 0",
        )
        .bind(&a.name)
        .bind(a.status.as_str())
        .bind(to_json(&a.pause_reason))
        .bind(crate::triggers::to_json(&a.triggers).to_string())
        .bind(a.target.to_json().to_string())
        .bind(a.managed_by.to_string())
        .bind(a.metadata.to_string())
        .bind(&a.ingest_secret)
        .bind(a.version)
        .bind(a.deleted_ms)
        .bind(a.updated_ms)
        .bind(&a.id)
        .bind(expected_version)
        .bind(i64::from(a.subscription().is_some()))
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
        timers::arm(&mut tx, &a.id, arm).await?;
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn get_automation(&self, id: &AutomationId) -> Result<Option<Automation>> {
        find_one(
            &self.db,
            "SELECT a.*, t.scheduled_for_ms AS next_ms FROM automations a LEFT JOIN timers t ON t.id = a.id WHERE a.id = $1",
            id,
            automation,
        )
        .await
    }

    async fn list_automations(&self, environment_ids: &[String], status: &str, page: &PageRequest) -> Result<Vec<Automation>> {
        list_in_envs_with(
            &self.db,
            "SELECT a.*, t.scheduled_for_ms AS next_ms FROM automations a LEFT JOIN timers t ON t.id = a.id \
             WHERE a.environment_id = $1 AND a.id < $2 AND a.deleted_ms = 0 AND ($4 = '' OR a.status = $4) ORDER BY a.id DESC LIMIT $3",
            environment_ids,
            &[status],
            page,
            automation,
            |a| &a.id,
        )
        .await
    }

    async fn insert_firing(&self, f: &Firing, child: Option<&ChildRequest>, delivery: Option<&Delivery>) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let r = sqlx::query(
            "INSERT INTO automation_firings (id, automation_id, environment_id, source, event_json, scheduled_for_ms, dedupe_value, \
             actor_principal_id, automation_version, state, usage_json, error_json, created_ms, settled_ms, program_json, graph_json, version, \
             webhook_source_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)",
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
        .bind(to_json(&f.program))
        .bind(f.graph.to_string())
        .bind(f.version)
        .bind(&f.webhook_source_id)
        .execute(&mut *tx)
        .await;
        match r {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => return Ok(false),
            Err(e) => return Err(db_err(e)),
        }
        if let Some(c) = child {
            insert_child(&mut tx, c, f.created_ms).await?;
        }
        if let Some(d) = delivery
            && !deliveries::insert(&mut tx, d).await?
        {
            return Ok(false);
        }
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn update_program(&self, f: &Firing, expected_version: i64, children: &[ChildRequest], waits: &[(String, i64)]) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let moved = sqlx::query(
            "UPDATE automation_firings SET state = $1, usage_json = $2, error_json = $3, settled_ms = $4, program_json = $5, version = $6 \
             WHERE id = $7 AND version = $8",
        )
        .bind(f.state.as_str())
        .bind(to_json(&f.usage))
        .bind(to_json(&f.error))
        .bind(f.settled_ms)
        .bind(to_json(&f.program))
        .bind(f.version)
        .bind(&f.id)
        .bind(expected_version)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?
        .rows_affected();
        if moved != 1 {
            return Ok(false);
        }
        for c in children {
            insert_child(&mut tx, c, checkfu_core::time::now_ms()).await?;
        }
        for (id, due) in waits {
            timers::arm_wait(&mut tx, id, &f.automation_id, *due).await?;
        }
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn record_events(&self, events: &[Record]) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)
    }

    async fn running_programs(&self, automation_id: Option<&AutomationId>) -> Result<Vec<FiringId>> {
        let rows = sqlx::query(
            "SELECT id FROM automation_firings WHERE state = 'running' AND program_json <> 'null' AND ($1 = '' OR automation_id = $1) \
             ORDER BY id LIMIT 1000",
        )
        .bind(automation_id.map(|a| a.as_str()).unwrap_or_default())
        .fetch_all(&self.db.pool)
        .await
        .map_err(db_err)?;
        rows.iter().map(|r| s(r, "id").map(TypedId::stored)).collect()
    }

    async fn confirm_child(&self, session_id: &str) -> Result<()> {
        sqlx::query("UPDATE automation_children SET confirmed = 1 WHERE session_id = $1")
            .bind(session_id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn drop_child(&self, session_id: &str) -> Result<()> {
        sqlx::query("DELETE FROM automation_children WHERE session_id = $1 AND confirmed = 0")
            .bind(session_id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn pending_children(&self, before_ms: i64, limit: i64) -> Result<Vec<ChildRequest>> {
        let rows = sqlx::query(
            "SELECT request_json FROM automation_children WHERE confirmed = 0 AND created_ms < $1 ORDER BY created_ms LIMIT $2",
        )
        .bind(before_ms)
        .bind(limit)
        .fetch_all(&self.db.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(|r| {
                serde_json::from_value(json(r, "request_json")?).map_err(|e| Error::internal(format!("a pending child is unreadable: {e}")))
            })
            .collect()
    }

    async fn firing_for_occurrence(&self, automation_id: &AutomationId, scheduled_for_ms: i64) -> Result<Option<Firing>> {
        let rows =
            sqlx::query("SELECT * FROM automation_firings WHERE automation_id = $1 AND scheduled_for_ms = $2 AND source = 'schedule'")
                .bind(automation_id)
                .bind(scheduled_for_ms)
                .fetch_all(&self.db.pool)
                .await
                .map_err(db_err)?;
        Ok(self.firings(rows).await?.pop())
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
        let before = page.before();
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

    async fn accept_input(&self, key: &str, input: &SessionInput, event_seq: i64) -> Result<()> {
        inputs::accept(&self.db, key, input, event_seq).await
    }

    async fn drop_input(&self, key: &str) -> Result<()> {
        inputs::drop_pending(&self.db, key).await
    }

    async fn pending_inputs(&self, before_ms: i64, limit: i64) -> Result<Vec<ChildRequest>> {
        inputs::pending(&self.db, before_ms, limit).await
    }

    async fn open_inputs(&self, session_id: &str) -> Result<Vec<(InputRecord, ChildRequest)>> {
        inputs::open_into(&self.db, session_id).await
    }

    async fn firing_inputs(&self, firing_id: &str) -> Result<Vec<InputRecord>> {
        inputs::of_firing(&self.db, firing_id).await
    }

    async fn subscribed_automations(&self, environment_id: &str) -> Result<Vec<Automation>> {
        let rows = sqlx::query(
            "SELECT a.*, t.scheduled_for_ms AS next_ms FROM automations a LEFT JOIN timers t ON t.id = a.id \
             WHERE a.environment_id = $1 AND a.subscribed = 1 AND a.deleted_ms = 0 AND a.status = 'active' ORDER BY a.id LIMIT 1000",
        )
        .bind(environment_id)
        .fetch_all(&self.db.pool)
        .await
        .map_err(db_err)?;
        rows.iter().map(automation).collect()
    }

    async fn propose_skill(&self, p: &SkillProposal, events: &[Record]) -> Result<(SkillProposal, bool)> {
        skill_proposals::propose(&self.db, p, events).await
    }

    async fn get_skill_proposal(&self, id: &str) -> Result<Option<SkillProposal>> {
        skill_proposals::get(&self.db, id).await
    }

    async fn list_skill_proposals(&self, environment_ids: &[String], status: &str, page: &PageRequest) -> Result<Vec<SkillProposal>> {
        skill_proposals::list(&self.db, environment_ids, status, page).await
    }

    async fn decide_skill_proposal(&self, p: &SkillProposal, expected_version: i64, events: &[Record]) -> Result<bool> {
        skill_proposals::decide(&self.db, p, expected_version, events).await
    }

    async fn adopted_skill_version(&self, automation_id: &str, skill_id: &str) -> Result<Option<i64>> {
        skill_proposals::adopted(&self.db, automation_id, skill_id).await
    }

    async fn insert_webhook_source(&self, x: &crate::webhook_source::SourceRow, events: &[Record]) -> Result<bool> {
        webhook_sources::insert(&self.db, x, events).await
    }

    async fn update_webhook_source(&self, x: &crate::webhook_source::SourceRow, expected_version: i64, events: &[Record]) -> Result<bool> {
        webhook_sources::update(&self.db, x, expected_version, events).await
    }

    async fn get_webhook_source(&self, id: &str) -> Result<Option<crate::webhook_source::SourceRow>> {
        webhook_sources::get(&self.db, id).await
    }

    async fn webhook_source_of_registration(&self, registration_id: &str) -> Result<Option<crate::webhook_source::SourceRow>> {
        webhook_sources::of_registration(&self.db, registration_id).await
    }

    async fn webhook_source_of_automation(&self, automation_id: &str) -> Result<Option<crate::webhook_source::SourceRow>> {
        webhook_sources::of_automation(&self.db, automation_id).await
    }

    async fn list_webhook_sources(
        &self,
        environment_ids: &[String],
        automation_id: &str,
        status: &str,
        live: bool,
        page: &PageRequest,
    ) -> Result<Vec<crate::webhook_source::SourceRow>> {
        webhook_sources::list(&self.db, environment_ids, automation_id, status, live, page).await
    }

    async fn frontier(&self, automation_id: &str, name: &str) -> Result<Option<Frontier>> {
        frontiers::get(&self.db, automation_id, name).await
    }

    async fn frontiers(&self, automation_id: &str) -> Result<Vec<Frontier>> {
        frontiers::list(&self.db, automation_id).await
    }

    async fn advance_frontier(
        &self,
        automation_id: &str,
        name: &str,
        base: &str,
        through: &str,
        firing_id: &str,
        now_ms: i64,
    ) -> Result<Moved> {
        frontiers::advance(&self.db, automation_id, name, base, through, firing_id, now_ms).await
    }

    async fn automations_of_session(&self, session_id: &str) -> Result<Vec<String>> {
        let rows = sqlx::query(
            "SELECT f.automation_id FROM automation_children c JOIN automation_firings f ON f.id = c.firing_id WHERE c.session_id = $1 \
             UNION SELECT f.automation_id FROM automation_inputs i JOIN automation_firings f ON f.id = i.firing_id WHERE i.session_id = $1",
        )
        .bind(session_id)
        .fetch_all(&self.db.pool)
        .await
        .map_err(db_err)?;
        rows.iter().map(|r| s(r, "automation_id")).collect()
    }

    async fn claim_due(&self, holder: &str, now_ms: i64, lease_until_ms: i64, limit: i64) -> Result<Vec<Timer>> {
        timers::claim_due(&self.db, holder, now_ms, lease_until_ms, limit).await
    }

    async fn finish_timer(&self, t: &Timer, arm: Arm) -> Result<bool> {
        timers::finish(&self.db, t, arm).await
    }

    async fn next_due(&self) -> Result<Option<i64>> {
        timers::next_due(&self.db).await
    }

    async fn get_delivery(&self, automation_id: &AutomationId, dedupe_key: &str) -> Result<Option<Delivery>> {
        deliveries::get(&self.db, automation_id, dedupe_key).await
    }

    async fn insert_filtered(&self, d: &FilteredDelivery, delivery: &Delivery) -> Result<bool> {
        deliveries::insert_filtered(&self.db, d, delivery).await
    }

    async fn get_filtered(&self, id: &str) -> Result<Option<FilteredDelivery>> {
        deliveries::get_filtered(&self.db, id).await
    }

    async fn list_filtered(&self, automation_id: &AutomationId, page: &PageRequest) -> Result<Vec<FilteredDelivery>> {
        deliveries::list_filtered(&self.db, automation_id, page).await
    }

    async fn sweep_deliveries(&self, before_ms: i64) -> Result<u64> {
        deliveries::sweep(&self.db, before_ms).await
    }

    async fn automation_named(&self, environment_id: &str, name: &str) -> Result<Option<Automation>> {
        let row = sqlx::query(
            "SELECT a.*, t.scheduled_for_ms AS next_ms FROM automations a LEFT JOIN timers t ON t.id = a.id \
             WHERE a.environment_id = $1 AND a.name = $2 AND a.deleted_ms = 0",
        )
        .bind(environment_id)
        .bind(name)
        .fetch_optional(&self.db.pool)
        .await
        .map_err(db_err)?;
        row.as_ref().map(automation).transpose()
    }

    async fn insert_graph(&self, g: &Graph, first: &Revision) -> Result<()> {
        graphs::insert(&self.db, g, first).await
    }

    async fn update_graph(&self, g: &Graph, expected_version: i64, revision: Option<&Revision>, app: Option<&Application>) -> Result<bool> {
        graphs::update(&self.db, g, expected_version, revision, app).await
    }

    async fn get_graph(&self, id: &GraphId) -> Result<Option<Graph>> {
        graphs::get(&self.db, id).await
    }

    async fn list_graphs(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Graph>> {
        graphs::list(&self.db, environment_ids, page).await
    }

    async fn get_revision(&self, id: &GraphId, n: i64) -> Result<Option<Revision>> {
        graphs::get_revision(&self.db, id, n).await
    }

    async fn list_revisions(&self, id: &GraphId, before: Option<i64>, limit: i64) -> Result<Vec<Revision>> {
        graphs::list_revisions(&self.db, id, before, limit).await
    }

    async fn list_applications(&self, id: &GraphId, page: &PageRequest) -> Result<Vec<Application>> {
        graphs::list_applications(&self.db, id, page).await
    }
}

#[cfg(test)]
mod conformance;
