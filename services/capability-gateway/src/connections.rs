//! Connections and their credentials (api.md §16.1–16.2): the rules of
//! each write, sealing under the installation's credential keys, and the
//! audit trail (which never holds a secret).
//!
//! Who may act was decided by the caller (the gateway); this keeps the rows
//! consistent. A credential is opened only by [`ReachService::open`], for a
//! call this service itself sends upstream.

use crate::model::*;
use crate::store::ReachStore;
use checkfu_bus::resource_record;
use checkfu_core::id::{ConnectionId, EnvironmentId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result, features};
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::governance::v1::governance_service_client::GovernanceServiceClient;
use checkfu_proto::transport::Transport;
use checkfu_store::envelope::KeyRing;
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Clone)]
pub struct ReachService {
    pub(crate) store: Arc<dyn ReachStore>,
    /// `None`: no readable key file, so `credentials` is unavailable.
    pub(crate) keys: Option<Arc<KeyRing>>,
    pub(crate) governance: GovernanceServiceClient<Transport>,
    pub(crate) allow_private: bool,
    disabled: features::Disabled,
    /// Whether this installation runs the sandbox egress proxy.
    egress: bool,
    /// One OAuth refresh at a time per Connection (in this process).
    refreshing: Arc<std::sync::Mutex<std::collections::HashMap<ConnectionId, Arc<tokio::sync::Mutex<()>>>>>,
}

/// A Connection to create, as the caller sent it.
#[derive(Debug, Clone, Default)]
pub struct NewConnection {
    pub environment_id: String,
    pub name: String,
    pub description: String,
    pub metadata_json: String,
    pub kind: String,
    pub url: String,
    pub owner_kind: String,
    pub owner_id: String,
    /// Set: the Connection starts with this credential.
    pub credential: Option<CredentialFields>,
}

/// A partial update.
#[derive(Debug, Clone, Default)]
pub struct ConnectionChange {
    pub name: Option<String>,
    pub description: Option<String>,
    pub metadata_json: Option<String>,
    pub disabled: Option<bool>,
    pub expected_version: Option<i64>,
}

/// What `checkfu credentials rewrap` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rewrapped {
    /// Credentials now under the current key.
    pub rewrapped: u64,
    /// Already under it.
    pub current: u64,
    /// Wrapped by a key no longer in the key file.
    pub unreadable: u64,
}

impl ReachService {
    pub fn new(
        store: Arc<dyn ReachStore>,
        keys: Option<Arc<KeyRing>>,
        governance: Transport,
        allow_private: bool,
        disabled: features::Disabled,
    ) -> Self {
        ReachService {
            store,
            keys,
            governance: GovernanceServiceClient::new(governance),
            allow_private,
            disabled,
            egress: false,
            refreshing: Arc::default(),
        }
    }

    /// Says the sandbox egress proxy runs (`sandbox_egress` is offered).
    pub fn with_egress(mut self, running: bool) -> Self {
        self.egress = running;
        self
    }

    /// The lock serialising `connection_id`'s refreshes.
    pub(crate) fn refresh_lock(&self, connection_id: &ConnectionId) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.refreshing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.entry(connection_id.clone()).or_default().clone()
    }

    /// Every reach feature and whether it is offered here.
    pub fn capabilities(&self) -> Vec<Capability> {
        features::ALL
            .iter()
            .filter_map(|name| {
                let (preview, limits, built) = feature(name)?;
                let reason = if self.disabled.contains(name) {
                    Some(features::FEATURE_DISABLED)
                } else if !built {
                    Some(features::NOT_BUILT)
                } else if (*name == "credentials" && self.keys.is_none())
                    || (*name == "sandbox_egress" && !self.egress)
                    || *name == "managed_tools"
                {
                    Some(features::DEPENDENCY_MISSING)
                } else {
                    None
                };
                Some(Capability { name: (*name).into(), reason: reason.map(str::to_string), preview, limits })
            })
            .collect()
    }

    /// 503 `unavailable` unless `feature` is offered.
    pub fn require(&self, feature: &str) -> Result<()> {
        match self.capabilities().into_iter().find(|c| c.name == feature).and_then(|c| c.reason) {
            Some(reason) => Err(features::unavailable(feature, &reason)),
            None => Ok(()),
        }
    }

    fn keys(&self) -> Result<&KeyRing> {
        self.require("credentials")?;
        self.keys.as_deref().ok_or_else(|| features::unavailable("credentials", features::DEPENDENCY_MISSING))
    }

    /// Records a change in governance's audit trail. The change is already
    /// committed, so a failure to record is logged rather than undone.
    pub(crate) async fn audit_resource(&self, actor: &str, action: &str, kind: &str, id: &str, details: Value) {
        let req = gov::RecordAuditRequest {
            actor_id: actor.into(),
            action: action.into(),
            resource: Some(gov::ResourceRef { kind: kind.into(), id: id.into() }),
            details_json: details.to_string(),
        };
        if let Err(e) = self.governance.clone().record_audit(req).await {
            tracing::warn!(resource_id = id, action, error = %e.message(), "the audit record was not written");
        }
    }

    async fn audit(&self, actor: &str, action: &str, c: &Connection, details: Value) {
        self.audit_resource(actor, action, "connection", &c.id, details).await;
    }

    fn seal(&self, id: &ConnectionId, cred: NewCredential, previous: Option<&StoredCredential>) -> Result<StoredCredential> {
        let now = now_ms();
        Ok(StoredCredential {
            envelope: self.keys()?.seal(id, &cred.secret.to_bytes()?)?,
            meta: cred.meta,
            state: CredentialState::Ok,
            created_ms: previous.map_or(now, |p| p.created_ms),
            rotated_ms: previous.map(|_| now),
            last_used_ms: None,
        })
    }

    fn parse_credential(&self, fields: &CredentialFields) -> Result<NewCredential> {
        NewCredential::parse(fields, |field, url| check_url(field, url, self.allow_private))
    }

    pub async fn create(&self, n: NewConnection, actor: &str) -> Result<Connection> {
        self.require("connections")?;
        let environment_id = EnvironmentId::parse("environment_id", &n.environment_id)?;
        check_name(&n.name)?;
        check_description(&n.description)?;
        let metadata = parse_metadata(&n.metadata_json)?;
        let kind = ConnectionKind::parse("kind", &n.kind)?;
        let url = check_url("endpoint.url", &n.url, self.allow_private)?;
        let owner = Owner::parse(&n.owner_kind, &n.owner_id)?;
        let id = ConnectionId::mint();
        let credential = match &n.credential {
            None => None,
            Some(fields) => Some(self.seal(&id, self.parse_credential(fields)?, None)?),
        };
        let now = now_ms();
        let c = Connection {
            id,
            environment_id,
            name: n.name,
            description: n.description,
            metadata,
            kind,
            url,
            owner,
            status: ConnectionStatus::Active,
            credential,
            created_by: actor.into(),
            created_ms: now,
            updated_ms: now,
            revoked_ms: None,
            version: 1,
        };
        self.store.insert_connection(&c, &[resource_record("connection.created", &c.environment_id, &c.id)]).await?;
        let details = json!({"name": c.name, "kind": c.kind.as_str(), "url": c.url, "owner": {"kind": c.owner.kind(), "id": c.owner.id()},
            "credential": c.credential.as_ref().map(|k| k.meta.kind.clone())});
        self.audit(actor, "connection.created", &c, details).await;
        Ok(c)
    }

    pub async fn get(&self, id: &str) -> Result<Connection> {
        self.require("connections")?;
        let id = ConnectionId::parse("id", id)?;
        self.store.get_connection(&id).await?.ok_or_else(|| Error::not_found("connection", &id))
    }

    pub async fn list(&self, environment_ids: &[String], kind: &str, status: &str, page: &PageRequest) -> Result<Vec<Connection>> {
        self.require("connections")?;
        let kind = (!kind.is_empty()).then(|| ConnectionKind::parse("kind", kind)).transpose()?;
        let status = (!status.is_empty()).then(|| ConnectionStatus::parse("status", status)).transpose()?;
        self.store.list_connections(environment_ids, kind, status, page).await
    }

    /// Applies `f` to the current row and writes it back if the version
    /// still matches; a client's `expected_version` must match first.
    async fn change(
        &self,
        id: &str,
        expected_version: Option<i64>,
        events: impl Fn(&Connection) -> Vec<checkfu_bus::Record>,
        f: impl Fn(&mut Connection) -> Result<()>,
    ) -> Result<(Connection, Connection)> {
        let store = &self.store;
        let events = &events;
        crate::versioned::change(
            expected_version,
            || self.get(id),
            f,
            |next: Connection, version| async move { store.update_connection(&next, version, &events(&next)).await },
        )
        .await
    }

    pub async fn update(&self, id: &str, ch: ConnectionChange, actor: &str) -> Result<Connection> {
        if let Some(n) = &ch.name {
            check_name(n)?;
        }
        if let Some(d) = &ch.description {
            check_description(d)?;
        }
        let metadata = ch.metadata_json.as_deref().map(parse_metadata).transpose()?;
        let (before, after) = self
            .change(
                id,
                ch.expected_version,
                |_| vec![],
                |c| {
                    c.writable()?;
                    if let Some(n) = &ch.name {
                        c.name = n.clone();
                    }
                    if let Some(d) = &ch.description {
                        c.description = d.clone();
                    }
                    if let Some(m) = &metadata {
                        c.metadata = m.clone();
                    }
                    if let Some(d) = ch.disabled {
                        c.status = if d { ConnectionStatus::Disabled } else { ConnectionStatus::Active };
                    }
                    Ok(())
                },
            )
            .await?;
        let details = json!({"before": {"name": before.name, "status": before.status.as_str()},
            "after": {"name": after.name, "status": after.status.as_str()}});
        self.audit(actor, "connection.updated", &after, details).await;
        Ok(after)
    }

    /// Terminal: the credential is destroyed in the same write; the record
    /// stays readable.
    pub async fn revoke(&self, id: &str, actor: &str) -> Result<Connection> {
        let (_, after) = self
            .change(
                id,
                None,
                |c| vec![resource_record("connection.revoked", &c.environment_id, &c.id)],
                |c| {
                    c.writable()?;
                    c.status = ConnectionStatus::Revoked;
                    c.credential = None;
                    c.revoked_ms = Some(now_ms());
                    Ok(())
                },
            )
            .await?;
        self.audit(actor, "connection.revoked", &after, json!({"name": after.name})).await;
        Ok(after)
    }

    /// Sets or replaces (rotates) the credential.
    pub async fn set_credential(&self, id: &str, fields: &CredentialFields, actor: &str) -> Result<Connection> {
        self.keys()?;
        let current = self.get(id).await?;
        current.writable()?;
        let cred = self.parse_credential(fields)?;
        let (before, after) = self
            .change(
                id,
                None,
                |_| vec![],
                |c| {
                    c.writable()?;
                    c.credential = Some(self.seal(&c.id, cred.clone(), c.credential.as_ref())?);
                    Ok(())
                },
            )
            .await?;
        let action = if before.credential.is_some() { "connection.credential_rotated" } else { "connection.credential_set" };
        self.audit(actor, action, &after, json!({"type": cred.meta.kind})).await;
        Ok(after)
    }

    pub async fn delete_credential(&self, id: &str, actor: &str) -> Result<Connection> {
        let (before, after) = self
            .change(
                id,
                None,
                |_| vec![],
                |c| {
                    c.writable()?;
                    c.credential = None;
                    Ok(())
                },
            )
            .await?;
        let kind = before.credential.as_ref().map(|k| k.meta.kind.clone());
        self.audit(actor, "connection.credential_deleted", &after, json!({"type": kind})).await;
        Ok(after)
    }

    /// The read form's `state`: `unreadable` when the key that wrapped it
    /// is not in the key file (or there is no key file).
    pub fn state_of(&self, k: &StoredCredential) -> CredentialState {
        match &self.keys {
            Some(keys) if keys.has(&k.envelope.key_id) => k.state,
            _ => CredentialState::Unreadable,
        }
    }

    /// Re-wraps every credential's data key under the key file's first key.
    pub async fn rewrap(&self) -> Result<Rewrapped> {
        rewrap_all(self.store.as_ref(), self.keys()?).await
    }
}

/// Re-wraps every stored credential's data key under `keys`' first key
/// (idempotent: one already under it is left alone; the secret itself is
/// never opened).
pub async fn rewrap_all(store: &dyn ReachStore, keys: &KeyRing) -> Result<Rewrapped> {
    let mut out = Rewrapped::default();
    let mut after = String::new();
    loop {
        let page = store.with_credentials_after(&after, 200).await?;
        let Some(last) = page.last() else { return Ok(out) };
        after = last.id.to_string();
        for c in page {
            let Some(k) = &c.credential else { continue };
            if k.envelope.key_id == keys.current() {
                out.current += 1;
                continue;
            }
            let Some(envelope) = keys.rewrap(&k.envelope) else {
                out.unreadable += 1;
                continue;
            };
            let mut next = c.clone();
            if let Some(n) = next.credential.as_mut() {
                n.envelope = envelope;
            }
            // The version is kept: a rewrap changes nothing a client wrote.
            if store.update_connection(&next, c.version, &[]).await? {
                out.rewrapped += 1;
            } else {
                // Changed meanwhile, so sealed under the current key already.
                out.current += 1;
            }
        }
    }
}

/// A feature's preview flag, limits and whether this build has it; `None`
/// for a name this service does not describe.
pub(crate) fn feature(name: &str) -> Option<(bool, Value, bool)> {
    Some(match name {
        "connections" => (false, json!({"max_url_bytes": MAX_URL, "max_name_chars": 200}), true),
        "credentials" => (false, json!({"max_secret_bytes": MAX_SECRET}), true),
        "tool_sources" => (
            false,
            json!({"max_tools": MAX_TOOLS, "max_schema_bytes": MAX_SCHEMA_BYTES, "max_call_timeout_seconds": MAX_CALL_TIMEOUT_SECONDS,
                    "max_response_bytes": crate::mcp::MAX_RESPONSE_BYTES, "transports": ["streamable_http"]}),
            true,
        ),
        "sandbox_egress" => (false, json!({"schemes": ["http", "connect"], "max_request_head_bytes": 16_384}), true),
        // Skills and Files are served by the sessions service;
        // these are its limits (sessions `model/skills.rs`, `model/uploads.rs`).
        "skills" => (
            false,
            json!({"max_files": 512, "max_bytes": 8 << 20, "max_body_bytes": 12 << 20, "max_path_bytes": 256, "max_per_definition": 500}),
            true,
        ),
        "files" => (
            false,
            json!({"max_bytes": 64 << 20, "max_window_bytes": 8 << 20, "max_blocks_per_message": 20, "max_image_bytes": 5 << 20,
                    "expires_in_seconds": {"min": 3_600, "max": 31_536_000}}),
            true,
        ),
        "http_connections" => (true, json!({}), false),
        // Served by the memory service (`model.rs` there).
        "memory" => (false, json!({"max_path_bytes": 1024, "max_document_bytes": 256 * 1024, "max_proposal_changes": 1000}), true),
        // Served by the gateway under `/cma` (docs/cma.md).
        "cma_projection" => (false, json!({"sdk": "anthropic 2.14", "max_events_per_send": 50, "max_initial_events": 50}), true),
        // Managed Tools (api.md §18.11): `step_managed_tool` is refused, as
        // there is no Managed Tool provider adapter, release catalog or
        // charge settlement to run one — and nothing falls back to a
        // Connection.
        "managed_tools" => (true, json!({}), true),
        // Provider events (api.md §18.9), served by the scheduler through
        // http Connections; `GET /v1/provider-triggers` lists the providers.
        "provider_triggers" => (false, json!({"max_events": 32, "max_body_bytes": 1 << 20, "modes": ["automatic", "manual"]}), true),
        _ => return None,
    })
}

/// A feature's availability.
#[derive(Debug, Clone, PartialEq)]
pub struct Capability {
    pub name: String,
    pub reason: Option<String>,
    pub preview: bool,
    pub limits: Value,
}
