//! Admission (api.md §12.5): one durable path for manual fires, schedule
//! occurrences and signed webhook events. The firing is recorded with its
//! child's id and request before the child is asked for, in one
//! transaction with what makes it unique (its occurrence, its dedupe
//! identity); the Session is then created with that id, which makes the
//! create idempotent. A crash in between leaves a pending child that
//! [`SchedulerService::recover_children`] completes — never a second child,
//! never a firing lost.

use crate::firing::Firing;
use crate::model::*;
use crate::service::SchedulerService;
use crate::session_input::Continuation;
use checkfu_core::id::{AutomationId, FiringId, SessionId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result};
use checkfu_proto::sessions::v1 as ss;
use serde_json::{Value, json};

/// A pending child older than this is presumed orphaned by a crash and
/// completed by recovery.
pub const ORPHANED_AFTER_MS: i64 = 30_000;

/// What is being admitted, beyond the Automation.
#[derive(Debug, Clone)]
pub struct Admission {
    pub source: FiringSource,
    pub event: Value,
    /// The occurrence's nominal time (schedule), else 0.
    pub scheduled_for_ms: i64,
    pub dedupe_value: String,
    pub actor: String,
    /// The dedupe identity a webhook event claims with its firing.
    pub delivery: Option<Delivery>,
    /// The WebhookSource a provider delivery came through (§18.9), else
    /// empty.
    pub webhook_source_id: String,
}

/// A refusal that will not change by asking again (versus an outage).
fn permanent(e: &Error) -> bool {
    !matches!(e.code, Code::Unavailable | Code::Internal)
}

impl SchedulerService {
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
        let adm = Admission {
            source: FiringSource::Manual,
            event,
            scheduled_for_ms: 0,
            dedupe_value: String::new(),
            actor: actor.to_string(),
            delivery: None,
            webhook_source_id: String::new(),
        };
        let f = self.admit(&a, adm).await?.ok_or_else(|| Error::internal("a manual firing has nothing to collide with"))?;
        self.audit(actor, "automation.fired", &a, json!({"firing_id": f.id, "state": f.state.as_str()})).await;
        Ok(f)
    }

    /// Admits a firing: readiness first (blocked → `skipped`), then the
    /// prompt, then the child. `None` when the occurrence or dedupe identity
    /// already has a firing (nothing was written).
    pub(crate) async fn admit(&self, a: &Automation, adm: Admission) -> Result<Option<Firing>> {
        let now = now_ms();
        let mut f = Firing {
            id: FiringId::mint(),
            automation_id: a.id.clone(),
            environment_id: a.environment_id.clone(),
            source: adm.source,
            event: adm.event,
            scheduled_for_ms: adm.scheduled_for_ms,
            dedupe_value: adm.dedupe_value,
            actor_principal_id: adm.actor,
            automation_version: a.version,
            state: FiringState::Running,
            child_session_ids: vec![],
            usage: Usage::default(),
            error: None,
            created_ms: now,
            settled_ms: 0,
            program: None,
            graph: match a.managed_by["kind"].as_str() {
                Some("graph") => json!({"graph_id": a.managed_by["graph_id"], "revision": a.managed_by["revision"]}),
                _ => Value::Null,
            },
            webhook_source_id: adm.webhook_source_id,
            version: 0,
        };
        let delivery = adm.delivery.map(|d| Delivery { firing_id: f.id.to_string(), ..d });
        let readiness = self.readiness(a).await;
        if !readiness.admits() {
            let failing: Vec<&str> = readiness.checks.iter().filter(|c| c.status != "pass").map(|c| c.name).collect();
            f.settle(FiringState::Skipped, Some(("readiness_blocked", format!("not ready: {}", failing.join(", ")))), now);
            return Ok(self.store.insert_firing(&f, None, delivery.as_ref()).await?.then_some(f));
        }
        let target = match &a.target {
            Target::Agent(t) => t,
            Target::Steps(steps) => {
                let Some(entry) = crate::program::entry(steps, f.source.as_str()) else {
                    f.settle(FiringState::Skipped, Some(("readiness_blocked", "the program has no trigger for this source".into())), now);
                    return Ok(self.store.insert_firing(&f, None, delivery.as_ref()).await?.then_some(f));
                };
                f.program = Some(crate::program::Program::new(steps.clone(), entry));
                if !self.store.insert_firing(&f, None, delivery.as_ref()).await? {
                    return Ok(None);
                }
                self.advance_program(&f.id, None).await?;
                return Ok(Some(self.store.get_firing(&f.id).await?.unwrap_or(f)));
            }
        };
        let prompt = match render_prompt(&target.prompt, &f.event) {
            Ok(p) => p,
            Err(e) => {
                f.settle(FiringState::Failed, Some(("rendered_prompt_too_large", e.message)), now);
                return Ok(self.store.insert_firing(&f, None, delivery.as_ref()).await?.then_some(f));
            }
        };
        // A continue_selected target's input goes into its Session (§18.4).
        let continued = target.continued_session().map(String::from);
        let child = ChildRequest {
            session_id: continued.clone().unwrap_or_else(|| SessionId::mint().to_string()),
            step_id: String::new(),
            agent_deployment_id: target.agent_deployment_id.clone(),
            deployment_revision: target.deployment_revision,
            principal_id: a.service_principal_id.to_string(),
            title: a.name.chars().take(200).collect(),
            metadata: json!({"automation_id": a.id, "automation_firing_id": f.id, "step_id": null}),
            prompt,
            budget: target.budget.clone(),
            firing_id: f.id.to_string(),
            outcome: None,
            continuation: continued.map(|_| Continuation::new(f.id.as_str(), "", 1)),
            delivery_screen: target.delivery_screen.clone(),
        };
        if !self.store.insert_firing(&f, Some(&child), delivery.as_ref()).await? {
            return Ok(None);
        }
        self.complete_child(&mut f, &child).await?;
        Ok(Some(f))
    }

    /// Asks for a recorded child — or, for a `continue_selected` input,
    /// appends it (`continuation.rs`). Created or accepted (or found, on a
    /// retry): confirmed and listed. Refused: nothing exists; an Agent
    /// target's firing fails here (`child_admission_denied`, or the input's
    /// `session_busy` / `session_terminated` / `session_input_denied`), a
    /// step's is failed by its program — the reason is answered.
    /// Unreachable: left pending for recovery.
    pub(crate) async fn complete_child(&self, f: &mut Firing, child: &ChildRequest) -> Result<Option<String>> {
        let asked = match &child.continuation {
            Some(c) => self.continue_child(child, c).await.map(|i| i.session_id),
            None => self.create_child(child).await,
        };
        match asked {
            Ok(session_id) => {
                if child.continuation.is_none() {
                    self.store.confirm_child(&session_id).await?;
                }
                if !f.child_session_ids.contains(&session_id) {
                    f.child_session_ids.push(session_id);
                }
            }
            Err(e) if permanent(&e) => {
                let reason = match &child.continuation {
                    Some(c) => {
                        self.store.drop_input(&c.key).await?;
                        crate::continuation::refusal(&e)
                    }
                    None => {
                        self.store.drop_child(&child.session_id).await?;
                        "child_admission_denied"
                    }
                };
                if !child.step_id.is_empty() {
                    return Ok(Some(reason.to_string()));
                }
                if f.state == FiringState::Running {
                    f.settle(FiringState::Failed, Some((reason, e.message)), now_ms());
                    self.store.update_firing(f).await?;
                }
            }
            Err(e) => {
                tracing::warn!(firing_id = %f.id, error = %e.message, "a child Session could not be created yet; recovery retries it")
            }
        }
        Ok(None)
    }

    /// The child: an ordinary Session of the service Principal at the
    /// pinned revision, whose first message the firing caused — or, for a
    /// step an Outcome reviews, whose Outcome it defined with the prompt as
    /// its description (§18.2).
    async fn create_child(&self, c: &ChildRequest) -> Result<String> {
        let (kind, payload) = match &c.outcome {
            Some(o) => {
                let mut define = o.clone();
                define["description"] = json!(c.prompt);
                ("user.define_outcome", define)
            }
            None => ("user.message", json!({"content": [{"type": "text", "text": c.prompt}]})),
        };
        // `caused_by_json` too, for a 0.1.0 sessions service until the
        // release after it.
        #[allow(deprecated)]
        let message = ss::InputEvent {
            r#type: kind.into(),
            payload_json: payload.to_string(),
            authored_by: c.principal_id.clone(),
            caused_by: Some(ss::Cause { kind: "automation_firing".into(), id: c.firing_id.clone(), ..Default::default() }),
            caused_by_json: json!({"kind": "automation_firing", "id": c.firing_id}).to_string(),
        };
        let req = ss::CreateSessionRequest {
            agent_deployment_id: c.agent_deployment_id.clone(),
            deployment_revision: c.deployment_revision,
            principal_id: c.principal_id.clone(),
            title: c.title.clone(),
            metadata_json: c.metadata.to_string(),
            initial_events: vec![message],
            created_by: c.principal_id.clone(),
            budget: c.budget.as_ref().map(|b| ss::NewBudget { limit: b.limit, metric: b.metric.clone() }),
            session_id: Some(c.session_id.clone()),
            delivery_screen: c.delivery_screen.as_ref().map(ss::DeliveryScreen::of),
            ..Default::default()
        };
        Ok(self.sessions.clone().create_session(req).await.map_err(Error::from)?.into_inner().id)
    }

    /// Completes children and inputs a crash (or an outage) left pending:
    /// each is asked for again with its recorded id or key, so it is made
    /// at most once. Answers how many were completed.
    pub async fn recover_children(&self) -> Result<usize> {
        let before = now_ms() - ORPHANED_AFTER_MS;
        let mut pending = self.store.pending_children(before, 100).await?;
        pending.extend(self.store.pending_inputs(before, 100).await?);
        for c in &pending {
            self.ask_again(c).await?;
        }
        Ok(pending.len())
    }

    pub async fn firing(&self, id: &str) -> Result<Firing> {
        let id = FiringId::parse("id", id)?;
        self.store.get_firing(&id).await?.ok_or_else(|| Error::not_found("automation_firing", &id))
    }

    /// The newest firing of an Automation, if it ever fired: shown beside it
    /// so a list needs no request per row.
    pub async fn last_firing(&self, automation_id: &AutomationId) -> Result<Option<Firing>> {
        let newest = PageRequest { limit: 1, before_id: None };
        Ok(self.store.list_firings(automation_id, "", "", &newest).await?.into_iter().next())
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
