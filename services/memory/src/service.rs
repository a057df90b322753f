//! MemoryStores, documents and versions (api.md §13.1–13.2). Access is
//! only PermissionAssignments, asked of governance for the store (or,
//! through the hierarchy, its Environment and the installation): `read`,
//! `write`, `approve`, and `manage` on the Environment for the store's
//! own lifecycle. Every API read and write is audited.

use crate::content::Contents;
use crate::model::*;
use crate::store::{Commit, Committed, MemoryDb, StoreFilter};
use checkfu_bus::{Record, resource_record};
use checkfu_core::features::Disabled;
use checkfu_core::id::{EnvironmentId, MemoryStoreId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result};
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::governance::v1::governance_service_client::GovernanceServiceClient;
use checkfu_proto::modelgateway::v1::model_gateway_service_client::ModelGatewayServiceClient;
use checkfu_proto::sessions::v1 as ss;
use checkfu_proto::sessions::v1::sessions_service_client::SessionsServiceClient;
use checkfu_proto::transport::Transport;
use serde_json::{Value, json};
use std::sync::Arc;

/// The feature `GET /v1/capabilities` reports for stores and proposals.
pub const FEATURE: &str = "memory";

#[derive(Clone)]
pub struct MemoryService {
    pub(crate) db: Arc<dyn MemoryDb>,
    pub(crate) contents: Contents,
    pub(crate) governance: GovernanceServiceClient<Transport>,
    pub(crate) sessions: SessionsServiceClient<Transport>,
    /// A model Dream's model calls.
    pub(crate) models: ModelGatewayServiceClient<Transport>,
    pub(crate) disabled: Disabled,
    /// Wakes the Dream worker when a Dream is created.
    pub(crate) dreams_wake: Arc<tokio::sync::Notify>,
    outbox_wake: Option<Arc<tokio::sync::Notify>>,
}

/// A new store as asked for, shape-checked by the wire.
#[derive(Debug, Clone, Default)]
pub struct NewStore {
    pub environment_id: String,
    pub name: String,
    pub description: String,
    pub metadata: Value,
    pub owner_kind: String,
    pub owner_id: String,
}

/// What an update changes.
#[derive(Debug, Clone, Default)]
pub struct StorePatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub metadata: Option<Value>,
    pub expected_version: Option<i64>,
}

/// What a permission check is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Read,
    Write,
    Approve,
}

impl Need {
    fn as_str(self) -> &'static str {
        match self {
            Need::Read => "read",
            Need::Write => "write",
            Need::Approve => "approve",
        }
    }
}

fn check_description(d: &str) -> Result<()> {
    if d.len() > MAX_DESCRIPTION_BYTES {
        return Err(Error::invalid_field("description", format!("description holds at most {MAX_DESCRIPTION_BYTES} bytes")));
    }
    Ok(())
}

fn check_metadata(m: &Value) -> Result<()> {
    if !m.is_object() || m.to_string().len() > 16 * 1024 {
        return Err(Error::invalid_field("metadata", "metadata must be an object of at most 16 KiB"));
    }
    Ok(())
}

/// A document write's path, content and expectation checked (§13.2): the
/// expectation is required — `null` to create, or the current sha — so no
/// write is blind.
pub(crate) fn checked_write(path: &str, content: &str, expected: Option<Expect>) -> Result<Expect> {
    check_path("path", path)?;
    check_content("content", content)?;
    let expected = expected.ok_or_else(|| {
        Error::invalid_field(
            "expected_sha256",
            "expected_sha256 is required: null to create, or the current content_sha256 (no blind writes)",
        )
    })?;
    if let Expect::Sha(sha) = &expected {
        check_sha("expected_sha256", sha)?;
    }
    Ok(expected)
}

pub(crate) fn archived(s: &Store) -> Error {
    Error::conflict(format!("memory store {} is archived", s.id)).with_reason("store_archived")
}

impl MemoryService {
    pub fn new(db: Arc<dyn MemoryDb>, governance: Transport, sessions: Transport, models: Transport) -> Self {
        MemoryService {
            contents: Contents { db: db.clone(), blobs: None },
            db,
            governance: GovernanceServiceClient::new(governance),
            sessions: SessionsServiceClient::new(sessions),
            models: ModelGatewayServiceClient::new(models),
            disabled: Disabled::default(),
            dreams_wake: Arc::new(tokio::sync::Notify::new()),
            outbox_wake: None,
        }
    }

    /// Content over 16 KiB goes to this blob store.
    pub fn with_blobs(mut self, blobs: Arc<dyn checkfu_blobs::BlobStore>) -> Self {
        self.contents.blobs = Some(blobs);
        self
    }

    pub fn with_disabled(mut self, disabled: Disabled) -> Self {
        self.disabled = disabled;
        self
    }

    pub fn with_outbox_wake(mut self, wake: Arc<tokio::sync::Notify>) -> Self {
        self.outbox_wake = Some(wake);
        self
    }

    pub(crate) fn woke(&self) {
        if let Some(w) = &self.outbox_wake {
            w.notify_one();
        }
    }

    /// 503 `unavailable` while the installation has Memory switched off.
    pub fn available(&self) -> Result<()> {
        self.disabled.require(FEATURE)
    }

    pub async fn ready(&self) -> bool {
        self.db.get_store("mstr_ready").await.is_ok()
    }

    // --- access -------------------------------------------------------------

    pub(crate) async fn allowed(&self, principal: &str, permission: &str, kind: &str, id: &str, environment_id: &str) -> Result<bool> {
        let req = gov::CheckRequest {
            principal_id: principal.into(),
            permission: permission.into(),
            resource: Some(gov::ResourceRef { kind: kind.into(), id: id.into() }),
            environment_id: environment_id.into(),
            subject: None,
        };
        Ok(self.governance.clone().check(req).await.map_err(Error::from)?.into_inner().allowed)
    }

    pub(crate) fn denied(principal: &str, permission: &str, kind: &str, id: &str) -> Error {
        Error::denied(format!("{principal} lacks {permission} on {kind} {id}"))
            .with_details(json!({"permission": permission, "resource": {"kind": kind, "id": id}}))
    }

    /// 403 unless `principal` holds `need` on the store.
    pub(crate) async fn require(&self, principal: &str, need: Need, s: &Store) -> Result<()> {
        if self.allowed(principal, need.as_str(), "memory_store", &s.id, &s.environment_id).await? {
            Ok(())
        } else {
            Err(Self::denied(principal, need.as_str(), "memory_store", &s.id))
        }
    }

    /// 403 unless `principal` holds `manage` on the Environment.
    pub(crate) async fn require_manage(&self, principal: &str, environment_id: &str) -> Result<()> {
        if self.allowed(principal, "manage", "environment", environment_id, environment_id).await? {
            Ok(())
        } else {
            Err(Self::denied(principal, "manage", "environment", environment_id))
        }
    }

    /// The store, if it exists (404) and `actor` holds `need` on it (403).
    pub async fn store_for(&self, id: &str, actor: &str, need: Need) -> Result<Store> {
        self.available()?;
        let s = self.store(id).await?;
        self.require(actor, need, &s).await?;
        Ok(s)
    }

    pub(crate) async fn store(&self, id: &str) -> Result<Store> {
        MemoryStoreId::check("id", id)?;
        self.db.get_store(id).await?.ok_or_else(|| Error::not_found("memory_store", id))
    }

    /// Records an API read or write in governance's audit trail; a failure
    /// is logged, never the caller's error.
    pub(crate) async fn audit(&self, actor: &str, action: &str, store_id: &str, details: Value) {
        let req = gov::RecordAuditRequest {
            actor_id: actor.into(),
            action: action.into(),
            resource: Some(gov::ResourceRef { kind: "memory_store".into(), id: store_id.into() }),
            details_json: details.to_string(),
        };
        if let Err(s) = self.governance.clone().record_audit(req).await {
            tracing::warn!(%s, store_id, action, "could not audit a memory access");
        }
    }

    pub(crate) fn event(s: &Store, kind: &str) -> Record {
        resource_record(kind, &s.environment_id, &s.id)
    }

    // --- stores -------------------------------------------------------------

    pub async fn create_store(&self, n: NewStore, actor: &str) -> Result<Store> {
        self.available()?;
        let env = EnvironmentId::parse("environment_id", &n.environment_id)?;
        checkfu_core::check_name("name", &n.name)?;
        check_description(&n.description)?;
        let metadata = if n.metadata.is_null() { json!({}) } else { n.metadata };
        check_metadata(&metadata)?;
        let kind = OwnerKind::parse("owner.kind", &n.owner_kind)?;
        self.require_manage(actor, &env).await?;
        let e =
            self.governance.clone().get_environment(gov::GetByIdRequest { id: env.to_string() }).await.map_err(Error::from)?.into_inner();
        if e.disabled {
            return Err(Error::conflict(format!("environment {env} is disabled")));
        }
        self.check_owner(kind, &n.owner_id, &env).await?;
        let now = now_ms();
        let s = Store {
            id: MemoryStoreId::mint(),
            environment_id: env,
            name: n.name,
            description: n.description,
            metadata,
            owner: Owner { kind: kind.as_str().into(), id: n.owner_id },
            review: kind.review(),
            head_version: 0,
            status: StoreStatus::Active,
            created_from: None,
            created_by: actor.into(),
            created_ms: now,
            updated_ms: now,
            archived_ms: 0,
            version: 1,
        };
        self.db.insert_store(&s, &[Self::event(&s, "memory_store.created")]).await?;
        self.woke();
        self.audit(actor, "memory_store.created", &s.id, json!({"name": s.name, "owner": s.owner})).await;
        Ok(s)
    }

    /// The owner exists and lives in the store's Environment (400 else).
    async fn check_owner(&self, kind: OwnerKind, id: &str, env: &str) -> Result<()> {
        let bad = |why: &str| Error::invalid_field("owner.id", format!("owner {id:?}: {why}"));
        match kind {
            OwnerKind::SurfaceScope => {
                return Err(Error::invalid_field("owner.kind", "surface_scope owners are reserved until surface scopes join the contract")
                    .with_reason("owner_kind_reserved"));
            }
            OwnerKind::Environment => {
                if id != env {
                    return Err(bad("an environment owner must be the store's own Environment"));
                }
            }
            OwnerKind::AgentDefinition => {
                checkfu_core::id::check("owner.id", kind.id_prefix(), id)?;
                let a = self.sessions.clone().get_agent(ss::GetByIdRequest { id: id.into() }).await.map_err(|_| bad("no such Agent"))?;
                if a.into_inner().environment_id != env {
                    return Err(bad("the Agent is in another Environment"));
                }
            }
            OwnerKind::Principal => {
                checkfu_core::id::check("owner.id", kind.id_prefix(), id)?;
                self.governance.clone().get_principal(gov::GetByIdRequest { id: id.into() }).await.map_err(|_| bad("no such Principal"))?;
            }
            OwnerKind::Session => {
                checkfu_core::id::check("owner.id", kind.id_prefix(), id)?;
                let s =
                    self.sessions.clone().get_session(ss::GetByIdRequest { id: id.into() }).await.map_err(|_| bad("no such Session"))?;
                if s.into_inner().environment_id != env {
                    return Err(bad("the Session is in another Environment"));
                }
            }
        }
        Ok(())
    }

    pub async fn get_store(&self, id: &str, actor: &str) -> Result<Store> {
        let s = self.store_for(id, actor, Need::Read).await?;
        self.audit(actor, "memory_store.read", &s.id, json!({})).await;
        Ok(s)
    }

    /// The stores `actor` may read, newest first. A page may hold fewer
    /// than `limit` when some stores are not readable; `next_page` goes on.
    pub async fn list_stores(&self, f: StoreFilter, limit: u32, page: &str, actor: &str) -> Result<(Vec<Store>, String)> {
        self.available()?;
        if let Some(e) = &f.environment_id {
            EnvironmentId::check("environment_id", e)?;
        }
        if let Some(k) = &f.owner_kind {
            OwnerKind::parse("owner_kind", k)?;
        }
        let page = PageRequest::standard(limit, page)?;
        let rows = self.db.list_stores(&f, &page).await?;
        let (rows, next) = page.finish(rows, |s| s.id.as_str());
        let mut out = Vec::with_capacity(rows.len());
        for s in rows {
            if self.allowed(actor, "read", "memory_store", &s.id, &s.environment_id).await? {
                out.push(s);
            }
        }
        Ok((out, next))
    }

    async fn write_store(&self, s: &Store, next: Store, event: Option<&str>) -> Result<Store> {
        let events: Vec<Record> = event.map(|e| Self::event(&next, e)).into_iter().collect();
        if !self.db.update_store(&next, s.version, &events).await? {
            return Err(Error::conflict(format!("memory store {} changed meanwhile; read it again", s.id)).with_reason("version_mismatch"));
        }
        if !events.is_empty() {
            self.woke();
        }
        Ok(next)
    }

    pub async fn update_store(&self, id: &str, p: StorePatch, actor: &str) -> Result<Store> {
        self.available()?;
        let s = self.store(id).await?;
        self.require_manage(actor, &s.environment_id).await?;
        if let Some(v) = p.expected_version
            && v != s.version
        {
            return Err(Error::conflict(format!("memory store {id} is at version {}, not {v}", s.version))
                .with_details(json!({"current_version": s.version}))
                .with_reason("version_mismatch"));
        }
        if let Some(n) = &p.name {
            checkfu_core::check_name("name", n)?;
        }
        if let Some(d) = &p.description {
            check_description(d)?;
        }
        if let Some(m) = &p.metadata {
            check_metadata(m)?;
        }
        let next = Store {
            name: p.name.unwrap_or_else(|| s.name.clone()),
            description: p.description.unwrap_or_else(|| s.description.clone()),
            metadata: p.metadata.unwrap_or_else(|| s.metadata.clone()),
            updated_ms: now_ms(),
            version: s.version + 1,
            ..s.clone()
        };
        let next = self.write_store(&s, next, None).await?;
        self.audit(actor, "memory_store.updated", id, json!({"version": next.version})).await;
        Ok(next)
    }

    /// Idempotent: an archived store answers as it is.
    pub async fn archive_store(&self, id: &str, actor: &str) -> Result<Store> {
        self.available()?;
        let s = self.store(id).await?;
        self.require_manage(actor, &s.environment_id).await?;
        if s.status == StoreStatus::Archived {
            return Ok(s);
        }
        let now = now_ms();
        let next = Store { status: StoreStatus::Archived, archived_ms: now, updated_ms: now, version: s.version + 1, ..s.clone() };
        let next = self.write_store(&s, next, Some("memory_store.archived")).await?;
        self.audit(actor, "memory_store.archived", id, json!({})).await;
        Ok(next)
    }

    /// Only an archived store that no live Session mounts; answers its
    /// last state.
    pub async fn delete_store(&self, id: &str, actor: &str) -> Result<Store> {
        self.available()?;
        let s = self.store(id).await?;
        self.require_manage(actor, &s.environment_id).await?;
        if s.status != StoreStatus::Archived {
            return Err(
                Error::conflict(format!("memory store {id} must be archived before it is deleted")).with_reason("store_not_archived")
            );
        }
        for session_id in self.db.mounting_sessions(id).await? {
            let live = match self.sessions.clone().get_session(ss::GetByIdRequest { id: session_id.clone() }).await {
                Ok(r) => r.into_inner().status != "terminated",
                Err(s) if s.code() == tonic::Code::NotFound => false,
                Err(s) => return Err(s.into()),
            };
            if live {
                return Err(Error::conflict(format!("memory store {id} is mounted by live session {session_id}"))
                    .with_details(json!({"session_id": session_id}))
                    .with_reason("store_mounted"));
            }
        }
        if !self.db.delete_store(id, s.version, &[Self::event(&s, "memory_store.deleted")]).await? {
            return Err(Error::conflict(format!("memory store {id} changed meanwhile; read it again")).with_reason("version_mismatch"));
        }
        self.woke();
        self.audit(actor, "memory_store.deleted", id, json!({})).await;
        Ok(s)
    }

    /// A Session's own stores are archived with it: on its
    /// `session.status_terminated`, every active store it owns.
    pub async fn on_session_event(&self, r: &Record) -> Result<()> {
        if r.header("type") != Some("session.status_terminated") {
            return Ok(());
        }
        let e: Value = serde_json::from_str(&r.payload).map_err(|e| Error::invalid(format!("unreadable session event: {e}")))?;
        let Some(session_id) = e.get("session_id").and_then(Value::as_str) else { return Ok(()) };
        let f =
            StoreFilter { owner_kind: Some(OwnerKind::Session.as_str().into()), owner_id: Some(session_id.into()), ..Default::default() };
        let page = PageRequest { limit: 100, before_id: None };
        for s in self.db.list_stores(&f, &page).await? {
            let now = now_ms();
            let next = Store { status: StoreStatus::Archived, archived_ms: now, updated_ms: now, version: s.version + 1, ..s.clone() };
            // A concurrent change retries with the redelivered event.
            self.write_store(&s, next, Some("memory_store.archived")).await?;
            self.audit(session_id, "memory_store.archived", &s.id, json!({"reason": "owner_session_archived"})).await;
        }
        Ok(())
    }

    // --- documents ----------------------------------------------------------

    /// A version to read at: the head, or an existing one (400 beyond it).
    fn at(s: &Store, at: Option<i64>) -> Result<i64> {
        match at {
            None => Ok(s.head_version),
            Some(n) if (0..=s.head_version).contains(&n) => Ok(n),
            Some(n) => {
                Err(Error::invalid_field("at_version", format!("at_version {n} is not a version of this store (head {})", s.head_version)))
            }
        }
    }

    /// `(store_version, document, content)`; 404 when absent at that version.
    pub async fn read_document(&self, id: &str, path: &str, at: Option<i64>, actor: &str) -> Result<(i64, DocumentMeta, String)> {
        check_path("path", path)?;
        let s = self.store_for(id, actor, Need::Read).await?;
        let n = Self::at(&s, at)?;
        let d = self.db.document(id, path, (n != s.head_version).then_some(n)).await?;
        let d = d.ok_or_else(|| {
            Error::new(Code::NotFound, format!("{path} is not in memory store {id} at version {n}"))
                .with_details(json!({"resource": "memory_document", "path": path}))
        })?;
        let text = self.contents.text(&d.sha256).await?;
        self.audit(actor, "memory_document.read", id, json!({"path": path, "store_version": n})).await;
        Ok((n, d, text))
    }

    /// `(store_version, documents, next_page)`, by path.
    pub async fn list_documents(
        &self,
        id: &str,
        prefix: &str,
        at: Option<i64>,
        limit: u32,
        page: &str,
        actor: &str,
    ) -> Result<(i64, Vec<DocumentMeta>, String)> {
        check_prefix(prefix)?;
        let s = self.store_for(id, actor, Need::Read).await?;
        let n = Self::at(&s, at)?;
        // Paged by path: the token holds the last path of the page.
        let page = PageRequest::standard(limit, page)?;
        let after = page.before_id.clone().unwrap_or_default();
        let rows = self.db.documents(id, prefix, (n != s.head_version).then_some(n), &after, page.fetch_limit()).await?;
        let (rows, next) = page.finish(rows, |d| d.path.as_str());
        self.audit(actor, "memory_document.listed", id, json!({"path_prefix": prefix, "store_version": n})).await;
        Ok((n, rows, next))
    }

    /// A compare-and-set write (§13.2's table); `expected` `None` is a
    /// blind write, refused.
    pub async fn write_document(
        &self,
        id: &str,
        path: &str,
        content: &str,
        expected: Option<Expect>,
        actor: &str,
    ) -> Result<(i64, DocumentMeta, String)> {
        let expected = checked_write(path, content, expected)?;
        let s = self.store_for(id, actor, Need::Write).await?;
        self.writable_directly(&s)?;
        let staged = Staged { path: path.into(), content: Some(self.contents.stage(content).await?), expected };
        let head = self.commit_api(&s, vec![staged], actor).await?;
        let d = self.db.document(id, path, None).await?.ok_or_else(|| Error::internal("a written document is missing"))?;
        Ok((head, d, content.to_string()))
    }

    pub async fn delete_document(&self, id: &str, path: &str, expected_sha256: &str, actor: &str) -> Result<(i64, String)> {
        check_path("path", path)?;
        check_sha("expected_sha256", expected_sha256)?;
        let s = self.store_for(id, actor, Need::Write).await?;
        self.writable_directly(&s)?;
        let staged = Staged { path: path.into(), content: None, expected: Expect::Sha(expected_sha256.into()) };
        let head = self.commit_api(&s, vec![staged], actor).await?;
        Ok((head, expected_sha256.to_string()))
    }

    fn writable_directly(&self, s: &Store) -> Result<()> {
        if s.status == StoreStatus::Archived {
            return Err(archived(s));
        }
        if s.review == Review::Proposal {
            return Err(Error::conflict(format!("memory store {} takes changes by proposal (POST /v1/memory-proposals)", s.id))
                .with_reason("proposal_required"));
        }
        Ok(())
    }

    /// Commits an API change set; answers the version it is at.
    async fn commit_api(&self, s: &Store, changes: Vec<Staged>, actor: &str) -> Result<i64> {
        let c = Commit {
            store_id: s.id.clone(),
            changes,
            actor: Actor::principal(actor),
            via: Via::Api,
            approves: None,
            allow_archived: false,
            key: String::new(),
            now_ms: now_ms(),
        };
        match self.db.commit(&c).await? {
            // An API write carries no key, so it is never a replay.
            Committed::Version(v) | Committed::Replayed(v) => {
                self.audit(actor, "memory_document.written", &s.id, json!({"store_version": v.store_version, "changes": v.changes})).await;
                Ok(v.store_version)
            }
            Committed::Unchanged(head) => Ok(head),
            Committed::Mismatch { path, current, head_version } => Err(sha_mismatch(&path, current.as_deref(), head_version)),
            Committed::Archived | Committed::Decided => Err(archived(s)),
        }
    }

    pub async fn versions(&self, id: &str, limit: u32, page: &str, actor: &str) -> Result<(Vec<Version>, String)> {
        self.store_for(id, actor, Need::Read).await?;
        // Paged by number: the token holds the last version of the page.
        let page = PageRequest::standard(limit, page)?;
        let rows = self.db.versions(id, page.before_number()?, page.fetch_limit()).await?;
        let (rows, next) = page.finish_numbered(rows, |v| v.store_version);
        self.audit(actor, "memory_version.listed", id, json!({})).await;
        Ok((rows, next))
    }

    pub async fn version(&self, id: &str, n: i64, actor: &str) -> Result<Version> {
        self.store_for(id, actor, Need::Read).await?;
        let v = self.db.version(id, n).await?.ok_or_else(|| {
            Error::new(Code::NotFound, format!("memory store {id} has no version {n}"))
                .with_details(json!({"resource": "memory_version", "store_version": n}))
        })?;
        self.audit(actor, "memory_version.read", id, json!({"store_version": n})).await;
        Ok(v)
    }

    /// The API JSON of a proposal, with each change's text.
    /// Each change's text, in the order of the proposal's changes; `None`
    /// for a deletion.
    pub async fn proposal_texts(&self, p: &Proposal) -> Result<Vec<Option<String>>> {
        let mut texts = Vec::with_capacity(p.changes.len());
        for c in &p.changes {
            texts.push(match &c.content {
                Some(x) => Some(self.contents.text(&x.sha256).await?),
                None => None,
            });
        }
        Ok(texts)
    }
}
