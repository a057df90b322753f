//! ConnectionVaults: saving one compiles its `use_connection` rows, and an
//! edit adds and deletes exactly the difference, in the same transaction as
//! the vault, each row audited. A compiled row cannot be deleted directly
//! (409 `managed_by_vault`); direct rows are never touched. Archiving keeps
//! the record (and its metadata) readable and deletes its rows; an archived
//! vault takes no edits (409 `vault_archived`).
//!
//! The caller (the gateway) has checked `manage` on the Environment and
//! that every Connection and agent named belongs to it; Principals and
//! Groups are checked here, where they live.

use crate::model::*;
use crate::service::GovernanceService;
use checkfu_core::id::{AssignmentId, EnvironmentId, VaultId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result};
use serde_json::json;
use std::collections::BTreeMap;

/// A vault's edit: lists replace.
#[derive(Debug, Clone, Default)]
pub struct VaultChange {
    pub name: Option<String>,
    pub connection_ids: Option<Vec<String>>,
    pub grantees: Option<Vec<Grantee>>,
    /// Replaces the labels whole.
    pub metadata: Option<BTreeMap<String, String>>,
    pub expected_version: Option<i64>,
}

impl GovernanceService {
    /// Principals and Groups named as grantees must exist (400 otherwise:
    /// the body is wrong, not the path).
    async fn check_grantees(&self, grantees: &[Grantee]) -> Result<()> {
        for (i, g) in grantees.iter().enumerate() {
            let found = match g.kind.as_str() {
                "principal" => self.principal(&g.id).await.map(|_| ()),
                "group" => self.group(&g.id).await.map(|_| ()),
                _ => Ok(()),
            };
            if let Err(e) = found {
                return Err(if e.code == Code::NotFound {
                    Error::invalid_field(&format!("grantees[{i}].id"), format!("{} {} does not exist", g.kind, g.id))
                } else {
                    e
                });
            }
        }
        Ok(())
    }

    fn compiled(&self, v: &ConnectionVault, tuple: &(SubjectKind, String, String), actor: &str) -> Assignment {
        Assignment {
            id: AssignmentId::mint(),
            subject_kind: tuple.0,
            subject_id: tuple.1.clone(),
            permission: Permission::UseConnection,
            resource_kind: ResourceKind::Connection,
            resource_id: tuple.2.clone(),
            environment_id: Some(v.environment_id.clone()),
            created_by: actor.to_string(),
            created_ms: now_ms(),
            via: Some(Via { kind: VAULT_KIND.into(), id: v.id.to_string() }),
        }
    }

    async fn audit_rows(&self, actor: &str, action: &str, rows: &[Assignment]) -> Result<()> {
        for a in rows {
            let via = a.via.as_ref().map(|v| json!({"kind": v.kind, "id": v.id}));
            let details = json!({"subject": {"kind": a.subject_kind.as_str(), "id": a.subject_id}, "permission": a.permission.as_str(),
                "resource": {"kind": a.resource_kind.as_str(), "id": a.resource_id}, "via": via});
            self.audit(actor, action, "permission_assignment", &a.id, details).await?;
        }
        Ok(())
    }

    pub async fn create_vault(
        &self,
        environment_id: &str,
        name: &str,
        connection_ids: &[String],
        grantees: &[Grantee],
        metadata: BTreeMap<String, String>,
        actor: &str,
    ) -> Result<ConnectionVault> {
        let environment_id = EnvironmentId::parse("environment_id", environment_id)?;
        self.environment(&environment_id).await?;
        check_name("name", name)?;
        checkfu_core::metadata::check("metadata", &metadata)?;
        let (connection_ids, grantees) = check_lists(connection_ids, grantees)?;
        self.check_grantees(&grantees).await?;
        let now = now_ms();
        let v = ConnectionVault {
            id: VaultId::mint(),
            environment_id,
            name: name.into(),
            connection_ids,
            grantees,
            metadata,
            archived_ms: None,
            created_by: actor.into(),
            created_ms: now,
            updated_ms: now,
            version: 1,
        };
        let rows: Vec<Assignment> = v.tuples().iter().map(|t| self.compiled(&v, t, actor)).collect();
        self.store.insert_vault(&v, &rows).await?;
        let told = self.wrote().await;
        let details =
            json!({"environment_id": v.environment_id, "name": v.name, "connection_ids": v.connection_ids, "grantees": v.grantees});
        self.audit(actor, "connection_vault.created", "connection_vault", &v.id, details).await?;
        self.audit_rows(actor, "permission_assignment.created", &rows).await?;
        told.map(|()| v)
    }

    pub async fn vault(&self, id: &str) -> Result<ConnectionVault> {
        VaultId::check("id", id)?;
        self.store.get_vault(id).await?.ok_or_else(|| Error::not_found("connection_vault", id))
    }

    pub async fn list_vaults(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<ConnectionVault>> {
        self.store.list_vaults(environment_ids, page).await
    }

    pub async fn update_vault(&self, id: &str, ch: VaultChange, actor: &str) -> Result<ConnectionVault> {
        if let Some(n) = &ch.name {
            check_name("name", n)?;
        }
        if let Some(m) = &ch.metadata {
            checkfu_core::metadata::check("metadata", m)?;
        }
        for _ in 0..3 {
            let current = self.vault(id).await?;
            check_version(&current, ch.expected_version)?;
            if current.archived_ms.is_some() {
                return Err(archived(&current));
            }
            let (connection_ids, grantees) = check_lists(
                ch.connection_ids.as_deref().unwrap_or(&current.connection_ids),
                ch.grantees.as_deref().unwrap_or(&current.grantees),
            )?;
            self.check_grantees(&grantees).await?;
            let next = ConnectionVault {
                name: ch.name.clone().unwrap_or_else(|| current.name.clone()),
                connection_ids,
                grantees,
                metadata: ch.metadata.clone().unwrap_or_else(|| current.metadata.clone()),
                updated_ms: now_ms(),
                version: current.version + 1,
                ..current.clone()
            };
            // Exactly the difference: rows that stay keep their ids.
            let existing = self.store.rows_via(id).await?;
            let wanted = next.tuples();
            let key = |a: &Assignment| (a.subject_kind, a.subject_id.clone(), a.resource_id.clone());
            let remove: Vec<Assignment> = existing.iter().filter(|a| !wanted.contains(&key(a))).cloned().collect();
            let have: Vec<_> = existing.iter().map(key).collect();
            let add: Vec<Assignment> = wanted.iter().filter(|t| !have.contains(t)).map(|t| self.compiled(&next, t, actor)).collect();
            let remove_ids: Vec<AssignmentId> = remove.iter().map(|a| a.id.clone()).collect();
            if !self.store.update_vault(&next, current.version, &add, &remove_ids).await? {
                continue;
            }
            let told = self.wrote().await;
            let details = json!({"before": {"name": current.name, "connection_ids": current.connection_ids, "grantees": current.grantees, "metadata": current.metadata},
                "after": {"name": next.name, "connection_ids": next.connection_ids, "grantees": next.grantees, "metadata": next.metadata}});
            self.audit(actor, "connection_vault.updated", "connection_vault", &next.id, details).await?;
            self.audit_rows(actor, "permission_assignment.created", &add).await?;
            self.audit_rows(actor, "permission_assignment.deleted", &remove).await?;
            return told.map(|()| next);
        }
        Err(Error::conflict("the connection vault changed concurrently; read it again"))
    }

    /// Archives the vault: its rows go (audited), the record stays. Again
    /// → the archived vault, unchanged.
    pub async fn archive_vault(&self, id: &str, expected_version: Option<i64>, actor: &str) -> Result<ConnectionVault> {
        for _ in 0..3 {
            let current = self.vault(id).await?;
            check_version(&current, expected_version)?;
            if current.archived_ms.is_some() {
                return Ok(current);
            }
            let now = now_ms();
            let next = ConnectionVault { archived_ms: Some(now), updated_ms: now, version: current.version + 1, ..current.clone() };
            let rows = self.store.rows_via(id).await?;
            let ids: Vec<AssignmentId> = rows.iter().map(|a| a.id.clone()).collect();
            if !self.store.update_vault(&next, current.version, &[], &ids).await? {
                continue;
            }
            let told = self.wrote().await;
            self.audit(actor, "connection_vault.archived", "connection_vault", &next.id, json!({"name": next.name})).await?;
            self.audit_rows(actor, "permission_assignment.deleted", &rows).await?;
            return told.map(|()| next);
        }
        Err(Error::conflict("the connection vault changed concurrently; read it again"))
    }

    /// The live vaults listing a Connection.
    pub async fn vaults_holding(&self, connection_id: &str) -> Result<Vec<String>> {
        checkfu_core::id::ConnectionId::check("connection_id", connection_id)?;
        self.store.vaults_holding(connection_id).await
    }

    /// Deletes the vault and every row it compiled.
    pub async fn delete_vault(&self, id: &str, actor: &str) -> Result<ConnectionVault> {
        let v = self.vault(id).await?;
        let rows = self.store.rows_via(id).await?;
        if !self.store.delete_vault(id).await? {
            return Err(Error::not_found("connection_vault", id));
        }
        let told = self.wrote().await;
        self.audit(actor, "connection_vault.deleted", "connection_vault", &v.id, json!({"name": v.name})).await?;
        self.audit_rows(actor, "permission_assignment.deleted", &rows).await?;
        told.map(|()| v)
    }
}

fn check_version(current: &ConnectionVault, expected: Option<i64>) -> Result<()> {
    match expected {
        Some(v) if v != current.version => Err(Error::conflict(format!("connection vault is at version {}, not {v}", current.version))
            .with_details(json!({"current_version": current.version}))),
        _ => Ok(()),
    }
}

fn archived(v: &ConnectionVault) -> Error {
    Error::conflict(format!("connection vault {} is archived", v.id)).with_reason("vault_archived")
}
