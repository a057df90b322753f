//! AutomationGraph endpoints (api.md §12.7): documents and revisions, plan
//! (a validation result that records nothing), apply (writes the Automation
//! the plan describes, refusing a plan that is rejected, blocked or stale),
//! drift, and node tests (a prompt preview: no Session, model call or
//! record).

use super::document::{Document, Kind, Node, StepConnection};
use super::plan::{self, Checked, Pin, PlanError, Resource};
use super::{Application, Graph, Revision};
use crate::model::*;
use crate::service::{SchedulerService, arm_for, check_future, conflict_readiness};
use checkfu_core::id::{ApplicationId, AutomationId, EnvironmentId, GraphId, PrincipalId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use checkfu_proto::capability::v1 as cg;
use checkfu_proto::sessions::v1 as ss;
use serde_json::{Value, json};

/// A plan: `planned` (maybe with blockers) or `rejected`.
#[derive(Debug, Clone)]
pub enum Plan {
    Planned(Box<Planned>),
    Rejected { graph_id: String, revision: i64, errors: Vec<PlanError> },
}

#[derive(Debug, Clone)]
pub struct Planned {
    pub graph_id: String,
    pub revision: i64,
    pub plan_sha256: String,
    /// The Automation it writes (`None`: a new one) and how.
    pub automation_id: Option<String>,
    pub action: &'static str,
    pub target: Value,
    pub triggers: Vec<Trigger>,
    pub name: String,
    pub pins: Vec<Pin>,
    /// Each `step_connection`'s ToolSource and Connection.
    pub resources: Vec<Resource>,
    pub blockers: Vec<PlanError>,
    pub readiness: Readiness,
}

impl Plan {
    pub fn to_json(&self) -> Value {
        match self {
            Plan::Rejected { graph_id, revision, errors } => json!({"kind": "rejected", "graph_id": graph_id, "revision": revision,
                "errors": errors.iter().map(PlanError::to_json).collect::<Vec<_>>()}),
            Plan::Planned(p) => {
                let inputs =
                    if p.needs_ingest_secret() { json!([{"name": "ingest_secret", "generated_if_absent": true}]) } else { json!([]) };
                json!({"kind": "planned", "graph_id": p.graph_id, "revision": p.revision, "plan_sha256": p.plan_sha256,
                    "automation": {"id": p.automation_id, "action": p.action}, "target_kind": p.target["kind"],
                    "pins": p.pins.iter().map(Pin::to_json).collect::<Vec<_>>(),
                    "resources": p.resources.iter().map(Resource::to_json).collect::<Vec<_>>(),
                    "blockers": p.blockers.iter().map(PlanError::to_json).collect::<Vec<_>>(),
                    "readiness": p.readiness.to_json(), "required_inputs": inputs})
            }
        }
    }
}

impl Planned {
    /// Whether apply takes an `ingest_secret` (generated when absent): the
    /// graph has a webhook trigger.
    pub fn needs_ingest_secret(&self) -> bool {
        self.triggers.iter().any(|t| matches!(t, Trigger::Webhook(_)))
    }
}

/// Whether the applied Automation still matches what its revision plans:
/// `not_applied`, `in_sync` or `drifted`, with a reason per difference.
#[derive(Debug, Clone, PartialEq)]
pub struct Drift {
    pub state: &'static str,
    pub reasons: Vec<PlanError>,
}

impl Drift {
    pub fn not_applied() -> Drift {
        Drift { state: "not_applied", reasons: vec![] }
    }

    pub fn to_json(&self) -> Value {
        json!({"state": self.state, "reasons": self.reasons.iter().map(PlanError::to_json).collect::<Vec<_>>()})
    }
}

/// A `prompt_preview`: the node's prompt as a Session would get it, and
/// what it would pin.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    pub graph_id: String,
    pub revision: i64,
    pub node: String,
    pub prompt_source: &'static str,
    pub rendered_prompt: String,
    pub missing_event_references: Vec<String>,
    pub pin: Option<Pin>,
    pub agent_deployment_id: String,
    pub environment_id: String,
}

impl Preview {
    pub fn to_json(&self) -> Value {
        json!({"mode": "prompt_preview", "graph_id": self.graph_id, "revision": self.revision, "node": self.node,
            "prompt_source": self.prompt_source, "rendered_prompt": self.rendered_prompt,
            "missing_event_references": self.missing_event_references,
            "agent_id": self.pin.as_ref().map(|p| p.agent_id.clone()), "agent_version": self.pin.as_ref().map(|p| p.agent_version),
            "agent_deployment_id": self.agent_deployment_id, "environment_id": self.environment_id})
    }
}

/// What an apply did.
#[derive(Debug, Clone)]
pub struct Applied {
    pub application: Application,
    pub automation_id: String,
    pub action: String,
    pub generated_secret: Option<String>,
}

/// A prompt preview's request.
#[derive(Debug, Clone, Default)]
pub struct NodeTest {
    pub mode: String,
    pub revision: i64,
    pub node: String,
    pub event: Option<Value>,
    pub previous_output: Option<Value>,
}

fn blocker(code: &'static str, node: &str, detail: impl Into<String>) -> PlanError {
    PlanError { code, detail: detail.into(), node: Some(node.to_string()), edge: None }
}

fn graph_conflict(reason: &str, why: impl Into<String>, details: Value) -> Error {
    let mut d = details;
    d["reason"] = json!(reason);
    Error::conflict(why).with_details(d)
}

impl SchedulerService {
    /// A document saved as a revision: the outline, in this graph's
    /// Environment and service Principal.
    fn outline_for(doc: &Value, env: &str, svc: &str) -> Result<Document> {
        let d = Document::outline(doc)?;
        if d.environment_id != env || d.service_principal_id != svc {
            return Err(Error::invalid_field("document", "a graph keeps its environment_id and service_principal_id")
                .with_reason("document_invalid"));
        }
        Ok(d)
    }

    pub async fn create_graph(&self, created_by: &str, document: &Value, layout: Value, actor: &str) -> Result<(Graph, Revision)> {
        let d = Document::outline(document)?;
        let environment_id = EnvironmentId::parse("document.environment_id", &d.environment_id)?;
        let service_principal_id = PrincipalId::parse("document.service_principal_id", &d.service_principal_id)?;
        check_layout(&layout)?;
        let now = now_ms();
        let g = Graph {
            id: GraphId::mint(),
            environment_id,
            name: d.name.clone(),
            service_principal_id,
            created_by_principal_id: created_by.to_string(),
            latest_revision: 1,
            applied_revision: 0,
            applied_plan_sha256: String::new(),
            automation_id: String::new(),
            layout: layout.clone(),
            version: 1,
            deleted_ms: 0,
            created_ms: now,
            updated_ms: now,
        };
        let r = Revision {
            graph_id: g.id.clone(),
            revision: 1,
            document: d.raw.clone(),
            document_sha256: d.sha256(),
            layout,
            created_by: created_by.to_string(),
            created_ms: now,
        };
        self.store.insert_graph(&g, &r).await?;
        self.audit_graph(actor, "automation_graph.created", &g, json!({"revision": 1})).await;
        Ok((g, r))
    }

    /// A new revision (201), or — the same document as the latest — only
    /// `layout` changes (`false`, 200).
    pub async fn revise_graph(
        &self,
        id: &str,
        document: &Value,
        layout: Option<Value>,
        expected_version: Option<i64>,
        actor: &str,
    ) -> Result<(Graph, Revision, bool)> {
        if let Some(l) = &layout {
            check_layout(l)?;
        }
        for _ in 0..3 {
            let g = self.graph(id).await?;
            if let Some(v) = expected_version.filter(|v| *v != g.version) {
                return Err(Error::conflict(format!("the graph is at version {}, not {v}", g.version)));
            }
            let d = Self::outline_for(document, g.environment_id.as_str(), g.service_principal_id.as_str())?;
            let latest = self
                .store
                .get_revision(&g.id, g.latest_revision)
                .await?
                .ok_or_else(|| Error::internal("a graph's latest revision is missing"))?;
            let now = now_ms();
            let mut next = Graph { version: g.version + 1, updated_ms: now, ..g.clone() };
            if let Some(l) = &layout {
                next.layout = l.clone();
            }
            if d.sha256() == latest.document_sha256 {
                if self.store.update_graph(&next, g.version, None, None).await? {
                    return Ok((next, latest, false));
                }
                continue;
            }
            next.latest_revision = g.latest_revision + 1;
            next.name = d.name.clone();
            let r = Revision {
                graph_id: g.id.clone(),
                revision: next.latest_revision,
                document: d.raw.clone(),
                document_sha256: d.sha256(),
                layout: next.layout.clone(),
                created_by: actor.to_string(),
                created_ms: now,
            };
            if self.store.update_graph(&next, g.version, Some(&r), None).await? {
                self.audit_graph(actor, "automation_graph.revised", &next, json!({"revision": r.revision})).await;
                return Ok((next, r, true));
            }
        }
        Err(Error::conflict("the graph changed concurrently; read it again"))
    }

    /// A live graph (404 once deleted).
    pub async fn graph(&self, id: &str) -> Result<Graph> {
        let id = GraphId::parse("id", id)?;
        self.store.get_graph(&id).await?.filter(|g| g.deleted_ms == 0).ok_or_else(|| Error::not_found("automation_graph", &id))
    }

    pub async fn list_graphs(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Graph>> {
        self.store.list_graphs(environment_ids, page).await
    }

    /// Revision `n` of `g` (which the caller has read).
    pub async fn graph_revision(&self, g: &Graph, n: i64) -> Result<Revision> {
        self.store.get_revision(&g.id, n).await?.ok_or_else(|| Error::not_found("automation_graph_revision", &format!("{}/{n}", g.id)))
    }

    pub async fn graph_revisions(&self, id: &str, before: Option<i64>, limit: i64) -> Result<Vec<Revision>> {
        let g = self.graph(id).await?;
        self.store.list_revisions(&g.id, before, limit).await
    }

    pub async fn graph_applications(&self, id: &str, page: &PageRequest) -> Result<Vec<Application>> {
        let g = self.graph(id).await?;
        self.store.list_applications(&g.id, page).await
    }

    /// `{state, reasons}`: `drifted` when planning the applied revision now
    /// gives another plan than the one applied.
    pub async fn drift(&self, g: &Graph) -> Drift {
        if g.applied_revision == 0 {
            return Drift::not_applied();
        }
        let drifted = |reasons| Drift { state: "drifted", reasons };
        match self.plan_graph(g, g.applied_revision).await {
            Ok(Plan::Planned(p)) if p.plan_sha256 == g.applied_plan_sha256 => Drift { state: "in_sync", reasons: vec![] },
            Ok(Plan::Planned(p)) => {
                let mut reasons = vec![];
                for pin in &p.pins {
                    let detail = format!(
                        "{} is now at revision {} (agent version {})",
                        pin.agent_deployment_id, pin.deployment_revision, pin.agent_version
                    );
                    reasons.push(blocker("pin_changed", &pin.node, detail));
                }
                reasons.extend(p.blockers.iter().cloned());
                if reasons.is_empty() {
                    reasons.push(PlanError::new("plan_changed", "planning the applied revision now gives another plan"));
                }
                drifted(reasons)
            }
            Ok(Plan::Rejected { errors, .. }) => drifted(errors),
            Err(e) => drifted(vec![PlanError::new("unknown", e.message)]),
        }
    }

    pub async fn plan(&self, id: &str, revision: i64) -> Result<Plan> {
        let g = self.graph(id).await?;
        self.plan_graph(&g, revision).await
    }

    /// Resolves a `step_agent`'s agent to its deployment here: a `dep_…`
    /// as named, an `agt_…` by its one deployment in the Environment.
    async fn pin_node(&self, node: &str, agent: &str, env: &str) -> std::result::Result<Pin, PlanError> {
        let dep = if agent.starts_with("agt_") {
            let a = match self.sessions.clone().get_agent(ss::GetByIdRequest { id: agent.into() }).await {
                Ok(a) => a.into_inner(),
                Err(s) if s.code() == tonic::Code::NotFound => {
                    return Err(blocker("agent_not_found", node, format!("{agent} does not exist")));
                }
                Err(s) => return Err(blocker("agent_not_found", node, s.message())),
            };
            if a.environment_id != env {
                return Err(blocker("environment_mismatch", node, format!("{agent} is in another Environment")));
            }
            let mut found = vec![];
            let mut page = String::new();
            loop {
                let req = ss::ListInEnvironmentsRequest { environment_ids: vec![env.into()], limit: 100, page };
                let r = self
                    .sessions
                    .clone()
                    .list_deployments(req)
                    .await
                    .map_err(|s| blocker("agent_deployment_missing", node, s.message()))?
                    .into_inner();
                found.extend(r.data.into_iter().filter(|d| d.agent_id == agent));
                if r.next_page.is_empty() {
                    break;
                }
                page = r.next_page;
            }
            match found.len() {
                0 => return Err(blocker("agent_deployment_missing", node, format!("{agent} has no deployment in this Environment"))),
                1 => found.remove(0),
                n => {
                    return Err(blocker("agent_deployment_ambiguous", node, format!("{agent} has {n} deployments here; name one (dep_…)")));
                }
            }
        } else {
            match self.sessions.clone().get_deployment(ss::GetByIdRequest { id: agent.into() }).await {
                Ok(d) => d.into_inner(),
                Err(s) if s.code() == tonic::Code::NotFound => {
                    return Err(blocker("agent_deployment_missing", node, format!("{agent} does not exist")));
                }
                Err(s) => return Err(blocker("agent_deployment_missing", node, s.message())),
            }
        };
        if dep.environment_id != env {
            return Err(blocker("environment_mismatch", node, format!("{} is in another Environment", dep.id)));
        }
        let pins = dep.pins.unwrap_or_default();
        Ok(Pin {
            node: node.to_string(),
            agent_id: dep.agent_id,
            agent_version: pins.agent_version,
            release_sha256: pins.release_sha256,
            agent_deployment_id: dep.id,
            deployment_revision: dep.revision,
        })
    }

    /// A `step_connection`'s ToolSource and tool here, with its written
    /// arguments checked against the tool's cached schema (bound keys are
    /// checked when the step runs): blockers `tool_source_not_found`,
    /// `tool_not_offered`, `arguments_invalid`.
    async fn resolve_connection(&self, node: &str, c: &StepConnection, env: &str) -> std::result::Result<Resource, PlanError> {
        let req = cg::ResolveStepToolRequest { environment_id: env.into(), tool_source: c.tool_source.clone(), tool: c.tool.clone() };
        let t = match self.capability.clone().resolve_step_tool(req).await {
            Ok(t) => t.into_inner(),
            Err(s) if s.code() == tonic::Code::NotFound => {
                return Err(blocker("tool_source_not_found", node, format!("no ToolSource {:?} in this Environment", c.tool_source)));
            }
            Err(s) => return Err(blocker("tool_source_not_found", node, s.message())),
        };
        if t.tool_source_status != "active" {
            return Err(blocker("tool_source_not_found", node, format!("the ToolSource {} is {}", t.tool_source_id, t.tool_source_status)));
        }
        if !t.offered {
            return Err(blocker("tool_not_offered", node, format!("{} does not offer {:?}", t.tool_source_id, c.tool)));
        }
        let schema: Value = serde_json::from_str(&t.input_schema_json).unwrap_or_else(|_| json!({}));
        if let Err(why) = crate::calls::written_arguments_fit(&schema, &c.arguments, &c.bindings) {
            return Err(blocker("arguments_invalid", node, why));
        }
        Ok(Resource { node: node.into(), tool_source_id: t.tool_source_id, connection_id: t.connection_id, input_schema: schema })
    }

    /// A Check's routing profile exists in this Environment, else the
    /// blocker `model_routing_profile_not_found`.
    async fn find_profile(&self, node: &str, profile: &str, env: &str) -> std::result::Result<(), PlanError> {
        let req = checkfu_proto::modelgateway::v1::GetRoutingProfileRequest { id: profile.into() };
        match self.models.clone().get_routing_profile(req).await {
            Ok(p) if p.get_ref().environment_id == env => Ok(()),
            Ok(_) => Err(blocker("model_routing_profile_not_found", node, format!("{profile} is in another Environment"))),
            Err(s) if s.code() == tonic::Code::NotFound => {
                Err(blocker("model_routing_profile_not_found", node, format!("{profile} does not exist")))
            }
            Err(s) => Err(blocker("model_routing_profile_not_found", node, s.message())),
        }
    }

    async fn plan_graph(&self, g: &Graph, revision: i64) -> Result<Plan> {
        let r = self
            .store
            .get_revision(&g.id, revision)
            .await?
            .ok_or_else(|| Error::not_found("automation_graph_revision", &format!("{}/{revision}", g.id)))?;
        let d = Document::outline(&r.document)?;
        let rejected = |errors| Ok(Plan::Rejected { graph_id: g.id.to_string(), revision, errors });
        let c = match plan::check(&d) {
            Ok(c) => c,
            Err(errors) => return rejected(errors),
        };
        let env = g.environment_id.as_str();
        let mut pins = vec![];
        let mut blockers = vec![];
        for (node, s) in c.agents() {
            match self.pin_node(node, &s.agent, env).await {
                Ok(p) => pins.push(p),
                Err(b) => blockers.push(b),
            }
        }
        let mut resources = vec![];
        for n in &c.nodes {
            if let Kind::Connection(sc) = &n.kind {
                match self.resolve_connection(&n.id, sc, env).await {
                    Ok(r) => resources.push(r),
                    Err(b) => blockers.push(b),
                }
            }
        }
        for n in c.nodes.iter().filter(|n| matches!(&n.kind, Kind::Later(k) if k == "step_managed_tool")) {
            blockers.push(blocker(
                "capability_unavailable",
                &n.id,
                "managed_tools is unavailable (dependency_missing): there is no Managed Tool provider adapter, release catalog or charge settlement, and nothing falls back to a Connection",
            ));
        }
        for n in &c.nodes {
            if let Some(check) = n.check()
                && let Err(b) = self.find_profile(&n.id, &check.model_routing_profile_id, env).await
            {
                blockers.push(b);
            }
        }
        // The Automation it manages: its own, found by id or (after a crash
        // mid-apply) by name; another's name is a blocker, never adopted.
        let mut existing = None;
        if !g.automation_id.is_empty() {
            existing =
                self.store.get_automation(&AutomationId::parse("automation_id", &g.automation_id)?).await?.filter(|a| a.deleted_ms == 0);
        }
        if let Some(named) = self.store.automation_named(env, &d.name).await? {
            let ours = named.managed_by["graph_id"] == g.id.as_str();
            if ours && existing.is_none() {
                existing = Some(named);
            } else if !ours {
                blockers.push(PlanError {
                    code: "name_taken",
                    detail: format!("an Automation named {:?} exists here and is not this graph's", d.name),
                    node: None,
                    edge: None,
                });
            }
        }
        let now = now_ms();
        let triggers = c.triggers.clone();
        let unchanged_at = |t: &Trigger| existing.as_ref().is_some_and(|a| a.timed() == Some(t));
        if let Some(t @ Trigger::Once(at)) = triggers.iter().find(|t| t.is_timed())
            && *at <= now
            && !unchanged_at(t)
        {
            return rejected(vec![PlanError {
                code: "invalid_trigger",
                detail: "a schedule_once trigger's at is in the future".into(),
                node: None,
                edge: None,
            }]);
        }
        // As stored (with its defaults), so an unchanged plan compares equal;
        // a target missing a pin (a blocker) stays as compiled.
        let compiled = plan::compile(&c, &pins, &resources);
        let target = Target::stored(&compiled).map(|t| t.to_json()).unwrap_or(compiled);
        let managed_by = json!({"kind": "graph", "graph_id": g.id, "revision": revision});
        let action = match &existing {
            None => "create",
            Some(a)
                if a.name == d.name
                    && a.target.to_json() == target
                    && crate::triggers::to_json(&a.triggers) == crate::triggers::to_json(&triggers)
                    && a.managed_by == managed_by =>
            {
                "unchanged"
            }
            Some(_) => "update",
        };
        let mut readiness = self.readiness(&self.draft(g, &d, &c, &target, existing.as_ref())).await;
        if !blockers.is_empty()
            && let Some(check) = readiness.checks.iter_mut().find(|c| c.name == "target")
        {
            *check = Check::fail("target", "the plan has blockers", None);
        }
        let pins_json: Vec<Value> = pins.iter().map(Pin::to_json).collect();
        let resources_json: Vec<Value> = resources.iter().map(Resource::to_json).collect();
        let blockers_json: Vec<Value> = blockers.iter().map(PlanError::to_json).collect();
        let digest = json!({"graph_id": g.id, "revision": revision, "document_sha256": r.document_sha256, "target": target,
            "triggers": crate::triggers::to_json(&triggers), "pins": pins_json, "resources": resources_json, "blockers": blockers_json});
        Ok(Plan::Planned(Box::new(Planned {
            graph_id: g.id.to_string(),
            revision,
            plan_sha256: checkfu_core::sha256_hex(digest.to_string()),
            automation_id: existing.as_ref().map(|a| a.id.to_string()),
            action,
            target,
            triggers,
            name: d.name.clone(),
            pins,
            resources,
            blockers,
            readiness,
        })))
    }

    /// The Automation a plan would write, for its readiness.
    fn draft(&self, g: &Graph, d: &Document, c: &Checked, target: &Value, existing: Option<&Automation>) -> Automation {
        let now = now_ms();
        let target = Target::stored(target)
            .unwrap_or_else(|_| Target::Steps(StepsTarget { program_sha256: String::new(), steps: vec![], edges: vec![] }));
        Automation {
            id: existing.map(|a| a.id.clone()).unwrap_or_else(AutomationId::mint),
            environment_id: g.environment_id.clone(),
            name: d.name.clone(),
            service_principal_id: g.service_principal_id.clone(),
            status: existing.map(|a| a.status).unwrap_or(AutomationStatus::Active),
            pause_reason: existing.and_then(|a| a.pause_reason.clone()),
            triggers: c.triggers.clone(),
            target,
            managed_by: json!({"kind": "graph", "graph_id": g.id}),
            metadata: existing.map(|a| a.metadata.clone()).unwrap_or_else(|| json!({})),
            // A webhook trigger's secret is generated by apply when absent.
            ingest_secret: existing
                .map(|a| a.ingest_secret.clone())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "generated at apply".into()),
            version: existing.map(|a| a.version).unwrap_or(1),
            deleted_ms: 0,
            created_ms: existing.map(|a| a.created_ms).unwrap_or(now),
            updated_ms: now,
            next_ms: None,
        }
    }

    /// Applies a plan of `revision` whose digest is `plan_sha256`.
    pub async fn apply(&self, id: &str, revision: i64, plan_sha256: &str, ingest_secret: Option<&str>, actor: &str) -> Result<Applied> {
        let g = self.graph(id).await?;
        let p = match self.plan_graph(&g, revision).await? {
            Plan::Rejected { errors, .. } => {
                let e: Vec<Value> = errors.iter().map(PlanError::to_json).collect();
                return Err(graph_conflict("plan_rejected", "the revision's plan is rejected", json!({"errors": e})));
            }
            Plan::Planned(p) => p,
        };
        if !p.blockers.is_empty() {
            let b: Vec<Value> = p.blockers.iter().map(PlanError::to_json).collect();
            return Err(graph_conflict("plan_blocked", "the plan has blockers", json!({"blockers": b})));
        }
        if p.plan_sha256 != plan_sha256 {
            return Err(graph_conflict("plan_stale", "planning now gives another plan; plan again", json!({"plan_sha256": p.plan_sha256})));
        }
        let target = Target::stored(&p.target)?;
        let managed_by = json!({"kind": "graph", "graph_id": g.id, "revision": revision});
        let mut generated_secret = None;
        let (automation_id, action) = match &p.automation_id {
            None => {
                let (secret, generated) = self.secret_for(&p.triggers, "", ingest_secret)?;
                generated_secret = generated;
                let now = now_ms();
                check_future(&p.triggers, now)?;
                let mut a = Automation {
                    id: AutomationId::mint(),
                    environment_id: g.environment_id.clone(),
                    name: p.name.clone(),
                    service_principal_id: g.service_principal_id.clone(),
                    status: AutomationStatus::Active,
                    pause_reason: None,
                    triggers: p.triggers.clone(),
                    target,
                    managed_by,
                    metadata: json!({}),
                    ingest_secret: secret,
                    version: 1,
                    deleted_ms: 0,
                    created_ms: now,
                    updated_ms: now,
                    next_ms: None,
                };
                if !self.readiness(&a).await.ready() {
                    a.status = AutomationStatus::Paused;
                    a.pause_reason = Some(PauseReason { code: "readiness_blocked".into(), note: None });
                }
                let mut events = vec![Self::event(&a, "automation.created")];
                if a.status == AutomationStatus::Paused {
                    events.push(Self::event(&a, "automation.paused"));
                }
                self.store.insert_automation(&a, &events, arm_for(&a, now)).await?;
                self.audit(actor, "automation.created", &a, json!({"graph_id": g.id, "revision": revision})).await;
                (a.id.to_string(), "create")
            }
            Some(existing) if p.action == "unchanged" && ingest_secret.is_none() => (existing.clone(), "unchanged"),
            Some(existing) => {
                let cur = self.automation(existing).await?;
                let mut next = Automation { name: p.name.clone(), triggers: p.triggers.clone(), target, managed_by, ..cur.clone() };
                let (secret, generated) = self.secret_for(&next.triggers, &cur.ingest_secret, ingest_secret)?;
                next.ingest_secret = secret;
                generated_secret = generated;
                let arm = self.rearm(&cur, &next)?;
                if cur.status == AutomationStatus::Active {
                    let r = self.readiness(&next).await;
                    if !r.ready() {
                        return Err(conflict_readiness(&r));
                    }
                }
                let a = self
                    .commit(&cur, next, &[], arm)
                    .await?
                    .ok_or_else(|| Error::conflict("the Automation changed concurrently; apply again"))?;
                self.audit(actor, "automation.updated", &a, json!({"graph_id": g.id, "revision": revision})).await;
                (a.id.to_string(), if p.action == "unchanged" { "unchanged" } else { "update" })
            }
        };
        let app = Application {
            id: ApplicationId::mint(),
            graph_id: g.id.clone(),
            revision,
            plan_sha256: p.plan_sha256.clone(),
            automation_id: automation_id.clone(),
            action: action.to_string(),
            applied_by: actor.to_string(),
            created_ms: now_ms(),
        };
        let next = Graph {
            applied_revision: revision,
            applied_plan_sha256: p.plan_sha256.clone(),
            automation_id: automation_id.clone(),
            version: g.version + 1,
            updated_ms: now_ms(),
            ..g.clone()
        };
        if !self.store.update_graph(&next, g.version, None, Some(&app)).await? {
            return Err(Error::conflict("the graph changed concurrently; plan and apply again"));
        }
        self.audit_graph(
            actor,
            "automation_graph.applied",
            &next,
            json!({"revision": revision, "action": action, "automation_id": automation_id}),
        )
        .await;
        Ok(Applied { application: app, automation_id, action: action.to_string(), generated_secret })
    }

    /// Deletes the graph and its Automation (terminal).
    pub async fn delete_graph(&self, id: &str, actor: &str) -> Result<Graph> {
        let g = self.graph(id).await?;
        if !g.automation_id.is_empty()
            && let Ok(a) = self.automation(&g.automation_id).await
        {
            self.delete_managed(&a, actor).await?;
        }
        let next = Graph { deleted_ms: now_ms(), version: g.version + 1, updated_ms: now_ms(), ..g.clone() };
        if !self.store.update_graph(&next, g.version, None, None).await? {
            return Err(Error::conflict("the graph changed concurrently; read it again"));
        }
        self.audit_graph(actor, "automation_graph.deleted", &g, json!({})).await;
        Ok(g)
    }

    /// A prompt preview of a `step_agent` node: free, recording nothing.
    pub async fn node_test(&self, g: &Graph, t: NodeTest) -> Result<Preview> {
        let bad = |reason: &str, why: &str| Error::invalid_field("node", why).with_reason(reason);
        if t.mode != "prompt_preview" {
            return Err(Error::invalid_field("mode", "mode is prompt_preview").with_reason("unsupported_mode"));
        }
        let r = self.graph_revision(g, t.revision).await?;
        let d = Document::outline(&r.document)?;
        let raw = d.nodes.iter().find(|n| n["id"] == t.node.as_str()).ok_or_else(|| Error::not_found("node", &t.node))?;
        let node = Node::parse(raw).map_err(|(code, why)| Error::invalid_field("node", why).with_reason(code))?;
        let Kind::StepAgent(s) = &node.kind else { return Err(bad("node_not_agent", "the node is not a step_agent")) };
        if !d.edges.iter().any(|e| e.is_control() && e.to.as_deref() == Some(t.node.as_str())) {
            return Err(bad("node_receives_no_prompt", "no control edge reaches the node"));
        }
        let checked = plan::check(&d).ok();
        let agent_graph_with_hook = checked.as_ref().is_some_and(|c| c.is_agent_target() && c.has_webhook_trigger());
        let reviews = d.edges.iter().any(|e| e.kind == "reviews" && e.from == t.node);
        let (source, rendered, missing) = if d.edges.iter().any(|e| e.kind == "output" && e.to.as_deref() == Some(t.node.as_str())) {
            let Some(out) = &t.previous_output else {
                return Err(bad("previous_output_sample_required", "send previous_output: the node's prompt is the producer's output"));
            };
            let text = match out {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            ("previous_output", text, vec![])
        } else if s.include_event || agent_graph_with_hook {
            let Some(event) = &t.event else {
                return Err(bad("event_sample_required", "send an event: the node's prompt is rendered against it"));
            };
            let r = render(&s.prompt, event);
            ("event_template", r.text, r.missing)
        } else {
            ("literal", s.prompt.clone(), vec![])
        };
        if rendered.len() > MAX_PROMPT_BYTES || (reviews && rendered.chars().count() > 4_096) {
            return Err(bad(
                "rendered_prompt_too_large",
                "the rendered prompt is over the limit (65,536 bytes; 4,096 characters when it reviews an outcome)",
            ));
        }
        let pin = self.pin_node(&t.node, &s.agent, g.environment_id.as_str()).await.ok();
        Ok(Preview {
            graph_id: g.id.to_string(),
            revision: t.revision,
            agent_deployment_id: pin.as_ref().map(|p| p.agent_deployment_id.clone()).unwrap_or_else(|| s.agent.clone()),
            node: t.node,
            prompt_source: source,
            rendered_prompt: rendered,
            missing_event_references: missing,
            pin,
            environment_id: g.environment_id.to_string(),
        })
    }

    async fn audit_graph(&self, actor: &str, action: &str, g: &Graph, details: Value) {
        self.audit_resource(actor, action, "automation_graph", g.id.as_str(), details).await
    }
}

/// A layout is an object of at most 64 KiB (node positions and the like).
fn check_layout(v: &Value) -> Result<()> {
    if !(v.is_object() || v.is_null()) || v.to_string().len() > 64 * 1024 {
        return Err(Error::invalid_field("layout", "layout is an object of at most 64 KiB"));
    }
    Ok(())
}
