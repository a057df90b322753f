//! WebhookSources and their registrations (api.md §18.9): one row each,
//! both as JSON, changed only by a compare-and-set on `version` with their
//! `provider_webhook_registration.*` events staged in the same
//! transaction. At most one live source per Automation (a unique index).

use super::{i, s};
use crate::webhook_source::SourceRow;
use checkfu_bus::Record;
use checkfu_bus::outbox::stage;
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, any::AnyRow};
use checkfu_store::{Db, db_err};

fn row(r: &AnyRow) -> Result<SourceRow> {
    let unreadable = |e: serde_json::Error| Error::internal(format!("a stored webhook source is unreadable: {e}"));
    Ok(SourceRow {
        source: serde_json::from_str(&s(r, "source_json")?).map_err(unreadable)?,
        registration: serde_json::from_str(&s(r, "registration_json")?).map_err(unreadable)?,
        version: i(r, "version")?,
    })
}

fn text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Inserts a new source unless its Automation has a live one: whether it
/// was inserted.
pub(super) async fn insert(db: &Db, x: &SourceRow, events: &[Record]) -> Result<bool> {
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    let made = sqlx::query(
        "INSERT INTO automation_webhook_sources (id, registration_id, automation_id, environment_id, provider, status, deleted_ms, \
         source_json, registration_json, created_ms, version) VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $8, $9, $10) ON CONFLICT DO NOTHING",
    )
    .bind(&x.source.id)
    .bind(&x.registration.id)
    .bind(&x.source.automation_id)
    .bind(&x.source.environment_id)
    .bind(&x.source.provider)
    .bind(&x.registration.status)
    .bind(text(&x.source))
    .bind(text(&x.registration))
    .bind(x.source.created_ms)
    .bind(x.version)
    .execute(&mut *tx)
    .await
    .map_err(db_err)?
    .rows_affected()
        == 1;
    if made {
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)?;
    }
    Ok(made)
}

/// Writes `x` if the row is still at `expected_version`.
pub(super) async fn update(db: &Db, x: &SourceRow, expected_version: i64, events: &[Record]) -> Result<bool> {
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    let done = sqlx::query(
        "UPDATE automation_webhook_sources SET status = $1, deleted_ms = $2, source_json = $3, registration_json = $4, version = $5 \
         WHERE id = $6 AND version = $7",
    )
    .bind(&x.registration.status)
    .bind(x.source.deleted_ms)
    .bind(text(&x.source))
    .bind(text(&x.registration))
    .bind(x.version)
    .bind(&x.source.id)
    .bind(expected_version)
    .execute(&mut *tx)
    .await
    .map_err(db_err)?
    .rows_affected()
        == 1;
    if done {
        stage(&mut tx, events).await?;
        tx.commit().await.map_err(db_err)?;
    }
    Ok(done)
}

pub(super) async fn get(db: &Db, id: &str) -> Result<Option<SourceRow>> {
    checkfu_store::find_one(db, "SELECT * FROM automation_webhook_sources WHERE id = $1", id, row).await
}

pub(super) async fn of_registration(db: &Db, id: &str) -> Result<Option<SourceRow>> {
    checkfu_store::find_one(db, "SELECT * FROM automation_webhook_sources WHERE registration_id = $1", id, row).await
}

/// The Automation's live source.
pub(super) async fn of_automation(db: &Db, automation_id: &str) -> Result<Option<SourceRow>> {
    checkfu_store::find_one(db, "SELECT * FROM automation_webhook_sources WHERE automation_id = $1 AND deleted_ms = 0", automation_id, row)
        .await
}

/// Newest first; `live` leaves deleted sources out; `status` (a
/// registration's) and `automation_id` narrow when not empty.
pub(super) async fn list(
    db: &Db,
    environment_ids: &[String],
    automation_id: &str,
    status: &str,
    live: bool,
    page: &PageRequest,
) -> Result<Vec<SourceRow>> {
    let live = if live { "live" } else { "" };
    checkfu_store::list_in_envs_with(
        db,
        "SELECT * FROM automation_webhook_sources WHERE environment_id = $1 AND id < $2 AND ($4 = '' OR automation_id = $4) \
         AND ($5 = '' OR status = $5) AND ($6 = '' OR deleted_ms = 0) ORDER BY id DESC LIMIT $3",
        environment_ids,
        &[automation_id, status, live],
        page,
        row,
        |x| &x.source.id,
    )
    .await
}
