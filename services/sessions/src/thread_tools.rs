//! Multiagent's platform tools (api.md §15.3): a coordinator's primary
//! thread spawns roster members as child threads (`spawn_agent`) and
//! messages them (`send_message`); a child messages the primary back.
//!
//! The control plane decides, never the execution plane: a spawn or a
//! primary→child message passes roster → capacity (spawn) → the
//! coordinator's `use_agent` row on the member → ActionPolicy on
//! `use_agent` (no matching rule allows) → an ActionApproval when the
//! policy asks. A refusal is the tool's error result `{error:{type}}`.
//! [`Threads::decide_thread_tool`] asks (the runner records the
//! call with that decision, and waits on an approval as for any tool);
//! [`Threads::call_thread_tool`] checks again — a revoked row stops
//! a call approved before — and does it in one commit with its events.

use crate::draft::{Draft, system};
use crate::model::Lease;
use crate::model::primary_of;
use crate::model::*;
use crate::store::View;
use crate::threads::Threads;
use checkfu_core::events::EventType;
use checkfu_core::id::SessionThreadId;
use checkfu_core::{Code, Error, Result};
use checkfu_proto::governance::v1 as gov;
use serde_json::{Value, json};

pub const SPAWN_AGENT: &str = "spawn_agent";
pub const SEND_MESSAGE: &str = "send_message";
/// A message's text, at most.
const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// The platform tools a thread is given: a coordinator's primary both, a
/// child only `send_message`, a single-agent Session's primary none.
pub fn platform_tools(coordinator: bool, child: bool) -> Vec<ToolDecl> {
    let message = json!({
        "description": "Text (at most 64 KiB), or user.message content blocks",
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}],
    });
    let send = ToolDecl::Platform {
        name: SEND_MESSAGE.into(),
        description: if child {
            "Send a message to the coordinating (primary) thread.".into()
        } else {
            "Send a follow-up message to one of your child threads; it keeps its context.".into()
        },
        input_schema: json!({
            "type": "object",
            "properties": {"session_thread_id": {"type": "string"}, "message": message},
            "required": if child { json!(["message"]) } else { json!(["session_thread_id", "message"]) },
        }),
    };
    if child {
        return vec![send];
    }
    if !coordinator {
        return vec![];
    }
    let spawn = ToolDecl::Platform {
        name: SPAWN_AGENT.into(),
        description: "Start a new child thread running a roster Agent (or \"self\") with a first message. \
                      It works on its own; its messages come back to you."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {"agent_id": {"type": "string"}, "message": message},
            "required": ["agent_id", "message"],
        }),
    };
    vec![spawn, send]
}

/// A platform tool call as the runner sends it.
#[derive(Debug, Clone)]
pub struct ThreadCall {
    pub lease: Lease,
    pub tool_use_id: String,
    pub name: String,
    pub input: Value,
    /// For a gated call being run: the approval (checked in the log) or
    /// StandingApproval that let it.
    pub approval_id: String,
    pub standing_approval_id: String,
}

/// How the control plane decided a call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadDecision {
    /// `allow`, `deny` or `require_approval`.
    pub disposition: String,
    /// A refusal's type (the tool's `{error:{type}}`).
    pub error_type: String,
    pub reason: String,
    pub matched_rule_id: String,
    pub approval_id: String,
    pub approval_expires_at: String,
    pub standing_approval_id: String,
}

impl ThreadDecision {
    fn refused(error_type: &str, reason: impl Into<String>) -> Self {
        ThreadDecision { disposition: "deny".into(), error_type: error_type.into(), reason: reason.into(), ..Default::default() }
    }

    fn allowed() -> Self {
        ThreadDecision { disposition: "allow".into(), ..Default::default() }
    }
}

/// What the call is, once its input and its thread are known.
#[derive(Debug, Clone)]
enum Target {
    /// A new child running this roster member.
    Spawn(ThreadAgent),
    /// A primary→child message.
    Child(String, ThreadAgent),
    /// A child→primary message.
    Primary,
}

/// `message` as content blocks: text, or `user.message` blocks.
fn content_of(input: &Value) -> std::result::Result<Value, String> {
    match input.get("message") {
        Some(Value::String(t)) if t.is_empty() => Err("message must not be empty".into()),
        Some(Value::String(t)) if t.len() > MAX_MESSAGE_BYTES => Err("message text is limited to 64 KiB".into()),
        Some(Value::String(t)) => Ok(json!([{"type": "text", "text": t}])),
        Some(Value::Array(blocks)) => {
            let text: usize = blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).map(str::len).sum();
            let ok = !blocks.is_empty()
                && blocks.len() <= 100
                && blocks
                    .iter()
                    .all(|b| b.get("type").and_then(Value::as_str) == Some("text") && b.get("text").is_some_and(Value::is_string));
            if !ok {
                return Err("message blocks must be 1 to 100 text blocks".into());
            }
            if text > MAX_MESSAGE_BYTES {
                return Err("message text is limited to 64 KiB".into());
            }
            Ok(Value::Array(blocks.clone()))
        }
        _ => Err("message is required: text, or content blocks".into()),
    }
}

/// The tool's result content for a refusal.
pub fn refusal_content(error_type: &str, reason: &str) -> Value {
    json!({"error": {"type": error_type, "message": reason}})
}

impl Threads {
    fn use_agent_governance(&self) -> Result<crate::upstream::Governance> {
        self.governance
            .clone()
            .ok_or_else(|| Error::unavailable("multiagent tools need the governance service, which this node cannot reach"))
    }

    /// The Session and the thread (`None`: the primary) whose Run `lease`
    /// holds.
    async fn thread_of_lease(&self, lease: &Lease) -> Result<(Session, Option<String>)> {
        let session_id = self.log.session_of(lease).await?;
        let s = self.log.session(session_id.as_str()).await?;
        let run = match self.log.cached_run(s.id.as_str(), &lease.run_id) {
            Some(r) => r,
            None => self.log.run(&lease.run_id).await?,
        };
        if !lease.holds(&run) {
            return Err(Error::new(Code::PreconditionFailed, "the lease on this run is no longer held").with_reason("lease_lost"));
        }
        Ok((s, run.thread_id))
    }

    /// The call's target, or the refusal that stops it before governance.
    async fn target(&self, s: &Session, from: Option<&str>, call: &ThreadCall) -> Result<std::result::Result<Target, ThreadDecision>> {
        let refused = |t: &str, why: String| Ok(Err(ThreadDecision::refused(t, why)));
        if let Err(why) = content_of(&call.input) {
            return refused("validation.invalid", why);
        }
        let named = call.input.get("session_thread_id").and_then(Value::as_str).filter(|t| !t.is_empty());
        match (call.name.as_str(), from) {
            (SEND_MESSAGE, Some(_)) => match named {
                None => Ok(Ok(Target::Primary)),
                Some(t) if t == primary_of(&s.id) => Ok(Ok(Target::Primary)),
                Some(t) => refused("invalid_target", format!("a child thread sends only to the primary thread, not {t}")),
            },
            (SEND_MESSAGE, None) => {
                let Some(t) = named else { return refused("invalid_target", "name the child thread (session_thread_id)".into()) };
                match s.threads.iter().find(|c| c.id == t) {
                    None => refused("invalid_target", format!("{t} is not a child thread of this Session")),
                    Some(c) if c.archived() => refused("thread_archived", format!("{t} is archived")),
                    Some(c) => Ok(Ok(Target::Child(c.id.clone(), c.agent.clone()))),
                }
            }
            (SPAWN_AGENT, Some(_)) => refused("invalid_target", "only the primary thread spawns".into()),
            (SPAWN_AGENT, None) => {
                let wanted = call.input.get("agent_id").and_then(Value::as_str).unwrap_or_default();
                let Some(member) = self.roster_member(s, wanted).await? else {
                    return refused("not_in_roster", format!("{wanted:?} is not in this coordinator's roster"));
                };
                let open = 1 + s.threads.iter().filter(|t| !t.archived()).count();
                if open >= MAX_THREADS {
                    return refused(
                        "thread_capacity_reached",
                        format!("a Session holds at most {MAX_THREADS} threads that are not archived"),
                    );
                }
                Ok(Ok(Target::Spawn(member)))
            }
            (other, _) => refused("invalid_target", format!("{other:?} is not a platform tool")),
        }
    }

    /// `agent_id` (or `"self"`) as a member of the Session's pinned roster.
    async fn roster_member(&self, s: &Session, wanted: &str) -> Result<Option<ThreadAgent>> {
        let Some(v) = self.catalog.pinned_version(&s.agent_id, s.pins.agent_version).await? else { return Ok(None) };
        let members = v.definition.multiagent.and_then(|m| m.resolved).unwrap_or_default();
        Ok(members.into_iter().find(|m| if wanted == "self" { m.itself } else { m.agent_id == wanted }).map(|m| ThreadAgent {
            agent_id: m.agent_id,
            version: m.version,
            release_sha256: m.release_sha256,
            name: m.name,
        }))
    }

    /// `use_agent` (a row) then ActionPolicy, for a spawn or a primary→child
    /// message to `member`.
    async fn govern(&self, s: &Session, member: &str, call: &ThreadCall) -> Result<ThreadDecision> {
        let mut g = self.use_agent_governance()?;
        let coordinator = gov::ResourceRef { kind: "agent_definition".into(), id: s.agent_id.to_string() };
        let check = gov::CheckRequest {
            principal_id: String::new(),
            permission: "use_agent".into(),
            resource: Some(gov::ResourceRef { kind: "agent".into(), id: member.into() }),
            environment_id: s.environment_id.to_string(),
            subject: Some(coordinator.clone()),
        };
        if !g.check(check).await.map_err(Error::from)?.into_inner().allowed {
            return Ok(ThreadDecision::refused("permission.denied", format!("agent {} holds no use_agent on agent {member}", s.agent_id)));
        }
        // `tool_json` too, for a 0.1.0 governance until the release after it.
        #[allow(deprecated)]
        let req = gov::EvaluateActionRequest {
            environment_id: s.environment_id.to_string(),
            subject: Some(gov::ResourceRef { kind: "principal".into(), id: s.principal_id.to_string() }),
            resource: Some(gov::ResourceRef { kind: "agent".into(), id: member.into() }),
            permission: "use_agent".into(),
            tool: Some(gov::CalledTool { r#type: "platform".into(), name: call.name.clone(), ..Default::default() }),
            tool_json: json!({"type": "platform", "name": call.name}).to_string(),
            also: vec![coordinator, gov::ResourceRef { kind: "session".into(), id: s.id.to_string() }],
            record: true,
            session_id: s.id.to_string(),
            tool_use_id: call.tool_use_id.clone(),
            ..Default::default()
        };
        let d = g.evaluate_action(req).await.map_err(Error::from)?.into_inner();
        let matched = d.matched_rule_ids.into_iter().next().unwrap_or_default();
        Ok(match d.disposition.as_str() {
            "allow" => ThreadDecision { matched_rule_id: matched, ..ThreadDecision::allowed() },
            "require_approval" => {
                ThreadDecision { disposition: "require_approval".into(), reason: d.reason, matched_rule_id: matched, ..Default::default() }
            }
            _ => ThreadDecision { matched_rule_id: matched, ..ThreadDecision::refused("policy.denied", d.reason) },
        })
    }

    /// Decides a platform tool call; on `require_approval` opens its
    /// ActionApproval (or finds a StandingApproval covering it).
    pub async fn decide_thread_tool(&self, call: &ThreadCall) -> Result<ThreadDecision> {
        let (s, from) = self.thread_of_lease(&call.lease).await?;
        let target = match self.target(&s, from.as_deref(), call).await? {
            Ok(t) => t,
            Err(refused) => return Ok(refused),
        };
        let member = match &target {
            Target::Spawn(m) | Target::Child(_, m) => m.agent_id.clone(),
            Target::Primary => return Ok(ThreadDecision::allowed()),
        };
        let mut d = self.govern(&s, &member, call).await?;
        if d.disposition != "require_approval" {
            return Ok(d);
        }
        let req = gov::RequestApprovalRequest {
            environment_id: s.environment_id.to_string(),
            session_id: s.id.to_string(),
            run_id: call.lease.run_id.to_string(),
            tool_use_id: call.tool_use_id.clone(),
            frozen: Some(gov::FrozenAction {
                principal_id: s.principal_id.to_string(),
                agent_id: s.agent_id.to_string(),
                tool: call.name.clone(),
                connection_id: String::new(),
                arguments_json: call.input.to_string(),
                arguments_sha256: String::new(),
            }),
        };
        let r = self.use_agent_governance()?.request_approval(req).await.map_err(Error::from)?.into_inner();
        match r.approval {
            Some(a) if r.standing_approval_id.is_empty() => {
                d.approval_id = a.id;
                d.approval_expires_at = a.expires_at;
            }
            _ => d.standing_approval_id = r.standing_approval_id,
        }
        Ok(d)
    }

    /// Whether a gated call may run now: its approval was approved (the
    /// Session's log says so), or a live StandingApproval covers it.
    async fn gate_passed(&self, s: &Session, call: &ThreadCall) -> Result<bool> {
        if !call.approval_id.is_empty() {
            let resolved =
                self.store.list_events(&s.id, &View::All, 0, i64::MAX, &[EventType::ActionApprovalResolved.as_str().to_string()]).await?;
            return Ok(resolved.iter().any(|e| {
                let f = |k: &str| e.payload.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                f("action_approval_id") == call.approval_id && f("tool_use_id") == call.tool_use_id && f("decision") == "approve"
            }));
        }
        if call.standing_approval_id.is_empty() {
            return Ok(false);
        }
        let req = gov::GetByIdRequest { id: call.standing_approval_id.clone() };
        let sa = match self.use_agent_governance()?.get_standing_approval(req).await {
            Ok(sa) => sa.into_inner(),
            Err(status) if status.code() == tonic::Code::NotFound => return Ok(false),
            Err(status) => return Err(status.into()),
        };
        let live = sa.revoked_at.is_empty()
            && checkfu_core::time::parse_rfc3339(&sa.expires_at, 9).is_some_and(|ms| ms > checkfu_core::time::now_ms());
        Ok(live && sa.principal_id == s.principal_id.as_str() && sa.agent_id == s.agent_id.as_str() && sa.tool == call.name)
    }

    /// The result of a `send_message` this thread already made for the tool
    /// use (a runner that died before recording the result runs the call
    /// again): the same message is not delivered twice.
    async fn sent_before(&self, s: &Session, from: Option<&str>, tool_use_id: &str) -> Result<Option<Value>> {
        let sent =
            self.store.list_events(&s.id, &View::All, 0, i64::MAX, &[EventType::AgentThreadMessageSent.as_str().to_string()]).await?;
        Ok(sent.iter().find(|e| e.thread_id.as_deref() == from && e.caused_by.get("id").and_then(Value::as_str) == Some(tool_use_id)).map(
            |e| json!({"event_id": e.id, "to_session_thread_id": e.payload["to_session_thread_id"], "delivery": e.payload["delivery"]}),
        ))
    }

    /// Runs a platform tool call: re-checks it, then spawns or delivers in
    /// one commit. Answers the tool result's content and whether it is an
    /// error.
    pub async fn call_thread_tool(&self, call: &ThreadCall) -> Result<(Value, bool)> {
        let (s, from) = self.thread_of_lease(&call.lease).await?;
        let target = match self.target(&s, from.as_deref(), call).await? {
            Ok(t) => t,
            Err(r) => return Ok((refusal_content(&r.error_type, &r.reason), true)),
        };
        if let Target::Spawn(m) | Target::Child(_, m) = &target {
            let d = self.govern(&s, &m.agent_id, call).await?;
            if d.disposition == "deny" {
                return Ok((refusal_content(&d.error_type, &d.reason), true));
            }
            if d.disposition == "require_approval" && !self.gate_passed(&s, call).await? {
                return Ok((refusal_content("policy.denied", "this call needs an approval it does not have"), true));
            }
        }
        if !matches!(target, Target::Spawn(_))
            && let Some(done) = self.sent_before(&s, from.as_deref(), &call.tool_use_id).await?
        {
            return Ok((done, false));
        }
        let content = content_of(&call.input).map_err(|m| Error::invalid_field("input.message", m))?;
        let (answer, _, _) = self
            .log
            .transact(&s.id, |d| {
                if !d.focus_run(&call.lease.run_id) || !d.run.as_ref().is_some_and(|r| call.lease.holds(r)) {
                    return Err(Error::new(Code::PreconditionFailed, "the lease on this run is no longer held").with_reason("lease_lost"));
                }
                match &target {
                    Target::Spawn(member) => Ok(spawn(d, member, call, &content)),
                    Target::Child(to, _) => Ok(send(d, Some(to.as_str()), call, &content)),
                    Target::Primary => Ok(send(d, None, call, &content)),
                }
            })
            .await?;
        Ok(answer)
    }
}

/// Creates the child and queues its first message (the draft's focus is
/// the primary's Run). A repeated call answers the thread it made.
fn spawn(d: &mut Draft, member: &ThreadAgent, call: &ThreadCall, content: &Value) -> (Value, bool) {
    let accepted = |t: &SessionThread| json!({"session_thread_id": t.id, "agent_id": t.agent.agent_id, "agent_version": t.agent.version, "status": "accepted"});
    if let Some(t) = d.session.threads.iter().find(|t| t.spawned_by_tool_use_id == call.tool_use_id) {
        return (accepted(t), false);
    }
    if 1 + d.session.threads.iter().filter(|t| !t.archived()).count() >= MAX_THREADS {
        let why = format!("a Session holds at most {MAX_THREADS} threads that are not archived");
        return (refusal_content("thread_capacity_reached", &why), true);
    }
    let thread = SessionThread {
        id: SessionThreadId::mint().to_string(),
        agent: member.clone(),
        status: SessionStatus::Idle,
        stop_reason: None,
        usage: Usage::default(),
        last_user_message_seq: 0,
        queued: 0,
        spawned_by_tool_use_id: call.tool_use_id.clone(),
        created_ms: d.now_ms,
        updated_ms: d.now_ms,
        archived_ms: None,
    };
    let cause = json!({"kind": "tool_use", "id": call.tool_use_id});
    let primary = primary_of(&d.session.id);
    d.session.threads.push(thread.clone());
    d.push_primary(
        EventType::SessionThreadCreated,
        cause.clone(),
        json!({
            "session_thread_id": thread.id, "agent_id": member.agent_id, "agent_version": member.version,
            "agent_name": member.name, "parent_thread_id": primary, "spawned_by_tool_use_id": call.tool_use_id,
        }),
    );
    if d.focus(Some(&thread.id)).is_ok() {
        deliver(d, &primary, None, content, cause);
    }
    (accepted(&thread), false)
}

/// Delivers a message to `to` (`None`: the primary) from the thread in
/// focus, then records its sending there.
fn send(d: &mut Draft, to: Option<&str>, call: &ThreadCall, content: &Value) -> (Value, bool) {
    let primary = primary_of(&d.session.id);
    let from = d.focused().map(|t| (t.id.clone(), t.agent.name.clone()));
    let to_name = to.and_then(|t| d.session.threads.iter().find(|c| c.id == t)).map(|c| c.agent.name.clone());
    let cause = json!({"kind": "tool_use", "id": call.tool_use_id});
    if d.session.status == SessionStatus::Terminated {
        return (refusal_content("thread_archived", "the Session is archived"), true);
    }
    let sender = from.as_ref().map(|(id, _)| id.clone());
    if d.focus(to).is_err() {
        return (refusal_content("invalid_target", "no such thread"), true);
    }
    if d.focused().is_some_and(SessionThread::archived) {
        d.focus(sender.as_deref()).ok();
        return (refusal_content("thread_archived", "the thread is archived"), true);
    }
    let queued = d.focused().map_or(0, |t| t.queued);
    if d.session.status == SessionStatus::Running && queued >= MAX_QUEUED_MESSAGES {
        d.focus(sender.as_deref()).ok();
        let why = format!("the thread already holds {MAX_QUEUED_MESSAGES} messages it has not read");
        return (refusal_content("queue_full", &why), true);
    }
    let delivery = deliver(d, sender.as_deref().unwrap_or(&primary), from.as_ref().map(|(_, n)| n.as_str()), content, cause.clone());
    d.focus(sender.as_deref()).ok();
    let mut payload = json!({"to_session_thread_id": to.unwrap_or(&primary), "content": content, "delivery": delivery});
    if let Some(n) = to_name {
        payload["to_agent_name"] = json!(n);
    }
    let run_id = d.run.as_ref().map(|r| r.id.clone());
    let sent =
        d.push(EventType::AgentThreadMessageSent, run_id.as_ref(), json!({"kind": "agent", "id": d.session.agent_id}), cause, payload);
    (json!({"event_id": sent, "to_session_thread_id": to.unwrap_or(&primary), "delivery": delivery}), false)
}

/// Records a message in the view of the thread in focus, as its newest user
/// turn: an idle thread wakes with a new Run ("delivered"); a running one
/// reads it at its next model call, a waiting one after its wait
/// ("queued").
fn deliver(d: &mut Draft, from_thread: &str, from_name: Option<&str>, content: &Value, cause: Value) -> &'static str {
    let seq = d.next_seq();
    let mut payload = json!({"from_session_thread_id": from_thread, "content": content});
    if let Some(n) = from_name {
        payload["from_agent_name"] = json!(n);
    }
    let id = d.push(EventType::AgentThreadMessageReceived, None, system(), cause, payload);
    d.session.last_user_message_seq = seq;
    let cause = json!({"kind": "event", "id": id});
    let waiting = matches!(d.session.stop_reason, Some(StopReason::RequiresAction(_) | StopReason::BudgetReached));
    match d.session.status {
        SessionStatus::Idle if !waiting && d.admission_closed() => {
            d.pause_for_budget(cause);
            "queued"
        }
        SessionStatus::Idle if !waiting => {
            d.admit_run(seq, cause);
            "delivered"
        }
        _ => {
            if let Some(f) = &d.focus {
                let i = f.index();
                d.session.threads[i].queued += 1;
            }
            "queued"
        }
    }
}

/// A thread id named by an input: the primary's, a child's, or refused.
pub fn check_thread_id(s: &Session, thread_id: &str) -> Result<()> {
    SessionThreadId::check("payload.session_thread_id", thread_id)?;
    if thread_id == primary_of(&s.id) || s.threads.iter().any(|t| t.id == thread_id) {
        return Ok(());
    }
    Err(Error::invalid_field("payload.session_thread_id", format!("{thread_id} is not a thread of this Session")))
}
