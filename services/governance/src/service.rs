//! Governance rules. Callers (the gateway) decide *whether* an actor may ask;
//! this layer keeps the rows consistent: names valid, subjects existing,
//! revocations audited, checks following groups and the resource hierarchy.

use crate::model::*;
use crate::policy::{ActionPolicy, Actor, Decision, Disposition, Rule, SUBJECT_KINDS, check_rules, classify, evaluate};
use crate::read_cache::ReadCache;
use crate::store::GovernanceStore;
use checkfu_core::id::{AssignmentId, AuditId, EnvironmentId, GroupId, KeyId, PolicyId, PrincipalId, check as check_id};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result, sha256_hex};
use serde_json::json;
use std::sync::Arc;

/// A grant as asked for, before validation.
#[derive(Debug, Clone, Default)]
pub struct NewAssignment {
    pub subject_kind: String,
    pub subject_id: String,
    pub permission: String,
    pub resource_kind: String,
    pub resource_id: String,
    /// The Environment holding the resource, as resolved by the caller.
    pub environment_id: String,
}

/// What bootstrap made; `admin_api_key` is the only copy of the secret.
#[derive(Debug, Clone)]
pub struct Bootstrapped {
    pub created: bool,
    pub admin_principal_id: String,
    pub environment_id: String,
    pub admin_api_key: String,
}

/// Active (unrevoked) API keys one Principal may hold.
pub const MAX_ACTIVE_API_KEYS: i64 = 100;

/// Environments one lookup of a policy by name may name.
pub const MAX_NAMED_ENVIRONMENTS: usize = 100;

#[derive(Clone)]
pub struct GovernanceService {
    pub(crate) store: Arc<dyn GovernanceStore>,
    /// How long an ActionApproval waits for its response.
    pub(crate) approval_ttl_ms: i64,
    /// Keys and grants in memory, where this process is the store's only
    /// writer (see read_cache.rs).
    reads: Option<Arc<ReadCache>>,
    /// Where every replica's decision caches (the gateways') learn that a
    /// change happened: the `decisions` epoch, moved after each one.
    epochs: Option<Arc<dyn checkfu_ephemeral::Epochs>>,
}

/// A new API key secret: `ck_` and 256 random bits.
fn new_secret() -> String {
    checkfu_core::new_secret("ck_")
}

impl GovernanceService {
    pub fn new(store: Arc<dyn GovernanceStore>) -> Self {
        GovernanceService { store, approval_ttl_ms: crate::model::DEFAULT_APPROVAL_TTL_MS, reads: None, epochs: None }
    }

    /// Keeps API keys' principals and principals' grants in memory. Only for
    /// a store no other process writes (the embedded one).
    pub fn with_read_cache(mut self) -> Self {
        self.reads = Some(Arc::new(ReadCache::default()));
        self
    }

    /// Tells the decision caches of every replica that keys and grants
    /// change here: after each such write, [`Self::wrote`] moves `epochs`'
    /// `decisions` epoch before the write is answered.
    pub fn with_epochs(mut self, epochs: Arc<dyn checkfu_ephemeral::Epochs>) -> Self {
        self.epochs = Some(epochs);
        self
    }

    /// After a committed write that may change who a key is or what a
    /// principal holds: empties this process's cache and moves the epoch
    /// every decision cache reads, so any request that starts once the
    /// write is answered is decided on the new rows. When the epoch cannot
    /// be moved (Redis unreachable, three tries), the write is answered 503
    /// saying so: it is committed, and caches drop what they hold within
    /// their age bound (5 s) however they learn of it.
    pub(crate) async fn wrote(&self) -> Result<()> {
        if let Some(c) = &self.reads {
            c.invalidate();
        }
        let Some(epochs) = &self.epochs else { return Ok(()) };
        let Err(e) = checkfu_ephemeral::announce(epochs.as_ref(), checkfu_ephemeral::DECISIONS_EPOCH).await else { return Ok(()) };
        tracing::error!(error = %e.message, "a change to keys or grants is committed, but the decision caches could not be told");
        Err(Error::unavailable(
            "the change is saved, but the gateways' decision caches could not be told at once: they follow it within 5 s; retrying tells them",
        ))
    }

    /// A principal's grants, directly and through its groups.
    async fn reach_of(&self, principal_id: &str) -> Result<Arc<Vec<Assignment>>> {
        let Some(c) = &self.reads else { return Ok(Arc::new(self.store.reach_of(principal_id).await?)) };
        if let Some(hit) = c.reach(principal_id) {
            return Ok(hit);
        }
        let generation = c.generation();
        let grants = Arc::new(self.store.reach_of(principal_id).await?);
        c.put_reach(generation, principal_id, grants.clone());
        Ok(grants)
    }

    /// Sets how long ActionApprovals wait before expiring as denied.
    pub fn with_approval_ttl_ms(mut self, ms: i64) -> Self {
        self.approval_ttl_ms = ms.max(1);
        self
    }

    /// Readiness: the store answers.
    pub async fn ready(&self) -> bool {
        self.store.is_empty().await.is_ok()
    }

    /// Creates the first admin, the `default` Environment and an admin key on
    /// an empty installation; does nothing on a bootstrapped one.
    /// Bootstraps an empty installation. `place_key` receives the admin's
    /// new API key and must store it durably before anything is committed:
    /// an installation whose only admin key could not be written is never
    /// created. When another replica wins the race, `created` is false and
    /// the caller discards what it placed.
    pub async fn bootstrap(&self, place_key: impl FnOnce(&str) -> Result<()>) -> Result<Bootstrapped> {
        if !self.store.is_empty().await? {
            return Ok(Bootstrapped {
                created: false,
                admin_principal_id: String::new(),
                environment_id: String::new(),
                admin_api_key: String::new(),
            });
        }
        let now = now_ms();
        let admin =
            Principal { id: PrincipalId::mint(), kind: PrincipalKind::Human, name: "admin".into(), disabled: false, created_ms: now };
        let grant = Assignment {
            id: AssignmentId::mint(),
            subject_kind: SubjectKind::Principal,
            subject_id: admin.id.clone().into(),
            permission: Permission::Admin,
            resource_kind: ResourceKind::Installation,
            resource_id: "*".into(),
            environment_id: None,
            created_by: admin.id.clone().into(),
            created_ms: now,
            via: None,
        };
        let env = Environment { id: EnvironmentId::mint(), name: "default".into(), version: 1, disabled: false, created_ms: now };
        let secret = new_secret();
        let key = ApiKey { id: KeyId::mint(), principal_id: admin.id.clone(), name: "bootstrap".into(), created_ms: now, revoked_ms: None };
        place_key(&secret)?;
        let created = self.store.bootstrap(&admin, &grant, &env, &key, &sha256_hex(&secret)).await?;
        self.wrote().await?;
        Ok(Bootstrapped {
            created,
            admin_principal_id: if created { admin.id.into() } else { String::new() },
            environment_id: if created { env.id.into() } else { String::new() },
            admin_api_key: if created { secret } else { String::new() },
        })
    }

    /// Resolves a secret to its (enabled) principal and key; revoked keys and
    /// disabled principals fail exactly like unknown keys.
    pub async fn authenticate(&self, secret: &str) -> Result<(String, String)> {
        let invalid = || Error::new(checkfu_core::Code::InvalidKey, "the API key is not valid");
        if !secret.starts_with("ck_") || secret.len() > 200 {
            return Err(invalid());
        }
        let hash = sha256_hex(secret);
        let Some(c) = &self.reads else { return self.store.authenticate(&hash).await?.ok_or_else(invalid) };
        if let Some(hit) = c.key(&hash) {
            return Ok(hit);
        }
        let generation = c.generation();
        let found = self.store.authenticate(&hash).await?.ok_or_else(invalid)?;
        c.put_key(generation, &hash, found.clone());
        Ok(found)
    }

    pub(crate) async fn audit(&self, actor: &str, action: &str, kind: &str, id: &str, details: serde_json::Value) -> Result<()> {
        self.store
            .insert_audit(&AuditRecord {
                id: AuditId::mint(),
                actor_id: actor.to_string(),
                action: action.to_string(),
                resource_kind: kind.to_string(),
                resource_id: id.to_string(),
                details,
                created_ms: now_ms(),
            })
            .await
    }

    /// Records what another service changed (its own audit trail lives
    /// here, with everyone else's). Bounded: a record is evidence, not a
    /// store.
    pub async fn record_audit(&self, actor: &str, action: &str, kind: &str, id: &str, details: &str) -> Result<AuditRecord> {
        if actor.is_empty() || action.is_empty() || action.len() > 100 || kind.is_empty() || kind.len() > 64 || id.len() > 200 {
            return Err(Error::invalid("an audit record needs an actor, an action (≤ 100 bytes) and a resource"));
        }
        if details.len() > 64 * 1024 {
            return Err(Error::invalid("audit details are at most 64 KiB"));
        }
        let details: serde_json::Value = if details.is_empty() {
            json!({})
        } else {
            serde_json::from_str(details).map_err(|e| Error::invalid_field("details_json", format!("not JSON: {e}")))?
        };
        let record = AuditRecord {
            id: AuditId::mint(),
            actor_id: actor.to_string(),
            action: action.to_string(),
            resource_kind: kind.to_string(),
            resource_id: id.to_string(),
            details,
            created_ms: now_ms(),
        };
        self.store.insert_audit(&record).await?;
        Ok(record)
    }

    pub async fn create_principal(&self, kind: &str, name: &str, actor: &str) -> Result<Principal> {
        let kind = PrincipalKind::parse("kind", kind)?;
        check_name("name", name)?;
        let p = Principal { id: PrincipalId::mint(), kind, name: name.to_string(), disabled: false, created_ms: now_ms() };
        self.store.insert_principal(&p).await?;
        self.audit(actor, "principal.created", "principal", &p.id, json!({"name": name})).await?;
        Ok(p)
    }

    pub async fn principal(&self, id: &str) -> Result<Principal> {
        let id = PrincipalId::parse("id", id)?;
        self.store.get_principal(&id).await?.ok_or_else(|| Error::not_found("principal", &id))
    }

    pub async fn list_principals(&self, page: &PageRequest) -> Result<Vec<Principal>> {
        self.store.list_principals(page).await
    }

    pub async fn update_principal(&self, id: &str, disabled: Option<bool>, actor: &str) -> Result<Principal> {
        let p = self.principal(id).await?;
        let Some(disabled) = disabled else { return Ok(p) };
        let p = self.store.set_principal_disabled(&p.id, disabled).await?.ok_or_else(|| Error::not_found("principal", id))?;
        let told = self.wrote().await;
        self.audit(actor, "principal.updated", "principal", id, json!({"disabled": disabled})).await?;
        told.map(|()| p)
    }

    pub async fn create_api_key(&self, principal_id: &str, name: &str, actor: &str) -> Result<(ApiKey, String)> {
        let principal_id = self.principal(principal_id).await?.id;
        check_name("name", name)?;
        if self.store.count_active_api_keys(&principal_id).await? >= MAX_ACTIVE_API_KEYS {
            return Err(Error::conflict(format!(
                "{principal_id} already has {MAX_ACTIVE_API_KEYS} active API keys: revoke one before creating another"
            ))
            .with_details(json!({"max_active_api_keys": MAX_ACTIVE_API_KEYS})));
        }
        let secret = new_secret();
        let key = ApiKey {
            id: KeyId::mint(),
            principal_id: principal_id.clone(),
            name: name.to_string(),
            created_ms: now_ms(),
            revoked_ms: None,
        };
        self.store.insert_api_key(&key, &sha256_hex(&secret)).await?;
        self.audit(actor, "api_key.created", "api_key", &key.id, json!({"principal_id": principal_id})).await?;
        Ok((key, secret))
    }

    pub async fn api_key(&self, id: &str) -> Result<ApiKey> {
        let id = KeyId::parse("id", id)?;
        self.store.get_api_key(&id).await?.ok_or_else(|| Error::not_found("api_key", &id))
    }

    pub async fn list_api_keys(&self, principal_id: &str, page: &PageRequest) -> Result<Vec<ApiKey>> {
        let principal_id = self.principal(principal_id).await?.id;
        self.store.list_api_keys(&principal_id, page).await
    }

    pub async fn revoke_api_key(&self, id: &str, actor: &str) -> Result<ApiKey> {
        let id = self.api_key(id).await?.id;
        let key = self.store.revoke_api_key(&id, now_ms()).await?.ok_or_else(|| Error::not_found("api_key", &id))?;
        let told = self.wrote().await;
        self.audit(actor, "api_key.revoked", "api_key", &id, json!({"principal_id": key.principal_id})).await?;
        told.map(|()| key)
    }

    pub async fn create_group(&self, name: &str, actor: &str) -> Result<Group> {
        check_name("name", name)?;
        let g = Group { id: GroupId::mint(), name: name.to_string(), member_ids: vec![], created_ms: now_ms() };
        self.store.insert_group(&g).await.map_err(|e| match e.code {
            checkfu_core::Code::Conflict => Error::conflict(format!("a group named {name:?} already exists")),
            _ => e,
        })?;
        self.audit(actor, "group.created", "group", &g.id, json!({"name": name})).await?;
        Ok(g)
    }

    pub async fn group(&self, id: &str) -> Result<Group> {
        let id = GroupId::parse("id", id)?;
        self.store.get_group(&id).await?.ok_or_else(|| Error::not_found("group", &id))
    }

    pub async fn list_groups(&self, page: &PageRequest) -> Result<Vec<Group>> {
        self.store.list_groups(page).await
    }

    pub async fn add_group_member(&self, group_id: &str, principal_id: &str, actor: &str) -> Result<Group> {
        let group = self.group(group_id).await?.id;
        let principal = self.principal(principal_id).await?.id;
        self.store.add_group_member(&group, &principal).await?;
        let told = self.wrote().await;
        self.audit(actor, "group.member_added", "group", group_id, json!({"principal_id": principal_id})).await?;
        told?;
        self.group(group_id).await
    }

    pub async fn remove_group_member(&self, group_id: &str, principal_id: &str, actor: &str) -> Result<Group> {
        let group = self.group(group_id).await?.id;
        let principal = PrincipalId::parse("principal_id", principal_id)?;
        let removed = self.store.remove_group_member(&group, &principal).await?;
        if !removed {
            return Err(Error::not_found("group member", principal_id));
        }
        let told = self.wrote().await;
        self.audit(actor, "group.member_removed", "group", group_id, json!({"principal_id": principal_id})).await?;
        told?;
        self.group(group_id).await
    }

    pub async fn create_environment(&self, name: &str, actor: &str) -> Result<Environment> {
        check_name("name", name)?;
        let e = Environment { id: EnvironmentId::mint(), name: name.to_string(), version: 1, disabled: false, created_ms: now_ms() };
        self.store.insert_environment(&e).await.map_err(|e| match e.code {
            checkfu_core::Code::Conflict => Error::conflict(format!("an environment named {name:?} already exists")),
            _ => e,
        })?;
        self.audit(actor, "environment.created", "environment", &e.id, json!({"name": name})).await?;
        Ok(e)
    }

    pub async fn environment(&self, id: &str) -> Result<Environment> {
        let id = EnvironmentId::parse("id", id)?;
        self.store.get_environment(&id).await?.ok_or_else(|| Error::not_found("environment", &id))
    }

    pub async fn list_environments(&self, page: &PageRequest) -> Result<Vec<Environment>> {
        self.store.list_environments(page).await
    }

    pub async fn update_environment(
        &self,
        id: &str,
        disabled: Option<bool>,
        expected_version: Option<i64>,
        actor: &str,
    ) -> Result<Environment> {
        let current = self.environment(id).await?;
        if let Some(v) = expected_version
            && v != current.version
        {
            return Err(Error::conflict(format!("environment is at version {}, not {v}", current.version))
                .with_details(json!({"current_version": current.version})));
        }
        let Some(disabled) = disabled else { return Ok(current) };
        let next = Environment { disabled, version: current.version + 1, ..current.clone() };
        if !self.store.update_environment(&next, current.version).await? {
            return Err(Error::conflict("environment changed concurrently; read it again"));
        }
        // Gateways keep whether an Environment is disabled under the epoch.
        let told = self.wrote().await;
        self.audit(actor, "environment.updated", "environment", id, json!({"disabled": disabled})).await?;
        told.map(|()| next)
    }

    /// Records a grant. The caller has already decided the actor may grant it;
    /// this checks the row is well formed and names things that exist here.
    pub async fn create_assignment(&self, req: &NewAssignment, actor: &str) -> Result<Assignment> {
        let NewAssignment { subject_kind, subject_id, permission, resource_kind, resource_id, environment_id } = req;
        let (subject_kind, subject_id, permission, resource_kind, resource_id, environment_id) = (
            subject_kind.as_str(),
            subject_id.as_str(),
            permission.as_str(),
            resource_kind.as_str(),
            resource_id.as_str(),
            environment_id.as_str(),
        );
        let subject_kind = SubjectKind::parse("subject.kind", subject_kind)?;
        let permission = Permission::parse("permission", permission)?;
        let resource_kind = ResourceKind::parse("resource.kind", resource_kind)?;
        if let Some(prefix) = id_prefix(subject_kind.as_str()) {
            check_id("subject.id", prefix, subject_id)?;
        }
        match subject_kind {
            SubjectKind::Principal => {
                self.principal(subject_id).await?;
            }
            SubjectKind::Group => {
                self.group(subject_id).await?;
            }
            SubjectKind::AgentDefinition => {}
        }
        let environment_id = match resource_kind {
            ResourceKind::Installation => {
                if resource_id != "*" {
                    return Err(Error::invalid_field("resource.id", "the installation's id is \"*\""));
                }
                String::new()
            }
            ResourceKind::Environment => {
                EnvironmentId::check("resource.id", resource_id)?;
                self.environment(resource_id).await?;
                resource_id.to_string()
            }
            ResourceKind::Principal => {
                PrincipalId::check("resource.id", resource_id)?;
                self.principal(resource_id).await?;
                String::new()
            }
            ResourceKind::Group => {
                GroupId::check("resource.id", resource_id)?;
                self.group(resource_id).await?;
                String::new()
            }
            other => {
                let prefix = id_prefix(other.as_str()).unwrap_or("");
                check_id("resource.id", prefix, resource_id)?;
                environment_id.to_string()
            }
        };
        if matches!(permission, Permission::Admin | Permission::Manage)
            && !matches!(resource_kind, ResourceKind::Installation | ResourceKind::Environment)
        {
            return Err(Error::invalid_field("permission", "admin and manage are held on the installation or an environment"));
        }
        let a = Assignment {
            id: AssignmentId::mint(),
            subject_kind,
            subject_id: subject_id.to_string(),
            permission,
            resource_kind,
            resource_id: resource_id.to_string(),
            environment_id: (!environment_id.is_empty()).then(|| EnvironmentId::parse("environment_id", &environment_id)).transpose()?,
            created_by: actor.to_string(),
            created_ms: now_ms(),
            via: None,
        };
        self.store.insert_assignment(&a).await.map_err(|e| match e.code {
            checkfu_core::Code::Conflict => Error::conflict("the same assignment already exists"),
            _ => e,
        })?;
        let told = self.wrote().await;
        self.audit(
            actor,
            "permission_assignment.created",
            "permission_assignment",
            &a.id,
            json!({"subject": {"kind": subject_kind.as_str(), "id": subject_id}, "permission": permission.as_str(), "resource": {"kind": resource_kind.as_str(), "id": resource_id}}),
        )
        .await?;
        told.map(|()| a)
    }

    pub async fn assignment(&self, id: &str) -> Result<Assignment> {
        let id = AssignmentId::parse("id", id)?;
        self.store.get_assignment(&id).await?.ok_or_else(|| Error::not_found("permission_assignment", &id))
    }

    /// Gives `to` copies of `from`'s own (direct) assignments: new rows,
    /// each audited. Idempotent: a copy made before is kept, not doubled.
    /// Only for resources inside an Environment (a Dream's output store).
    pub async fn copy_assignments(&self, kind: &str, from: &str, to: &str, environment_id: &str, actor: &str) -> Result<Vec<Assignment>> {
        let resource_kind = ResourceKind::parse("resource_kind", kind)?;
        if matches!(resource_kind, ResourceKind::Installation | ResourceKind::Environment | ResourceKind::Principal | ResourceKind::Group) {
            return Err(Error::invalid_field("resource_kind", "only an Environment's resources have their assignments copied"));
        }
        let filter = AssignmentFilter { resource_id: Some(from.to_string()), ..Default::default() };
        let mut copied = vec![];
        let mut page = PageRequest { limit: 100, before_id: None };
        loop {
            let mut rows = self.store.list_assignments(&filter, &page).await?;
            let more = rows.len() > page.limit as usize;
            rows.truncate(page.limit as usize);
            for a in &rows {
                if a.via.is_some() || a.resource_kind != resource_kind {
                    continue;
                }
                let copy = NewAssignment {
                    subject_kind: a.subject_kind.as_str().into(),
                    subject_id: a.subject_id.clone(),
                    permission: a.permission.as_str().into(),
                    resource_kind: kind.into(),
                    resource_id: to.into(),
                    environment_id: environment_id.into(),
                };
                match self.create_assignment(&copy, actor).await {
                    Ok(row) => copied.push(row),
                    Err(e) if e.code == checkfu_core::Code::Conflict => {}
                    Err(e) => return Err(e),
                }
            }
            match rows.last() {
                Some(last) if more => page.before_id = Some(last.id.to_string()),
                _ => return Ok(copied),
            }
        }
    }

    pub async fn list_assignments(&self, filter: &AssignmentFilter, page: &PageRequest) -> Result<Vec<Assignment>> {
        self.store.list_assignments(filter, page).await
    }

    pub async fn delete_assignment(&self, id: &str, actor: &str) -> Result<Assignment> {
        let a = self.assignment(id).await?;
        if let Some(via) = &a.via {
            return Err(Error::conflict(format!("{id} is compiled by {} {}: change that instead", via.kind, via.id))
                .with_details(json!({"via": {"kind": via.kind, "id": via.id}}))
                .with_reason("managed_by_vault"));
        }
        let deleted = self.store.delete_assignment(&a.id).await?;
        if !deleted {
            return Err(Error::not_found("permission_assignment", id));
        }
        let told = self.wrote().await;
        self.audit(
            actor,
            "permission_assignment.deleted",
            "permission_assignment",
            id,
            json!({"subject": {"kind": a.subject_kind.as_str(), "id": a.subject_id}, "permission": a.permission.as_str(), "resource": {"kind": a.resource_kind.as_str(), "id": a.resource_id}}),
        )
        .await?;
        told.map(|()| a)
    }

    /// Whether `principal_id` holds `permission` on the resource, directly or
    /// through a group, on the resource itself, its Environment (`None`: it
    /// belongs to none), or the installation. Read straight from the rows
    /// (or a cache their writes empty), so a revoke counts at once.
    pub async fn check(
        &self,
        principal_id: &str,
        permission: &str,
        resource_kind: &str,
        resource_id: &str,
        environment_id: Option<&str>,
    ) -> Result<(bool, Vec<String>)> {
        let permission = Permission::parse("permission", permission)?;
        let resource_kind = ResourceKind::parse("resource.kind", resource_kind)?;
        let matched: Vec<String> = self
            .reach_of(principal_id)
            .await?
            .iter()
            .filter(|a| a.subject_kind != SubjectKind::AgentDefinition)
            .filter(|a| a.permission.grants(permission) && a.covers(resource_kind, resource_id, environment_id))
            .map(|a| a.id.to_string())
            .collect();
        Ok((!matched.is_empty(), matched))
    }

    pub async fn list_audit(&self, resource_id: &str, actor_id: &str, page: &PageRequest) -> Result<Vec<AuditRecord>> {
        self.store.list_audit(resource_id, actor_id, page).await
    }
}

/// What `evaluate` is asked about.
#[derive(Debug, Clone, Default)]
pub struct EvaluationRequest {
    pub environment_id: String,
    pub subject_kind: String,
    pub subject_id: String,
    pub resource_kind: String,
    pub resource_id: String,
    pub permission: String,
    pub tool: crate::policy::CalledTool,
    /// Further `(kind, id)` identities the actor counts as.
    pub also: Vec<(String, String)>,
    /// A call through a Connection (a ToolSource tool).
    pub connection: Option<ConnectionCall>,
}

/// A ToolSource tool's call: the Connection its version pinned and how it
/// stands now.
#[derive(Debug, Clone, Default)]
pub struct ConnectionCall {
    pub connection_id: String,
    /// `active`, `disabled` or `revoked` (as the capability gateway said).
    pub status: String,
    pub tool_source_id: String,
}

impl GovernanceService {
    pub async fn create_policy(&self, environment_id: &str, name: &str, rules: Vec<Rule>, actor: &str) -> Result<ActionPolicy> {
        let environment_id = EnvironmentId::parse("environment_id", environment_id)?;
        self.environment(&environment_id).await?;
        check_name("name", name)?;
        let id = PolicyId::mint();
        let now = now_ms();
        let p = ActionPolicy {
            rules: check_rules(&id, rules)?,
            id,
            environment_id,
            name: name.into(),
            version: 1,
            created_ms: now,
            updated_ms: now,
        };
        self.store.insert_policy(&p).await.map_err(|e| match e.code {
            checkfu_core::Code::Conflict => Error::conflict(format!("a policy named {name:?} already exists in this environment")),
            _ => e,
        })?;
        self.audit(
            actor,
            "action_policy.created",
            "action_policy",
            &p.id,
            json!({"environment_id": p.environment_id, "name": name, "rules": p.rules}),
        )
        .await?;
        Ok(p)
    }

    pub async fn policy(&self, id: &str) -> Result<ActionPolicy> {
        let id = PolicyId::parse("id", id)?;
        self.store.get_policy(&id).await?.ok_or_else(|| Error::not_found("action_policy", &id))
    }

    pub async fn list_policies(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<ActionPolicy>> {
        self.store.list_policies(environment_ids, page).await
    }

    /// The policies named `name`, at most one per Environment.
    pub async fn policies_named(&self, environment_ids: &[String], name: &str) -> Result<Vec<ActionPolicy>> {
        if environment_ids.len() > MAX_NAMED_ENVIRONMENTS {
            return Err(Error::invalid_field(
                "environment_ids",
                format!("a lookup by name names at most {MAX_NAMED_ENVIRONMENTS} environments"),
            ));
        }
        let mut out = vec![];
        for env in environment_ids {
            out.extend(self.store.policy_named(env, name).await?);
        }
        Ok(out)
    }

    pub async fn update_policy(
        &self,
        id: &str,
        name: Option<&str>,
        rules: Option<Vec<Rule>>,
        expected_version: Option<i64>,
        actor: &str,
    ) -> Result<ActionPolicy> {
        let current = self.policy(id).await?;
        if let Some(v) = expected_version
            && v != current.version
        {
            return Err(Error::conflict(format!("policy is at version {}, not {v}", current.version))
                .with_details(json!({"current_version": current.version})));
        }
        let mut next = current.clone();
        if let Some(n) = name {
            check_name("name", n)?;
            next.name = n.into();
        }
        if let Some(r) = rules {
            next.rules = check_rules(id, r)?;
        }
        next.version += 1;
        next.updated_ms = now_ms();
        if !self.store.update_policy(&next, current.version).await? {
            return Err(Error::conflict("the policy changed concurrently; read it again"));
        }
        self.audit(
            actor,
            "action_policy.updated",
            "action_policy",
            id,
            json!({"before": {"name": current.name, "rules": current.rules}, "after": {"name": next.name, "rules": next.rules}}),
        )
        .await?;
        Ok(next)
    }

    pub async fn delete_policy(&self, id: &str, actor: &str) -> Result<ActionPolicy> {
        let p = self.policy(id).await?;
        if !self.store.delete_policy(&p.id).await? {
            return Err(Error::not_found("action_policy", id));
        }
        self.audit(actor, "action_policy.deleted", "action_policy", id, json!({"name": p.name, "rules": p.rules})).await?;
        Ok(p)
    }

    /// A dry run: which disposition the Environment's policies give the
    /// request. Records nothing.
    pub async fn evaluate(&self, req: &EvaluationRequest) -> Result<Decision> {
        EnvironmentId::check("environment_id", &req.environment_id)?;
        if !SUBJECT_KINDS.contains(&req.subject_kind.as_str()) || req.subject_kind == "*" {
            return Err(Error::invalid_field(
                "subject.kind",
                format!("subject kind must be one of {}", SUBJECT_KINDS[..SUBJECT_KINDS.len() - 1].join(", ")),
            ));
        }
        if req.subject_id.is_empty() || req.resource_kind.is_empty() || req.resource_id.is_empty() || req.permission.is_empty() {
            return Err(Error::invalid("subject.id, resource.kind, resource.id and permission are required"));
        }
        let tool = classify(&req.tool)?;
        let mut actor = Actor { identities: vec![(req.subject_kind.clone(), req.subject_id.clone())] };
        for (kind, id) in &req.also {
            if !SUBJECT_KINDS.contains(&kind.as_str()) || kind == "*" {
                return Err(Error::invalid_field("also.kind", format!("identity kind {kind:?} is not a subject kind")));
            }
            actor.identities.push((kind.clone(), id.clone()));
        }
        if req.subject_kind == "principal" {
            for g in self.store.groups_of(&req.subject_id).await? {
                actor.identities.push(("group".into(), g));
            }
        }
        let mut resources = vec![(req.resource_kind.as_str(), req.resource_id.as_str())];
        if let Some(c) = &req.connection {
            if let Some(denied) = self.connection_denial(req, c).await? {
                return Ok(denied);
            }
            resources.push(("tool_source", c.tool_source_id.as_str()));
            resources.push(("connection", c.connection_id.as_str()));
        }
        let policies = self.store.policies_in(&req.environment_id).await?;
        Ok(evaluate(&policies, &actor, &resources, &req.permission, tool))
    }

    /// api.md §16.4 step 1: the Session's principal and the agent each hold
    /// `use_connection` on the pinned Connection, and it is active; else a
    /// deny naming what is missing.
    async fn connection_denial(&self, req: &EvaluationRequest, c: &ConnectionCall) -> Result<Option<Decision>> {
        checkfu_core::id::ConnectionId::check("connection_id", &c.connection_id)?;
        let deny = |reason: String| Some(Decision { disposition: Disposition::Deny, matched_rule_ids: vec![], reason });
        if c.status != "active" {
            let status = if c.status.is_empty() { "unavailable" } else { c.status.as_str() };
            return Ok(deny(format!("connection {} is {status}: nothing goes through it", c.connection_id)));
        }
        let env = Some(req.environment_id.as_str());
        let mut missing = vec![];
        if req.subject_kind == "principal" {
            let (held, _) = self.check(&req.subject_id, "use_connection", "connection", &c.connection_id, env).await?;
            if !held {
                missing.push(format!("the Session's principal {}", req.subject_id));
            }
        }
        for (_, agent) in req.also.iter().filter(|(k, _)| k == "agent_definition") {
            if !self.agent_holds(agent, Permission::UseConnection, &c.connection_id, &req.environment_id).await? {
                missing.push(format!("the agent {agent}"));
            }
        }
        if missing.is_empty() {
            return Ok(None);
        }
        Ok(deny(format!("use_connection on connection {} is missing: {} holds none", c.connection_id, missing.join(" and "))))
    }

    /// Whether an agent definition holds `permission` on a Connection (rows
    /// granted to the agent itself; agents hold nothing through groups).
    /// Whether an Agent's own rows (`agent_definition` subject) grant
    /// `permission` on the resource: the coordinator → member check of
    /// `use_agent` (api.md §15.3). No admin lends an Agent anything.
    pub async fn agent_check(
        &self,
        agent_id: &str,
        permission: &str,
        resource_kind: &str,
        resource_id: &str,
        environment_id: &str,
    ) -> Result<bool> {
        let permission = Permission::parse("permission", permission)?;
        let kind = ResourceKind::parse("resource.kind", resource_kind)?;
        self.agent_holds_on(agent_id, permission, kind, resource_id, environment_id).await
    }

    async fn agent_holds(&self, agent_id: &str, permission: Permission, connection_id: &str, environment_id: &str) -> Result<bool> {
        self.agent_holds_on(agent_id, permission, ResourceKind::Connection, connection_id, environment_id).await
    }

    async fn agent_holds_on(
        &self,
        agent_id: &str,
        permission: Permission,
        kind: ResourceKind,
        resource_id: &str,
        environment_id: &str,
    ) -> Result<bool> {
        let filter = AssignmentFilter { subject_id: Some(agent_id.to_string()), resource_id: None, permission: None };
        let mut page = PageRequest::standard(100, "")?;
        loop {
            let rows = self.store.list_assignments(&filter, &page).await?;
            let more = rows.len() > page.limit as usize;
            if rows.iter().take(page.limit as usize).any(|a| {
                a.subject_kind == SubjectKind::AgentDefinition
                    && a.permission.grants(permission)
                    && a.covers(kind, resource_id, Some(environment_id))
            }) {
                return Ok(true);
            }
            let Some(last) = rows.get(page.limit as usize - 1).filter(|_| more) else { return Ok(false) };
            page = PageRequest { limit: page.limit, before_id: Some(last.id.to_string()) };
        }
    }

    /// Audits a real call's denial (the dry run records nothing).
    pub async fn record_decision(&self, req: &EvaluationRequest, d: &Decision, session_id: &str, tool_use_id: &str) -> Result<()> {
        if d.disposition.as_str() != "deny" {
            return Ok(());
        }
        let details = json!({
            "tool": req.resource_id,
            "tool_use_id": tool_use_id,
            "subject": {"kind": req.subject_kind, "id": req.subject_id},
            "matched_rule_ids": d.matched_rule_ids,
            "reason": d.reason,
        });
        self.audit(&req.subject_id, "action.denied", "session", session_id, details).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn copied_assignments_are_new_rows_made_once_and_only_direct_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (svc, _db) = crate::open(&checkfu_store::Location::SqliteDir(dir.path().into())).await.unwrap();
        let env = svc.create_environment("e", "prin_admin").await.unwrap();
        let who = svc.create_principal("human", "reader", "prin_admin").await.unwrap();
        let from = checkfu_core::id::MemoryStoreId::mint().to_string();
        let to = checkfu_core::id::MemoryStoreId::mint().to_string();
        for permission in ["read", "write"] {
            let row = NewAssignment {
                subject_kind: "principal".into(),
                subject_id: who.id.to_string(),
                permission: permission.into(),
                resource_kind: "memory_store".into(),
                resource_id: from.clone(),
                environment_id: env.id.to_string(),
            };
            svc.create_assignment(&row, "prin_admin").await.unwrap();
        }
        let copied = svc.copy_assignments("memory_store", &from, &to, &env.id, "prin_dreamer").await.unwrap();
        assert_eq!(copied.len(), 2);
        assert!(copied.iter().all(|a| a.resource_id == to && a.created_by == "prin_dreamer"));
        let again = svc.copy_assignments("memory_store", &from, &to, &env.id, "prin_dreamer").await.unwrap();
        assert!(again.is_empty(), "a copy already made is kept, not doubled");
        let page = PageRequest { limit: 10, before_id: None };
        let on_target =
            svc.list_assignments(&AssignmentFilter { resource_id: Some(to.clone()), ..Default::default() }, &page).await.unwrap();
        assert_eq!(on_target.len(), 2);
        assert!(svc.copy_assignments("environment", &env.id, &env.id, &env.id, "prin_dreamer").await.is_err());
    }
}
