//! Automations: their writes, readiness (evaluated on every read and
//! write), pause and resume, each arming the Automation's occurrence timer
//! in the same transaction. Firings are admitted in `admission.rs`, taken
//! from timers in `occurrences.rs`, from signed webhooks in `ingest.rs`,
//! and settled from their children's events in `settle.rs`.

use crate::model::*;
use crate::store::SchedulerStore;
use checkfu_bus::{Record, resource_record};
use checkfu_core::id::{AutomationId, EnvironmentId, PrincipalId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use checkfu_proto::capability::v1::capability_gateway_service_client::CapabilityGatewayServiceClient;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::governance::v1::governance_service_client::GovernanceServiceClient;
use checkfu_proto::memory::v1::memory_service_client::MemoryServiceClient;
use checkfu_proto::modelgateway::v1::model_gateway_service_client::ModelGatewayServiceClient;
use checkfu_proto::sessions::v1 as ss;
use checkfu_proto::sessions::v1::sessions_service_client::SessionsServiceClient;
use checkfu_proto::sessions::v1::skills_service_client::SkillsServiceClient;
use checkfu_proto::transport::Transport;
use checkfu_store::sealed::Sealer;
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Clone)]
pub struct SchedulerService {
    pub(crate) store: Arc<dyn SchedulerStore>,
    pub(crate) governance: GovernanceServiceClient<Transport>,
    pub(crate) sessions: SessionsServiceClient<Transport>,
    /// Checks' evaluations, and whether their profiles have a qualified
    /// evaluator.
    pub(crate) models: ModelGatewayServiceClient<Transport>,
    /// `step_connection`s: their tools resolved, planned and called.
    pub(crate) capability: CapabilityGatewayServiceClient<Transport>,
    /// Memory steps: their stores checked for readiness, read and written
    /// as the service Principal.
    pub(crate) memory: MemoryServiceClient<Transport>,
    /// Skill proposals: their skills checked, and versions made on adoption.
    pub(crate) skills: SkillsServiceClient<Transport>,
    /// `{firing}/{step}/{attempt}` of the Check nodes this replica is
    /// evaluating and the Connection steps it is governing or calling now,
    /// so concurrent advances of one program ask once.
    pub(crate) in_flight: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    outbox_wake: Option<Arc<tokio::sync::Notify>>,
    /// Wakes this replica's timer loop when a write arms a timer.
    pub(crate) timer_wake: Arc<tokio::sync::Notify>,
    /// Seals ingest secrets (and providers' signing secrets) at rest.
    pub(crate) sealer: Sealer,
    /// The provider adapters offered (`providers/`, §18.9).
    pub(crate) providers: crate::providers::Providers,
    /// Where providers reach this installation's public API: callback URLs
    /// are built from it.
    pub(crate) public_url: String,
    /// The features switched off (`provider_triggers` among them).
    pub(crate) features_disabled: checkfu_core::features::Disabled,
}

/// The services the scheduler calls.
pub struct Mesh {
    pub governance: Transport,
    pub sessions: Transport,
    pub models: Transport,
    pub capability: Transport,
    pub memory: Transport,
}

/// What a caller asked for when creating an Automation, its triggers and
/// target checked.
#[derive(Debug, Clone)]
pub struct NewAutomation {
    pub environment_id: String,
    pub name: String,
    pub service_principal_id: String,
    pub triggers: Vec<Trigger>,
    pub target: AgentTarget,
    pub metadata: Value,
    /// Supplied, or empty to generate one when a webhook trigger needs it.
    pub ingest_secret: String,
    pub actor_id: String,
}

/// What an update changes.
#[derive(Debug, Clone, Default)]
pub struct AutomationChange {
    pub name: Option<String>,
    pub triggers: Option<Vec<Trigger>>,
    pub target: Option<AgentTarget>,
    pub metadata: Option<Value>,
    /// A new ingest secret: replaces the old one at once (no overlap).
    pub ingest_secret: Option<String>,
    pub expected_version: Option<i64>,
    pub actor_id: String,
}

/// A write's result: the Automation, its readiness as the write evaluated
/// it (when it did), and an ingest secret the write generated (shown once).
#[derive(Debug, Clone)]
pub struct Written {
    pub automation: Automation,
    pub readiness: Option<Readiness>,
    pub generated_secret: Option<String>,
}

/// 32–256 printable ASCII characters.
fn check_secret(secret: &str) -> Result<()> {
    let n = secret.len();
    if !(32..=256).contains(&n) || !secret.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(Error::invalid_field("ingest_secret", "an ingest secret is 32 to 256 printable ASCII characters"));
    }
    Ok(())
}

/// What `status` makes of an Automation's timed trigger when it is (re)armed
/// from scratch: a one-time occurrence is kept (dormant while paused); a
/// recurring one is pending only while active, at its next time after now.
pub(crate) fn arm_for(a: &Automation, now: i64) -> Arm {
    let active = a.status == AutomationStatus::Active;
    match a.timed() {
        Some(Trigger::Once(at)) => Arm::Set { at: *at, awake: active },
        Some(Trigger::Schedule(s)) if active => s.next_after(now).map_or(Arm::Clear, |at| Arm::Set { at, awake: true }),
        _ => Arm::Clear,
    }
}

/// The pending occurrence (`next_at`) after `arm` is applied to a timer at
/// `current`: what the store now holds, without reading it back.
fn next_after(current: Option<i64>, arm: Arm) -> Option<i64> {
    match arm {
        Arm::Keep | Arm::Sleep | Arm::Wake => current,
        Arm::Set { at, .. } => Some(at),
        Arm::Clear => None,
    }
}

/// A one-time trigger's `at` must be in the future when it is set.
pub(crate) fn check_future(triggers: &[Trigger], now: i64) -> Result<()> {
    for (i, t) in triggers.iter().enumerate() {
        if let Trigger::Once(at) = t
            && *at <= now
        {
            return Err(Error::invalid_field(&format!("triggers[{i}].at"), "at is in the future").with_reason("invalid_trigger"));
        }
    }
    Ok(())
}

pub(crate) fn conflict_readiness(r: &Readiness) -> Error {
    Error::conflict("the Automation would not be ready: see details.readiness").with_details(json!({"readiness": r.to_json()}))
}

fn managed_by_graph(a: &Automation) -> Error {
    Error::conflict("a graph manages this Automation's name, triggers and target, and its deletion: change the graph")
        .with_details(json!({"reason": "managed_by_graph", "graph_id": a.managed_by["graph_id"]}))
}

fn raced() -> Error {
    Error::conflict("the Automation changed concurrently; read it again")
}

fn stale(current: i64, expected: i64) -> Error {
    Error::conflict(format!("the Automation is at version {current}, not {expected}")).with_details(json!({"current_version": current}))
}

impl SchedulerService {
    pub fn new(store: Arc<dyn SchedulerStore>, mesh: Mesh, sealer: Sealer) -> Self {
        SchedulerService {
            store,
            governance: GovernanceServiceClient::new(mesh.governance),
            skills: SkillsServiceClient::new(mesh.sessions.clone()),
            sessions: SessionsServiceClient::new(mesh.sessions).max_decoding_message_size(64 * 1024 * 1024),
            models: ModelGatewayServiceClient::new(mesh.models),
            capability: CapabilityGatewayServiceClient::new(mesh.capability),
            memory: MemoryServiceClient::new(mesh.memory),
            in_flight: Arc::default(),
            outbox_wake: None,
            timer_wake: Arc::new(tokio::sync::Notify::new()),
            sealer,
            providers: crate::providers::Providers::new(false),
            public_url: String::new(),
            features_disabled: Default::default(),
        }
    }

    /// Provider events (§18.9): callbacks under `public_url` (the public
    /// API's base, e.g. `https://checkfu.example.com`); `test_providers`
    /// adds the `fake` provider (tests and local development only).
    pub fn with_providers(mut self, public_url: &str, test_providers: bool) -> Self {
        self.public_url = public_url.trim_end_matches('/').to_string();
        self.providers = crate::providers::Providers::new(test_providers);
        self
    }

    /// The features switched off: `provider_triggers` off refuses provider
    /// sources, their registrations' actions and provider ingest (503).
    pub fn with_features_disabled(mut self, disabled: checkfu_core::features::Disabled) -> Self {
        self.features_disabled = disabled;
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
        self.timer_wake.notify_one();
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
        let mut agents = vec![];
        let mut target = Check::pass("target");
        for (dep_id, pinned) in a.target.deployments() {
            let check = match self.sessions.clone().get_deployment(ss::GetByIdRequest { id: dep_id.clone() }).await {
                Ok(d) => {
                    let d = d.into_inner();
                    let pinned = pinned.unwrap_or(d.revision);
                    if d.environment_id != a.environment_id.as_str() {
                        Check::fail("target", "the deployment is in another Environment", Some(dep_id.clone()))
                    } else if pinned > d.revision {
                        Check::fail("target", format!("the deployment has no revision {pinned}"), Some(dep_id.clone()))
                    } else {
                        match self.sessions.clone().get_agent(ss::GetByIdRequest { id: d.agent_id.clone() }).await {
                            Ok(ag) if ag.get_ref().archived => Check::fail("target", "the Agent is archived", Some(d.agent_id.clone())),
                            Ok(_) => {
                                agents.push(d.agent_id.clone());
                                Check::pass("target")
                            }
                            Err(s) => Check::unknown("target", s.message()),
                        }
                    }
                }
                Err(s) if s.code() == tonic::Code::NotFound => Check::fail("target", "the deployment does not exist", Some(dep_id.clone())),
                Err(s) => Check::unknown("target", s.message()),
            };
            if check.status != "pass" && target.status == "pass" {
                target = check;
            }
        }
        let target_ok = target.status == "pass";
        checks.push(target);
        let mut permissions = Check::pass("permissions");
        if !target_ok {
            permissions = Check::unknown("permissions", "the target's Agents are not known");
        }
        agents.sort();
        agents.dedup();
        for agent in agents.iter().filter(|_| target_ok) {
            let check = match self.allowed(&svc, "invoke", "agent", agent, &a.environment_id).await {
                Ok(true) => continue,
                Ok(false) => Check::fail("permissions", format!("{svc} lacks invoke on agent {agent}"), Some(agent.clone())),
                Err(s) => Check::unknown("permissions", s.message()),
            };
            permissions = check;
            break;
        }
        checks.push(permissions);
        checks.push(self.webhook_readiness(a).await);
        checks.push(self.evaluators(a).await);
        checks.push(self.connections(a).await);
        checks.push(self.session_targets(a).await);
        checks.push(self.memory_stores(a).await);
        checks.push(self.subscription_reader(a).await);
        checks.push(match (a.target.refused(), a.target.not_executable()) {
            (Some(why), _) => Check::fail("capabilities", why, None),
            (None, Some(why)) => Check::unknown("capabilities", why),
            (None, None) => Check::pass("capabilities"),
        });
        Readiness { checks, checked_ms: now_ms() }
    }

    /// Whether governance lets `principal` do `permission` on `(kind, id)`
    /// in the Environment; the status when it could not be asked.
    pub(crate) async fn allowed(
        &self,
        principal: &str,
        permission: &str,
        kind: &str,
        id: &str,
        environment_id: &str,
    ) -> std::result::Result<bool, tonic::Status> {
        let req = gov::CheckRequest {
            principal_id: principal.into(),
            permission: permission.into(),
            resource: Some(gov::ResourceRef { kind: kind.into(), id: id.into() }),
            environment_id: environment_id.into(),
            subject: None,
        };
        Ok(self.governance.clone().check(req).await?.into_inner().allowed)
    }

    /// Readiness `subscription` (api.md §18.10): a subscribed Automation's
    /// service Principal may read its Environment, whose events it sees.
    async fn subscription_reader(&self, a: &Automation) -> Check {
        if a.subscription().is_none() {
            return Check::pass("subscription");
        }
        let svc = a.service_principal_id.to_string();
        match self.allowed(&svc, "read", "environment", &a.environment_id, &a.environment_id).await {
            Ok(true) => Check::pass("subscription"),
            Ok(false) => {
                Check::fail("subscription", format!("{svc} lacks read on the Environment, whose events it subscribes to"), Some(svc))
            }
            Err(s) => Check::unknown("subscription", s.message()),
        }
    }

    /// Readiness `evaluators`: every routing profile a Check or a delivery
    /// screen calls has a candidate qualified for that purpose now (api.md
    /// §18.1, §18.8).
    async fn evaluators(&self, a: &Automation) -> Check {
        for (profile, purpose) in a.target.evaluator_profiles() {
            let req =
                checkfu_proto::modelgateway::v1::CheckEvaluatorsRequest { routing_profile_id: profile.clone(), purpose: purpose.into() };
            match self.models.clone().check_evaluators(req).await {
                Ok(r) if r.get_ref().qualified => continue,
                Ok(_) => {
                    return Check::fail(
                        "evaluators",
                        format!(
                            "no candidate of {profile} is qualified for {purpose}: an installation admin records an evaluator qualification"
                        ),
                        Some(profile),
                    );
                }
                Err(s) if s.code() == tonic::Code::NotFound => {
                    return Check::fail("evaluators", format!("the routing profile {profile} does not exist ({purpose})"), Some(profile));
                }
                Err(s) => return Check::unknown("evaluators", s.message()),
            }
        }
        Check::pass("evaluators")
    }

    /// Readiness `connections` (api.md §18.3): each `step_connection`'s
    /// ToolSource and Connection are active, the tool is offered, and the
    /// service Principal holds `use_connection` on the Connection.
    async fn connections(&self, a: &Automation) -> Check {
        let Target::Steps(t) = &a.target else { return Check::pass("connections") };
        let svc = a.service_principal_id.to_string();
        for (tool_source_id, connection_id, tool) in t.connection_tools() {
            let req = checkfu_proto::capability::v1::ResolveStepToolRequest {
                environment_id: a.environment_id.to_string(),
                tool_source: tool_source_id.clone(),
                tool: tool.clone(),
            };
            let found = match self.capability.clone().resolve_step_tool(req).await {
                Ok(r) => r.into_inner(),
                Err(s) if s.code() == tonic::Code::NotFound => {
                    return Check::fail("connections", format!("the ToolSource {tool_source_id} no longer exists"), Some(tool_source_id));
                }
                Err(s) => return Check::unknown("connections", s.message()),
            };
            if found.tool_source_status != "active" {
                return Check::fail(
                    "connections",
                    format!("the ToolSource {tool_source_id} is {}", found.tool_source_status),
                    Some(tool_source_id),
                );
            }
            if found.connection_id != connection_id || found.connection_status != "active" {
                let status = if found.connection_status.is_empty() { "gone" } else { found.connection_status.as_str() };
                return Check::fail("connections", format!("the Connection {connection_id} is {status}"), Some(connection_id));
            }
            if !found.offered {
                return Check::fail("connections", format!("{tool_source_id} no longer offers {tool}"), Some(tool_source_id));
            }
            match self.allowed(&svc, "use_connection", "connection", &connection_id, &a.environment_id).await {
                Ok(true) => {}
                Ok(false) => {
                    return Check::fail("connections", format!("{svc} lacks use_connection on {connection_id}"), Some(connection_id));
                }
                Err(s) => return Check::unknown("connections", s.message()),
            }
        }
        Check::pass("connections")
    }

    pub(crate) async fn audit(&self, actor: &str, action: &str, a: &Automation, details: Value) {
        self.audit_resource(actor, action, "automation", a.id.as_str(), details).await
    }

    /// Records a change in governance's audit trail; a failure is logged,
    /// never the caller's error (the change itself is already written).
    pub(crate) async fn audit_resource(&self, actor: &str, action: &str, kind: &str, id: &str, details: Value) {
        let req = gov::RecordAuditRequest {
            actor_id: actor.into(),
            action: action.into(),
            resource: Some(gov::ResourceRef { kind: kind.into(), id: id.into() }),
            details_json: details.to_string(),
        };
        if let Err(s) = self.governance.clone().record_audit(req).await {
            tracing::warn!(%s, kind, id, action, "could not audit a change");
        }
    }

    pub(crate) fn event(a: &Automation, kind: &str) -> Record {
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

    /// The secret a write leaves: `supplied` (checked), else the current
    /// one, else a generated one when a webhook trigger needs it (returned
    /// as generated, to be shown once).
    pub(crate) fn secret_for(&self, triggers: &[Trigger], current: &str, supplied: Option<&str>) -> Result<(String, Option<String>)> {
        if let Some(s) = supplied {
            check_secret(s)?;
            return Ok((self.sealer.seal(s)?, None));
        }
        if !current.is_empty() || !triggers.iter().any(|t| matches!(t, Trigger::Webhook(_))) {
            return Ok((current.to_string(), None));
        }
        let generated = checkfu_core::signature::new_secret();
        Ok((self.sealer.seal(&generated)?, Some(generated)))
    }

    pub async fn create(&self, new: NewAutomation) -> Result<Written> {
        let environment_id = EnvironmentId::parse("environment_id", &new.environment_id)?;
        let service_principal_id = PrincipalId::parse("service_principal_id", &new.service_principal_id)?;
        check_name(&new.name)?;
        let triggers = new.triggers;
        let now = now_ms();
        check_future(&triggers, now)?;
        let supplied = (!new.ingest_secret.is_empty()).then_some(new.ingest_secret.as_str());
        let (ingest_secret, generated_secret) = self.secret_for(&triggers, "", supplied)?;
        let target = Target::Agent(self.pin(new.target, &environment_id).await?);
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
            ingest_secret,
            version: 1,
            deleted_ms: 0,
            created_ms: now,
            updated_ms: now,
            next_ms: None,
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
        let arm = arm_for(&a, now);
        self.store.insert_automation(&a, &events, arm).await?;
        self.woke();
        self.audit(&new.actor_id, "automation.created", &a, json!({"name": a.name, "status": a.status.as_str()})).await;
        a.next_ms = next_after(None, arm);
        Ok(Written { automation: a, readiness: Some(readiness), generated_secret })
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
    /// staging an event of each of `kinds` and applying `arm` to its timer;
    /// `None` when the row moved (the caller decides again from a fresh
    /// read). Answers the Automation as stored, with its pending occurrence.
    pub(crate) async fn commit(&self, current: &Automation, mut next: Automation, kinds: &[&str], arm: Arm) -> Result<Option<Automation>> {
        next.version = current.version + 1;
        next.updated_ms = now_ms();
        let events: Vec<Record> = kinds.iter().map(|k| Self::event(&next, k)).collect();
        if !self.store.update_automation(&next, current.version, &events, arm).await? {
            return Ok(None);
        }
        self.woke();
        next.next_ms = next_after(current.next_ms, arm);
        Ok(Some(next))
    }

    pub async fn update(&self, id: &str, ch: AutomationChange) -> Result<Written> {
        if let Some(n) = &ch.name {
            check_name(n)?;
        }
        if let Some(s) = &ch.ingest_secret {
            check_secret(s)?;
        }
        let metadata = ch.metadata.as_ref().map(check_metadata).transpose()?;
        for _ in 0..3 {
            let cur = self.current(id, ch.expected_version).await?;
            if cur.managed_by["kind"] == "graph" && (ch.name.is_some() || ch.triggers.is_some() || ch.target.is_some()) {
                return Err(managed_by_graph(&cur));
            }
            let mut next = cur.clone();
            if let Some(n) = &ch.name {
                next.name = n.clone();
            }
            if let Some(t) = &ch.triggers {
                next.triggers = t.clone();
            }
            if let Some(m) = &metadata {
                next.metadata = m.clone();
            }
            if let Some(t) = &ch.target {
                next.target = Target::Agent(self.pin(t.clone(), &cur.environment_id).await?);
            }
            let (secret, generated_secret) = self.secret_for(&next.triggers, &cur.ingest_secret, ch.ingest_secret.as_deref())?;
            next.ingest_secret = secret;
            let arm = self.rearm(&cur, &next)?;
            let mut readiness = None;
            if cur.status == AutomationStatus::Active {
                let r = self.readiness(&next).await;
                if !r.ready() {
                    return Err(conflict_readiness(&r));
                }
                readiness = Some(r);
            }
            if let Some(a) = self.commit(&cur, next, &[], arm).await? {
                let rotated = ch.ingest_secret.is_some();
                self.audit(&ch.actor_id, "automation.updated", &a, json!({"version": a.version, "ingest_secret_rotated": rotated})).await;
                if rotated {
                    self.audit(&ch.actor_id, "automation.ingest_secret_rotated", &a, json!({"version": a.version})).await;
                }
                return Ok(Written { automation: a, readiness, generated_secret });
            }
        }
        Err(raced())
    }

    /// What an update does to the pending occurrence: nothing unless the
    /// timed trigger changed. The same `at` again is no change (even past);
    /// a different one must be future and re-arms it.
    pub(crate) fn rearm(&self, cur: &Automation, next: &Automation) -> Result<Arm> {
        let now = now_ms();
        match (cur.timed(), next.timed()) {
            (old, new) if old == new => Ok(Arm::Keep),
            (_, Some(Trigger::Once(_))) => {
                check_future(&next.triggers, now)?;
                Ok(arm_for(next, now))
            }
            _ => Ok(arm_for(next, now)),
        }
    }

    /// Pausing a paused Automation changes nothing.
    pub async fn pause(&self, id: &str, expected_version: Option<i64>, note: &str, actor: &str) -> Result<Automation> {
        if note.len() > 1000 {
            return Err(Error::invalid_field("note", "a note is at most 1,000 bytes"));
        }
        let reason = PauseReason { code: "manual".into(), note: (!note.is_empty()).then(|| note.to_string()) };
        let a = self.pause_for(id, expected_version, reason).await?;
        if a.1 {
            self.audit(actor, "automation.paused", &a.0, json!({"note": note})).await;
        }
        Ok(a.0)
    }

    /// Pauses for `reason`: a recurring schedule's pending occurrence goes,
    /// a one-time one stays (dormant). True when this call paused it.
    pub(crate) async fn pause_for(&self, id: &str, expected_version: Option<i64>, reason: PauseReason) -> Result<(Automation, bool)> {
        for _ in 0..3 {
            let cur = self.current(id, expected_version).await?;
            if cur.status == AutomationStatus::Paused {
                return Ok((cur, false));
            }
            let next = Automation { status: AutomationStatus::Paused, pause_reason: Some(reason.clone()), ..cur.clone() };
            let arm = match cur.timed() {
                Some(Trigger::Once(_)) => Arm::Sleep,
                _ => Arm::Clear,
            };
            if let Some(a) = self.commit(&cur, next, &["automation.paused"], arm).await? {
                return Ok((a, true));
            }
        }
        Err(raced())
    }

    /// Resuming needs readiness (409 with it otherwise); an active one is
    /// left as it is.
    /// A one-time occurrence still pending wakes (firing at once if its
    /// time passed); a recurring schedule is armed at its next time.
    pub async fn resume(&self, id: &str, expected_version: Option<i64>, actor: &str) -> Result<(Automation, Option<Readiness>)> {
        for _ in 0..3 {
            let cur = self.current(id, expected_version).await?;
            if cur.status == AutomationStatus::Active {
                return Ok((cur, None));
            }
            let r = self.readiness(&cur).await;
            if !r.ready() {
                return Err(conflict_readiness(&r));
            }
            let next = Automation { status: AutomationStatus::Active, pause_reason: None, ..cur.clone() };
            let arm = match next.timed() {
                Some(Trigger::Once(_)) => Arm::Wake,
                _ => arm_for(&next, now_ms()),
            };
            if let Some(a) = self.commit(&cur, next, &["automation.resumed"], arm).await? {
                self.audit(actor, "automation.resumed", &a, json!({})).await;
                // Unfinished step programs continue as the same firings.
                self.advance_programs(Some(&a.id)).await;
                return Ok((a, Some(r)));
            }
        }
        Err(raced())
    }

    /// Terminal: the Automation goes; its firings stay readable and its
    /// children run on. Answers its last state.
    pub async fn delete(&self, id: &str, actor: &str) -> Result<Automation> {
        let cur = self.current(id, None).await?;
        if cur.managed_by["kind"] == "graph" {
            return Err(managed_by_graph(&cur));
        }
        self.delete_managed(&cur, actor).await
    }

    /// Deletes whoever manages it (a graph's delete deletes its own).
    pub(crate) async fn delete_managed(&self, a: &Automation, actor: &str) -> Result<Automation> {
        for _ in 0..3 {
            let cur = self.current(a.id.as_str(), None).await?;
            let next = Automation { deleted_ms: now_ms(), ..cur.clone() };
            if let Some(a) = self.commit(&cur, next, &["automation.deleted"], Arm::Clear).await? {
                self.audit(actor, "automation.deleted", &a, json!({})).await;
                // An unfinished step program settles failed (automation_deleted).
                self.advance_programs(Some(&a.id)).await;
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
}
