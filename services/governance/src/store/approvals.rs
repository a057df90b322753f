//! Storage of ActionApprovals and StandingApprovals, and its SQL
//! implementation (one text for both dialects).

use super::SqlGovernanceStore;
use crate::model::{ActionApproval, ApprovalStatus, Frozen, StandingApproval};
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{db_err, find_one, flag, is_unique_violation, list_in_envs, list_in_envs_with};

#[async_trait::async_trait]
pub trait ApprovalStore: Send + Sync + 'static {
    /// False when the same `(session_id, tool_use_id)` already has one.
    async fn insert_approval(&self, a: &ActionApproval) -> Result<bool>;
    async fn get_approval(&self, id: &str) -> Result<Option<ActionApproval>>;
    async fn approval_for(&self, session_id: &str, tool_use_id: &str) -> Result<Option<ActionApproval>>;
    /// Newest first; `status` and `session_id` filter when not empty.
    async fn list_approvals(
        &self,
        environment_ids: &[String],
        status: &str,
        session_id: &str,
        page: &PageRequest,
    ) -> Result<Vec<ActionApproval>>;
    /// Writes a decision (or expiry) only while the row is still pending:
    /// of two racing responses exactly one wins.
    async fn decide_approval(&self, a: &ActionApproval) -> Result<bool>;
    async fn overdue_approvals(&self, now_ms: i64, limit: i64) -> Result<Vec<ActionApproval>>;
    /// Decided or expired, not yet recorded by the Session; oldest first.
    /// An Automation's approval steps' (`steps`), or Sessions'.
    async fn unsettled_approvals(&self, steps: bool, limit: i64) -> Result<Vec<ActionApproval>>;
    async fn mark_settled(&self, id: &str) -> Result<bool>;

    async fn insert_standing(&self, s: &StandingApproval) -> Result<()>;
    async fn get_standing(&self, id: &str) -> Result<Option<StandingApproval>>;
    async fn list_standing(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<StandingApproval>>;
    /// A live (unrevoked, unexpired) StandingApproval on exactly this tuple.
    async fn covering_standing(
        &self,
        environment_id: &str,
        principal_id: &str,
        agent_id: &str,
        tool: &str,
        connection_id: &str,
        now_ms: i64,
    ) -> Result<Option<StandingApproval>>;
    async fn revoke_standing(&self, id: &str, at_ms: i64) -> Result<bool>;
}

fn approval(r: &AnyRow) -> Result<ActionApproval> {
    let s = |c: &str| r.try_get::<String, _>(c).map_err(db_err);
    let frozen: serde_json::Value =
        serde_json::from_str(&s("frozen_json")?).map_err(|e| Error::internal(format!("stored approval unreadable: {e}")))?;
    Ok(ActionApproval {
        id: r.try_get("id").map_err(db_err)?,
        environment_id: r.try_get("environment_id").map_err(db_err)?,
        status: ApprovalStatus::parse("status", &s("status")?)?,
        session_id: r.try_get("session_id").map_err(db_err)?,
        run_id: r.try_get("run_id").map_err(db_err)?,
        tool_use_id: s("tool_use_id")?,
        frozen: Frozen::from_json(&frozen),
        response_token: s("response_token")?,
        expires_ms: r.try_get("expires_ms").map_err(db_err)?,
        responder_principal_id: s("responder_principal_id")?,
        responded_ms: r.try_get("responded_ms").map_err(db_err)?,
        decision: s("decision")?,
        standing_approval_id: s("standing_approval_id")?,
        settled: r.try_get::<i64, _>("settled").map_err(db_err)? != 0,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
        deny_message: s("deny_message")?,
        automation_firing_id: s("automation_firing_id")?,
        step_id: s("step_id")?,
    })
}

fn standing(r: &AnyRow) -> Result<StandingApproval> {
    let s = |c: &str| r.try_get::<String, _>(c).map_err(db_err);
    Ok(StandingApproval {
        id: r.try_get("id").map_err(db_err)?,
        environment_id: r.try_get("environment_id").map_err(db_err)?,
        principal_id: r.try_get("principal_id").map_err(db_err)?,
        agent_id: r.try_get("agent_id").map_err(db_err)?,
        tool: s("tool")?,
        connection_id: s("connection_id")?,
        expires_ms: r.try_get("expires_ms").map_err(db_err)?,
        created_from_approval_id: r.try_get("created_from_approval_id").map_err(db_err)?,
        created_by: s("created_by")?,
        revoked_ms: r.try_get("revoked_ms").map_err(db_err)?,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
    })
}

impl SqlGovernanceStore {
    async fn approvals_where(&self, sql: &'static str, binds: &[&str], num: &[i64]) -> Result<Vec<ActionApproval>> {
        let mut q = sqlx::query(sql);
        for b in binds {
            q = q.bind(*b);
        }
        for n in num {
            q = q.bind(*n);
        }
        q.fetch_all(&self.db.pool).await.map_err(db_err)?.iter().map(approval).collect()
    }
}

#[async_trait::async_trait]
impl ApprovalStore for SqlGovernanceStore {
    async fn insert_approval(&self, a: &ActionApproval) -> Result<bool> {
        let r = sqlx::query(
            "INSERT INTO action_approvals (id, environment_id, status, session_id, run_id, tool_use_id, frozen_json, response_token, \
             expires_ms, responder_principal_id, responded_ms, decision, standing_approval_id, settled, created_ms, \
             automation_firing_id, step_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
        )
        .bind(&a.id)
        .bind(&a.environment_id)
        .bind(a.status.as_str())
        .bind(&a.session_id)
        .bind(&a.run_id)
        .bind(&a.tool_use_id)
        .bind(a.frozen.to_json().to_string())
        .bind(&a.response_token)
        .bind(a.expires_ms)
        .bind(&a.responder_principal_id)
        .bind(a.responded_ms)
        .bind(&a.decision)
        .bind(&a.standing_approval_id)
        .bind(flag(a.settled))
        .bind(a.created_ms)
        .bind(&a.automation_firing_id)
        .bind(&a.step_id)
        .execute(&self.db.pool)
        .await;
        match r {
            Ok(_) => Ok(true),
            Err(e) if is_unique_violation(&e) => Ok(false),
            Err(e) => Err(db_err(e)),
        }
    }

    async fn get_approval(&self, id: &str) -> Result<Option<ActionApproval>> {
        Ok(self.approvals_where("SELECT * FROM action_approvals WHERE id = $1", &[id], &[]).await?.pop())
    }

    async fn approval_for(&self, session_id: &str, tool_use_id: &str) -> Result<Option<ActionApproval>> {
        let sql = "SELECT * FROM action_approvals WHERE session_id = $1 AND tool_use_id = $2";
        Ok(self.approvals_where(sql, &[session_id, tool_use_id], &[]).await?.pop())
    }

    async fn list_approvals(
        &self,
        environment_ids: &[String],
        status: &str,
        session_id: &str,
        page: &PageRequest,
    ) -> Result<Vec<ActionApproval>> {
        let sql = "SELECT * FROM action_approvals WHERE environment_id = $1 AND id < $2 AND ($4 = '' OR status = $4) \
                   AND ($5 = '' OR session_id = $5) ORDER BY id DESC LIMIT $3";
        list_in_envs_with(&self.db, sql, environment_ids, &[status, session_id], page, approval, |a| &a.id).await
    }

    async fn decide_approval(&self, a: &ActionApproval) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE action_approvals SET status = $1, decision = $2, responder_principal_id = $3, responded_ms = $4, \
             response_token = $5, standing_approval_id = $6, deny_message = $7 WHERE id = $8 AND status = 'pending'",
        )
        .bind(a.status.as_str())
        .bind(&a.decision)
        .bind(&a.responder_principal_id)
        .bind(a.responded_ms)
        .bind(&a.response_token)
        .bind(&a.standing_approval_id)
        .bind(&a.deny_message)
        .bind(&a.id)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }

    async fn overdue_approvals(&self, now_ms: i64, limit: i64) -> Result<Vec<ActionApproval>> {
        let sql = "SELECT * FROM action_approvals WHERE status = 'pending' AND expires_ms < $1 ORDER BY expires_ms LIMIT $2";
        self.approvals_where(sql, &[], &[now_ms, limit]).await
    }

    async fn unsettled_approvals(&self, steps: bool, limit: i64) -> Result<Vec<ActionApproval>> {
        let sql = if steps {
            "SELECT * FROM action_approvals WHERE settled = 0 AND status <> 'pending' AND automation_firing_id <> '' ORDER BY id LIMIT $1"
        } else {
            "SELECT * FROM action_approvals WHERE settled = 0 AND status <> 'pending' AND automation_firing_id = '' ORDER BY id LIMIT $1"
        };
        self.approvals_where(sql, &[], &[limit]).await
    }

    async fn mark_settled(&self, id: &str) -> Result<bool> {
        let r = sqlx::query("UPDATE action_approvals SET settled = 1 WHERE id = $1 AND status <> 'pending'")
            .bind(id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }

    async fn insert_standing(&self, s: &StandingApproval) -> Result<()> {
        sqlx::query(
            "INSERT INTO standing_approvals (id, environment_id, principal_id, agent_id, tool, connection_id, expires_ms, \
             created_from_approval_id, created_by, revoked_ms, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(&s.id)
        .bind(&s.environment_id)
        .bind(&s.principal_id)
        .bind(&s.agent_id)
        .bind(&s.tool)
        .bind(&s.connection_id)
        .bind(s.expires_ms)
        .bind(&s.created_from_approval_id)
        .bind(&s.created_by)
        .bind(s.revoked_ms)
        .bind(s.created_ms)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn get_standing(&self, id: &str) -> Result<Option<StandingApproval>> {
        find_one(&self.db, "SELECT * FROM standing_approvals WHERE id = $1", id, standing).await
    }

    async fn list_standing(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<StandingApproval>> {
        let sql = "SELECT * FROM standing_approvals WHERE environment_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3";
        list_in_envs(&self.db, sql, environment_ids, page, standing, |s| &s.id).await
    }

    async fn covering_standing(
        &self,
        environment_id: &str,
        principal_id: &str,
        agent_id: &str,
        tool: &str,
        connection_id: &str,
        now_ms: i64,
    ) -> Result<Option<StandingApproval>> {
        sqlx::query(
            "SELECT * FROM standing_approvals WHERE environment_id = $1 AND principal_id = $2 AND agent_id = $3 AND tool = $4 \
             AND connection_id = $5 AND revoked_ms IS NULL AND expires_ms > $6 ORDER BY id DESC LIMIT 1",
        )
        .bind(environment_id)
        .bind(principal_id)
        .bind(agent_id)
        .bind(tool)
        .bind(connection_id)
        .bind(now_ms)
        .fetch_optional(&self.db.pool)
        .await
        .map_err(db_err)?
        .as_ref()
        .map(standing)
        .transpose()
    }

    async fn revoke_standing(&self, id: &str, at_ms: i64) -> Result<bool> {
        let r = sqlx::query("UPDATE standing_approvals SET revoked_ms = $1 WHERE id = $2 AND revoked_ms IS NULL")
            .bind(at_ms)
            .bind(id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }
}
