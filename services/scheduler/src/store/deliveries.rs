//! Signed ingest's dedupe identities and the deliveries an admission filter
//! stopped (api.md §12.4). An identity is written in the same transaction
//! as what it became, so two racing deliveries of one event make one.

use super::{i, s};
use crate::model::{Delivery, FilteredDelivery};
use checkfu_core::Result;
use checkfu_core::id::{AutomationId, TypedId};
use checkfu_core::page::PageRequest;
use checkfu_store::sqlx::{self, Any, Transaction, any::AnyRow};
use checkfu_store::{Db, db_err, is_unique_violation};

fn delivery(r: &AnyRow) -> Result<Delivery> {
    Ok(Delivery {
        automation_id: TypedId::stored(s(r, "automation_id")?),
        dedupe_key: s(r, "dedupe_key")?,
        body_sha256: s(r, "body_sha256")?,
        firing_id: s(r, "firing_id")?,
        filtered_id: s(r, "filtered_id")?,
        created_ms: i(r, "created_ms")?,
    })
}

fn filtered(r: &AnyRow) -> Result<FilteredDelivery> {
    Ok(FilteredDelivery {
        id: TypedId::stored(s(r, "id")?),
        automation_id: TypedId::stored(s(r, "automation_id")?),
        dedupe_value: s(r, "dedupe_value")?,
        body_sha256: s(r, "body_sha256")?,
        predicate_index: i(r, "predicate_index")?,
        created_ms: i(r, "created_ms")?,
    })
}

/// Records an identity; false when it already has a delivery.
pub(super) async fn insert(tx: &mut Transaction<'_, Any>, d: &Delivery) -> Result<bool> {
    let r = sqlx::query(
        "INSERT INTO automation_deliveries (automation_id, dedupe_key, body_sha256, firing_id, filtered_id, created_ms) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&d.automation_id)
    .bind(&d.dedupe_key)
    .bind(&d.body_sha256)
    .bind(&d.firing_id)
    .bind(&d.filtered_id)
    .bind(d.created_ms)
    .execute(&mut **tx)
    .await;
    match r {
        Ok(_) => Ok(true),
        Err(e) if is_unique_violation(&e) => Ok(false),
        Err(e) => Err(db_err(e)),
    }
}

pub(super) async fn get(db: &Db, automation_id: &AutomationId, dedupe_key: &str) -> Result<Option<Delivery>> {
    let row = sqlx::query("SELECT * FROM automation_deliveries WHERE automation_id = $1 AND dedupe_key = $2")
        .bind(automation_id)
        .bind(dedupe_key)
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?;
    row.as_ref().map(delivery).transpose()
}

pub(super) async fn insert_filtered(db: &Db, f: &FilteredDelivery, d: &Delivery) -> Result<bool> {
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    if !insert(&mut tx, d).await? {
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO filtered_deliveries (id, automation_id, dedupe_value, body_sha256, reason, predicate_index, created_ms) \
         VALUES ($1, $2, $3, $4, 'admission_filter', $5, $6)",
    )
    .bind(&f.id)
    .bind(&f.automation_id)
    .bind(&f.dedupe_value)
    .bind(&f.body_sha256)
    .bind(f.predicate_index)
    .bind(f.created_ms)
    .execute(&mut *tx)
    .await
    .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    Ok(true)
}

pub(super) async fn get_filtered(db: &Db, id: &str) -> Result<Option<FilteredDelivery>> {
    checkfu_store::find_one(db, "SELECT * FROM filtered_deliveries WHERE id = $1", id, filtered).await
}

pub(super) async fn list_filtered(db: &Db, automation_id: &AutomationId, page: &PageRequest) -> Result<Vec<FilteredDelivery>> {
    let before = page.before();
    let rows = sqlx::query("SELECT * FROM filtered_deliveries WHERE automation_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3")
        .bind(automation_id)
        .bind(before)
        .bind(page.fetch_limit())
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    rows.iter().map(filtered).collect()
}

pub(super) async fn sweep(db: &Db, before_ms: i64) -> Result<u64> {
    let r =
        sqlx::query("DELETE FROM automation_deliveries WHERE created_ms < $1").bind(before_ms).execute(&db.pool).await.map_err(db_err)?;
    Ok(r.rows_affected())
}
