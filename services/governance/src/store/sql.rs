//! SQL implementation of [`GovernanceStore`], one text for both dialects.

use super::GovernanceStore;
use crate::model::*;
use crate::policy::{ActionPolicy, Rule};
use checkfu_bus::Record;
use checkfu_bus::outbox::stage;
use checkfu_core::id::{AssignmentId, EnvironmentId, GroupId, KeyId, PolicyId, PrincipalId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{Db, db_err, find_one, flag, list_in_envs};

/// An Environment lifecycle event for the outbox, keyed by the Environment
/// (which is its own Environment).
fn environment_record(event_type: &str, id: &str) -> Record {
    checkfu_bus::resource_record(event_type, id, id)
}

#[derive(Clone, Debug)]
pub struct SqlGovernanceStore {
    pub(super) db: Db,
}

impl SqlGovernanceStore {
    pub fn new(db: Db) -> Self {
        SqlGovernanceStore { db }
    }
}

fn principal(r: &AnyRow) -> Result<Principal> {
    Ok(Principal {
        id: r.try_get("id").map_err(db_err)?,
        kind: PrincipalKind::parse("kind", &r.try_get::<String, _>("kind").map_err(db_err)?)?,
        name: r.try_get("name").map_err(db_err)?,
        disabled: r.try_get::<i64, _>("disabled").map_err(db_err)? != 0,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
    })
}

fn api_key(r: &AnyRow) -> Result<ApiKey> {
    Ok(ApiKey {
        id: r.try_get("id").map_err(db_err)?,
        principal_id: r.try_get("principal_id").map_err(db_err)?,
        name: r.try_get("name").map_err(db_err)?,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
        revoked_ms: r.try_get("revoked_ms").map_err(db_err)?,
    })
}

fn environment(r: &AnyRow) -> Result<Environment> {
    Ok(Environment {
        id: r.try_get("id").map_err(db_err)?,
        name: r.try_get("name").map_err(db_err)?,
        version: r.try_get("version").map_err(db_err)?,
        disabled: r.try_get::<i64, _>("disabled").map_err(db_err)? != 0,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
    })
}

pub(super) fn assignment(r: &AnyRow) -> Result<Assignment> {
    let s = |c: &str| r.try_get::<String, _>(c).map_err(db_err);
    Ok(Assignment {
        id: r.try_get("id").map_err(db_err)?,
        subject_kind: SubjectKind::parse("subject.kind", &s("subject_kind")?)?,
        subject_id: s("subject_id")?,
        permission: Permission::parse("permission", &s("permission")?)?,
        resource_kind: ResourceKind::parse("resource.kind", &s("resource_kind")?)?,
        resource_id: s("resource_id")?,
        environment_id: Some(r.try_get::<EnvironmentId, _>("environment_id").map_err(db_err)?).filter(|e| !e.is_empty()),
        created_by: s("created_by")?,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
        via: Some(Via { kind: s("via_kind")?, id: s("via_id")? }).filter(|v| !v.kind.is_empty()),
    })
}

fn policy(r: &AnyRow) -> Result<ActionPolicy> {
    let s = |c: &str| r.try_get::<String, _>(c).map_err(db_err);
    let rules: Vec<Rule> = serde_json::from_str(&s("rules_json")?).map_err(|e| Error::internal(format!("stored rules unreadable: {e}")))?;
    let id: PolicyId = r.try_get("id").map_err(db_err)?;
    // Rule ids are positional and not stored; re-derive them.
    let rules = rules.into_iter().enumerate().map(|(i, r)| Rule { id: format!("{id}#{i}"), ..r }).collect();
    Ok(ActionPolicy {
        id,
        environment_id: r.try_get("environment_id").map_err(db_err)?,
        name: s("name")?,
        rules,
        version: r.try_get("version").map_err(db_err)?,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
        updated_ms: r.try_get("updated_ms").map_err(db_err)?,
    })
}

fn rules_json(p: &ActionPolicy) -> String {
    serde_json::to_string(&p.rules).unwrap_or_else(|_| "[]".into())
}

fn audit(r: &AnyRow) -> Result<AuditRecord> {
    let s = |c: &str| r.try_get::<String, _>(c).map_err(db_err);
    Ok(AuditRecord {
        id: r.try_get("id").map_err(db_err)?,
        actor_id: s("actor_id")?,
        action: s("action")?,
        resource_kind: s("resource_kind")?,
        resource_id: s("resource_id")?,
        details: serde_json::from_str(&s("details_json")?).map_err(|e| Error::internal(e.to_string()))?,
        created_ms: r.try_get("created_ms").map_err(db_err)?,
    })
}

/// `before` is the page cursor: rows with a smaller id, newest first.
const INSERT_PRINCIPAL: &str = "INSERT INTO principals (id, kind, name, disabled, created_ms) VALUES ($1, $2, $3, $4, $5)";
const INSERT_KEY: &str =
    "INSERT INTO api_keys (id, principal_id, name, secret_sha256, created_ms, revoked_ms) VALUES ($1, $2, $3, $4, $5, NULL)";
const INSERT_ENV: &str = "INSERT INTO environments (id, name, version, disabled, created_ms) VALUES ($1, $2, $3, $4, $5)";
pub(super) const INSERT_ASSIGNMENT: &str = "INSERT INTO permission_assignments (id, subject_kind, subject_id, permission, resource_kind, resource_id, environment_id, created_by, created_ms, via_kind, via_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";

macro_rules! bind_principal {
    ($q:expr, $p:expr) => {
        $q.bind(&$p.id).bind($p.kind.as_str()).bind(&$p.name).bind(flag($p.disabled)).bind($p.created_ms)
    };
}
macro_rules! bind_key {
    ($q:expr, $k:expr, $sha:expr) => {
        $q.bind(&$k.id).bind(&$k.principal_id).bind(&$k.name).bind($sha).bind($k.created_ms)
    };
}
macro_rules! bind_env {
    ($q:expr, $e:expr) => {
        $q.bind(&$e.id).bind(&$e.name).bind($e.version).bind(flag($e.disabled)).bind($e.created_ms)
    };
}

/// Binds an assignment's columns, in `INSERT_ASSIGNMENT`'s order.
pub(super) fn bind_assignment<'q>(
    q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    a: &'q Assignment,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    q.bind(&a.id)
        .bind(a.subject_kind.as_str())
        .bind(&a.subject_id)
        .bind(a.permission.as_str())
        .bind(a.resource_kind.as_str())
        .bind(&a.resource_id)
        // '' for an installation-wide assignment (the column is NOT NULL).
        .bind(a.environment_id.as_deref().unwrap_or(""))
        .bind(&a.created_by)
        .bind(a.created_ms)
        // '' for a direct row.
        .bind(a.via.as_ref().map_or("", |v| v.kind.as_str()))
        .bind(a.via.as_ref().map_or("", |v| v.id.as_str()))
}

#[async_trait::async_trait]
impl GovernanceStore for SqlGovernanceStore {
    async fn is_empty(&self) -> Result<bool> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM principals").fetch_one(&self.db.pool).await.map_err(db_err)?;
        Ok(row.try_get::<i64, _>("n").map_err(db_err)? == 0)
    }

    async fn bootstrap(&self, admin: &Principal, grant: &Assignment, env: &Environment, key: &ApiKey, secret_sha256: &str) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        // The singleton row decides a race between replicas starting at once.
        let first = sqlx::query("INSERT INTO installation (id, bootstrapped_ms) VALUES ('installation', $1)")
            .bind(now_ms())
            .execute(&mut *tx)
            .await;
        match first {
            Ok(_) => {}
            Err(e) if checkfu_store::is_unique_violation(&e) => return Ok(false),
            Err(e) => return Err(db_err(e)),
        }
        let n: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM principals").fetch_one(&mut *tx).await.map_err(db_err)?.try_get("n").map_err(db_err)?;
        if n > 0 {
            return Ok(false);
        }
        bind_principal!(sqlx::query(INSERT_PRINCIPAL), admin).execute(&mut *tx).await.map_err(db_err)?;
        bind_assignment(sqlx::query(INSERT_ASSIGNMENT), grant).execute(&mut *tx).await.map_err(db_err)?;
        bind_env!(sqlx::query(INSERT_ENV), env).execute(&mut *tx).await.map_err(db_err)?;
        bind_key!(sqlx::query(INSERT_KEY), key, secret_sha256).execute(&mut *tx).await.map_err(db_err)?;
        stage(&mut tx, &[environment_record("environment.created", &env.id)]).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn insert_principal(&self, p: &Principal) -> Result<()> {
        bind_principal!(sqlx::query(INSERT_PRINCIPAL), p).execute(&self.db.pool).await.map_err(db_err)?;
        Ok(())
    }

    async fn get_principal(&self, id: &PrincipalId) -> Result<Option<Principal>> {
        find_one(&self.db, "SELECT * FROM principals WHERE id = $1", id, principal).await
    }

    async fn list_principals(&self, page: &PageRequest) -> Result<Vec<Principal>> {
        sqlx::query("SELECT * FROM principals WHERE id < $1 ORDER BY id DESC LIMIT $2")
            .bind(page.before())
            .bind(page.fetch_limit())
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(principal)
            .collect()
    }

    async fn set_principal_disabled(&self, id: &PrincipalId, disabled: bool) -> Result<Option<Principal>> {
        sqlx::query("UPDATE principals SET disabled = $1 WHERE id = $2")
            .bind(flag(disabled))
            .bind(id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        self.get_principal(id).await
    }

    async fn insert_api_key(&self, key: &ApiKey, secret_sha256: &str) -> Result<()> {
        bind_key!(sqlx::query(INSERT_KEY), key, secret_sha256).execute(&self.db.pool).await.map_err(db_err)?;
        Ok(())
    }

    async fn get_api_key(&self, id: &KeyId) -> Result<Option<ApiKey>> {
        find_one(&self.db, "SELECT * FROM api_keys WHERE id = $1", id, api_key).await
    }

    async fn count_active_api_keys(&self, principal_id: &PrincipalId) -> Result<i64> {
        sqlx::query_scalar("SELECT COUNT(*) FROM api_keys WHERE principal_id = $1 AND revoked_ms IS NULL")
            .bind(principal_id)
            .fetch_one(&self.db.pool)
            .await
            .map_err(db_err)
    }

    async fn list_api_keys(&self, principal_id: &PrincipalId, page: &PageRequest) -> Result<Vec<ApiKey>> {
        sqlx::query("SELECT * FROM api_keys WHERE principal_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3")
            .bind(principal_id)
            .bind(page.before())
            .bind(page.fetch_limit())
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(api_key)
            .collect()
    }

    async fn revoke_api_key(&self, id: &KeyId, at_ms: i64) -> Result<Option<ApiKey>> {
        sqlx::query("UPDATE api_keys SET revoked_ms = $1 WHERE id = $2 AND revoked_ms IS NULL")
            .bind(at_ms)
            .bind(id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        self.get_api_key(id).await
    }

    async fn insert_group(&self, g: &Group) -> Result<()> {
        sqlx::query("INSERT INTO groups_ (id, name, created_ms) VALUES ($1, $2, $3)")
            .bind(&g.id)
            .bind(&g.name)
            .bind(g.created_ms)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn get_group(&self, id: &GroupId) -> Result<Option<Group>> {
        let Some(row) = sqlx::query("SELECT * FROM groups_ WHERE id = $1").bind(id).fetch_optional(&self.db.pool).await.map_err(db_err)?
        else {
            return Ok(None);
        };
        let members = sqlx::query("SELECT principal_id FROM group_members WHERE group_id = $1 ORDER BY principal_id")
            .bind(id)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(|r| r.try_get("principal_id").map_err(db_err))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(Group {
            id: row.try_get("id").map_err(db_err)?,
            name: row.try_get("name").map_err(db_err)?,
            member_ids: members,
            created_ms: row.try_get("created_ms").map_err(db_err)?,
        }))
    }

    async fn list_groups(&self, page: &PageRequest) -> Result<Vec<Group>> {
        let ids: Vec<GroupId> = sqlx::query("SELECT id FROM groups_ WHERE id < $1 ORDER BY id DESC LIMIT $2")
            .bind(page.before())
            .bind(page.fetch_limit())
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(|r| r.try_get::<GroupId, _>("id").map_err(db_err))
            .collect::<Result<_>>()?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(g) = self.get_group(&id).await? {
                out.push(g);
            }
        }
        Ok(out)
    }

    async fn add_group_member(&self, group_id: &GroupId, principal_id: &PrincipalId) -> Result<()> {
        let sql = "INSERT INTO group_members (group_id, principal_id) VALUES ($1, $2) ON CONFLICT DO NOTHING";
        sqlx::query(sql).bind(group_id).bind(principal_id).execute(&self.db.pool).await.map_err(db_err)?;
        Ok(())
    }

    async fn remove_group_member(&self, group_id: &GroupId, principal_id: &PrincipalId) -> Result<bool> {
        let r = sqlx::query("DELETE FROM group_members WHERE group_id = $1 AND principal_id = $2")
            .bind(group_id)
            .bind(principal_id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(r.rows_affected() > 0)
    }

    async fn groups_of(&self, principal_id: &str) -> Result<Vec<String>> {
        sqlx::query("SELECT group_id FROM group_members WHERE principal_id = $1")
            .bind(principal_id)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(|r| r.try_get::<String, _>("group_id").map_err(db_err))
            .collect()
    }

    async fn insert_environment(&self, e: &Environment) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        bind_env!(sqlx::query(INSERT_ENV), e).execute(&mut *tx).await.map_err(db_err)?;
        stage(&mut tx, &[environment_record("environment.created", &e.id)]).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(())
    }

    async fn get_environment(&self, id: &EnvironmentId) -> Result<Option<Environment>> {
        find_one(&self.db, "SELECT * FROM environments WHERE id = $1", id, environment).await
    }

    async fn list_environments(&self, page: &PageRequest) -> Result<Vec<Environment>> {
        sqlx::query("SELECT * FROM environments WHERE id < $1 ORDER BY id DESC LIMIT $2")
            .bind(page.before())
            .bind(page.fetch_limit())
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(environment)
            .collect()
    }

    async fn update_environment(&self, e: &Environment, expected_version: i64) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let r = sqlx::query("UPDATE environments SET disabled = $1, version = $2 WHERE id = $3 AND version = $4")
            .bind(flag(e.disabled))
            .bind(e.version)
            .bind(&e.id)
            .bind(expected_version)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        if r.rows_affected() != 1 {
            return Ok(false);
        }
        stage(&mut tx, &[environment_record("environment.updated", &e.id)]).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn insert_assignment(&self, a: &Assignment) -> Result<()> {
        bind_assignment(sqlx::query(INSERT_ASSIGNMENT), a).execute(&self.db.pool).await.map_err(db_err)?;
        Ok(())
    }

    async fn get_assignment(&self, id: &AssignmentId) -> Result<Option<Assignment>> {
        find_one(&self.db, "SELECT * FROM permission_assignments WHERE id = $1", id, assignment).await
    }

    async fn list_assignments(&self, f: &AssignmentFilter, page: &PageRequest) -> Result<Vec<Assignment>> {
        sqlx::query(
            "SELECT * FROM permission_assignments WHERE id < $1 \
             AND ($2 = '' OR subject_id = $2) AND ($3 = '' OR resource_id = $3) AND ($4 = '' OR permission = $4) \
             ORDER BY id DESC LIMIT $5",
        )
        .bind(page.before())
        // Stored and matched as text: '' stands for "any" in the query.
        .bind(f.subject_id.as_deref().unwrap_or(""))
        .bind(f.resource_id.as_deref().unwrap_or(""))
        .bind(f.permission.map_or("", Permission::as_str))
        .bind(page.fetch_limit())
        .fetch_all(&self.db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(assignment)
        .collect()
    }

    async fn delete_assignment(&self, id: &AssignmentId) -> Result<bool> {
        let r = sqlx::query("DELETE FROM permission_assignments WHERE id = $1").bind(id).execute(&self.db.pool).await.map_err(db_err)?;
        Ok(r.rows_affected() > 0)
    }

    async fn reach_of(&self, principal_id: &str) -> Result<Vec<Assignment>> {
        sqlx::query(
            "SELECT a.* FROM permission_assignments a JOIN principals p ON p.id = $1 AND p.disabled = 0 \
             WHERE a.subject_id = $1 OR a.subject_id IN (SELECT group_id FROM group_members WHERE principal_id = $1)",
        )
        .bind(principal_id)
        .fetch_all(&self.db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(assignment)
        .collect()
    }

    async fn authenticate(&self, secret_sha256: &str) -> Result<Option<(String, String)>> {
        let row = sqlx::query(
            "SELECT k.id AS key_id, p.id AS principal_id FROM api_keys k JOIN principals p ON p.id = k.principal_id \
             WHERE k.secret_sha256 = $1 AND k.revoked_ms IS NULL AND p.disabled = 0",
        )
        .bind(secret_sha256)
        .fetch_optional(&self.db.pool)
        .await
        .map_err(db_err)?;
        row.map(|r| Ok((r.try_get("principal_id").map_err(db_err)?, r.try_get("key_id").map_err(db_err)?))).transpose()
    }

    async fn insert_policy(&self, p: &ActionPolicy) -> Result<()> {
        sqlx::query("INSERT INTO action_policies (id, environment_id, name, rules_json, version, created_ms, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)")
            .bind(&p.id)
            .bind(&p.environment_id)
            .bind(&p.name)
            .bind(rules_json(p))
            .bind(p.version)
            .bind(p.created_ms)
            .bind(p.updated_ms)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn get_policy(&self, id: &PolicyId) -> Result<Option<ActionPolicy>> {
        find_one(&self.db, "SELECT * FROM action_policies WHERE id = $1", id, policy).await
    }

    async fn list_policies(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<ActionPolicy>> {
        let sql = "SELECT * FROM action_policies WHERE environment_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3";
        list_in_envs(&self.db, sql, environment_ids, page, policy, |p| &p.id).await
    }

    async fn policy_named(&self, environment_id: &str, name: &str) -> Result<Option<ActionPolicy>> {
        sqlx::query("SELECT * FROM action_policies WHERE environment_id = $1 AND name = $2")
            .bind(environment_id)
            .bind(name)
            .fetch_optional(&self.db.reads)
            .await
            .map_err(db_err)?
            .as_ref()
            .map(policy)
            .transpose()
    }

    async fn policies_in(&self, environment_id: &str) -> Result<Vec<ActionPolicy>> {
        sqlx::query("SELECT * FROM action_policies WHERE environment_id = $1")
            .bind(environment_id)
            .fetch_all(&self.db.pool)
            .await
            .map_err(db_err)?
            .iter()
            .map(policy)
            .collect()
    }

    async fn update_policy(&self, p: &ActionPolicy, expected_version: i64) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE action_policies SET name = $1, rules_json = $2, version = $3, updated_ms = $4 WHERE id = $5 AND version = $6",
        )
        .bind(&p.name)
        .bind(rules_json(p))
        .bind(p.version)
        .bind(p.updated_ms)
        .bind(&p.id)
        .bind(expected_version)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }

    async fn delete_policy(&self, id: &PolicyId) -> Result<bool> {
        let r = sqlx::query("DELETE FROM action_policies WHERE id = $1").bind(id).execute(&self.db.pool).await.map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }

    async fn insert_audit(&self, r: &AuditRecord) -> Result<()> {
        sqlx::query("INSERT INTO audit_events (id, actor_id, action, resource_kind, resource_id, details_json, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)")
            .bind(&r.id)
            .bind(&r.actor_id)
            .bind(&r.action)
            .bind(&r.resource_kind)
            .bind(&r.resource_id)
            .bind(r.details.to_string())
            .bind(r.created_ms)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn list_audit(&self, resource_id: &str, actor_id: &str, page: &PageRequest) -> Result<Vec<AuditRecord>> {
        sqlx::query(
            "SELECT * FROM audit_events WHERE id < $1 AND ($2 = '' OR resource_id = $2) AND ($3 = '' OR actor_id = $3) \
             ORDER BY id DESC LIMIT $4",
        )
        .bind(page.before())
        .bind(resource_id)
        .bind(actor_id)
        .bind(page.fetch_limit())
        .fetch_all(&self.db.pool)
        .await
        .map_err(db_err)?
        .iter()
        .map(audit)
        .collect()
    }
}
