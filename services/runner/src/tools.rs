//! Governed tool calls. Every call the model makes is decided by
//! governance's ActionPolicies before anything runs: `allow` runs it in the
//! Session's workspace, `deny` answers with `policy.denied` and the matched
//! rule, and `require_approval` runs only under a StandingApproval on the
//! exact tuple or once its ActionApproval is approved — until then the
//! Session waits (`requires_action`). A tool the agent did not declare is
//! refused without asking.

use crate::Runner;
use crate::model::{ApprovalStatus, Decision, Disposition};
use crate::sandbox::Workspace;
use checkfu_core::events::EventType as E;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::runner::v1 as pb;
use checkfu_proto::token::with_token;
use serde_json::{Value, json};

/// Tool results longer than this many characters become a
/// `result_truncated` envelope with a bounded preview.
pub const MAX_RESULT_CHARS: usize = 100_000;
const PREVIEW_CHARS: usize = 2_000;
const SANDBOX_TOOLS: &[&str] = &["bash", "read", "write", "edit", "glob", "grep"];

/// A tool call and how governance decided it.
pub struct Decided {
    pub call: mg::ToolUse,
    pub input: Value,
    pub declaration: Option<Value>,
    pub disposition: Disposition,
    pub matched_rule_id: Option<String>,
    pub reason: String,
    /// A gated call allowed without asking by this StandingApproval.
    pub standing_approval_id: Option<String>,
    /// A gated call waiting on this ActionApproval (id, expiry).
    pub pending_approval: Option<(String, String)>,
    /// A gated call from an earlier Run whose approval was decided.
    pub resumed: Option<Resumed>,
    /// A platform tool call the control plane refused: the result's
    /// `{error:{type, message}}` (api.md §15.3).
    pub refusal: Option<Value>,
    /// A sandbox tool of an external_tools Session: the holder of its work
    /// item runs it and answers with `user.tool_result` (api.md §17.13).
    pub external: bool,
}

/// How a call from before this Run (gated, or left unanswered by a runner
/// that died) is settled now.
#[derive(Debug, Clone)]
pub struct Resumed {
    pub approved: bool,
    pub approval_id: Option<String>,
    /// `run.action_authorized` is already in the log.
    pub authorized: bool,
}

impl Decided {
    /// Why a call that does not run was refused, for clients to explain it
    /// (`policy.denied`'s `reason`): the agent's version declares no such
    /// tool; an ActionPolicy denied it; or its approval was declined,
    /// expired or never answered (`guidance` says which, in words).
    pub fn denial_reason(&self) -> &'static str {
        match &self.resumed {
            _ if self.declaration.is_none() => "tool_not_declared",
            Some(_) if self.disposition != Disposition::Deny => "approval_not_granted",
            _ => "policy",
        }
    }

    /// Runs now: allowed by policy, a StandingApproval or an approval.
    pub fn runs(&self) -> bool {
        self.disposition == Disposition::Allow || self.standing_approval_id.is_some() || self.resumed.as_ref().is_some_and(|r| r.approved)
    }

    fn is_custom(&self) -> bool {
        self.declaration.as_ref().and_then(|x| x.get("type")).and_then(Value::as_str) == Some("custom")
    }

    fn is_platform(&self) -> bool {
        is_platform(self.declaration.as_ref())
    }

    /// Runs now, at the holder of the Session's work item.
    pub fn runs_externally(&self) -> bool {
        self.external && self.runs()
    }

    /// Whether the Session must wait before this call is answered: the host
    /// runs an allowed custom tool, or an approval is pending.
    pub fn waits(&self) -> bool {
        self.pending_approval.is_some() || (self.runs() && self.is_custom())
    }
}

/// The `content` of an `agent.tool_result`: the text, or an envelope when
/// it is too long.
pub fn result_content(text: String) -> Value {
    let chars = text.chars().count();
    if chars <= MAX_RESULT_CHARS {
        return Value::String(text);
    }
    let preview: String = text.chars().take(PREVIEW_CHARS).collect();
    json!({"type": "result_truncated", "original_chars": chars, "preview": preview})
}

/// A ToolSource declaration's ToolSource and pinned Connection.
pub(crate) fn tool_source_of(decl: Option<&Value>) -> Option<(String, String)> {
    let d = decl?;
    if d.get("type").and_then(Value::as_str) != Some("tool_source") {
        return None;
    }
    let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    Some((s("tool_source_id"), s("connection_id")))
}

/// Multiagent's `spawn_agent` and `send_message`, answered by the control
/// plane.
fn is_platform(decl: Option<&Value>) -> bool {
    decl.and_then(|x| x.get("type")).and_then(Value::as_str) == Some("platform")
}

/// Whether a tool declaration is one of the sandbox's builtins.
pub(crate) fn is_builtin(decl: Option<&Value>) -> bool {
    decl.and_then(|x| x.get("type")).and_then(Value::as_str) == Some("builtin")
}

/// Marks the sandbox tool calls of an external_tools Session: the holder
/// of its work item runs them (api.md §17.13), not this runner.
fn mark_external(work: &pb::WorkItem, decided: &mut [Decided]) {
    for d in decided.iter_mut() {
        d.external = work.external_tools && is_builtin(d.declaration.as_ref()) && SANDBOX_TOOLS.contains(&d.call.name.as_str());
    }
}

/// The tools a work item declares, in their public JSON shape: from the
/// typed list, or a 0.1.0 sessions service's text.
#[allow(deprecated)] // tools_json: a 0.1.0 sessions service's
pub(crate) fn declared(work: &pb::WorkItem) -> Vec<Value> {
    if work.tools.is_empty() {
        return serde_json::from_str(&work.tools_json).unwrap_or_default();
    }
    work.tools.iter().map(checkfu_proto::sessions::v1::ToolDeclaration::to_json).collect()
}

pub(crate) fn declaration<'a>(tools: &'a [Value], name: &str) -> Option<&'a Value> {
    tools.iter().find(|d| match d.get("type").and_then(Value::as_str) {
        Some("tool_source") => d.get("tools").and_then(Value::as_array).is_some_and(|t| t.iter().any(|n| n == name)),
        _ => d.get("name").and_then(Value::as_str) == Some(name),
    })
}

impl Runner {
    /// Asks governance about each call.
    pub(crate) async fn decide(&self, work: &pb::WorkItem, calls: Vec<mg::ToolUse>) -> Result<Vec<Decided>, tonic::Status> {
        let tools = declared(work);
        #[allow(deprecated)] // a 0.1.0 sessions service sends only the JSON text
        let pins = checkfu_proto::views::execution_pins(work.execution_pins.as_ref(), &work.execution_pins_json);
        let agent_id = pins.get("agent_id").and_then(Value::as_str).unwrap_or_default().to_string();
        let mut out = Vec::with_capacity(calls.len());
        for call in calls {
            let input: Value = serde_json::from_str(&call.input_json).unwrap_or(json!({}));
            let Some(decl) = declaration(&tools, &call.name).cloned() else {
                out.push(Decided {
                    reason: format!("{:?} is not a tool this agent declares", call.name),
                    call,
                    input,
                    declaration: None,
                    disposition: Disposition::Deny,
                    matched_rule_id: None,
                    standing_approval_id: None,
                    pending_approval: None,
                    resumed: None,
                    refusal: None,
                    external: false,
                });
                continue;
            };
            if is_platform(Some(&decl)) {
                out.push(self.decide_platform(work, call, input, decl).await?);
                continue;
            }
            let source = tool_source_of(Some(&decl));
            let connection_status = match &source {
                Some((_, connection_id)) => self.connection_status(work, connection_id).await?,
                None => String::new(),
            };
            let (tool_source_id, connection_id) = source.unwrap_or_default();
            // `tool_json` too, for a 0.1.0 governance until the release after it.
            #[allow(deprecated)]
            let req = gov::EvaluateActionRequest {
                environment_id: work.environment_id.clone(),
                subject: Some(gov::ResourceRef { kind: "principal".into(), id: work.principal_id.clone() }),
                resource: Some(gov::ResourceRef { kind: "tool".into(), id: call.name.clone() }),
                permission: "invoke".into(),
                tool: Some(gov::CalledTool::from_declaration(&decl)),
                tool_json: decl.to_string(),
                also: vec![
                    gov::ResourceRef { kind: "agent_definition".into(), id: agent_id.clone() },
                    gov::ResourceRef { kind: "session".into(), id: work.session_id.clone() },
                ],
                record: true,
                session_id: work.session_id.clone(),
                tool_use_id: call.id.clone(),
                connection_id,
                connection_status,
                tool_source_id,
            };
            let d = self.governance.clone().evaluate_action(with_token(req, &self.token(work))).await?.into_inner();
            let mut decided = Decided {
                call,
                input,
                declaration: Some(decl),
                disposition: Disposition::from_wire(&d.disposition),
                matched_rule_id: d.matched_rule_ids.into_iter().next(),
                reason: d.reason,
                standing_approval_id: None,
                pending_approval: None,
                resumed: None,
                refusal: None,
                external: false,
            };
            if decided.disposition == Disposition::RequireApproval {
                self.ask_approval(work, &agent_id, &mut decided).await?;
            }
            out.push(decided);
        }
        mark_external(work, &mut out);
        Ok(out)
    }

    /// A platform tool call, decided by the control plane: roster,
    /// capacity, `use_agent` and ActionPolicy, and the approval it opened.
    async fn decide_platform(&self, work: &pb::WorkItem, call: mg::ToolUse, input: Value, decl: Value) -> Result<Decided, tonic::Status> {
        let req = pb::ThreadToolRequest {
            lease: work.lease.clone(),
            tool_use_id: call.id.clone(),
            name: call.name.clone(),
            input_json: input.to_string(),
            ..Default::default()
        };
        let d = self.runs.clone().decide_thread_tool(req).await?.into_inner();
        let refusal = (!d.error_type.is_empty()).then(|| json!({"error": {"type": d.error_type, "message": d.reason}}));
        Ok(Decided {
            call,
            input,
            declaration: Some(decl),
            disposition: Disposition::from_wire(&d.disposition),
            matched_rule_id: Some(d.matched_rule_id).filter(|m| !m.is_empty()),
            reason: d.reason,
            standing_approval_id: Some(d.standing_approval_id).filter(|s| !s.is_empty()),
            pending_approval: (!d.action_approval_id.is_empty()).then_some((d.action_approval_id, d.approval_expires_at)),
            resumed: None,
            refusal,
            external: false,
        })
    }

    /// Runs an allowed platform tool call in the control plane: the
    /// result's content and whether it is an error.
    async fn call_platform(&self, work: &pb::WorkItem, d: &Decided) -> (Value, bool) {
        let req = pb::ThreadToolRequest {
            lease: work.lease.clone(),
            tool_use_id: d.call.id.clone(),
            name: d.call.name.clone(),
            input_json: d.input.to_string(),
            action_approval_id: d.resumed.as_ref().and_then(|r| r.approval_id.clone()).unwrap_or_default(),
            standing_approval_id: d.standing_approval_id.clone().unwrap_or_default(),
        };
        match self.runs.clone().call_thread_tool(req).await {
            Ok(r) => {
                let r = r.into_inner();
                (serde_json::from_str(&r.content_json).unwrap_or(Value::Null), r.is_error)
            }
            Err(status) => (json!({"error": {"type": "unavailable", "message": status.message()}}), true),
        }
    }

    /// A gated call: covered by a StandingApproval on the exact tuple, or
    /// an ActionApproval freezing its context is now pending.
    async fn ask_approval(&self, work: &pb::WorkItem, agent_id: &str, d: &mut Decided) -> Result<(), tonic::Status> {
        let req = gov::RequestApprovalRequest {
            environment_id: work.environment_id.clone(),
            session_id: work.session_id.clone(),
            run_id: work.run_id.clone(),
            tool_use_id: d.call.id.clone(),
            frozen: Some(gov::FrozenAction {
                principal_id: work.principal_id.clone(),
                agent_id: agent_id.to_string(),
                tool: d.call.name.clone(),
                connection_id: tool_source_of(d.declaration.as_ref()).map(|(_, c)| c).unwrap_or_default(),
                arguments_json: d.input.to_string(),
                arguments_sha256: String::new(),
            }),
        };
        let r = self.governance.clone().request_approval(with_token(req, &self.token(work))).await?.into_inner();
        match r.approval {
            Some(a) if r.standing_approval_id.is_empty() => d.pending_approval = Some((a.id, a.expires_at)),
            _ => d.standing_approval_id = Some(r.standing_approval_id),
        }
        Ok(())
    }

    /// Runs an allowed call; the text and whether it failed.
    pub(crate) async fn execute_tool(&self, work: &pb::WorkItem, d: &Decided) -> (String, bool) {
        let session_id = work.session_id.as_str();
        let kind = d.declaration.as_ref().and_then(|x| x.get("type")).and_then(Value::as_str).unwrap_or_default();
        if kind == "builtin" && SANDBOX_TOOLS.contains(&d.call.name.as_str()) {
            let limits = crate::sync::limits(work, self.cfg.sandbox_cgroup.clone());
            if let Some(pods) = &self.kubernetes {
                let proxy = if d.call.name == "bash" { self.pod_proxy_url(work).await } else { String::new() };
                let out = match pods.open(work, limits).await {
                    Ok(sandbox) => {
                        self.restore_pod_once(work, &sandbox).await;
                        sandbox.run_via(&d.call.name, &d.input, proxy, crate::sync::writable_mounts(work)).await
                    }
                    Err(e) => crate::sandbox::Outcome { content: format!("the sandbox is unavailable: {e}"), is_error: true },
                };
                return (out.content, out.is_error);
            }
            let ws = match Workspace::open(&self.cfg.workspaces.join(session_id), self.isolation(), limits) {
                Ok(ws) => ws,
                Err(e) => return (format!("the session workspace is unavailable: {e}"), true),
            };
            // bash's one route out, for this command only.
            let link = if d.call.name == "bash" { self.egress_link(work).await } else { None };
            let egress = link.as_ref().zip(self.cfg.egress_relay.as_ref()).map(|(l, relay)| crate::sandbox::SandboxEgress {
                socket_dir: l.socket_dir().to_path_buf(),
                proxy_url: l.proxy_url.clone(),
                relay: relay.clone(),
            });
            let out = ws.with_egress(egress).with_writable_mounts(crate::sync::writable_mounts(work)).run(&d.call.name, &d.input).await;
            drop(link);
            return (out.content, out.is_error);
        }
        if kind == "builtin" && d.call.name == "web_fetch" {
            return self.web_fetch(work, &d.input).await;
        }
        if let Some((tool_source_id, connection_id)) = tool_source_of(d.declaration.as_ref()) {
            return self.call_tool_source(work, &tool_source_id, &connection_id, &d.call.name, &d.input).await;
        }
        ("custom (host-side) tools are answered by the client (user.custom_tool_result)".into(), true)
    }

    /// The egress proxy's route for one bash command, when this runner can
    /// relay into bubblewrap and the installation runs the proxy; `None`
    /// leaves the sandbox without a network.
    async fn egress_link(&self, work: &pb::WorkItem) -> Option<crate::egress::EgressLink> {
        self.cfg.egress_relay.as_ref()?;
        if self.isolation() != crate::sandbox::Isolation::Bubblewrap {
            return None;
        }
        let grant = self.grant_egress(work).await?;
        match crate::egress::EgressLink::open(&grant.proxy_address, &grant.token) {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::warn!(error = %e, "the sandbox's egress relay could not be opened");
                None
            }
        }
    }

    /// An egress token for this Run and where the proxy listens; `None`
    /// when the installation runs no proxy (the command gets no network).
    async fn grant_egress(&self, work: &pb::WorkItem) -> Option<checkfu_proto::capability::v1::GrantEgressResponse> {
        let req = checkfu_proto::capability::v1::GrantEgressRequest { session_id: work.session_id.clone() };
        match self.capabilities.clone().grant_egress(with_token(req, &self.token(work))).await {
            Ok(g) => Some(g.into_inner()),
            Err(status) => {
                tracing::debug!(error = %status.message(), "no sandbox egress for this command");
                None
            }
        }
    }

    /// The egress proxy's URL for a bash command in a sandbox pod: by
    /// address, since the pod may not resolve names (its policy admits the
    /// capability gateway alone); empty when there is no proxy.
    async fn pod_proxy_url(&self, work: &pb::WorkItem) -> String {
        let Some(grant) = self.grant_egress(work).await else { return String::new() };
        match tokio::net::lookup_host(grant.proxy_address.as_str()).await.ok().and_then(|mut a| a.next()) {
            Some(addr) => format!("http://egress:{}@{addr}", grant.token),
            None => String::new(),
        }
    }

    /// The egress proxy's refusals during this Run's commands, as
    /// `egress.denied` events (the first per host and port in a Run).
    pub(crate) async fn egress_denials(&self, work: &pb::WorkItem) -> Vec<(E, String)> {
        let req = checkfu_proto::capability::v1::TakeEgressDenialsRequest { session_id: work.session_id.clone() };
        match self.capabilities.clone().take_egress_denials(with_token(req, &self.token(work))).await {
            Ok(r) => r
                .into_inner()
                .denials
                .into_iter()
                .map(|d| (E::EgressDenied, json!({"host": d.host, "port": d.port, "reason": d.reason}).to_string()))
                .collect(),
            Err(_) => vec![],
        }
    }

    /// How a pinned Connection stands now, for governance's decision.
    async fn connection_status(&self, work: &pb::WorkItem, connection_id: &str) -> Result<String, tonic::Status> {
        let req = checkfu_proto::capability::v1::ConnectionStatusRequest {
            session_id: work.session_id.clone(),
            connection_id: connection_id.to_string(),
        };
        Ok(self.capabilities.clone().get_connection_status(with_token(req, &self.token(work))).await?.into_inner().status)
    }

    /// A ToolSource tool runs in the capability gateway, which holds the
    /// credential; the sandbox never takes part.
    async fn call_tool_source(
        &self,
        work: &pb::WorkItem,
        tool_source_id: &str,
        connection_id: &str,
        tool: &str,
        input: &Value,
    ) -> (String, bool) {
        let req = checkfu_proto::capability::v1::CallToolRequest {
            session_id: work.session_id.clone(),
            tool_source_id: tool_source_id.into(),
            connection_id: connection_id.into(),
            tool: tool.into(),
            arguments_json: input.to_string(),
        };
        match self.capabilities.clone().call_tool(with_token(req, &self.token(work))).await {
            Ok(r) => {
                let r = r.into_inner();
                (r.text, r.is_error)
            }
            Err(status) => (format!("capability.unavailable: {}", status.message()), true),
        }
    }

    /// The tools of the Run's ToolSource declarations still offered, with
    /// their schemas, for the model.
    pub(crate) async fn offered_tool_specs(&self, work: &pb::WorkItem, tools: &[Value]) -> Vec<mg::ToolSpec> {
        let mut out = vec![];
        for d in tools.iter().filter(|d| d.get("type").and_then(Value::as_str) == Some("tool_source")) {
            let names: Vec<String> =
                d.get("tools").and_then(Value::as_array).into_iter().flatten().filter_map(|n| n.as_str().map(str::to_string)).collect();
            let req = checkfu_proto::capability::v1::OfferedToolsRequest {
                session_id: work.session_id.clone(),
                tool_source_id: d.get("tool_source_id").and_then(Value::as_str).unwrap_or_default().into(),
                names,
            };
            match self.capabilities.clone().offered_tools(with_token(req, &self.token(work))).await {
                Ok(r) => out.extend(r.into_inner().tools.into_iter().map(|t| mg::ToolSpec {
                    name: t.name,
                    description: t.description,
                    input_schema_json: t.input_schema_json,
                })),
                Err(status) => tracing::warn!(error = %status.message(), "the ToolSource's offered tools are unavailable for this Run"),
            }
        }
        out
    }

    /// `web_fetch` runs in the capability gateway, never in the sandbox.
    async fn web_fetch(&self, work: &pb::WorkItem, input: &Value) -> (String, bool) {
        let Some(url) = input.get("url").and_then(Value::as_str) else {
            return ("web_fetch needs a string \"url\"".into(), true);
        };
        let req = checkfu_proto::capability::v1::WebFetchRequest { session_id: work.session_id.clone(), url: url.into() };
        match self.capabilities.clone().web_fetch(with_token(req, &self.token(work))).await {
            Ok(r) => {
                let r = r.into_inner();
                let cut = if r.truncated { "\n[body truncated at 1 MiB]" } else { "" };
                (format!("HTTP {} ({})\n{}{cut}", r.status, r.content_type, r.body), r.status >= 400)
            }
            Err(status) => (format!("web_fetch refused: {}", status.message()), true),
        }
    }

    /// The events a decided call produces before it is answered.
    pub(crate) fn call_events(d: &Decided) -> Vec<(E, String)> {
        let id = &d.call.id;
        if d.runs() && d.is_custom() && d.resumed.is_none() {
            let payload = json!({"custom_tool_use_id": id, "name": d.call.name, "input": d.input, "evaluated_permission": d.disposition.as_str(),
                "matched_rule_id": d.matched_rule_id});
            return vec![(E::AgentCustomToolUse, payload.to_string())];
        }
        let mut ev = vec![];
        if d.resumed.is_none() {
            let source = tool_source_of(d.declaration.as_ref());
            // Which ActionPolicy rule decided (null: the defaults), so a
            // reader can tell a rule's decision from the built-in one.
            ev.push((
                E::AgentToolUse,
                json!({"tool_use_id": id, "name": d.call.name, "input": d.input, "evaluated_permission": d.disposition.as_str(),
                    "matched_rule_id": d.matched_rule_id,
                    "tool_source_id": source.as_ref().map(|s| &s.0), "connection_id": source.as_ref().map(|s| &s.1),
                    "external": d.external.then_some(true)})
                .to_string(),
            ));
        }
        if d.runs() && !d.resumed.as_ref().is_some_and(|r| r.authorized) {
            let mut auth = json!({"tool_use_id": id});
            if let Some(a) = d.resumed.as_ref().and_then(|r| r.approval_id.as_ref()) {
                auth["action_approval_id"] = json!(a);
            }
            if let Some(s) = &d.standing_approval_id {
                auth["standing_approval_id"] = json!(s);
            }
            ev.push((E::RunActionAuthorized, auth.to_string()));
            if d.is_custom() && d.resumed.is_some() {
                // Approved: now the host owes the result.
                let payload = json!({"custom_tool_use_id": id, "name": d.call.name, "input": d.input, "evaluated_permission": d.disposition.as_str()});
                ev.push((E::AgentCustomToolUse, payload.to_string()));
            }
        }
        if let Some((approval_id, expires_at)) = &d.pending_approval {
            ev.push((
                E::ActionApprovalPending,
                json!({"action_approval_id": approval_id, "tool_use_id": id, "expires_at": expires_at}).to_string(),
            ));
        }
        ev
    }

    /// The event that answers a call now: its result, or the refusal.
    /// `None` for a call the Session waits on.
    pub(crate) async fn answer(&self, work: &pb::WorkItem, d: &Decided) -> Vec<(E, String)> {
        if d.waits() {
            return vec![];
        }
        if d.is_platform() {
            // Its result is JSON, a refusal included (never policy.denied).
            let (content, is_error) = match &d.refusal {
                Some(r) => (r.clone(), true),
                None if d.runs() => self.call_platform(work, d).await,
                None => (json!({"error": {"type": "policy.denied", "message": d.reason}}), true),
            };
            let result = json!({"tool_use_id": d.call.id, "content": content, "is_error": is_error});
            return vec![(E::AgentToolResult, result.to_string())];
        }
        if d.runs_externally() {
            // The work item's holder answers (user.tool_result).
            return vec![];
        }
        if d.runs() {
            let (text, is_error) = self.execute_tool(work, d).await;
            let mut out = if d.call.name == "bash" { self.egress_denials(work).await } else { vec![] };
            out.push((
                E::AgentToolResult,
                json!({"tool_use_id": d.call.id, "content": result_content(text), "is_error": is_error}).to_string(),
            ));
            return out;
        }
        let guidance = if d.resumed.is_some() { format!("not run: {}", d.reason) } else { format!("denied: {}", d.reason) };
        let reason = d.denial_reason();
        vec![(
            E::PolicyDenied,
            json!({"tool_use_id": d.call.id, "matched_rule_id": d.matched_rule_id, "reason": reason, "guidance": guidance}).to_string(),
        )]
    }

    /// Calls from before this Run still owed an answer, settled from the
    /// log: approved ones (and allowed ones a dead runner never answered —
    /// at least once) run with the arguments recorded there; denied or
    /// expired ones are refused; ones whose wait ended without a decision
    /// (an interrupt) are refused too, so every tool use gets an answer.
    pub(crate) fn resume_outstanding(work: &pb::WorkItem, outstanding: &[crate::transcript::Outstanding]) -> Vec<Decided> {
        let tools = declared(work);
        let mut decided: Vec<Decided> = outstanding
            .iter()
            .map(|o| {
                let approved = o.decision == Some(Decision::Approve)
                    || (o.decision.is_none() && (o.authorized || o.evaluated_permission == Disposition::Allow));
                let reason = match (o.status, &o.deny_message) {
                    _ if o.evaluated_permission == Disposition::Deny => "denied by policy".to_string(),
                    (_, Some(m)) => format!("the approver declined: {m}"),
                    (Some(ApprovalStatus::Expired), _) => "the approval expired without a response".to_string(),
                    (Some(_), _) => "the approver declined this call".to_string(),
                    (None, _) => "the wait for approval ended without a decision".to_string(),
                };
                Decided {
                    call: mg::ToolUse { id: o.tool_use_id.clone(), name: o.name.clone(), input_json: o.input.to_string() },
                    input: o.input.clone(),
                    declaration: declaration(&tools, &o.name).cloned(),
                    disposition: o.evaluated_permission,
                    matched_rule_id: None,
                    reason,
                    standing_approval_id: None,
                    pending_approval: None,
                    resumed: Some(Resumed { approved, approval_id: o.approval_id.clone(), authorized: o.authorized }),
                    refusal: None,
                    external: false,
                }
            })
            .collect();
        mark_external(work, &mut decided);
        decided
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Outstanding;
    use checkfu_proto::runner::v1 as rpb;

    fn decided(name: &str, disposition: Disposition, custom: bool) -> Decided {
        let kind = if custom { "custom" } else { "builtin" };
        Decided {
            call: mg::ToolUse { id: "tu_1".into(), name: name.into(), input_json: "{}".into() },
            input: json!({}),
            declaration: Some(json!({"type": kind, "name": name})),
            disposition,
            matched_rule_id: None,
            reason: "rule".into(),
            standing_approval_id: None,
            pending_approval: None,
            resumed: None,
            refusal: None,
            external: false,
        }
    }

    fn types(events: &[(E, String)]) -> Vec<E> {
        events.iter().map(|(t, _)| *t).collect()
    }

    fn outstanding(disposition: Disposition, decision: Option<Decision>, status: Option<ApprovalStatus>) -> Outstanding {
        Outstanding {
            tool_use_id: "tu_1".into(),
            name: "bash".into(),
            input: json!({"command": "true"}),
            evaluated_permission: disposition,
            approval_id: Some("aa_1".into()),
            decision,
            status,
            deny_message: None,
            authorized: false,
        }
    }

    fn work() -> rpb::WorkItem {
        use checkfu_proto::sessions::v1::{BuiltinTool, ToolDeclaration, tool_declaration::Kind};
        rpb::WorkItem {
            tools: vec![ToolDeclaration { kind: Some(Kind::Builtin(BuiltinTool { name: "bash".into() })) }],
            ..Default::default()
        }
    }

    #[test]
    #[allow(deprecated)] // tools_json: a 0.1.0 sessions service's
    fn declarations_read_the_same_typed_or_from_a_0_1_0_services_text() {
        let old = rpb::WorkItem { tools_json: json!([{"type": "builtin", "name": "bash"}]).to_string(), ..Default::default() };
        assert_eq!(declared(&work()), declared(&old));
        assert_eq!(declared(&work()), vec![json!({"type": "builtin", "name": "bash"})]);
        assert!(declared(&rpb::WorkItem::default()).is_empty(), "none declared");
    }

    #[test]
    fn an_allowed_call_is_authorized_then_answered() {
        let d = decided("bash", Disposition::Allow, false);
        assert!(d.runs() && !d.waits());
        assert_eq!(types(&Runner::call_events(&d)), [E::AgentToolUse, E::RunActionAuthorized]);
    }

    #[test]
    fn a_denied_call_is_recorded_and_never_authorized() {
        let d = decided("bash", Disposition::Deny, false);
        assert!(!d.runs() && !d.waits(), "answered at once, with policy.denied");
        assert_eq!(types(&Runner::call_events(&d)), [E::AgentToolUse]);
    }

    #[test]
    fn a_gated_call_waits_on_its_approval_and_a_standing_one_does_not() {
        let mut d = decided("bash", Disposition::RequireApproval, false);
        d.pending_approval = Some(("aa_1".into(), "2026-12-01T00:00:00Z".into()));
        assert!(!d.runs() && d.waits());
        assert_eq!(types(&Runner::call_events(&d)), [E::AgentToolUse, E::ActionApprovalPending]);

        let mut standing = decided("bash", Disposition::RequireApproval, false);
        standing.standing_approval_id = Some("sa_1".into());
        assert!(standing.runs() && !standing.waits());
        let events = Runner::call_events(&standing);
        assert_eq!(types(&events), [E::AgentToolUse, E::RunActionAuthorized]);
        assert!(events[1].1.contains("sa_1"), "the authorization names the StandingApproval");
    }

    #[test]
    fn an_external_tools_sandbox_call_is_left_to_the_work_holder() {
        let work = rpb::WorkItem { external_tools: true, ..Default::default() };
        let mut calls = vec![decided("bash", Disposition::Allow, false), decided("lookup", Disposition::Allow, true)];
        calls.push(Decided {
            declaration: Some(json!({"type": "builtin", "name": "web_fetch"})),
            ..decided("web_fetch", Disposition::Allow, false)
        });
        mark_external(&work, &mut calls);
        assert_eq!(calls.iter().map(|d| d.external).collect::<Vec<_>>(), [true, false, false], "only sandbox builtins leave");
        let bash = &calls[0];
        assert!(bash.runs_externally() && !bash.waits(), "the Run waits in place, the Session running");
        let events = Runner::call_events(bash);
        assert_eq!(types(&events), [E::AgentToolUse, E::RunActionAuthorized]);
        let use_: Value = serde_json::from_str(&events[0].1).expect("json");
        assert_eq!(use_["external"], true, "the log says who runs it");
        // Not on an external_tools Session: run here.
        let mut here = vec![decided("bash", Disposition::Allow, false)];
        mark_external(&rpb::WorkItem::default(), &mut here);
        assert!(!here[0].external);
        let plain: Value = serde_json::from_str(&Runner::call_events(&here[0])[0].1).expect("json");
        assert!(plain["external"].is_null());
        // Gated: it waits on its approval first, then runs externally.
        let mut gated = vec![decided("bash", Disposition::RequireApproval, false)];
        mark_external(&work, &mut gated);
        assert!(gated[0].external && !gated[0].runs_externally());
    }

    #[test]
    fn an_allowed_custom_tool_hands_the_call_to_the_host() {
        let d = decided("lookup", Disposition::Allow, true);
        assert!(d.runs() && d.waits(), "the host owes the result");
        assert_eq!(types(&Runner::call_events(&d)), [E::AgentCustomToolUse]);
    }

    #[test]
    fn outstanding_calls_resume_as_their_approval_ended() {
        let resume = |o: Outstanding| Runner::resume_outstanding(&work(), &[o]).remove(0);

        let approved = resume(outstanding(Disposition::RequireApproval, Some(Decision::Approve), Some(ApprovalStatus::Approved)));
        assert!(approved.runs(), "approved: runs now, with the arguments from the log");
        assert_eq!(approved.input, json!({"command": "true"}));
        let events = Runner::call_events(&approved);
        assert_eq!(types(&events), [E::RunActionAuthorized], "the tool use is already in the log");
        assert!(events[0].1.contains("aa_1"), "authorized by its approval");

        let expired = resume(outstanding(Disposition::RequireApproval, Some(Decision::Deny), Some(ApprovalStatus::Expired)));
        assert!(!expired.runs());
        assert_eq!(expired.reason, "the approval expired without a response");
        assert_eq!(expired.denial_reason(), "approval_not_granted");

        let interrupted = resume(outstanding(Disposition::RequireApproval, None, None));
        assert!(!interrupted.runs(), "a wait that ended without a decision refuses the call");
        assert_eq!(interrupted.reason, "the wait for approval ended without a decision");

        let unanswered = resume(outstanding(Disposition::Allow, None, None));
        assert!(unanswered.runs(), "an allowed call a dead runner never answered runs (at least once)");
        assert!(Runner::call_events(&unanswered).iter().any(|(t, _)| *t == E::RunActionAuthorized));

        let policy = resume(outstanding(Disposition::Deny, None, None));
        assert_eq!(policy.reason, "denied by policy");
        assert_eq!(policy.denial_reason(), "policy");
        let undeclared = Decided { declaration: None, ..decided("nope", Disposition::Deny, false) };
        assert_eq!(undeclared.denial_reason(), "tool_not_declared");
    }

    #[test]
    fn long_results_become_a_bounded_envelope() {
        assert_eq!(result_content("short".into()), json!("short"));
        let v = result_content("é".repeat(MAX_RESULT_CHARS + 1));
        assert_eq!(v["type"], "result_truncated");
        assert_eq!(v["original_chars"], MAX_RESULT_CHARS + 1);
        assert_eq!(v["preview"].as_str().map(|p| p.chars().count()), Some(PREVIEW_CHARS));
    }

    #[test]
    fn declarations_are_found_by_name() {
        let tools = vec![
            json!({"type": "builtin", "name": "read"}),
            json!({"type": "tool_source", "tool_source_id": "tsrc_1", "tools": ["search"]}),
        ];
        assert!(declaration(&tools, "read").is_some());
        assert!(declaration(&tools, "search").is_some());
        assert!(declaration(&tools, "bash").is_none());
    }
}
