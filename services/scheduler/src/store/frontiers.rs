//! History frontiers (api.md §18.7): where each of an Automation's named
//! frontiers stands, moved only by a compare-and-set from the position a
//! selection saw.

use super::s;
use crate::model::{Frontier, Moved};
use checkfu_core::Result;
use checkfu_store::sqlx::{self, any::AnyRow};
use checkfu_store::{Db, db_err};

fn frontier(r: &AnyRow) -> Result<Frontier> {
    Ok(Frontier { name: s(r, "name")?, position: s(r, "position")?, firing_id: s(r, "firing_id")? })
}

pub(super) async fn get(db: &Db, automation_id: &str, name: &str) -> Result<Option<Frontier>> {
    sqlx::query("SELECT name, position, firing_id FROM automation_frontiers WHERE automation_id = $1 AND name = $2")
        .bind(automation_id)
        .bind(name)
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(frontier)
        .transpose()
}

pub(super) async fn list(db: &Db, automation_id: &str) -> Result<Vec<Frontier>> {
    sqlx::query("SELECT name, position, firing_id FROM automation_frontiers WHERE automation_id = $1 ORDER BY name")
        .bind(automation_id)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(frontier)
        .collect()
}

/// Moves `name` from `base` (`""`: it has never moved) to `through` for
/// `firing`. Asked again after it moved — a crash before the firing saved
/// that — it answers [`Moved::Already`].
pub(super) async fn advance(
    db: &Db,
    automation_id: &str,
    name: &str,
    base: &str,
    through: &str,
    firing: &str,
    now_ms: i64,
) -> Result<Moved> {
    let done = if base.is_empty() {
        sqlx::query(
            "INSERT INTO automation_frontiers (automation_id, name, position, firing_id, updated_ms) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (automation_id, name) DO NOTHING",
        )
        .bind(automation_id)
        .bind(name)
        .bind(through)
        .bind(firing)
        .bind(now_ms)
        .execute(&db.pool)
        .await
    } else {
        sqlx::query(
            "UPDATE automation_frontiers SET position = $1, firing_id = $2, updated_ms = $3 \
             WHERE automation_id = $4 AND name = $5 AND position = $6",
        )
        .bind(through)
        .bind(firing)
        .bind(now_ms)
        .bind(automation_id)
        .bind(name)
        .bind(base)
        .execute(&db.pool)
        .await
    }
    .map_err(db_err)?;
    if done.rows_affected() == 1 {
        return Ok(Moved::Moved);
    }
    Ok(match get(db, automation_id, name).await? {
        Some(f) if f.position == through && f.firing_id == firing => Moved::Already,
        _ => Moved::Since,
    })
}
