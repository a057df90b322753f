//! AutomationGraphs, their revisions and their apply journal. A revision
//! is written with the graph's compare-and-set on `version`, so two writers
//! never make the same revision number.

use super::{i, json, s};
use crate::graph::{Application, Graph, Revision};
use checkfu_core::Result;
use checkfu_core::id::{GraphId, TypedId};
use checkfu_core::page::PageRequest;
use checkfu_store::sqlx::{self, Any, Transaction, any::AnyRow};
use checkfu_store::{Db, db_err};

fn graph(r: &AnyRow) -> Result<Graph> {
    Ok(Graph {
        id: TypedId::stored(s(r, "id")?),
        environment_id: TypedId::stored(s(r, "environment_id")?),
        name: s(r, "name")?,
        service_principal_id: TypedId::stored(s(r, "service_principal_id")?),
        created_by_principal_id: s(r, "created_by_principal_id")?,
        latest_revision: i(r, "latest_revision")?,
        applied_revision: i(r, "applied_revision")?,
        applied_plan_sha256: s(r, "applied_plan_sha256")?,
        automation_id: s(r, "automation_id")?,
        layout: json(r, "layout_json")?,
        version: i(r, "version")?,
        deleted_ms: i(r, "deleted_ms")?,
        created_ms: i(r, "created_ms")?,
        updated_ms: i(r, "updated_ms")?,
    })
}

fn revision(r: &AnyRow) -> Result<Revision> {
    Ok(Revision {
        graph_id: TypedId::stored(s(r, "graph_id")?),
        revision: i(r, "revision")?,
        document: json(r, "document_json")?,
        document_sha256: s(r, "document_sha256")?,
        layout: json(r, "layout_json")?,
        created_by: s(r, "created_by")?,
        created_ms: i(r, "created_ms")?,
    })
}

fn application(r: &AnyRow) -> Result<Application> {
    Ok(Application {
        id: TypedId::stored(s(r, "id")?),
        graph_id: TypedId::stored(s(r, "graph_id")?),
        revision: i(r, "revision")?,
        plan_sha256: s(r, "plan_sha256")?,
        automation_id: s(r, "automation_id")?,
        action: s(r, "action")?,
        applied_by: s(r, "applied_by")?,
        created_ms: i(r, "created_ms")?,
    })
}

async fn insert_revision(tx: &mut Transaction<'_, Any>, r: &Revision) -> Result<()> {
    sqlx::query(
        "INSERT INTO graph_revisions (graph_id, revision, document_json, document_sha256, layout_json, created_by, created_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&r.graph_id)
    .bind(r.revision)
    .bind(r.document.to_string())
    .bind(&r.document_sha256)
    .bind(r.layout.to_string())
    .bind(&r.created_by)
    .bind(r.created_ms)
    .execute(&mut **tx)
    .await
    .map_err(db_err)?;
    Ok(())
}

pub(super) async fn insert(db: &Db, g: &Graph, r: &Revision) -> Result<()> {
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    sqlx::query(
        "INSERT INTO automation_graphs (id, environment_id, name, service_principal_id, created_by_principal_id, latest_revision, \
         applied_revision, applied_plan_sha256, automation_id, layout_json, version, deleted_ms, created_ms, updated_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
    )
    .bind(&g.id)
    .bind(&g.environment_id)
    .bind(&g.name)
    .bind(&g.service_principal_id)
    .bind(&g.created_by_principal_id)
    .bind(g.latest_revision)
    .bind(g.applied_revision)
    .bind(&g.applied_plan_sha256)
    .bind(&g.automation_id)
    .bind(g.layout.to_string())
    .bind(g.version)
    .bind(g.deleted_ms)
    .bind(g.created_ms)
    .bind(g.updated_ms)
    .execute(&mut *tx)
    .await
    .map_err(db_err)?;
    insert_revision(&mut tx, r).await?;
    tx.commit().await.map_err(db_err)
}

/// Writes `g` if the stored row is at `expected_version`, with a new
/// revision and a journal entry when given; false when it moved.
pub(super) async fn update(db: &Db, g: &Graph, expected_version: i64, r: Option<&Revision>, app: Option<&Application>) -> Result<bool> {
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    let moved = sqlx::query(
        "UPDATE automation_graphs SET name = $1, latest_revision = $2, applied_revision = $3, applied_plan_sha256 = $4, \
         automation_id = $5, layout_json = $6, version = $7, deleted_ms = $8, updated_ms = $9 \
         WHERE id = $10 AND version = $11 AND deleted_ms = 0",
    )
    .bind(&g.name)
    .bind(g.latest_revision)
    .bind(g.applied_revision)
    .bind(&g.applied_plan_sha256)
    .bind(&g.automation_id)
    .bind(g.layout.to_string())
    .bind(g.version)
    .bind(g.deleted_ms)
    .bind(g.updated_ms)
    .bind(&g.id)
    .bind(expected_version)
    .execute(&mut *tx)
    .await
    .map_err(db_err)?
    .rows_affected();
    if moved != 1 {
        return Ok(false);
    }
    if let Some(r) = r {
        insert_revision(&mut tx, r).await?;
    }
    if let Some(a) = app {
        sqlx::query(
            "INSERT INTO graph_applications (id, graph_id, revision, plan_sha256, automation_id, action, applied_by, created_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&a.id)
        .bind(&a.graph_id)
        .bind(a.revision)
        .bind(&a.plan_sha256)
        .bind(&a.automation_id)
        .bind(&a.action)
        .bind(&a.applied_by)
        .bind(a.created_ms)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    }
    tx.commit().await.map_err(db_err)?;
    Ok(true)
}

pub(super) async fn get(db: &Db, id: &GraphId) -> Result<Option<Graph>> {
    checkfu_store::find_one(db, "SELECT * FROM automation_graphs WHERE id = $1", id.as_str(), graph).await
}

pub(super) async fn list(db: &Db, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Graph>> {
    checkfu_store::list_in_envs_with(
        db,
        "SELECT * FROM automation_graphs WHERE environment_id = $1 AND id < $2 AND deleted_ms = 0 ORDER BY id DESC LIMIT $3",
        environment_ids,
        &[],
        page,
        graph,
        |g| &g.id,
    )
    .await
}

pub(super) async fn get_revision(db: &Db, id: &GraphId, n: i64) -> Result<Option<Revision>> {
    let row = sqlx::query("SELECT * FROM graph_revisions WHERE graph_id = $1 AND revision = $2")
        .bind(id)
        .bind(n)
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?;
    row.as_ref().map(revision).transpose()
}

/// Newest first, below revision `before` (`None`: from the latest).
pub(super) async fn list_revisions(db: &Db, id: &GraphId, before: Option<i64>, limit: i64) -> Result<Vec<Revision>> {
    let before = before.unwrap_or(i64::MAX);
    let rows = sqlx::query("SELECT * FROM graph_revisions WHERE graph_id = $1 AND revision < $2 ORDER BY revision DESC LIMIT $3")
        .bind(id)
        .bind(before)
        .bind(limit)
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    rows.iter().map(revision).collect()
}

pub(super) async fn list_applications(db: &Db, id: &GraphId, page: &PageRequest) -> Result<Vec<Application>> {
    let before = page.before();
    let rows = sqlx::query("SELECT * FROM graph_applications WHERE graph_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3")
        .bind(id)
        .bind(before)
        .bind(page.fetch_limit())
        .fetch_all(&db.pool)
        .await
        .map_err(db_err)?;
    rows.iter().map(application).collect()
}
