//! `continue_selected` inputs (api.md §18.4), recorded under their key in
//! the write that admits them and accepted once the sessions service
//! answered with the event and its Run.

use super::{i, s, to_json};
use crate::model::ChildRequest;
use crate::session_input::{Continuation, InputRecord, SessionInput};
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, Any, Transaction, any::AnyRow};
use checkfu_store::{Db, db_err};

fn record(r: &AnyRow) -> Result<InputRecord> {
    let run_id = s(r, "run_id")?;
    let session_id = s(r, "session_id")?;
    Ok(InputRecord {
        key: s(r, "input_key")?,
        firing_id: s(r, "firing_id")?,
        step_id: s(r, "step_id")?,
        event_seq: i(r, "event_seq")?,
        accepted: (!run_id.is_empty()).then(|| SessionInput {
            session_id: session_id.clone(),
            event_id: s(r, "event_id").unwrap_or_default(),
            run_id,
        }),
        session_id,
    })
}

/// Records a pending input; one already recorded under its key stays.
pub(super) async fn insert(tx: &mut Transaction<'_, Any>, c: &ChildRequest, k: &Continuation, created_ms: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO automation_inputs (input_key, firing_id, step_id, session_id, event_id, event_seq, run_id, created_ms, request_json) \
         VALUES ($1, $2, $3, $4, $5, 0, '', $6, $7) ON CONFLICT (input_key) DO NOTHING",
    )
    .bind(&k.key)
    .bind(&c.firing_id)
    .bind(&c.step_id)
    .bind(&c.session_id)
    .bind(&k.event_id)
    .bind(created_ms)
    .bind(to_json(c))
    .execute(&mut **tx)
    .await
    .map_err(db_err)?;
    Ok(())
}

pub(super) async fn accept(db: &Db, key: &str, input: &SessionInput, event_seq: i64) -> Result<()> {
    sqlx::query("UPDATE automation_inputs SET event_seq = $1, run_id = $2 WHERE input_key = $3")
        .bind(event_seq)
        .bind(&input.run_id)
        .bind(key)
        .execute(&db.pool)
        .await
        .map_err(db_err)?;
    Ok(())
}

/// Forgets a pending input that was refused (nothing was appended).
pub(super) async fn drop_pending(db: &Db, key: &str) -> Result<()> {
    sqlx::query("DELETE FROM automation_inputs WHERE input_key = $1 AND run_id = ''").bind(key).execute(&db.pool).await.map_err(db_err)?;
    Ok(())
}

/// Pending inputs recorded before `before_ms`, oldest first, as asked for.
pub(super) async fn pending(db: &Db, before_ms: i64, limit: i64) -> Result<Vec<ChildRequest>> {
    let rows = sqlx::query("SELECT request_json FROM automation_inputs WHERE run_id = '' AND created_ms < $1 ORDER BY created_ms LIMIT $2")
        .bind(before_ms)
        .bind(limit)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    rows.iter()
        .map(|r| serde_json::from_str(&s(r, "request_json")?).map_err(|e| Error::internal(format!("a pending input is unreadable: {e}"))))
        .collect()
}

/// The inputs into a Session whose firings are still running, with the
/// request each was asked with.
pub(super) async fn open_into(db: &Db, session_id: &str) -> Result<Vec<(InputRecord, ChildRequest)>> {
    let rows = sqlx::query(
        "SELECT i.* FROM automation_inputs i JOIN automation_firings f ON f.id = i.firing_id \
         WHERE i.session_id = $1 AND f.state = 'running' ORDER BY i.created_ms LIMIT 100",
    )
    .bind(session_id)
    .fetch_all(&db.pool)
    .await
    .map_err(db_err)?;
    rows.iter()
        .map(|r| {
            let request = serde_json::from_str(&s(r, "request_json")?)
                .map_err(|e| Error::internal(format!("a recorded input is unreadable: {e}")))?;
            Ok((record(r)?, request))
        })
        .collect()
}

/// A firing's inputs, in the order they were admitted.
pub(super) async fn of_firing(db: &Db, firing_id: &str) -> Result<Vec<InputRecord>> {
    let rows = sqlx::query("SELECT * FROM automation_inputs WHERE firing_id = $1 ORDER BY created_ms, input_key")
        .bind(firing_id)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    rows.iter().map(record).collect()
}
