//! SkillProposals (api.md §18.7): one per firing and step — a second ask
//! answers the first — decided once by a compare-and-set on `version`,
//! their `skill_proposal.*` events staged in the same transaction.

use super::{i, s};
use crate::skill_proposal::SkillProposal;
use checkfu_bus::Record;
use checkfu_bus::outbox::stage;
use checkfu_core::Result;
use checkfu_core::id::TypedId;
use checkfu_core::page::PageRequest;
use checkfu_store::sqlx::{self, any::AnyRow};
use checkfu_store::{Db, db_err};

fn proposal(r: &AnyRow) -> Result<SkillProposal> {
    let skill = s(r, "skill_id")?;
    let adopted = s(r, "adopted_skill_id")?;
    Ok(SkillProposal {
        id: s(r, "id")?,
        environment_id: TypedId::stored(s(r, "environment_id")?),
        automation_id: s(r, "automation_id")?,
        firing_id: s(r, "firing_id")?,
        step_id: s(r, "step_id")?,
        skill_id: (!skill.is_empty()).then_some(skill),
        name: s(r, "name")?,
        status: s(r, "status")?,
        content: s(r, "content")?,
        content_sha256: s(r, "content_sha256")?,
        adopted: (!adopted.is_empty()).then(|| (adopted, i(r, "adopted_version").unwrap_or_default())),
        decided_by: s(r, "decided_by")?,
        decided_ms: i(r, "decided_ms")?,
        decision_note: s(r, "decision_note")?,
        created_ms: i(r, "created_ms")?,
        version: i(r, "version")?,
    })
}

async fn of_step(db: &Db, firing_id: &str, step_id: &str) -> Result<Option<SkillProposal>> {
    sqlx::query("SELECT * FROM automation_skill_proposals WHERE firing_id = $1 AND step_id = $2")
        .bind(firing_id)
        .bind(step_id)
        .fetch_optional(&db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(proposal)
        .transpose()
}

/// Inserts `p` with its events unless its firing and step have one: the
/// proposal that stands, and whether it is `p`.
pub(super) async fn propose(db: &Db, p: &SkillProposal, events: &[Record]) -> Result<(SkillProposal, bool)> {
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    let made = sqlx::query(
        "INSERT INTO automation_skill_proposals (id, environment_id, automation_id, firing_id, step_id, skill_id, name, status, content, \
         content_sha256, adopted_skill_id, adopted_version, decided_by, decided_ms, decision_note, created_ms, version) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, '', 0, '', 0, '', $11, 1) ON CONFLICT (firing_id, step_id) DO NOTHING",
    )
    .bind(&p.id)
    .bind(p.environment_id.as_str())
    .bind(&p.automation_id)
    .bind(&p.firing_id)
    .bind(&p.step_id)
    .bind(p.skill_id.clone().unwrap_or_default())
    .bind(&p.name)
    .bind(&p.status)
    .bind(&p.content)
    .bind(&p.content_sha256)
    .bind(p.created_ms)
    .execute(&mut *tx)
    .await
    .map_err(db_err)?
    .rows_affected()
        == 1;
    if made {
        stage(&mut tx, events).await?;
    }
    tx.commit().await.map_err(db_err)?;
    let kept = of_step(db, &p.firing_id, &p.step_id).await?.ok_or_else(|| checkfu_core::Error::internal("a proposal just made is gone"))?;
    Ok((kept, made))
}

pub(super) async fn get(db: &Db, id: &str) -> Result<Option<SkillProposal>> {
    checkfu_store::find_one(db, "SELECT * FROM automation_skill_proposals WHERE id = $1", id, proposal).await
}

pub(super) async fn list(db: &Db, environment_ids: &[String], status: &str, page: &PageRequest) -> Result<Vec<SkillProposal>> {
    checkfu_store::list_in_envs_with(
        db,
        "SELECT * FROM automation_skill_proposals WHERE environment_id = $1 AND id < $2 AND ($4 = '' OR status = $4) ORDER BY id DESC LIMIT $3",
        environment_ids,
        &[status],
        page,
        proposal,
        |p| &p.id,
    )
    .await
}

/// Writes a decision if the proposal is still at `expected_version` and
/// open.
pub(super) async fn decide(db: &Db, p: &SkillProposal, expected_version: i64, events: &[Record]) -> Result<bool> {
    let mut tx = db.pool.begin().await.map_err(db_err)?;
    let (skill, version) = p.adopted.clone().unwrap_or_default();
    let done = sqlx::query(
        "UPDATE automation_skill_proposals SET status = $1, adopted_skill_id = $2, adopted_version = $3, decided_by = $4, decided_ms = $5, \
         decision_note = $6, version = $7 WHERE id = $8 AND version = $9 AND status = 'open'",
    )
    .bind(&p.status)
    .bind(skill)
    .bind(version)
    .bind(&p.decided_by)
    .bind(p.decided_ms)
    .bind(&p.decision_note)
    .bind(p.version)
    .bind(&p.id)
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

/// The latest version of `skill_id` adopted from one of the Automation's
/// proposals.
pub(super) async fn adopted(db: &Db, automation_id: &str, skill_id: &str) -> Result<Option<i64>> {
    let row = sqlx::query(
        "SELECT adopted_version FROM automation_skill_proposals WHERE automation_id = $1 AND adopted_skill_id = $2 \
         ORDER BY adopted_version DESC LIMIT 1",
    )
    .bind(automation_id)
    .bind(skill_id)
    .fetch_optional(&db.pool)
    .await
    .map_err(db_err)?;
    row.as_ref().map(|r| i(r, "adopted_version")).transpose()
}
