//! The statements of one write to the event log, run inside a transaction
//! the caller holds: the group commit (both stores) and the write-by-write
//! fallback share them, so every path writes a change the same way.

use super::Change;
use super::outbox::session_records;
use super::rows::{i, to_json};
use crate::model::*;
use checkfu_bus::outbox::stage;
use checkfu_core::Result;
use checkfu_core::id::SessionId;
use checkfu_store::db_err;
use checkfu_store::sqlx::query::Query;
use checkfu_store::sqlx::{self, Any, AnyConnection, AssertSqlSafe, any::AnyArguments};

/// Where a claim's precondition is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Order {
    /// After the session's compare-and-set, as PostgreSQL needs for its
    /// lock order (the sessions row, then the runs row); a claim that loses
    /// then has moved the session row, and its transaction must be rolled
    /// back ([`Applied::Undo`]).
    SessionFirst,
    /// Before it, so that a change that loses writes nothing at all (SQLite
    /// has one writer and no row locks).
    GuardFirst,
}

impl Order {
    /// The order a store's row locks need.
    pub(super) fn of(dialect: checkfu_store::Dialect) -> Order {
        match dialect {
            checkfu_store::Dialect::Postgres => Order::SessionFirst,
            checkfu_store::Dialect::Sqlite => Order::GuardFirst,
        }
    }
}

/// How one change went inside the caller's transaction.
#[derive(Debug)]
pub(super) enum Applied {
    Done(Box<(Session, Vec<Event>)>),
    /// Its compare-and-set or its claim lost before anything was written.
    Lost,
    /// Its claim lost after its session row moved ([`Order::SessionFirst`]):
    /// the transaction holds a write that must not commit.
    Undo,
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

/// The Session's compare-and-set: only the writer that read
/// `expected_version` moves the row, and it alone assigns the next seqs
/// (`$1`–`$17`, bound by [`bind_compare_and_set`]).
const COMPARE_AND_SET: &str = "UPDATE sessions SET status = $1, stop_reason_json = $2, title = $3, metadata_json = $4, budget_id = $5, \
     input_tokens = $6, output_tokens = $7, spend_micro_usd = $8, selection_json = $9, last_seq = last_seq + $10, last_user_message_seq = $11, \
     updated_ms = $12, version = version + 1, budget_json = $15, outcome_json = $16, threads_json = $17 WHERE id = $13 AND version = $14";

fn bind_compare_and_set<'q>(q: Query<'q, Any, AnyArguments>, c: &'q Change) -> Query<'q, Any, AnyArguments> {
    let se = &c.session;
    bind_state(q, se)
        .bind(c.events.len() as i64)
        .bind(se.last_user_message_seq)
        .bind(se.updated_ms)
        .bind(&se.id)
        .bind(c.expected_version)
        .bind(se.budget.as_ref().map(to_json))
        .bind(se.outcome.as_ref().map(to_json))
        .bind(to_json(&se.threads))
}

/// One change inside the caller's transaction. `traceparent` is the trace
/// of the request that made the change.
pub(super) async fn apply(conn: &mut AnyConnection, c: &Change, order: Order, traceparent: &str) -> Result<Applied> {
    if order == Order::GuardFirst && !claim_holds(conn, c).await? {
        return Ok(Applied::Lost);
    }
    let se = &c.session;
    let sql = format!("{COMPARE_AND_SET} RETURNING last_seq, version");
    let row = bind_compare_and_set(sqlx::query(AssertSqlSafe(sql)), c).fetch_optional(&mut *conn).await.map_err(db_err)?;
    let Some(row) = row else {
        return Ok(Applied::Lost);
    };
    if order == Order::SessionFirst && !claim_holds(conn, c).await? {
        return Ok(Applied::Undo);
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
    Ok(Applied::Done(Box::new((after, events))))
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

/// The Session's changing state, bound in the order both the insert and
/// the update list it (status through selection).
fn bind_state<'q>(q: Query<'q, Any, AnyArguments>, se: &'q Session) -> Query<'q, Any, AnyArguments> {
    q.bind(se.status.as_str())
        .bind(se.stop_reason.as_ref().map(to_json))
        .bind(&se.title)
        .bind(se.metadata.to_string())
        .bind(se.budget_id())
        .bind(se.usage.input_tokens)
        .bind(se.usage.output_tokens)
        .bind(se.usage.model_spend_micro_usd)
        .bind(to_json(&se.selection))
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
    bind_state(
        sqlx::query(
        "INSERT INTO sessions (id, environment_id, agent_id, deployment_id, deployment_revision, principal_id, status, stop_reason_json, title, metadata_json, budget_id, \
         input_tokens, output_tokens, spend_micro_usd, selection_json, pins_json, last_seq, last_user_message_seq, created_ms, updated_ms, version, budget_json, \
         outcome_json, threads_json, connection_vault_ids_json, delivery_screen_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)",
    )
    .bind(&se.id)
    .bind(&se.environment_id)
    .bind(&se.agent_id)
    .bind(&se.deployment_id)
    .bind(se.deployment_revision)
    .bind(&se.principal_id),
        se,
    )
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
    .bind(se.delivery_screen.as_ref().map(to_json))
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

/// The events' columns, in the order [`bind_events`] binds them.
const EVENT_COLUMNS: &str =
    "session_id, seq, id, type, run_id, thread_id, origin_event_id, authored_by_json, caused_by_json, payload_json, created_ms";
const EVENT_VALUES: usize = 11;

/// `events` as the log's rows, with consecutive seqs from `first_seq`.
fn numbered(session_id: &SessionId, first_seq: i64, events: &[NewEvent]) -> Vec<Event> {
    events
        .iter()
        .enumerate()
        .map(|(n, e)| Event {
            id: e.id.clone(),
            session_id: session_id.clone(),
            seq: first_seq + n as i64,
            event_type: e.event_type.clone(),
            run_id: e.run_id.clone(),
            thread_id: e.thread_id.clone(),
            origin_event_id: e.origin_event_id.clone(),
            authored_by: e.authored_by.clone(),
            caused_by: e.caused_by.clone(),
            payload: e.payload.clone(),
            created_ms: e.created_ms,
        })
        .collect()
}

/// Binds `events` ([`EVENT_COLUMNS`], in order).
fn bind_events<'q>(mut q: Query<'q, Any, AnyArguments>, events: &[Event]) -> Query<'q, Any, AnyArguments> {
    for e in events {
        q = q
            .bind(e.session_id.clone())
            .bind(e.seq)
            .bind(e.id.clone())
            .bind(e.event_type.clone())
            .bind(e.run_id.clone())
            .bind(e.thread_id.clone())
            .bind(e.origin_event_id.clone())
            .bind(e.authored_by.to_string())
            .bind(e.caused_by.to_string())
            .bind(e.payload.to_string())
            .bind(e.created_ms);
    }
    q
}

/// Inserts events with consecutive seqs from `first_seq`, in one statement.
async fn insert_events(conn: &mut AnyConnection, session_id: &SessionId, first_seq: i64, events: &[NewEvent]) -> Result<Vec<Event>> {
    if events.is_empty() {
        return Ok(vec![]);
    }
    let sql = format!("INSERT INTO events ({EVENT_COLUMNS}) VALUES {}", checkfu_store::value_rows(events.len(), EVENT_VALUES));
    let out = numbered(session_id, first_seq, events);
    bind_events(sqlx::query(AssertSqlSafe(sql)), &out).execute(&mut *conn).await.map_err(db_err)?;
    Ok(out)
}

/// Whether `c` can be written as one statement ([`apply_in_one`]): events
/// and nothing beside them — no claim to check, no Run or Outcome row.
pub(super) fn in_one_statement(c: &Change) -> bool {
    c.claim_guard.is_none() && c.runs.is_empty() && !c.outcome_changed && !c.events.is_empty()
}

/// `rows` groups of `cols` parameters from `$first`, each cast to its
/// column's type (`types`), for a `VALUES` list whose types PostgreSQL
/// cannot take from a target column.
fn typed_rows(first: usize, rows: usize, types: &[&str]) -> String {
    (0..rows)
        .map(|r| {
            let marks: Vec<String> = types.iter().enumerate().map(|(c, t)| format!("${}::{t}", first + r * types.len() + c)).collect();
            format!("({})", marks.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One change as one statement on PostgreSQL: the Session's
/// compare-and-set, its events and their outbox rows in one data-modifying
/// `WITH`, the inserts taking place only when the update did — one round
/// trip where there were three, and a transaction of its own when it is
/// not in a group. The seqs continue from the `last_seq` the change was
/// decided from, which the compare-and-set checks with the version.
pub(super) async fn apply_in_one(conn: &mut AnyConnection, c: &Change, traceparent: &str) -> Result<Applied> {
    const EVENT_TYPES: [&str; EVENT_VALUES] = ["text", "bigint", "text", "text", "text", "text", "text", "text", "text", "text", "bigint"];
    const STAGED_TYPES: [&str; checkfu_bus::outbox::STAGED_VALUES] = ["text", "text", "text", "text", "text", "bigint"];
    let se = &c.session;
    let events = numbered(&se.id, se.last_seq + 1, &c.events);
    let records = session_records(se, &events, traceparent);
    let events_from = 19;
    let staged_from = events_from + events.len() * EVENT_VALUES;
    let sql = format!(
        "WITH s AS ({COMPARE_AND_SET} AND last_seq = $18 RETURNING last_seq, version), \
         e AS (INSERT INTO events ({EVENT_COLUMNS}) SELECT * FROM (VALUES {}) AS v WHERE EXISTS (SELECT 1 FROM s)), \
         o AS (INSERT INTO outbox ({}) SELECT * FROM (VALUES {}) AS v WHERE EXISTS (SELECT 1 FROM s)) \
         SELECT last_seq, version FROM s",
        typed_rows(events_from, events.len(), &EVENT_TYPES),
        checkfu_bus::outbox::STAGED_COLUMNS,
        typed_rows(staged_from, records.len(), &STAGED_TYPES),
    );
    let q = bind_compare_and_set(sqlx::query(AssertSqlSafe(sql)), c).bind(se.last_seq);
    let q = checkfu_bus::outbox::bind_staged(bind_events(q, &events), &records)?;
    let Some(row) = q.fetch_optional(&mut *conn).await.map_err(db_err)? else {
        return Ok(Applied::Lost);
    };
    let mut after = se.clone();
    after.last_seq = i(&row, "last_seq")?;
    after.version = i(&row, "version")?;
    Ok(Applied::Done(Box::new((after, events))))
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
        .bind(r.stop_reason.as_ref().map(to_json))
        .bind(to_json(&r.execution_pins))
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
