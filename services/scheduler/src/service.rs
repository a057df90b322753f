//! Automations: their writes, readiness (evaluated on every read and
//! write), pause and resume, and firings with an Agent target — a child
//! Session created during admission, settled from the Session's own status
//! events (`settle.rs`).

use crate::model::*;
use crate::store::SchedulerStore;
use checkfu_bus::{Record, resource_record};
use checkfu_core::id::{AutomationId, EnvironmentId, FiringId, PrincipalId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result};
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::governance::v1::governance_service_client::GovernanceServiceClient;
use checkfu_proto::sessions::v1 as ss;
use checkfu_proto::sessions::v1::sessions_service_client::SessionsServiceClient;
use checkfu_proto::transport::Transport;
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Clone)]
pub struct SchedulerService {
    pub(crate) store: Arc<dyn SchedulerStore>,
    governance: GovernanceServiceClient<Transport>,
    pub(crate) sessions: SessionsServiceClient<Transport>,
    outbox_wake: Option<Arc<tokio::sync::Notify>>,
}

/// What a caller asked for when creating an Automation, shape-checked.
#[derive(Debug, Clone, Default)]
pub struct NewAutomation {
    pub environment_id: String,
    pub name: String,
    pub service_principal_id: String,
    pub triggers: Value,
    pub target: Value,
    pub metadata: Value,
    pub actor_id: String,
}

/// What an update changes.
#[derive(Debug, Clone, Default)]
pub struct AutomationChange {
    pub name: Option<String>,
    pub triggers: Option<Value>,
    pub target: Option<Value>,
    pub metadata: Option<Value>,
    pub expected_version: Option<i64>,
    pub actor_id: String,
}

fn conflict_readiness(r: &Readiness) -> Error {
    Error::conflict("the Automation would not be ready: see details.readiness").with_details(json!({"readiness": r.to_json()}))
}

fn raced() -> Error {
    Error::conflict("the Automation changed concurrently; read it again")
}

fn stale(current: i64, expected: i64) -> Error {
    Error::conflict(format!("the Automation is at version {current}, not {expected}")).with_details(json!({"current_version": current}))
}

impl SchedulerService {
    pub fn new(store: Arc<dyn SchedulerStore>, governance: Transport, sessions: Transport) -> Self {
        SchedulerService {
            store,
            governance: GovernanceServiceClient::new(governance),
            sessions: SessionsServiceClient::new(sessions).max_decoding_message_size(64 * 1024 * 1024),
            outbox_wake: None,
        }
    }

    pub fn with_outbox_wake(mut self, wake: Arc<tokio::sync::Notify>) -> Self {
        self.outbox_wake = Some(wake);
        self
    }

    fn woke(&self) {
        if let Some(w) = &self.outbox_wake {
            w.notify_one();
        }
    }

    /// Readiness: the store answers.
    pub async fn ready(&self) -> bool {
        self.store.get_automation(&AutomationId::mint()).await.is_ok()
    }

    /// Every check of §12.2, evaluated now. A check whose answer cannot be
    /// had (a service unreachable) is `unknown`, which blocks like `fail`.
    pub async fn readiness(&self, a: &Automation) -> Readiness {
        let mut checks = vec![];
        let mut gov = self.governance.clone();
        checks.push(match gov.get_environment(gov::GetByIdRequest { id: a.environment_id.to_string() }).await {
            Ok(e) if e.get_ref().disabled => Check::fail("environment", "the Environment is disabled", Some(a.environment_id.to_string())),
            Ok(_) => Check::pass("environment"),
            Err(s) if s.code() == tonic::Code::NotFound => Check::fail("environment", "the Environment does not exist", None),
            Err(s) => Check::unknown("environment", s.message()),
        });
        let svc = a.service_principal_id.to_string();
        checks.push(match gov.get_principal(gov::GetByIdRequest { id: svc.clone() }).await {
            Ok(p) if p.get_ref().kind != "service" => Check::fail("service_principal", "the Principal is not a service", Some(svc.clone())),
            Ok(p) if p.get_ref().disabled => Check::fail("service_principal", "the service Principal is disabled", Some(svc.clone())),
            Ok(_) => Check::pass("service_principal"),
            Err(s) if s.code() == tonic::Code::NotFound => {
                Check::fail("service_principal", "the service Principal does not exist", Some(svc.clone()))
            }
            Err(s) => Check::unknown("service_principal", s.message()),
        });
        let dep_id = a.target.agent_deployment_id.clone();
        let mut agent_id = None;
        checks.push(match self.sessions.clone().get_deployment(ss::GetByIdRequest { id: dep_id.clone() }).await {
            Ok(d) => {
                let d = d.into_inner();
                let pinned = a.target.deployment_revision.unwrap_or(d.revision);
                if d.environment_id != a.environment_id.as_str() {
                    Check::fail("target", "the deployment is in another Environment", Some(dep_id.clone()))
                } else if pinned > d.revision {
                    Check::fail("target", format!("the deployment has no revision {pinned}"), Some(dep_id.clone()))
                } else {
                    match self.sessions.clone().get_agent(ss::GetByIdRequest { id: d.agent_id.clone() }).await {
                        Ok(ag) if ag.get_ref().archived => Check::fail("target", "the Agent is archived", Some(d.agent_id.clone())),
                        Ok(_) => {
                            agent_id = Some(d.agent_id.clone());
                            Check::pass("target")
                        }
                        Err(s) => Check::unknown("target", s.message()),
                    }
                }
            }
            Err(s) if s.code() == tonic::Code::NotFound => Check::fail("target", "the deployment does not exist", Some(dep_id.clone())),
            Err(s) => Check::unknown("target", s.message()),
        });
        checks.push(match &agent_id {
            None => Check::unknown("permissions", "the target's Agent is not known"),
            Some(agent) => {
                let req = gov::CheckRequest {
                    principal_id: svc.clone(),
                    permission: "invoke".into(),
                    resource: Some(gov::ResourceRef { kind: "agent".into(), id: agent.clone() }),
                    environment_id: a.environment_id.to_string(),
                };
                match gov.check(req).await {
                    Ok(r) if r.get_ref().allowed => Check::pass("permissions"),
                    Ok(_) => Check::fail("permissions", format!("{svc} lacks invoke on agent {agent}"), Some(agent.clone())),
                    Err(s) => Check::unknown("permissions", s.message()),
                }
            }
        });
        checks.push(Check::pass("webhook"));
        checks.push(if a.target.not_executable() {
            Check::unknown("capabilities", "a continue_selected session_target is saved but not yet executable")
        } else {
            Check::pass("capabilities")
        });
        Readiness { checks, checked_ms: now_ms() }
    }

    async fn audit(&self, actor: &str, action: &str, a: &Automation, details: Value) {
        let req = gov::RecordAuditRequest {
            actor_id: actor.into(),
            action: action.into(),
            resource: Some(gov::ResourceRef { kind: "automation".into(), id: a.id.to_string() }),
            details_json: details.to_string(),
        };
        if let Err(s) = self.governance.clone().record_audit(req).await {
            tracing::warn!(%s, automation_id = %a.id, action, "could not audit an Automation change");
        }
    }

    fn event(a: &Automation, kind: &str) -> Record {
        resource_record(kind, &a.environment_id, &a.id)
    }

    pub async fn automation(&self, id: &str) -> Result<Automation> {
        let id = AutomationId::parse("id", id)?;
        self.store.get_automation(&id).await?.filter(|a| a.deleted_ms == 0).ok_or_else(|| Error::not_found("automation", &id))
    }

    /// Pins the deployment's current revision when the target names none.
    async fn pin(&self, mut target: AgentTarget, environment_id: &EnvironmentId) -> Result<AgentTarget> {
        let d = self.sessions.clone().get_deployment(ss::GetByIdRequest { id: target.agent_deployment_id.clone() }).await;
        let d = match d {
            Ok(d) => d.into_inner(),
            Err(s) if s.code() == tonic::Code::NotFound => {
                return Err(
                    Error::invalid_field("target.agent_deployment_id", "the deployment does not exist").with_reason("invalid_target")
                );
            }
            Err(s) => return Err(s.into()),
        };
        if d.environment_id != environment_id.as_str() {
            return Err(Error::invalid_field("target.agent_deployment_id", "the deployment is in another Environment")
                .with_reason("invalid_target"));
        }
        if target.deployment_revision.is_none_or(|r| r > d.revision) {
            if let Some(r) = target.deployment_revision {
                return Err(Error::invalid_field("target.deployment_revision", format!("the deployment has no revision {r}"))
                    .with_reason("invalid_target"));
            }
            target.deployment_revision = Some(d.revision);
        }
        Ok(target)
    }

    pub async fn create(&self, new: NewAutomation) -> Result<(Automation, Readiness)> {
        let environment_id = EnvironmentId::parse("environment_id", &new.environment_id)?;
        let service_principal_id = PrincipalId::parse("service_principal_id", &new.service_principal_id)?;
        check_name(&new.name)?;
        let triggers = parse_triggers(&new.triggers)?;
        let target = self.pin(AgentTarget::parse(&new.target)?, &environment_id).await?;
        let metadata = check_metadata(&new.metadata)?;
        match self.governance.clone().get_principal(gov::GetByIdRequest { id: service_principal_id.to_string() }).await {
            Ok(p) if p.get_ref().kind != "service" => {
                return Err(Error::invalid_field("service_principal_id", "an Automation runs as a service Principal, not a human"));
            }
            Ok(_) => {}
            Err(s) if s.code() == tonic::Code::NotFound => {
                return Err(Error::invalid_field("service_principal_id", "the service Principal does not exist"));
            }
            Err(s) => return Err(s.into()),
        }
        let now = now_ms();
        let mut a = Automation {
            id: AutomationId::mint(),
            environment_id,
            name: new.name,
            service_principal_id,
            status: AutomationStatus::Active,
            pause_reason: None,
            triggers,
            target,
            managed_by: json!({"kind": "direct"}),
            metadata,
            ingest_secret: String::new(),
            version: 1,
            deleted_ms: 0,
            created_ms: now,
            updated_ms: now,
        };
        let readiness = self.readiness(&a).await;
        if !readiness.ready() {
            a.status = AutomationStatus::Paused;
            a.pause_reason = Some(PauseReason { code: "readiness_blocked".into(), note: None });
        }
        let mut events = vec![Self::event(&a, "automation.created")];
        if a.status == AutomationStatus::Paused {
            events.push(Self::event(&a, "automation.paused"));
        }
        self.store.insert_automation(&a, &events).await?;
        self.woke();
        self.audit(&new.actor_id, "automation.created", &a, json!({"name": a.name, "status": a.status.as_str()})).await;
        Ok((a, readiness))
    }

    /// The live Automation, at `expected_version` when one is given.
    async fn current(&self, id: &str, expected_version: Option<i64>) -> Result<Automation> {
        let a = self.automation(id).await?;
        if let Some(v) = expected_version.filter(|v| *v != a.version) {
            return Err(stale(a.version, v));
        }
        Ok(a)
    }

    /// Writes `next` over `current` with a compare-and-set on `version`,
    /// staging an event of each of `kinds`; `None` when the row moved (the
    /// caller decides again from a fresh read).
    async fn commit(&self, current: &Automation, mut next: Automation, kinds: &[&str]) -> Result<Option<Automation>> {
        next.version = current.version + 1;
        next.updated_ms = now_ms();
        let events: Vec<Record> = kinds.iter().map(|k| Self::event(&next, k)).collect();
        if !self.store.update_automation(&next, current.version, &events).await? {
            return Ok(None);
        }
        self.woke();
        Ok(Some(next))
    }

    pub async fn update(&self, id: &str, ch: AutomationChange) -> Result<Automation> {
        if let Some(n) = &ch.name {
            check_name(n)?;
        }
        let triggers = ch.triggers.as_ref().map(parse_triggers).transpose()?;
        let metadata = ch.metadata.as_ref().map(check_metadata).transpose()?;
        let target = ch.target.as_ref().map(AgentTarget::parse).transpose()?;
        for _ in 0..3 {
            let cur = self.current(id, ch.expected_version).await?;
            let mut next = cur.clone();
            if let Some(n) = &ch.name {
                next.name = n.clone();
            }
            if let Some(t) = &triggers {
                next.triggers = t.clone();
            }
            if let Some(m) = &metadata {
                next.metadata = m.clone();
            }
            if let Some(t) = &target {
                next.target = self.pin(t.clone(), &cur.environment_id).await?;
            }
            if cur.status == AutomationStatus::Active {
                let r = self.readiness(&next).await;
                if !r.ready() {
                    return Err(conflict_readiness(&r));
                }
            }
            if let Some(a) = self.commit(&cur, next, &[]).await? {
                self.audit(&ch.actor_id, "automation.updated", &a, json!({"version": a.version})).await;
                return Ok(a);
            }
        }
        Err(raced())
    }

    /// Pausing a paused Automation changes nothing.
    pub async fn pause(&self, id: &str, expected_version: Option<i64>, note: &str, actor: &str) -> Result<Automation> {
        if note.len() > 1000 {
            return Err(Error::invalid_field("note", "a note is at most 1,000 bytes"));
        }
        for _ in 0..3 {
            let cur = self.current(id, expected_version).await?;
            if cur.status == AutomationStatus::Paused {
                return Ok(cur);
            }
            let reason = PauseReason { code: "manual".into(), note: (!note.is_empty()).then(|| note.to_string()) };
            let next = Automation { status: AutomationStatus::Paused, pause_reason: Some(reason), ..cur.clone() };
            if let Some(a) = self.commit(&cur, next, &["automation.paused"]).await? {
                self.audit(actor, "automation.paused", &a, json!({"note": note})).await;
                return Ok(a);
            }
        }
        Err(raced())
    }

    /// Resuming needs readiness (409 with it otherwise); an active one is
    /// left as it is.
    pub async fn resume(&self, id: &str, expected_version: Option<i64>, actor: &str) -> Result<Automation> {
        for _ in 0..3 {
            let cur = self.current(id, expected_version).await?;
            if cur.status == AutomationStatus::Active {
                return Ok(cur);
            }
            let r = self.readiness(&cur).await;
            if !r.ready() {
                return Err(conflict_readiness(&r));
            }
            let next = Automation { status: AutomationStatus::Active, pause_reason: None, ..cur.clone() };
            if let Some(a) = self.commit(&cur, next, &["automation.resumed"]).await? {
                self.audit(actor, "automation.resumed", &a, json!({})).await;
                return Ok(a);
            }
        }
        Err(raced())
    }

    /// Terminal: the Automation goes; its firings stay readable and its
    /// children run on. Answers its last state.
    pub async fn delete(&self, id: &str, actor: &str) -> Result<Automation> {
        for _ in 0..3 {
            let cur = self.current(id, None).await?;
            let next = Automation { deleted_ms: now_ms(), ..cur.clone() };
            if let Some(a) = self.commit(&cur, next, &["automation.deleted"]).await? {
                self.audit(actor, "automation.deleted", &a, json!({})).await;
                return Ok(Automation { deleted_ms: 0, ..a });
            }
        }
        Err(raced())
    }

    pub async fn list(&self, environment_ids: &[String], status: &str, page: &PageRequest) -> Result<Vec<Automation>> {
        if !status.is_empty() {
            AutomationStatus::parse("status", status)?;
        }
        self.store.list_automations(environment_ids, status, page).await
    }

    /// A manual fire: 409 while paused; a blocked Automation records a
    /// `skipped` firing; else the child Session is created now.
    pub async fn fire(&self, id: &str, event: Value, actor: &str) -> Result<Firing> {
        let a = self.automation(id).await?;
        if a.status == AutomationStatus::Paused {
            return Err(Error::conflict("the Automation is paused").with_details(json!({"status": "paused"})));
        }
        if event.to_string().len() > MAX_EVENT_BYTES {
            return Err(Error::new(Code::PayloadTooLarge, "an event is at most 1 MiB"));
        }
        let f = self.admit(&a, FiringSource::Manual, event, actor).await?;
        self.audit(actor, "automation.fired", &a, json!({"firing_id": f.id, "state": f.state.as_str()})).await;
        Ok(f)
    }

    /// Durable admission: the firing is recorded before its child exists,
    /// so a crash leaves a `running` firing, never a child without one.
    async fn admit(&self, a: &Automation, source: FiringSource, event: Value, actor: &str) -> Result<Firing> {
        let now = now_ms();
        let mut f = Firing {
            id: FiringId::mint(),
            automation_id: a.id.clone(),
            environment_id: a.environment_id.clone(),
            source,
            event,
            scheduled_for_ms: 0,
            dedupe_value: String::new(),
            actor_principal_id: actor.to_string(),
            automation_version: a.version,
            state: FiringState::Running,
            child_session_ids: vec![],
            usage: Usage::default(),
            error: None,
            created_ms: now,
            settled_ms: 0,
        };
        let readiness = self.readiness(a).await;
        if !readiness.ready() {
            let failing: Vec<&str> = readiness.checks.iter().filter(|c| c.status != "pass").map(|c| c.name).collect();
            f.settle(FiringState::Skipped, Some(("readiness_blocked", format!("not ready: {}", failing.join(", ")))), now);
            self.store.insert_firing(&f).await?;
            return Ok(f);
        }
        let prompt = match render_prompt(&a.target.prompt, &f.event) {
            Ok(p) => p,
            Err(e) => {
                f.settle(FiringState::Failed, Some(("rendered_prompt_too_large", e.message)), now);
                self.store.insert_firing(&f).await?;
                return Ok(f);
            }
        };
        self.store.insert_firing(&f).await?;
        match self.start_child(a, &f, &prompt).await {
            Ok(session_id) => {
                self.store.add_child(&f, &session_id, "").await?;
                f.child_session_ids.push(session_id);
            }
            Err(e) => {
                f.settle(FiringState::Failed, Some(("child_admission_denied", e.message)), now_ms());
                self.store.update_firing(&f).await?;
            }
        }
        Ok(f)
    }

    /// The child: an ordinary Session of the service Principal at the
    /// pinned revision, whose first message the firing caused.
    async fn start_child(&self, a: &Automation, f: &Firing, prompt: &str) -> Result<String> {
        let svc = a.service_principal_id.to_string();
        let message = ss::InputEvent {
            r#type: "user.message".into(),
            payload_json: json!({"content": [{"type": "text", "text": prompt}]}).to_string(),
            authored_by: svc.clone(),
            caused_by_json: json!({"kind": "automation_firing", "id": f.id}).to_string(),
        };
        let req = ss::CreateSessionRequest {
            agent_deployment_id: a.target.agent_deployment_id.clone(),
            deployment_revision: a.target.deployment_revision,
            principal_id: svc.clone(),
            title: a.name.chars().take(200).collect(),
            metadata_json: json!({"automation_id": a.id, "automation_firing_id": f.id, "step_id": null}).to_string(),
            initial_events: vec![message],
            created_by: svc,
            budget: a.target.budget.as_ref().map(|b| ss::NewBudget { limit: b.limit, metric: b.metric.clone() }),
            ..Default::default()
        };
        Ok(self.sessions.clone().create_session(req).await.map_err(Error::from)?.into_inner().id)
    }

    /// A firing and its receipts: each child Session's status and stop
    /// reason as the Session says now. A child that cannot be read is listed
    /// as missing evidence. Reading resumes nothing.
    pub async fn trace(&self, id: &str) -> Result<(Firing, Value, Value)> {
        let f = self.firing(id).await?;
        let mut sessions = vec![];
        let mut missing = vec![];
        for child in &f.child_session_ids {
            match self.sessions.clone().get_session(ss::GetByIdRequest { id: child.clone() }).await {
                Ok(s) => {
                    let s = s.into_inner();
                    let stop: Value = serde_json::from_str(&s.stop_reason_json).unwrap_or(Value::Null);
                    sessions.push(json!({"step_id": null, "session_id": s.id, "status": s.status, "stop_reason": stop}));
                }
                Err(st) if st.code() == tonic::Code::NotFound => missing.push(json!({"kind": "session", "id": child})),
                Err(st) => return Err(st.into()),
            }
        }
        let receipts = json!({"sessions": sessions, "approvals": [], "waits": []});
        let evidence = json!({"complete": missing.is_empty(), "missing": missing});
        Ok((f, receipts, evidence))
    }

    pub async fn firing(&self, id: &str) -> Result<Firing> {
        let id = FiringId::parse("id", id)?;
        self.store.get_firing(&id).await?.ok_or_else(|| Error::not_found("automation_firing", &id))
    }

    /// Readable after the Automation is deleted.
    pub async fn firings(&self, automation_id: &str, source: &str, state: &str, page: &PageRequest) -> Result<Vec<Firing>> {
        let id = AutomationId::parse("id", automation_id)?;
        self.store.get_automation(&id).await?.ok_or_else(|| Error::not_found("automation", &id))?;
        if !source.is_empty() {
            FiringSource::parse("source", source)?;
        }
        if !state.is_empty() {
            FiringState::parse("state", state)?;
        }
        self.store.list_firings(&id, source, state, page).await
    }
}
