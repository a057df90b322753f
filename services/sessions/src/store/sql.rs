//! SQL implementation of [`SessionsStore`], one text for both dialects.

use super::group_commit::GroupCommit;
use super::rows::*;
use super::{Change, SessionFilter, SessionsStore, View};
use crate::model::*;
use checkfu_bus::Record;
use checkfu_bus::outbox::stage;
use checkfu_bus::resource_record;
use checkfu_core::Result;
use checkfu_core::id::{AgentId, BudgetId, DeploymentId, RunId, SandboxProfileId, SessionId};
use checkfu_core::page::PageRequest;
use checkfu_store::sqlx::{self, Any, Row};
use checkfu_store::{Db, db_err, find_one, flag, list_in_envs};

#[derive(Clone, Debug)]
pub struct SqlSessionsStore {
    pub(super) db: Db,
    /// The log's writes, committed in groups (group_commit.rs).
    group: GroupCommit,
}

type Query<'q> = sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>;

impl SqlSessionsStore {
    /// The store on `db`; this starts the log's group-commit writers (so it
    /// needs a Tokio runtime).
    pub fn new(db: Db) -> Self {
        let group = GroupCommit::start(db.clone());
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
            .fetch_optional(&self.db.reads)
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
            .fetch_all(&self.db.reads)
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
            .fetch_one(&self.db.reads)
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
            .fetch_optional(&self.db.reads)
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
        .fetch_optional(&self.db.reads)
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
        self.group.create(se.clone(), events.to_vec(), runs.to_vec()).await
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
                .fetch_all(&self.db.reads)
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
        self.group.commit(c).await
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
        let rows = q.fetch_all(&self.db.reads).await.map_err(db_err)?;
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
            .fetch_all(&self.db.reads)
            .await
            .map_err(db_err)?
            .iter()
            .map(outcome)
            .collect()
    }

    async fn grading_sessions(&self, limit: i64) -> Result<Vec<SessionId>> {
        sqlx::query("SELECT session_id FROM outcomes WHERE grading = 1 ORDER BY session_id LIMIT $1")
            .bind(limit)
            .fetch_all(&self.db.reads)
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
            .fetch_all(&self.db.reads)
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
            .fetch_all(&self.db.reads)
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
        .fetch_all(&self.db.reads)
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
