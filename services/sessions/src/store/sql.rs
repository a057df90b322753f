//! SQL implementation of [`SessionsStore`], one text for both dialects.

use super::group_commit::GroupCommit;
use super::outbox::session_records;
use super::{Change, SessionFilter, SessionsStore, View};
use crate::model::*;
use checkfu_bus::Record;
use checkfu_bus::outbox::stage;
use checkfu_bus::resource_record;
use checkfu_core::id::{AgentId, BudgetId, DeploymentId, RunId, SandboxProfileId, SessionId, TypedId};
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::AssertSqlSafe;
use checkfu_store::sqlx::{self, Any, AnyConnection, Row, any::AnyRow};
use checkfu_store::{Db, db_err, find_one, flag, list_in_envs};
use serde::de::DeserializeOwned;
use serde_json::Value;

#[derive(Clone, Debug)]
pub struct SqlSessionsStore {
    pub(super) db: Db,
    /// SQLite's single writer commits changes in groups.
    group: Option<GroupCommit>,
}

type Query<'q> = sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>;

impl SqlSessionsStore {
    /// The store on `db`; on SQLite this starts the group-commit writer
    /// (so it needs a Tokio runtime).
    pub fn new(db: Db) -> Self {
        let group = (db.dialect == checkfu_store::Dialect::Sqlite).then(|| GroupCommit::start(db.clone()));
        SqlSessionsStore { db, group }
    }

    /// Moves a parent's revision counter with a compare-and-set, then inserts
    /// the new immutable child row, in one transaction. False when the parent
    /// moved first (someone else published that revision).
    async fn bump_then_insert(&self, bump: Query<'_>, insert: Query<'_>, record: Record) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        if bump.execute(&mut *tx).await.map_err(db_err)?.rows_affected() != 1 {
            return Ok(false);
        }
        insert.execute(&mut *tx).await.map_err(db_err)?;
        stage(&mut tx, &[record]).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }
}

pub(super) fn s(r: &AnyRow, c: &str) -> Result<String> {
    r.try_get(c).map_err(db_err)
}
pub(super) fn id<T: TypedId>(r: &AnyRow, c: &str) -> Result<T> {
    s(r, c).map(T::stored)
}
fn opt_id<T: TypedId>(r: &AnyRow, c: &str) -> Result<Option<T>> {
    let raw: Option<String> = r.try_get(c).map_err(db_err)?;
    Ok(raw.map(T::stored))
}
pub(super) fn i(r: &AnyRow, c: &str) -> Result<i64> {
    r.try_get(c).map_err(db_err)
}
fn json<T: DeserializeOwned>(r: &AnyRow, c: &str) -> Result<T> {
    serde_json::from_str(&s(r, c)?).map_err(|e| Error::internal(format!("stored {c} unreadable: {e}")))
}
fn opt_json(r: &AnyRow, c: &str) -> Result<Option<Value>> {
    let raw: Option<String> = r.try_get(c).map_err(db_err)?;
    raw.map(|t| serde_json::from_str(&t).map_err(|e| Error::internal(format!("stored {c} unreadable: {e}")))).transpose()
}
fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}
fn agent(r: &AnyRow) -> Result<Agent> {
    Ok(Agent {
        id: id(r, "id")?,
        environment_id: id(r, "environment_id")?,
        name: s(r, "name")?,
        draft: json(r, "draft_json")?,
        latest_version: i(r, "latest_version")?,
        version: i(r, "version")?,
        archived: i(r, "archived")? != 0,
        created_ms: i(r, "created_ms")?,
        updated_ms: i(r, "updated_ms")?,
    })
}

fn agent_version(r: &AnyRow) -> Result<AgentVersion> {
    Ok(AgentVersion {
        agent_id: id(r, "agent_id")?,
        environment_id: id(r, "environment_id")?,
        version: i(r, "version")?,
        release_sha256: s(r, "release_sha256")?,
        definition: json(r, "definition_json")?,
        published_by: s(r, "published_by")?,
        published_ms: i(r, "published_ms")?,
    })
}

fn sandbox_profile(r: &AnyRow) -> Result<SandboxProfile> {
    Ok(SandboxProfile {
        id: id(r, "id")?,
        environment_id: id(r, "environment_id")?,
        name: s(r, "name")?,
        latest_revision: i(r, "latest_revision")?,
        created_ms: i(r, "created_ms")?,
        archived_ms: r.try_get("archived_ms").map_err(db_err)?,
    })
}

fn sandbox_revision(r: &AnyRow) -> Result<SandboxRevision> {
    Ok(SandboxRevision {
        profile_id: id(r, "profile_id")?,
        revision: i(r, "revision")?,
        spec: json(r, "spec_json")?,
        created_ms: i(r, "created_ms")?,
    })
}

fn deployment(r: &AnyRow) -> Result<Deployment> {
    Ok(Deployment {
        id: id(r, "id")?,
        environment_id: id(r, "environment_id")?,
        key: s(r, "key")?,
        agent_id: id(r, "agent_id")?,
        revision: i(r, "revision")?,
        pins: json(r, "pins_json")?,
        created_ms: i(r, "created_ms")?,
        updated_ms: i(r, "updated_ms")?,
    })
}

fn outcome(r: &AnyRow) -> Result<crate::model::outcome::Outcome> {
    serde_json::from_str(&s(r, "outcome_json")?).map_err(|e| Error::internal(format!("stored outcome unreadable: {e}")))
}

fn session(r: &AnyRow) -> Result<Session> {
    Ok(Session {
        id: id(r, "id")?,
        environment_id: id(r, "environment_id")?,
        agent_id: id(r, "agent_id")?,
        deployment_id: id(r, "deployment_id")?,
        deployment_revision: i(r, "deployment_revision")?,
        principal_id: id(r, "principal_id")?,
        status: SessionStatus::parse("status", &s(r, "status")?)?,
        stop_reason: opt_json(r, "stop_reason_json")?,
        title: s(r, "title")?,
        metadata: json(r, "metadata_json")?,
        budget: opt_json(r, "budget_json")?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| Error::internal(format!("stored budget unreadable: {e}")))?,
        usage: Usage {
            input_tokens: i(r, "input_tokens")?,
            output_tokens: i(r, "output_tokens")?,
            model_spend_micro_usd: i(r, "spend_micro_usd")?,
        },
        selection: json(r, "selection_json")?,
        pins: json(r, "pins_json")?,
        last_seq: i(r, "last_seq")?,
        last_user_message_seq: i(r, "last_user_message_seq")?,
        outcome: opt_json(r, "outcome_json")?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| Error::internal(format!("stored outcome unreadable: {e}")))?,
        threads: json(r, "threads_json")?,
        connection_vault_ids: json(r, "connection_vault_ids_json")?,
        created_ms: i(r, "created_ms")?,
        updated_ms: i(r, "updated_ms")?,
        version: i(r, "version")?,
    })
}

fn event(r: &AnyRow) -> Result<Event> {
    Ok(Event {
        id: id(r, "id")?,
        session_id: id(r, "session_id")?,
        seq: i(r, "seq")?,
        event_type: s(r, "type")?,
        run_id: opt_id(r, "run_id")?,
        thread_id: r.try_get("thread_id").map_err(db_err)?,
        origin_event_id: opt_id(r, "origin_event_id")?,
        authored_by: json(r, "authored_by_json")?,
        caused_by: json(r, "caused_by_json")?,
        payload: json(r, "payload_json")?,
        created_ms: i(r, "created_ms")?,
    })
}

fn run(r: &AnyRow) -> Result<Run> {
    Ok(Run {
        id: id(r, "id")?,
        session_id: id(r, "session_id")?,
        status: RunStatus::parse("status", &s(r, "status")?)?,
        stop_reason: opt_json(r, "stop_reason_json")?,
        execution_pins: json(r, "pins_json")?,
        usage: Usage {
            input_tokens: i(r, "input_tokens")?,
            output_tokens: i(r, "output_tokens")?,
            model_spend_micro_usd: i(r, "spend_micro_usd")?,
        },
        start_seq: i(r, "start_seq")?,
        lease_id: s(r, "lease_id")?,
        generation: i(r, "generation")?,
        lease_expires_ms: i(r, "lease_expires_ms")?,
        runner_id: s(r, "runner_id")?,
        created_ms: i(r, "created_ms")?,
        completed_ms: r.try_get("completed_ms").map_err(db_err)?,
        placement: s(r, "placement")?,
        traceparent: s(r, "traceparent")?,
        thread_id: Some(s(r, "thread_id")?).filter(|t| !t.is_empty()),
    })
}

/// Where a claim's precondition is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Order {
    /// After the session's compare-and-set, as PostgreSQL needs for its
    /// lock order (the sessions row, then the runs row).
    SessionFirst,
    /// Before it, so that a change that loses writes nothing at all (the
    /// group commit runs changes side by side without savepoints; SQLite has
    /// one writer and no row locks).
    GuardFirst,
}

/// Whether a claim's Run is still claimable. The no-op update takes the run
/// row's lock until commit, so a heartbeat racing the claim either lands
/// first (and the claim yields) or after (and finds its generation moved).
async fn claim_holds(conn: &mut AnyConnection, c: &Change) -> Result<bool> {
    let Some(g) = &c.claim_guard else { return Ok(true) };
    let held = sqlx::query(
        "UPDATE runs SET generation = generation WHERE id = $1 AND generation = $2 AND (status = 'queued' OR lease_expires_ms < $3)",
    )
    .bind(&g.run_id)
    .bind(g.generation)
    .bind(g.now_ms)
    .execute(&mut *conn)
    .await
    .map_err(db_err)?;
    Ok(held.rows_affected() == 1)
}

/// One change inside the caller's transaction: `None` when its
/// compare-and-set lost.
/// `traceparent` is the trace of the request that made the change.
pub(super) async fn apply(conn: &mut AnyConnection, c: &Change, order: Order, traceparent: &str) -> Result<Option<(Session, Vec<Event>)>> {
    if order == Order::GuardFirst && !claim_holds(conn, c).await? {
        return Ok(None);
    }
    let se = &c.session;
    // The compare-and-set: only the writer that read `expected_version`
    // moves the row, and it alone assigns the next seqs.
    let row = sqlx::query(
        "UPDATE sessions SET status = $1, stop_reason_json = $2, title = $3, metadata_json = $4, budget_id = $5, input_tokens = $6, output_tokens = $7, \
         spend_micro_usd = $8, selection_json = $9, last_seq = last_seq + $10, last_user_message_seq = $11, updated_ms = $12, version = version + 1, \
         budget_json = $15, outcome_json = $16, threads_json = $17 WHERE id = $13 AND version = $14 RETURNING last_seq, version",
    )
    .bind(se.status.as_str())
    .bind(se.stop_reason.as_ref().map(Value::to_string))
    .bind(&se.title)
    .bind(se.metadata.to_string())
    .bind(se.budget_id())
    .bind(se.usage.input_tokens)
    .bind(se.usage.output_tokens)
    .bind(se.usage.model_spend_micro_usd)
    .bind(to_json(&se.selection))
    .bind(c.events.len() as i64)
    .bind(se.last_user_message_seq)
    .bind(se.updated_ms)
    .bind(&se.id)
    .bind(c.expected_version)
    .bind(se.budget.as_ref().map(to_json))
    .bind(se.outcome.as_ref().map(to_json))
    .bind(to_json(&se.threads))
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_err)?;
    let Some(row) = row else {
        return Ok(None);
    };
    if order == Order::SessionFirst && !claim_holds(conn, c).await? {
        return Ok(None);
    }
    let last_seq = i(&row, "last_seq")?;
    let version = i(&row, "version")?;
    let first = last_seq - c.events.len() as i64 + 1;
    let events = insert_events(conn, &se.id, first, &c.events).await?;
    stage(conn, &session_records(se, &events, traceparent)).await?;
    upsert_runs(conn, &c.runs).await?;
    if c.outcome_changed
        && let Some(o) = &se.outcome
    {
        upsert_outcome(conn, o).await?;
    }
    let mut after = se.clone();
    after.last_seq = last_seq;
    after.version = version;
    Ok(Some((after, events)))
}

/// Keeps the Outcome readable by id (its state lives on the Session row).
async fn upsert_outcome(conn: &mut AnyConnection, o: &crate::model::outcome::Outcome) -> Result<()> {
    sqlx::query(
        "INSERT INTO outcomes (id, session_id, status, grading, created_ms, outcome_json) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (id) DO UPDATE SET status = excluded.status, grading = excluded.grading, outcome_json = excluded.outcome_json",
    )
    .bind(&o.id)
    .bind(&o.session_id)
    .bind(o.status.as_str())
    .bind(i64::from(o.grading.is_some()))
    .bind(o.created_ms)
    .bind(to_json(o))
    .execute(&mut *conn)
    .await
    .map_err(db_err)?;
    Ok(())
}

/// A new Session with its first events and Runs, inside the caller's
/// transaction.
pub(super) async fn create(
    conn: &mut AnyConnection,
    se: &Session,
    events: &[NewEvent],
    runs: &[Run],
    traceparent: &str,
) -> Result<Vec<Event>> {
    sqlx::query(
        "INSERT INTO sessions (id, environment_id, agent_id, deployment_id, deployment_revision, principal_id, status, stop_reason_json, title, metadata_json, budget_id, \
         input_tokens, output_tokens, spend_micro_usd, selection_json, pins_json, last_seq, last_user_message_seq, created_ms, updated_ms, version, budget_json, \
         outcome_json, threads_json, connection_vault_ids_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25)",
    )
    .bind(&se.id)
    .bind(&se.environment_id)
    .bind(&se.agent_id)
    .bind(&se.deployment_id)
    .bind(se.deployment_revision)
    .bind(&se.principal_id)
    .bind(se.status.as_str())
    .bind(se.stop_reason.as_ref().map(Value::to_string))
    .bind(&se.title)
    .bind(se.metadata.to_string())
    .bind(se.budget_id())
    .bind(se.usage.input_tokens)
    .bind(se.usage.output_tokens)
    .bind(se.usage.model_spend_micro_usd)
    .bind(to_json(&se.selection))
    .bind(to_json(&se.pins))
    .bind(events.len() as i64)
    .bind(se.last_user_message_seq)
    .bind(se.created_ms)
    .bind(se.updated_ms)
    .bind(se.version)
    .bind(se.budget.as_ref().map(to_json))
    .bind(se.outcome.as_ref().map(to_json))
    .bind(to_json(&se.threads))
    .bind(to_json(&se.connection_vault_ids))
    .execute(&mut *conn)
    .await
    .map_err(db_err)?;
    let out = insert_events(conn, &se.id, 1, events).await?;
    stage(conn, &session_records(se, &out, traceparent)).await?;
    upsert_runs(conn, runs).await?;
    if let Some(o) = &se.outcome {
        upsert_outcome(conn, o).await?;
    }
    Ok(out)
}

/// Inserts events with consecutive seqs from `first_seq`, in one statement.
async fn insert_events(conn: &mut AnyConnection, session_id: &SessionId, first_seq: i64, events: &[NewEvent]) -> Result<Vec<Event>> {
    if events.is_empty() {
        return Ok(vec![]);
    }
    const COLS: usize = 11;
    let sql = format!(
        "INSERT INTO events (session_id, seq, id, type, run_id, thread_id, origin_event_id, authored_by_json, caused_by_json, payload_json, created_ms) VALUES {}",
        checkfu_store::value_rows(events.len(), COLS)
    );
    let mut q = sqlx::query(AssertSqlSafe(sql));
    let mut out = Vec::with_capacity(events.len());
    for (n, e) in events.iter().enumerate() {
        let seq = first_seq + n as i64;
        q = q
            .bind(session_id.clone())
            .bind(seq)
            .bind(e.id.clone())
            .bind(e.event_type.clone())
            .bind(e.run_id.clone())
            .bind(e.thread_id.clone())
            .bind(e.origin_event_id.clone())
            .bind(e.authored_by.to_string())
            .bind(e.caused_by.to_string())
            .bind(e.payload.to_string())
            .bind(e.created_ms);
        out.push(Event {
            id: e.id.clone(),
            session_id: session_id.clone(),
            seq,
            event_type: e.event_type.clone(),
            run_id: e.run_id.clone(),
            thread_id: e.thread_id.clone(),
            origin_event_id: e.origin_event_id.clone(),
            authored_by: e.authored_by.clone(),
            caused_by: e.caused_by.clone(),
            payload: e.payload.clone(),
            created_ms: e.created_ms,
        });
    }
    q.execute(&mut *conn).await.map_err(db_err)?;
    Ok(out)
}

async fn upsert_runs(conn: &mut AnyConnection, runs: &[Run]) -> Result<()> {
    for r in runs {
        sqlx::query(
            "INSERT INTO runs (id, session_id, status, stop_reason_json, pins_json, input_tokens, output_tokens, spend_micro_usd, start_seq, lease_id, generation, lease_expires_ms, runner_id, created_ms, completed_ms, traceparent, placement, thread_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) \
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, stop_reason_json = excluded.stop_reason_json, \
             input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, spend_micro_usd = excluded.spend_micro_usd, \
             lease_id = excluded.lease_id, generation = excluded.generation, lease_expires_ms = excluded.lease_expires_ms, \
             runner_id = excluded.runner_id, completed_ms = excluded.completed_ms",
        )
        .bind(&r.id)
        .bind(&r.session_id)
        .bind(r.status.as_str())
        .bind(r.stop_reason.as_ref().map(Value::to_string))
        .bind(r.execution_pins.to_string())
        .bind(r.usage.input_tokens)
        .bind(r.usage.output_tokens)
        .bind(r.usage.model_spend_micro_usd)
        .bind(r.start_seq)
        .bind(&r.lease_id)
        .bind(r.generation)
        .bind(r.lease_expires_ms)
        .bind(&r.runner_id)
        .bind(r.created_ms)
        .bind(r.completed_ms)
        .bind(&r.traceparent)
        .bind(&r.placement)
        .bind(r.thread_id.clone().unwrap_or_default())
        .execute(&mut *conn)
        .await
        .map_err(db_err)?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl SessionsStore for SqlSessionsStore {
    async fn insert_agent(&self, a: &Agent) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        sqlx::query("INSERT INTO agents (id, environment_id, name, draft_json, latest_version, version, archived, created_ms, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)")
            .bind(&a.id)
            .bind(&a.environment_id)
            .bind(&a.name)
            .bind(to_json(&a.draft))
            .bind(a.latest_version)
            .bind(a.version)
            .bind(flag(a.archived))
            .bind(a.created_ms)
            .bind(a.updated_ms)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        stage(&mut tx, &[resource_record("agent.created", &a.environment_id, &a.id)]).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(())
    }

    async fn get_agent(&self, id: &AgentId) -> Result<Option<Agent>> {
        find_one(&self.db, "SELECT * FROM agents WHERE id = $1", id, agent).await
    }

    async fn list_agents(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Agent>> {
        list_in_envs(
            &self.db,
            "SELECT * FROM agents WHERE environment_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3",
            environment_ids,
            page,
            agent,
            |a| &a.id,
        )
        .await
    }

    async fn update_agent(&self, a: &Agent, expected_version: i64) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let r = sqlx::query(
            "UPDATE agents SET name = $1, draft_json = $2, archived = $3, version = $4, updated_ms = $5 WHERE id = $6 AND version = $7",
        )
        .bind(&a.name)
        .bind(to_json(&a.draft))
        .bind(flag(a.archived))
        .bind(a.version)
        .bind(a.updated_ms)
        .bind(&a.id)
        .bind(expected_version)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        if r.rows_affected() != 1 {
            return Ok(false);
        }
        let kind = if a.archived { "agent.archived" } else { "agent.updated" };
        stage(&mut tx, &[resource_record(kind, &a.environment_id, &a.id)]).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn publish_agent_version(&self, v: &AgentVersion, expected_agent_version: i64) -> Result<bool> {
        let bump = sqlx::query(
            "UPDATE agents SET latest_version = $1, version = version + 1, updated_ms = $2 WHERE id = $3 AND version = $4 AND latest_version = $5",
        )
        .bind(v.version)
        .bind(v.published_ms)
        .bind(v.agent_id.clone())
        .bind(expected_agent_version)
        .bind(v.version - 1);
        let insert = sqlx::query(
            "INSERT INTO agent_versions (agent_id, version, environment_id, release_sha256, definition_json, published_by, published_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(v.agent_id.clone())
        .bind(v.version)
        .bind(v.environment_id.clone())
        .bind(v.release_sha256.clone())
        .bind(to_json(&v.definition))
        .bind(v.published_by.clone())
        .bind(v.published_ms);
        self.bump_then_insert(bump, insert, resource_record("agent.updated", &v.environment_id, &v.agent_id)).await
    }
    async fn get_agent_version(&self, agent_id: &AgentId, version: i64) -> Result<Option<AgentVersion>> {
        sqlx::query("SELECT * FROM agent_versions WHERE agent_id = $1 AND version = $2")
            .bind(agent_id)
            .bind(version)
            .fetch_optional(&self.db.pool)
            .await
            .map_err(db_err)?
            .as_ref()
            .map(agent_version)
            .transpose()
    }

    async fn list_agent_versions(&self, agent_id: &AgentId, before_version: Option<i64>, limit: i64) -> Result<Vec<AgentVersion>> {
        sqlx::query("SELECT * FROM agent_versions WHERE agent_id = $1 AND version < $2 ORDER BY version DESC LIMIT $3")
            .bind(agent_id)
            .bind(before_version.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(agent_version)
            .collect()
    }

    async fn insert_sandbox_profile(&self, p: &SandboxProfile, first: &SandboxRevision) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        sqlx::query("INSERT INTO sandbox_profiles (id, environment_id, name, latest_revision, created_ms) VALUES ($1, $2, $3, $4, $5)")
            .bind(&p.id)
            .bind(&p.environment_id)
            .bind(&p.name)
            .bind(p.latest_revision)
            .bind(p.created_ms)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        sqlx::query("INSERT INTO sandbox_revisions (profile_id, revision, spec_json, created_ms) VALUES ($1, $2, $3, $4)")
            .bind(&first.profile_id)
            .bind(first.revision)
            .bind(to_json(&first.spec))
            .bind(first.created_ms)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        stage(&mut tx, &[resource_record("sandbox_profile.created", &p.environment_id, &p.id)]).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(())
    }

    async fn insert_sandbox_revision(&self, rev: &SandboxRevision) -> Result<bool> {
        let env: String = sqlx::query("SELECT environment_id FROM sandbox_profiles WHERE id = $1")
            .bind(&rev.profile_id)
            .fetch_one(&self.db.pool)
            .await
            .map_err(db_err)?
            .try_get("environment_id")
            .map_err(db_err)?;
        let bump = sqlx::query("UPDATE sandbox_profiles SET latest_revision = $1 WHERE id = $2 AND latest_revision = $3")
            .bind(rev.revision)
            .bind(rev.profile_id.clone())
            .bind(rev.revision - 1);
        let insert = sqlx::query("INSERT INTO sandbox_revisions (profile_id, revision, spec_json, created_ms) VALUES ($1, $2, $3, $4)")
            .bind(rev.profile_id.clone())
            .bind(rev.revision)
            .bind(to_json(&rev.spec))
            .bind(rev.created_ms);
        self.bump_then_insert(bump, insert, resource_record("sandbox_profile.updated", &env, &rev.profile_id)).await
    }
    async fn archive_sandbox_profile(&self, id: &SandboxProfileId, at_ms: i64) -> Result<Option<SandboxProfile>> {
        sqlx::query("UPDATE sandbox_profiles SET archived_ms = COALESCE(archived_ms, $1) WHERE id = $2")
            .bind(at_ms)
            .bind(id.clone())
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        self.get_sandbox_profile(id).await
    }
    async fn get_sandbox_profile(&self, id: &SandboxProfileId) -> Result<Option<SandboxProfile>> {
        find_one(&self.db, "SELECT * FROM sandbox_profiles WHERE id = $1", id, sandbox_profile).await
    }

    async fn get_sandbox_revision(&self, profile_id: &SandboxProfileId, revision: i64) -> Result<Option<SandboxRevision>> {
        sqlx::query("SELECT * FROM sandbox_revisions WHERE profile_id = $1 AND revision = $2")
            .bind(profile_id)
            .bind(revision)
            .fetch_optional(&self.db.pool)
            .await
            .map_err(db_err)?
            .as_ref()
            .map(sandbox_revision)
            .transpose()
    }

    async fn list_sandbox_profiles(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<SandboxProfile>> {
        let sql = "SELECT * FROM sandbox_profiles WHERE environment_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3";
        list_in_envs(&self.db, sql, environment_ids, page, sandbox_profile, |p| &p.id).await
    }

    async fn insert_deployment(&self, d: &Deployment) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        sqlx::query("INSERT INTO deployments (id, environment_id, key, agent_id, revision, created_ms, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)")
            .bind(&d.id)
            .bind(&d.environment_id)
            .bind(&d.key)
            .bind(&d.agent_id)
            .bind(d.revision)
            .bind(d.created_ms)
            .bind(d.updated_ms)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        sqlx::query("INSERT INTO deployment_revisions (deployment_id, revision, pins_json, created_ms) VALUES ($1, $2, $3, $4)")
            .bind(&d.id)
            .bind(d.revision)
            .bind(to_json(&d.pins))
            .bind(d.updated_ms)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        stage(&mut tx, &[resource_record("agent_deployment.created", &d.environment_id, &d.id)]).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(())
    }

    async fn insert_deployment_revision(&self, d: &Deployment) -> Result<bool> {
        let bump = sqlx::query("UPDATE deployments SET revision = $1, updated_ms = $2 WHERE id = $3 AND revision = $4")
            .bind(d.revision)
            .bind(d.updated_ms)
            .bind(d.id.clone())
            .bind(d.revision - 1);
        let insert =
            sqlx::query("INSERT INTO deployment_revisions (deployment_id, revision, pins_json, created_ms) VALUES ($1, $2, $3, $4)")
                .bind(d.id.clone())
                .bind(d.revision)
                .bind(to_json(&d.pins))
                .bind(d.updated_ms);
        self.bump_then_insert(bump, insert, resource_record("agent_deployment.updated", &d.environment_id, &d.id)).await
    }
    async fn get_deployment(&self, id: &DeploymentId) -> Result<Option<Deployment>> {
        find_one(&self.db, "SELECT d.*, r.pins_json FROM deployments d JOIN deployment_revisions r ON r.deployment_id = d.id AND r.revision = d.revision WHERE d.id = $1", id, deployment).await
    }

    async fn get_deployment_at(&self, id: &DeploymentId, revision: i64) -> Result<Option<Deployment>> {
        sqlx::query(
            "SELECT d.id, d.environment_id, d.key, d.agent_id, r.revision, d.created_ms, d.updated_ms, r.pins_json \
             FROM deployments d JOIN deployment_revisions r ON r.deployment_id = d.id WHERE d.id = $1 AND r.revision = $2",
        )
        .bind(id)
        .bind(revision)
        .fetch_optional(&self.db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(deployment)
        .transpose()
    }

    async fn list_deployments(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Deployment>> {
        let sql = "SELECT d.*, r.pins_json FROM deployments d JOIN deployment_revisions r ON r.deployment_id = d.id AND r.revision = d.revision \
                   WHERE d.environment_id = $1 AND d.id < $2 ORDER BY d.id DESC LIMIT $3";
        list_in_envs(&self.db, sql, environment_ids, page, deployment, |d| &d.id).await
    }

    async fn insert_session(&self, se: &Session, events: &[NewEvent], runs: &[Run]) -> Result<Vec<Event>> {
        if let Some(group) = &self.group {
            return group.create(se.clone(), events.to_vec(), runs.to_vec()).await;
        }
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let out = create(&mut tx, se, events, runs, &checkfu_telemetry::current_traceparent()).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(out)
    }

    async fn get_session(&self, id: &SessionId) -> Result<Option<Session>> {
        find_one(&self.db, "SELECT * FROM sessions WHERE id = $1", id, session).await
    }

    async fn session_by_budget(&self, budget_id: &BudgetId) -> Result<Option<Session>> {
        find_one(&self.db, "SELECT * FROM sessions WHERE budget_id = $1", budget_id, session).await
    }

    async fn list_budget_sessions(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Session>> {
        let sql =
            "SELECT * FROM sessions WHERE environment_id = $1 AND budget_id <> '' AND budget_id < $2 ORDER BY budget_id DESC LIMIT $3";
        list_in_envs(&self.db, sql, environment_ids, page, session, Session::budget_id).await
    }

    async fn list_sessions(&self, f: &SessionFilter, page: &PageRequest) -> Result<Vec<Session>> {
        let mut out = Vec::new();
        let (sql, cursor) = if f.ascending {
            (
                "SELECT * FROM sessions WHERE environment_id = $1 AND id > $2 AND ($3 = '' OR status = $3) AND ($4 = '' OR deployment_id = $4) AND ($6 = '' OR principal_id = $6) ORDER BY id ASC LIMIT $5",
                page.before_id.clone().unwrap_or_default(),
            )
        } else {
            (
                "SELECT * FROM sessions WHERE environment_id = $1 AND id < $2 AND ($3 = '' OR status = $3) AND ($4 = '' OR deployment_id = $4) AND ($6 = '' OR principal_id = $6) ORDER BY id DESC LIMIT $5",
                page.before(),
            )
        };
        for env in &f.environment_ids {
            let rows = sqlx::query(sql)
                .bind(env)
                .bind(&cursor)
                .bind(&f.status)
                .bind(&f.deployment_id)
                .bind(page.fetch_limit())
                .bind(&f.principal_id)
                .fetch_all(&self.db.pool)
                .await
                .map_err(db_err)?;
            for r in &rows {
                out.push(session(r)?);
            }
        }
        if f.ascending {
            out.sort_by(|a, b| a.id.cmp(&b.id));
        } else {
            out.sort_by(|a, b| b.id.cmp(&a.id));
        }
        out.truncate(page.fetch_limit() as usize);
        Ok(out)
    }

    async fn commit(&self, c: Change) -> Result<Option<(Session, Vec<Event>)>> {
        if let Some(group) = &self.group {
            return group.commit(c).await;
        }
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let Some(done) = apply(&mut tx, &c, Order::SessionFirst, &checkfu_telemetry::current_traceparent()).await? else {
            return Ok(None);
        };
        tx.commit().await.map_err(db_err)?;
        Ok(Some(done))
    }

    async fn list_events(&self, session_id: &SessionId, view: &View, after_seq: i64, limit: i64, types: &[String]) -> Result<Vec<Event>> {
        // $4 is the thread of a child view (unused elsewhere, but bound so
        // the type marks always start at $5).
        let (thread, of_view) = match view {
            View::All => ("", ""),
            View::Primary => ("", " AND (thread_id IS NULL OR origin_event_id IS NOT NULL) AND $4 = ''"),
            View::PrimaryOwn => ("", " AND thread_id IS NULL AND $4 = ''"),
            View::Child(t) => (t.as_str(), " AND thread_id = $4 AND origin_event_id IS NULL"),
        };
        let of_types = if types.is_empty() { String::new() } else { format!(" AND type IN ({})", checkfu_store::marks(5, types.len())) };
        let all = if matches!(view, View::All) { " AND $4 = ''" } else { "" };
        let sql = format!("SELECT * FROM events WHERE session_id = $1 AND seq > $2{of_view}{all}{of_types} ORDER BY seq LIMIT $3");
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(session_id).bind(after_seq).bind(limit).bind(thread.to_string());
        for t in types {
            q = q.bind(t);
        }
        let rows = q.fetch_all(&self.db.pool).await.map_err(db_err)?;
        rows.iter().map(event).collect()
    }

    async fn get_run(&self, id: &RunId) -> Result<Option<Run>> {
        find_one(&self.db, "SELECT * FROM runs WHERE id = $1", id, run).await
    }

    async fn get_outcome(&self, id: &str) -> Result<Option<crate::model::outcome::Outcome>> {
        find_one(&self.db, "SELECT outcome_json FROM outcomes WHERE id = $1", id, outcome).await
    }

    async fn list_outcomes(&self, session_id: &SessionId, page: &PageRequest) -> Result<Vec<crate::model::outcome::Outcome>> {
        sqlx::query("SELECT outcome_json FROM outcomes WHERE session_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3")
            .bind(session_id)
            .bind(page.before())
            .bind(page.fetch_limit())
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(outcome)
            .collect()
    }

    async fn grading_sessions(&self, limit: i64) -> Result<Vec<SessionId>> {
        sqlx::query("SELECT session_id FROM outcomes WHERE grading = 1 ORDER BY session_id LIMIT $1")
            .bind(limit)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(|r| id(r, "session_id"))
            .collect()
    }

    async fn active_run(&self, session_id: &SessionId) -> Result<Option<Run>> {
        find_one(
            &self.db,
            "SELECT * FROM runs WHERE session_id = $1 AND status <> 'completed' AND thread_id = '' ORDER BY id DESC LIMIT 1",
            session_id,
            run,
        )
        .await
    }

    async fn child_runs(&self, session_id: &SessionId) -> Result<Vec<Run>> {
        sqlx::query("SELECT * FROM runs WHERE session_id = $1 AND status <> 'completed' AND thread_id <> '' ORDER BY id")
            .bind(session_id)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(run)
            .collect()
    }

    async fn list_runs(&self, session_id: &SessionId, page: &PageRequest) -> Result<Vec<Run>> {
        sqlx::query("SELECT * FROM runs WHERE session_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3")
            .bind(session_id)
            .bind(page.before())
            .bind(page.fetch_limit())
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(run)
            .collect()
    }

    async fn claimable_runs(&self, placement: &str, now_ms: i64, limit: i64) -> Result<Vec<Run>> {
        sqlx::query(
            "SELECT * FROM runs WHERE placement = $1 AND (status = 'queued' OR (status = 'running' AND lease_expires_ms < $2)) \
             ORDER BY created_ms, id LIMIT $3",
        )
        .bind(placement)
        .bind(now_ms)
        .bind(limit)
        .fetch_all(&self.db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(run)
        .collect()
    }

    async fn extend_lease(&self, run_id: &RunId, lease_id: &str, generation: i64, now_ms: i64, expires_ms: i64) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE runs SET lease_expires_ms = $1 WHERE id = $2 AND lease_id = $3 AND generation = $4 AND status = 'running' AND lease_expires_ms >= $5",
        )
        .bind(expires_ms)
        .bind(run_id)
        .bind(lease_id)
        .bind(generation)
        .bind(now_ms)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }

    async fn expire_all_leases(&self) -> Result<u64> {
        let r =
            sqlx::query("UPDATE runs SET lease_expires_ms = 0 WHERE status = 'running'").execute(&self.db.pool).await.map_err(db_err)?;
        Ok(r.rows_affected())
    }
}
