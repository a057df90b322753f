//! The transactional outbox. A service stages its events in its own
//! database, in the same transaction as the change they describe
//! ([`stage`]); the [`Relay`] publishes them to the bus in outbox order and
//! deletes them only once the bus accepted them. With the bus down nothing
//! is lost and work goes on: the outbox grows, and drains in order when the
//! bus returns. One relay per service publishes at a time (a lease row), so
//! replicas do not reorder each other; a relay that dies hands over when
//! its lease expires, and what it may have published twice is deduplicated
//! by consumers on the record id.

use crate::{Bus, Record};
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, AssertSqlSafe, Row};
use checkfu_store::{Db, db_err};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const COLS: usize = 6;
/// Rows published per round.
const BATCH: i64 = 500;
const LEASE_MS: i64 = 10_000;
/// After a wake, how long to let further commits gather before a round.
const GATHER: Duration = Duration::from_millis(50);
/// How often the lag gauges are refreshed.
const LAG_EVERY: Duration = Duration::from_secs(1);

/// The outbox's columns, in the order [`bind_staged`] binds them.
pub const STAGED_COLUMNS: &str = "topic, msg_key, event_id, payload, headers_json, created_ms";
/// How many values each staged record binds.
pub const STAGED_VALUES: usize = COLS;

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

/// Binds `records` as outbox rows ([`STAGED_COLUMNS`], in order), staged now:
/// for a statement that inserts them with something else (the event log's
/// one-statement write).
pub fn bind_staged<'q>(mut q: AnyQuery<'q>, records: &[Record]) -> Result<AnyQuery<'q>> {
    let staged_ms = now_ms();
    for r in records {
        let headers = serde_json::to_string(&r.headers).map_err(|e| Error::internal(e.to_string()))?;
        q = q.bind(r.topic.clone()).bind(r.key.clone()).bind(r.id.clone()).bind(r.payload.clone()).bind(headers).bind(staged_ms);
    }
    Ok(q)
}

/// Stages `records` in the caller's transaction.
pub async fn stage(conn: &mut sqlx::AnyConnection, records: &[Record]) -> Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    let sql = format!("INSERT INTO outbox ({STAGED_COLUMNS}) VALUES {}", checkfu_store::value_rows(records.len(), COLS));
    bind_staged(sqlx::query(AssertSqlSafe(sql)), records)?.execute(&mut *conn).await.map_err(db_err)?;
    Ok(())
}

/// Publishes a service's outbox to the bus.
#[derive(Clone)]
pub struct Relay {
    db: Db,
    bus: Arc<dyn Bus>,
    service: String,
    holder: String,
    /// Woken after a commit staged records, so they go out at once.
    pub wake: Arc<Notify>,
}

/// How a relay round went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// Another relay holds the lease.
    NotLeader,
    /// Published this many records.
    Published(usize),
}

impl Relay {
    pub fn new(db: Db, bus: Arc<dyn Bus>, service: &str) -> Relay {
        Relay { db, bus, service: service.to_string(), holder: checkfu_core::id::new_id("relay"), wake: Arc::new(Notify::new()) }
    }

    /// Takes or renews the lease; false when another relay holds it.
    async fn lead(&self) -> Result<bool> {
        let now = now_ms();
        let r = sqlx::query(
            "INSERT INTO outbox_relay (name, holder, expires_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms \
             WHERE outbox_relay.holder = excluded.holder OR outbox_relay.expires_ms < $4",
        )
        .bind(&self.service)
        .bind(&self.holder)
        .bind(now + LEASE_MS)
        .bind(now)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }

    /// One round: publish the oldest staged records, then delete them.
    pub async fn round(&self) -> Result<Round> {
        if !self.lead().await? {
            return Ok(Round::NotLeader);
        }
        let rows = sqlx::query("SELECT id, topic, msg_key, event_id, payload, headers_json FROM outbox ORDER BY id LIMIT $1")
            .bind(BATCH)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?;
        let Some(last) = rows.last() else { return Ok(Round::Published(0)) };
        let last_id: i64 = last.try_get("id").map_err(db_err)?;
        let mut records = Vec::with_capacity(rows.len());
        for r in &rows {
            let s = |c: &str| r.try_get::<String, _>(c).map_err(db_err);
            let headers: Vec<(String, String)> =
                serde_json::from_str(&s("headers_json")?).map_err(|e| Error::internal(format!("outbox headers unreadable: {e}")))?;
            records.push(Record { topic: s("topic")?, key: s("msg_key")?, id: s("event_id")?, payload: s("payload")?, headers });
        }
        self.bus.publish(&records).await?;
        sqlx::query("DELETE FROM outbox WHERE id <= $1").bind(last_id).execute(&self.db.pool).await.map_err(db_err)?;
        Ok(Round::Published(records.len()))
    }

    /// How many records wait, and the age of the oldest in milliseconds.
    pub async fn lag(&self) -> Result<(i64, i64)> {
        let r =
            sqlx::query("SELECT COUNT(*) AS n, MIN(created_ms) AS oldest FROM outbox").fetch_one(&self.db.pool).await.map_err(db_err)?;
        let n: i64 = r.try_get("n").map_err(db_err)?;
        let oldest: Option<i64> = r.try_get("oldest").map_err(db_err)?;
        Ok((n, oldest.map_or(0, |o| (now_ms() - o).max(0))))
    }

    /// Relays until `stop`: at once after a wake, else every `idle`; backs
    /// off while the bus is unreachable.
    pub async fn run(self, idle: Duration, stop: CancellationToken) {
        let mut backoff = Duration::from_millis(200);
        let mut measured: Option<tokio::time::Instant> = None;
        loop {
            let wait = match self.round().await {
                Ok(Round::Published(n)) if n as i64 == BATCH => Duration::ZERO,
                Ok(Round::Published(_)) | Ok(Round::NotLeader) => {
                    backoff = Duration::from_millis(200);
                    idle
                }
                Err(e) => {
                    tracing::warn!(service = %self.service, error = %e, "outbox relay: the bus is unreachable; records stay staged");
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                    backoff
                }
            };
            // The lag gauges cost a query: at most once a second, not per round.
            if measured.is_none_or(|at| at.elapsed() >= LAG_EVERY)
                && let Ok((n, age)) = self.lag().await
            {
                measured = Some(tokio::time::Instant::now());
                metrics::gauge!("checkfu_outbox_pending", "service" => self.service.clone()).set(n as f64);
                metrics::gauge!("checkfu_outbox_oldest_age_seconds", "service" => self.service.clone()).set(age as f64 / 1000.0);
            }
            if wait.is_zero() {
                continue;
            }
            tokio::select! {
                () = stop.cancelled() => return,
                // Gather what a burst of commits stages into one round.
                () = self.wake.notified() => tokio::time::sleep(GATHER).await,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}
