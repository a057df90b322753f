//! ToolSources (api.md §16.4): discovery through a Connection, per-tool
//! enablement, what publication pins, what a Run is offered, and the
//! governed call itself — the last step, after governance allowed it:
//! re-check the Connection and the ToolSource, inject the credential,
//! `tools/call`, redact what comes back.
//!
//! Who may manage a ToolSource was decided by the gateway; who may call a
//! tool was decided by governance (the runner asked). This service checks
//! that the Run's capability token names the Session and the tool.

use crate::connections::ReachService;
use crate::mcp::{self, McpFailure, Upstream};
use crate::model::*;
use crate::oauth;
use checkfu_core::id::{ConnectionId, EnvironmentId, ToolSourceId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use serde_json::{Value, json};
use std::time::Duration;

/// A ToolSource to create, as the caller sent it.
#[derive(Debug, Clone, Default)]
pub struct NewToolSource {
    pub environment_id: String,
    pub name: String,
    pub description: String,
    pub connection_id: String,
    pub transport: String,
    pub default_enabled: bool,
    pub call_timeout_seconds: Option<i64>,
    pub sync_interval_seconds: Option<i64>,
}

#[derive(Debug, Clone, Default)]
pub struct ToolSourceChange {
    pub name: Option<String>,
    pub description: Option<String>,
    pub call_timeout_seconds: Option<i64>,
    pub sync_interval_seconds: Option<i64>,
    pub expected_version: Option<i64>,
}

/// A call that did not produce a result: `code: message` in an
/// `is_error` tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFailure {
    pub code: String,
    pub message: String,
}

impl CallFailure {
    fn new(code: &str, message: impl Into<String>) -> Self {
        CallFailure { code: code.into(), message: message.into() }
    }

    pub fn text(&self) -> String {
        format!("{}: {}", self.code, self.message)
    }
}

impl From<McpFailure> for CallFailure {
    fn from(f: McpFailure) -> Self {
        CallFailure { code: f.code(), message: f.message() }
    }
}

/// A tool as a Run is offered it.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// One `tools/call` to make: where, what, and its `_meta`.
pub(crate) struct Dispatch<'a> {
    /// Set: the ToolSource must be this Environment's (an Automation's
    /// step names its Environment; a Run's token already scopes it).
    pub environment_id: Option<&'a str>,
    pub tool_source_id: &'a str,
    pub connection_id: &'a str,
    pub tool: &'a str,
    pub arguments: Value,
    pub meta: Option<Value>,
}

/// What a call answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallAnswer {
    pub text: String,
    pub is_error: bool,
}

impl ReachService {
    pub async fn tool_source(&self, id: &str) -> Result<ToolSource> {
        self.require("tool_sources")?;
        let id = ToolSourceId::parse("id", id)?;
        self.store.get_tool_source(&id).await?.ok_or_else(|| Error::not_found("tool_source", &id))
    }

    pub async fn list_tool_sources(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<ToolSource>> {
        self.require("tool_sources")?;
        self.store.list_tool_sources(environment_ids, page).await
    }

    async fn audit_tool_source(&self, actor: &str, action: &str, t: &ToolSource, details: Value) {
        self.audit_resource(actor, action, "tool_source", &t.id, details).await;
    }

    pub async fn create_tool_source(&self, n: NewToolSource, actor: &str) -> Result<ToolSource> {
        self.require("tool_sources")?;
        if !n.transport.is_empty() && n.transport != "streamable_http" {
            return Err(Error::invalid_field("transport", "only streamable_http is supported: there is no stdio on the managed plane")
                .with_reason("transport_unsupported"));
        }
        let environment_id = EnvironmentId::parse("environment_id", &n.environment_id)?;
        check_name(&n.name)?;
        check_description(&n.description)?;
        let call_timeout_seconds = n.call_timeout_seconds.unwrap_or(DEFAULT_CALL_TIMEOUT_SECONDS);
        let sync_interval_seconds = n.sync_interval_seconds.unwrap_or(DEFAULT_SYNC_INTERVAL_SECONDS);
        check_timeouts(call_timeout_seconds, sync_interval_seconds)?;
        let connection_id = ConnectionId::parse("connection_id", &n.connection_id)?;
        let c = self.store.get_connection(&connection_id).await?;
        let c = match c {
            Some(c) if c.environment_id == environment_id => c,
            _ => {
                return Err(Error::invalid_field(
                    "connection_id",
                    format!("connection {connection_id} is not in environment {environment_id}"),
                ));
            }
        };
        if c.kind != ConnectionKind::Mcp {
            return Err(Error::invalid_field("connection_id", "a ToolSource needs an mcp Connection"));
        }
        if c.status != ConnectionStatus::Active {
            return Err(Error::conflict(format!("connection {} is {}", c.id, c.status.as_str())).with_reason("connection_unavailable"));
        }
        let now = now_ms();
        let t = ToolSource {
            id: ToolSourceId::mint(),
            environment_id,
            name: n.name,
            description: n.description,
            connection_id,
            default_enabled: n.default_enabled,
            call_timeout_seconds,
            sync_interval_seconds,
            tools: vec![],
            overrides: Default::default(),
            sync_status: None,
            sync_error: None,
            synced_ms: None,
            status: ToolSourceStatus::Active,
            created_by: actor.into(),
            created_ms: now,
            updated_ms: now,
            version: 1,
        };
        self.store.insert_tool_source(&t).await?;
        let details = json!({"name": t.name, "connection_id": t.connection_id, "default_config": {"enabled": t.default_enabled}});
        self.audit_tool_source(actor, "tool_source.created", &t, details).await;
        // The first sync: the ToolSource exists even if it fails.
        self.sync(&t.id, actor).await
    }

    /// Applies `f` under compare-and-set on `version`.
    async fn change_tool_source(
        &self,
        id: &str,
        expected_version: Option<i64>,
        f: impl Fn(&mut ToolSource) -> Result<()>,
    ) -> Result<(ToolSource, ToolSource)> {
        let store = &self.store;
        crate::versioned::change(
            expected_version,
            || self.tool_source(id),
            f,
            |next: ToolSource, version| async move { store.update_tool_source(&next, version).await },
        )
        .await
    }

    pub async fn update_tool_source(&self, id: &str, ch: ToolSourceChange, actor: &str) -> Result<ToolSource> {
        if let Some(n) = &ch.name {
            check_name(n)?;
        }
        if let Some(d) = &ch.description {
            check_description(d)?;
        }
        let (before, after) = self
            .change_tool_source(id, ch.expected_version, |t| {
                if t.status == ToolSourceStatus::Archived {
                    return Err(Error::conflict(format!("tool source {} is archived", t.id)).with_reason("tool_source_archived"));
                }
                let call = ch.call_timeout_seconds.unwrap_or(t.call_timeout_seconds);
                let sync = ch.sync_interval_seconds.unwrap_or(t.sync_interval_seconds);
                check_timeouts(call, sync)?;
                t.call_timeout_seconds = call;
                t.sync_interval_seconds = sync;
                if let Some(n) = &ch.name {
                    t.name = n.clone();
                }
                if let Some(d) = &ch.description {
                    t.description = d.clone();
                }
                Ok(())
            })
            .await?;
        let view = |t: &ToolSource| json!({"name": t.name, "call_timeout_seconds": t.call_timeout_seconds, "sync_interval_seconds": t.sync_interval_seconds});
        self.audit_tool_source(actor, "tool_source.updated", &after, json!({"before": view(&before), "after": view(&after)})).await;
        Ok(after)
    }

    /// Later publications naming it are refused; calls answer
    /// `tool.not_offered`.
    pub async fn archive_tool_source(&self, id: &str, actor: &str) -> Result<ToolSource> {
        let (_, after) = self
            .change_tool_source(id, None, |t| {
                t.status = ToolSourceStatus::Archived;
                Ok(())
            })
            .await?;
        self.audit_tool_source(actor, "tool_source.archived", &after, json!({"name": after.name})).await;
        Ok(after)
    }

    /// Sets one tool's enablement (`None`: follow `default_config`). No
    /// sync changes it.
    pub async fn set_tool(&self, id: &str, tool: &str, enabled: Option<bool>, actor: &str) -> Result<ToolSource> {
        let (before, after) = self
            .change_tool_source(id, None, |t| {
                if t.tool(tool).is_none() && !t.overrides.contains_key(tool) {
                    return Err(Error::not_found("tool", tool));
                }
                match enabled {
                    Some(e) => t.overrides.insert(tool.to_string(), e),
                    None => t.overrides.remove(tool),
                };
                Ok(())
            })
            .await?;
        let details = json!({"tool": tool, "before": before.enabled(tool), "after": after.enabled(tool)});
        self.audit_tool_source(actor, "tool_source.tool_set", &after, details).await;
        Ok(after)
    }

    /// Discovery: `initialize` and every page of `tools/list` through the
    /// Connection. A failure keeps the last good list and says why.
    pub async fn sync(&self, id: &ToolSourceId, actor: &str) -> Result<ToolSource> {
        let t = self.tool_source(id).await?;
        if t.status == ToolSourceStatus::Archived {
            return Err(Error::conflict(format!("tool source {} is archived", t.id)).with_reason("tool_source_archived"));
        }
        let listed = self.list_upstream(&t).await;
        let now = now_ms();
        let (_, after) = self
            .change_tool_source(id, None, |next| {
                next.synced_ms = Some(now);
                match &listed {
                    Ok(tools) => {
                        next.tools = tools.clone();
                        next.sync_status = Some(SyncStatus::Ok);
                        next.sync_error = None;
                    }
                    Err(e) => {
                        next.sync_status = Some(SyncStatus::Failed);
                        next.sync_error = Some(e.clone());
                    }
                }
                Ok(())
            })
            .await?;
        let names = |l: &[SourceTool]| l.iter().map(|x| x.name.clone()).collect::<Vec<_>>();
        let details = match &listed {
            Ok(tools) => {
                let (old, new) = (names(&t.tools), names(tools));
                let changed: Vec<&String> =
                    new.iter().filter(|n| old.contains(n) && t.tool(n) != tools.iter().find(|x| &&x.name == n)).collect();
                json!({"sync_status": "ok", "added": new.iter().filter(|n| !old.contains(n)).collect::<Vec<_>>(),
                    "removed": old.iter().filter(|n| !new.contains(n)).collect::<Vec<_>>(), "changed": changed})
            }
            Err(e) => json!({"sync_status": "failed", "sync_error": {"type": e.kind, "message": e.message}}),
        };
        self.audit_tool_source(actor, "tool_source.synced", &after, details).await;
        Ok(after)
    }

    async fn list_upstream(&self, t: &ToolSource) -> std::result::Result<Vec<SourceTool>, SyncError> {
        let failed = |kind: &str, message: String| SyncError { kind: kind.into(), message };
        let c = self.store.get_connection(&t.connection_id).await.ok().flatten();
        let Some(c) = c.filter(|c| c.status == ConnectionStatus::Active) else {
            return Err(failed("unreachable", "the Connection is disabled or revoked".into()));
        };
        let (listed, secrets) =
            self.with_refresh(&c, |up| async move { mcp::list_tools(&up).await }).await.map_err(|f| failed(&f.code, f.message))?;
        let listed =
            listed.map_err(|f| failed(f.sync_type(), redact(&f.message(), &secrets.iter().map(String::as_str).collect::<Vec<_>>())))?;
        let tools = listed
            .into_iter()
            .filter_map(|v| {
                Some(SourceTool {
                    name: v.get("name")?.as_str()?.to_string(),
                    description: v.get("description").and_then(Value::as_str).unwrap_or_default().chars().take(4096).collect(),
                    input_schema: v.get("inputSchema").cloned().unwrap_or(json!({"type": "object"})),
                    annotations: v.get("annotations").cloned().unwrap_or(json!({})),
                })
            })
            .collect();
        bounded(tools).map_err(|m| failed("protocol_error", m))
    }

    /// Syncs every ToolSource whose interval is due (a batch at a time).
    pub async fn sync_due(&self) -> Result<usize> {
        let due = self.store.due_tool_sources(now_ms(), 20).await?;
        for t in &due {
            if let Err(e) = self.sync(&t.id, "system").await {
                tracing::warn!(tool_source_id = %t.id, error = %e.message, "a periodic sync failed");
            }
        }
        Ok(due.len())
    }

    /// Publication: the ToolSource is this Environment's and active, and
    /// every named tool is offered; the Connection it pins.
    pub async fn resolve_for_publication(&self, environment_id: &str, id: &str, tools: &[String]) -> Result<ConnectionId> {
        let t = match self.tool_source(id).await {
            Ok(t) if t.environment_id.as_str() == environment_id => t,
            Ok(_) | Err(Error { code: checkfu_core::Code::NotFound, .. }) => {
                return Err(Error::invalid_field("tool_source_id", format!("tool source {id} is not in environment {environment_id}")));
            }
            Err(e) => return Err(e),
        };
        if t.status == ToolSourceStatus::Archived {
            return Err(Error::conflict(format!("tool source {id} is archived")).with_reason("tool_source_archived"));
        }
        let missing: Vec<&String> = tools.iter().filter(|n| !t.offers(n)).collect();
        if !missing.is_empty() {
            return Err(Error::invalid_field("tools", format!("tool source {id} does not offer {missing:?}"))
                .with_details(json!({"field": "tools", "tool_source_id": id, "tools": missing}))
                .with_reason("tool_not_offered"));
        }
        Ok(t.connection_id)
    }

    /// How a Connection of `environment_id` stands now; "" when there is
    /// none there.
    pub async fn connection_status(&self, connection_id: &str, environment_id: &str) -> Result<String> {
        let id = ConnectionId::parse("connection_id", connection_id)?;
        Ok(match self.store.get_connection(&id).await? {
            Some(c) if c.environment_id.as_str() == environment_id => c.status.as_str().to_string(),
            _ => String::new(),
        })
    }

    /// What a Run is offered of `names`: the ones still offered, as cached.
    pub async fn offered(&self, id: &str, names: &[String]) -> Result<Vec<OfferedTool>> {
        let t = self.tool_source(id).await?;
        Ok(names
            .iter()
            .filter(|n| t.offers(n))
            .filter_map(|n| t.tool(n))
            .map(|x| OfferedTool { name: x.name.clone(), description: x.description.clone(), input_schema: x.input_schema.clone() })
            .collect())
    }

    /// One governed `tools/call`, already allowed. Every failure is an
    /// answer (`is_error`), never an error of the RPC.
    pub async fn call(&self, tool_source_id: &str, connection_id: &str, tool: &str, arguments: Value) -> CallAnswer {
        let sent = std::sync::atomic::AtomicBool::new(false);
        match self.dispatch(&Dispatch { environment_id: None, tool_source_id, connection_id, tool, arguments, meta: None }, &sent).await {
            Ok(c) => CallAnswer { text: c.text, is_error: c.is_error },
            Err(f) => CallAnswer { text: f.text(), is_error: true },
        }
    }

    /// Checks the ToolSource and Connection again, injects the credential
    /// and sends the `tools/call`; the answer with every secret redacted.
    /// `sent` says whether a failure came after the request was written.
    pub(crate) async fn dispatch(
        &self,
        d: &Dispatch<'_>,
        sent: &std::sync::atomic::AtomicBool,
    ) -> std::result::Result<mcp::Called, CallFailure> {
        let (tool_source_id, connection_id, tool) = (d.tool_source_id, d.connection_id, d.tool);
        if let Err(e) = self.require("tool_sources") {
            return Err(CallFailure::new("capability.unavailable", e.message));
        }
        let not_offered = || CallFailure::new("tool.not_offered", format!("{tool} is not offered by tool source {tool_source_id}"));
        let t = self.tool_source(tool_source_id).await.map_err(|_| not_offered())?;
        let elsewhere = d.environment_id.is_some_and(|e| t.environment_id.as_str() != e);
        if elsewhere || !t.offers(tool) || t.connection_id.as_str() != connection_id {
            return Err(not_offered());
        }
        let c = self.store.get_connection(&t.connection_id).await.ok().flatten();
        let Some(c) = c.filter(|c| c.status == ConnectionStatus::Active) else {
            return Err(CallFailure::new("connection.unavailable", format!("connection {connection_id} is disabled or revoked")));
        };
        let timeout = Duration::from_secs(t.call_timeout_seconds.clamp(1, MAX_CALL_TIMEOUT_SECONDS) as u64);
        let (called, secrets) = self
            .with_refresh(&c, |up| {
                let (arguments, meta) = (d.arguments.clone(), d.meta.clone());
                async move { mcp::call_tool(&up, tool, arguments, meta, timeout, sent).await }
            })
            .await?;
        if c.credential.is_some() {
            let _ = self.store.touch_credential(&c.id, now_ms()).await;
        }
        let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
        match called {
            Ok(r) => Ok(mcp::Called {
                text: redact(&r.text, &secrets),
                is_error: r.is_error,
                structured: r.structured.and_then(|v| serde_json::from_str(&redact(&v.to_string(), &secrets)).ok()),
            }),
            Err(f) => Err(CallFailure { code: f.code(), message: redact(&f.message(), &secrets) }),
        }
    }

    /// Runs `attempt` against the Connection's upstream. A 401 reached no
    /// tool, so with a refreshable credential it refreshes once and tries
    /// again. The outcome, and every secret to redact from it.
    async fn with_refresh<T, F, Fut>(
        &self,
        c: &Connection,
        attempt: F,
    ) -> std::result::Result<(std::result::Result<T, McpFailure>, Vec<String>), CallFailure>
    where
        F: Fn(Upstream) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, McpFailure>>,
    {
        let (up, mut secrets) = self.upstream(c, false).await?;
        let mut outcome = attempt(up).await;
        if matches!(outcome, Err(McpFailure::AuthenticationFailed)) && self.refreshable(c) {
            let (up, more) = self.upstream(c, true).await?;
            secrets.extend(more);
            outcome = attempt(up).await;
        }
        Ok((outcome, secrets))
    }

    fn refreshable(&self, c: &Connection) -> bool {
        c.credential.as_ref().is_some_and(|k| k.meta.kind() == CredentialType::OAuth2Refresh)
    }

    /// Where to send a Connection's requests, with its credential's
    /// headers, and every secret to redact from what comes back. An OAuth
    /// access token is refreshed first when none is valid for 60 s more
    /// (or always, with `force`).
    pub(crate) async fn upstream(&self, c: &Connection, force: bool) -> std::result::Result<(Upstream, Vec<String>), CallFailure> {
        let mut up = Upstream { url: c.url.clone(), headers: http::HeaderMap::new(), allow_private: self.allow_private };
        let Some(k) = &c.credential else { return Ok((up, vec![])) };
        let unreadable =
            || CallFailure::new("credential.unreadable", "the Connection's credential cannot be opened (its key is not in the key file)");
        let keys = self.keys.as_deref().ok_or_else(unreadable)?;
        let mut secret = keys.open(&c.id, &k.envelope).and_then(|b| Secret::from_bytes(&b)).ok_or_else(unreadable)?;
        if let Secret::OAuth2Refresh { access_token, access_expires_ms, .. } = &secret
            && (force || access_token.is_none() || *access_expires_ms - now_ms() < oauth::REFRESH_MARGIN_MS)
        {
            secret = self.refresh(c, force).await?;
        }
        up.headers = upstream_headers(&k.meta, &secret).map_err(|_| unreadable())?;
        Ok((up, secret.values().into_iter().map(str::to_string).collect()))
    }

    /// Refreshes an OAuth credential (one refresh at a time per Connection
    /// in this process), stores the new tokens sealed, and records a
    /// failure: `refresh_failed`, audited, webhook `connection.refresh_failed`.
    /// Unless `force`d, a token another call refreshed meanwhile is used.
    async fn refresh(&self, c: &Connection, force: bool) -> std::result::Result<Secret, CallFailure> {
        let lock = self.refresh_lock(&c.id);
        let _held = lock.lock().await;
        let current = self.store.get_connection(&c.id).await.ok().flatten().filter(|x| x.status == ConnectionStatus::Active);
        let Some(current) = current else {
            return Err(CallFailure::new("connection.unavailable", format!("connection {} is disabled or revoked", c.id)));
        };
        let unreadable =
            || CallFailure::new("credential.unreadable", "the Connection's credential cannot be opened (its key is not in the key file)");
        let k = current.credential.clone().ok_or_else(unreadable)?;
        let keys = self.keys.as_deref().ok_or_else(unreadable)?;
        let fresh = keys.open(&c.id, &k.envelope).and_then(|b| Secret::from_bytes(&b)).ok_or_else(unreadable)?;
        if let Secret::OAuth2Refresh { access_token: Some(_), access_expires_ms, .. } = &fresh
            && !force
            && *access_expires_ms - now_ms() >= oauth::REFRESH_MARGIN_MS
        {
            return Ok(fresh);
        }
        let Secret::OAuth2Refresh { refresh_token, client_secret, .. } = &fresh else {
            return Ok(fresh);
        };
        let grant = oauth::Grant {
            token_endpoint: k.meta.token_endpoint.as_deref().unwrap_or_default(),
            client_id: k.meta.client_id.as_deref().unwrap_or_default(),
            client_secret: client_secret.as_deref(),
            auth: k.meta.token_endpoint_auth.as_deref().unwrap_or("none"),
            refresh_token,
            scope: k.meta.scope.as_deref(),
        };
        let issued = oauth::refresh(&grant, self.allow_private, now_ms()).await;
        let (next_secret, state) = match &issued {
            Ok(i) => (
                Secret::OAuth2Refresh {
                    refresh_token: i.refresh_token.clone().unwrap_or_else(|| refresh_token.clone()),
                    client_secret: client_secret.clone(),
                    access_token: Some(i.access_token.clone()),
                    access_expires_ms: i.expires_ms,
                },
                CredentialState::Ok,
            ),
            Err(_) => (fresh.clone(), CredentialState::RefreshFailed),
        };
        let changed = issued.is_ok() || k.state != CredentialState::RefreshFailed;
        if changed {
            let envelope = keys.seal(&c.id, &next_secret.to_bytes().map_err(|e| CallFailure::new("credential.unreadable", e.message))?);
            let envelope = envelope.map_err(|e| CallFailure::new("credential.unreadable", e.message))?;
            let next = StoredCredential { envelope, state, ..k.clone() };
            let events = if issued.is_err() { self.refresh_failed_records(&current.environment_id, &current.id).await } else { vec![] };
            if let Err(e) = self.store.replace_credential(&c.id, &k.envelope.sealed, &next, &events).await {
                tracing::warn!(connection_id = %c.id, error = %e.message, "the refreshed credential was not stored");
            }
        }
        match issued {
            Ok(_) => Ok(next_secret),
            Err(oauth::RefreshFailed(why)) => {
                if k.state != CredentialState::RefreshFailed {
                    self.audit_resource("system", "connection.refresh_failed", "connection", &c.id, json!({"reason": why})).await;
                }
                Err(CallFailure::new("credential.refresh_failed", why))
            }
        }
    }

    /// `connection.refresh_failed`, and `vault_credential.refresh_failed`
    /// naming each live ConnectionVault that lists the Connection (a CMA
    /// vault's credential, api.md §16.2). Vaults that cannot be read now
    /// are logged and left out: the Connection's own event still goes.
    async fn refresh_failed_records(&self, environment_id: &str, connection_id: &str) -> Vec<checkfu_bus::Record> {
        let mut out = vec![checkfu_bus::resource_record("connection.refresh_failed", environment_id, connection_id)];
        let req = checkfu_proto::governance::v1::VaultsHoldingRequest { connection_id: connection_id.into() };
        match self.governance.clone().vaults_holding(req).await {
            Ok(r) => out.extend(r.into_inner().vault_ids.into_iter().map(|v| {
                let mut extra = serde_json::Map::new();
                extra.insert("vault_id".into(), serde_json::Value::String(v));
                checkfu_bus::resource_record_with("vault_credential.refresh_failed", environment_id, connection_id, extra)
            })),
            Err(status) => tracing::warn!(%connection_id, %status, "the vaults holding a connection could not be read"),
        }
        out
    }
}

#[async_trait::async_trait]
impl crate::egress::DenialSink for ReachService {
    /// Kept for the runner to take as an `egress.denied` event; the first
    /// per host and port in a Run is audited on the Session.
    async fn record(&self, d: crate::egress::Denial) {
        match self.store.record_denial(&d).await {
            Ok(true) => {
                let details = json!({"run_id": d.run_id, "host": d.host, "port": d.port, "reason": d.reason.as_str()});
                self.audit_resource("system", "egress.denied", "session", &d.session_id, details).await;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(session_id = %d.session_id, error = %e.message, "an egress refusal was not recorded"),
        }
    }
}
