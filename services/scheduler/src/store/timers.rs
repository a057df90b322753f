//! Occurrence timers: one row per pending occurrence, taken by exactly one
//! replica. Taking moves `due_ms` to the end of the taker's lease in the
//! same statement that checks it is due, so a second taker finds it not
//! due (PostgreSQL re-checks the condition on the row it waited for;
//! SQLite has one writer); a holder that dies leaves the timer due again
//! when its lease ends. Finishing is a compare-and-set on the holder and
//! the occurrence, so a write that re-armed the timer meanwhile wins.

use super::{i, s};
use crate::model::{Arm, Timer};
use checkfu_core::Result;
use checkfu_core::id::{AutomationId, TypedId};
use checkfu_store::sqlx::{self, Any, Transaction};
use checkfu_store::{Db, db_err};

/// `due_ms` of a dormant timer: kept, never due until woken.
pub const DORMANT: i64 = i64::MAX;

/// Applies a write's `arm` to an Automation's occurrence timer, releasing
/// any hold on it.
pub(super) async fn arm(tx: &mut Transaction<'_, Any>, automation_id: &AutomationId, arm: Arm) -> Result<()> {
    let q = match arm {
        Arm::Keep => return Ok(()),
        Arm::Set { at, awake } => sqlx::query(
            "INSERT INTO timers (id, kind, automation_id, scheduled_for_ms, due_ms, holder) VALUES ($1, 'occurrence', $1, $2, $3, '') \
             ON CONFLICT (id) DO UPDATE SET scheduled_for_ms = $2, due_ms = $3, holder = ''",
        )
        .bind(automation_id.as_str())
        .bind(at)
        .bind(if awake { at } else { DORMANT }),
        Arm::Sleep => sqlx::query("UPDATE timers SET due_ms = $2, holder = '' WHERE id = $1").bind(automation_id.as_str()).bind(DORMANT),
        Arm::Wake => sqlx::query("UPDATE timers SET due_ms = scheduled_for_ms, holder = '' WHERE id = $1").bind(automation_id.as_str()),
        Arm::Clear => sqlx::query("DELETE FROM timers WHERE id = $1").bind(automation_id.as_str()),
    };
    q.execute(&mut **tx).await.map_err(db_err)?;
    Ok(())
}

/// A `step_wait`'s timer (`{firing}/{step}`), due at `due_ms`; arming it
/// again changes nothing.
pub(super) async fn arm_wait(tx: &mut Transaction<'_, Any>, id: &str, automation_id: &AutomationId, due_ms: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO timers (id, kind, automation_id, scheduled_for_ms, due_ms, holder) VALUES ($1, 'wait', $2, $3, $3, '') \
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(id)
    .bind(automation_id.as_str())
    .bind(due_ms)
    .execute(&mut **tx)
    .await
    .map_err(db_err)?;
    Ok(())
}

pub(super) async fn claim_due(db: &Db, holder: &str, now_ms: i64, lease_until_ms: i64, limit: i64) -> Result<Vec<Timer>> {
    let rows = sqlx::query(
        "UPDATE timers SET holder = $1, due_ms = $2 WHERE due_ms <= $3 AND id IN \
         (SELECT id FROM timers WHERE due_ms <= $3 ORDER BY due_ms LIMIT $4) \
         RETURNING id, kind, automation_id, scheduled_for_ms, holder",
    )
    .bind(holder)
    .bind(lease_until_ms)
    .bind(now_ms)
    .bind(limit)
    .fetch_all(&db.pool)
    .await
    .map_err(db_err)?;
    let mut out = rows
        .iter()
        .map(|r| {
            Ok(Timer {
                id: s(r, "id")?,
                kind: s(r, "kind")?,
                automation_id: TypedId::stored(s(r, "automation_id")?),
                scheduled_for_ms: i(r, "scheduled_for_ms")?,
                holder: s(r, "holder")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    out.sort_by_key(|t| t.scheduled_for_ms);
    Ok(out)
}

pub(super) async fn finish(db: &Db, t: &Timer, arm: Arm) -> Result<bool> {
    let q = match arm {
        Arm::Keep => return Ok(true),
        Arm::Set { at, awake } => sqlx::query(
            "UPDATE timers SET scheduled_for_ms = $4, due_ms = $5, holder = '' WHERE id = $1 AND holder = $2 AND scheduled_for_ms = $3",
        )
        .bind(&t.id)
        .bind(&t.holder)
        .bind(t.scheduled_for_ms)
        .bind(at)
        .bind(if awake { at } else { DORMANT }),
        Arm::Sleep => sqlx::query("UPDATE timers SET due_ms = $4, holder = '' WHERE id = $1 AND holder = $2 AND scheduled_for_ms = $3")
            .bind(&t.id)
            .bind(&t.holder)
            .bind(t.scheduled_for_ms)
            .bind(DORMANT),
        Arm::Wake => {
            sqlx::query("UPDATE timers SET due_ms = scheduled_for_ms, holder = '' WHERE id = $1 AND holder = $2 AND scheduled_for_ms = $3")
                .bind(&t.id)
                .bind(&t.holder)
                .bind(t.scheduled_for_ms)
        }
        Arm::Clear => sqlx::query("DELETE FROM timers WHERE id = $1 AND holder = $2 AND scheduled_for_ms = $3")
            .bind(&t.id)
            .bind(&t.holder)
            .bind(t.scheduled_for_ms),
    };
    Ok(q.execute(&db.pool).await.map_err(db_err)?.rows_affected() == 1)
}

pub(super) async fn next_due(db: &Db) -> Result<Option<i64>> {
    let row =
        sqlx::query("SELECT MIN(due_ms) AS due FROM timers WHERE due_ms < $1").bind(DORMANT).fetch_one(&db.pool).await.map_err(db_err)?;
    use checkfu_store::sqlx::Row;
    row.try_get::<Option<i64>, _>("due").map_err(db_err)
}
