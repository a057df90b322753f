//! Thin gRPC handlers: convert, call, map errors.

use crate::firing::Firing;
use crate::graph::service::{Drift, NodeTest};
use crate::graph::{Graph, Revision, answers, wire};
use crate::ingest::{Ingested, Signed};
use crate::model::{AgentTarget, Automation, FilteredDelivery, Readiness};
use crate::service::{AutomationChange, NewAutomation, SchedulerService, Written};
use crate::triggers::{from_specs, parse_triggers};
use checkfu_core::page::PageRequest;
use checkfu_core::time::rfc3339;
use checkfu_core::{Error, Result};
use checkfu_proto::scheduler::v1 as pb;
use checkfu_proto::scheduler::v1::graph_answer::Resource as Graph_;
use checkfu_proto::scheduler::v1::scheduler_service_server::SchedulerService as Rpc;
use serde_json::Value;
use tonic::{Request, Response, Status};

pub struct SchedulerGrpc {
    pub svc: SchedulerService,
}

type R<T> = std::result::Result<Response<T>, Status>;

fn ok<T>(v: T) -> R<T> {
    Ok(Response::new(v))
}

/// A JSON document from the wire; empty means absent.
fn doc(field: &str, s: &str) -> Result<Value> {
    if s.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(s).map_err(|e| Error::invalid_field(field, format!("{field} is not JSON: {e}")))
}

// The JSON text fields are written for 0.1.0 readers until the release
// after it.
#[allow(deprecated)]
fn automation(a: Automation, r: &Readiness, last: Option<Firing>) -> pb::Automation {
    let triggers = a.trigger_specs();
    let target = a.target.to_spec();
    pb::Automation {
        pause_reason: a.pause_reason.as_ref().map(crate::automation_wire::pause_reason),
        readiness: Some(crate::automation_wire::readiness(r)),
        managed_by: Some(crate::automation_wire::managed_by(&a.managed_by)),
        id: a.id.into(),
        environment_id: a.environment_id.into(),
        name: a.name,
        service_principal_id: a.service_principal_id.into(),
        status: a.status.as_str().into(),
        pause_reason_json: serde_json::to_string(&a.pause_reason).unwrap_or_else(|_| "null".into()),
        triggers_json: pb::Trigger::list_to_json(&triggers).to_string(),
        target_json: target.to_json().to_string(),
        triggers: Some(pb::TriggerList { triggers }),
        target: Some(target),
        readiness_json: r.to_json().to_string(),
        managed_by_json: a.managed_by.to_string(),
        metadata_json: a.metadata.to_string(),
        version: a.version,
        created_ms: a.created_ms,
        updated_ms: a.updated_ms,
        last_firing: last.map(|f| pb::FiringSummary {
            id: f.id.into(),
            source: f.source.as_str().into(),
            state: f.state.as_str().into(),
            created_ms: f.created_ms,
        }),
    }
}

// The JSON text fields are written for 0.1.0 readers until the release
// after it.
#[allow(deprecated)]
fn firing(f: Firing) -> pb::Firing {
    let program = f.program.as_ref().map(|p| p.to_spec());
    pb::Firing {
        error: f.error.as_ref().map(crate::automation_wire::firing_error),
        graph: crate::automation_wire::graph_ref(&f.graph),
        id: f.id.into(),
        automation_id: f.automation_id.into(),
        environment_id: f.environment_id.into(),
        source: f.source.as_str().into(),
        event_json: f.event.to_string(),
        scheduled_for_ms: f.scheduled_for_ms,
        dedupe_value: f.dedupe_value,
        actor_principal_id: f.actor_principal_id,
        automation_version: f.automation_version,
        state: f.state.as_str().into(),
        child_session_ids: f.child_session_ids,
        usage: Some(pb::Usage {
            input_tokens: f.usage.input_tokens,
            output_tokens: f.usage.output_tokens,
            model_spend_micro_usd: f.usage.model_spend_micro_usd,
        }),
        error_json: f.error.map(|e| e.to_string()).unwrap_or_else(|| "null".into()),
        created_ms: f.created_ms,
        settled_ms: f.settled_ms,
        program_json: program.as_ref().map(checkfu_proto::firing_trace::program).unwrap_or(Value::Null).to_string(),
        program,
        graph_json: f.graph.to_string(),
        webhook_source_id: f.webhook_source_id,
    }
}

fn skill_proposal(p: crate::skill_proposal::SkillProposal) -> pb::SkillProposal {
    let (adopted_skill_id, adopted_version) = p.adopted.unwrap_or_default();
    pb::SkillProposal {
        id: p.id,
        environment_id: p.environment_id.to_string(),
        automation_id: p.automation_id,
        firing_id: p.firing_id,
        step_id: p.step_id,
        skill_id: p.skill_id.unwrap_or_default(),
        name: p.name,
        status: p.status,
        content: p.content,
        content_sha256: p.content_sha256,
        adopted_skill_id,
        adopted_version,
        decided_by: p.decided_by,
        decided_at: if p.decided_ms > 0 { rfc3339(p.decided_ms) } else { String::new() },
        decision_note: p.decision_note,
        created_at: rfc3339(p.created_ms),
    }
}

fn filtered(d: FilteredDelivery, environment_id: &str) -> pb::FilteredDelivery {
    pb::FilteredDelivery {
        id: d.id.into(),
        automation_id: d.automation_id.into(),
        dedupe_value: d.dedupe_value,
        body_sha256: d.body_sha256,
        reason: "admission_filter".into(),
        predicate_index: d.predicate_index,
        created_ms: d.created_ms,
        environment_id: environment_id.into(),
    }
}

impl SchedulerGrpc {
    /// The Automation with its readiness (the one a write just evaluated,
    /// else evaluated now) and its newest firing.
    async fn view(&self, a: Automation, evaluated: Option<Readiness>) -> Result<pb::Automation> {
        let r = match evaluated {
            Some(r) => r,
            None => self.svc.readiness(&a).await,
        };
        let last = self.svc.last_firing(&a.id).await?;
        Ok(automation(a, &r, last))
    }

    async fn written(&self, w: Written) -> Result<pb::AutomationWrite> {
        Ok(pb::AutomationWrite {
            automation: Some(self.view(w.automation, w.readiness).await?),
            ingest_secret: w.generated_secret.unwrap_or_default(),
        })
    }
}

#[tonic::async_trait]
impl Rpc for SchedulerGrpc {
    async fn create_automation(&self, r: Request<pb::CreateAutomationRequest>) -> R<pb::AutomationWrite> {
        let r = r.into_inner();
        // A 0.2.0 gateway always sends the typed forms; a 0.1.0 one, JSON.
        #[allow(deprecated)]
        let (triggers, target) = match (r.triggers, r.target) {
            (Some(t), Some(a)) => (from_specs(&t.triggers)?, AgentTarget::from_spec(a)?),
            _ => (parse_triggers(&doc("triggers", &r.triggers_json)?)?, AgentTarget::parse(&doc("target", &r.target_json)?)?),
        };
        let new = NewAutomation {
            environment_id: r.environment_id,
            name: r.name,
            service_principal_id: r.service_principal_id,
            triggers,
            target,
            metadata: doc("metadata", &r.metadata_json)?,
            ingest_secret: r.ingest_secret,
            actor_id: r.actor_id,
        };
        let w = self.svc.create(new).await?;
        ok(self.written(w).await?)
    }

    async fn get_automation(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Automation> {
        ok(self.view(self.svc.automation(&r.into_inner().id).await?, None).await?)
    }

    async fn list_automations(&self, r: Request<pb::ListAutomationsRequest>) -> R<pb::ListAutomationsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.list(&r.environment_ids, &r.status, &p).await?, |a| &a.id);
        let mut data = Vec::with_capacity(rows.len());
        for a in rows {
            data.push(self.view(a, None).await?);
        }
        ok(pb::ListAutomationsResponse { data, next_page })
    }

    async fn update_automation(&self, r: Request<pb::UpdateAutomationRequest>) -> R<pb::AutomationWrite> {
        let r = r.into_inner();
        // Typed when set; a 0.1.0 gateway sends only the JSON.
        #[allow(deprecated)]
        let triggers = match (r.triggers, r.triggers_json.as_deref()) {
            (Some(t), _) => Some(from_specs(&t.triggers)?),
            (None, Some(text)) => Some(parse_triggers(&doc("triggers", text)?)?),
            (None, None) => None,
        };
        #[allow(deprecated)]
        let target = match (r.target, r.target_json.as_deref()) {
            (Some(t), _) => Some(AgentTarget::from_spec(t)?),
            (None, Some(text)) => Some(AgentTarget::parse(&doc("target", text)?)?),
            (None, None) => None,
        };
        let ch = AutomationChange {
            name: r.name,
            triggers,
            target,
            metadata: r.metadata_json.as_deref().map(|m| doc("metadata", m)).transpose()?,
            ingest_secret: r.ingest_secret,
            expected_version: r.expected_version,
            actor_id: r.actor_id,
        };
        let w = self.svc.update(&r.id, ch).await?;
        ok(self.written(w).await?)
    }

    async fn pause_automation(&self, r: Request<pb::PauseAutomationRequest>) -> R<pb::Automation> {
        let r = r.into_inner();
        ok(self.view(self.svc.pause(&r.id, r.expected_version, &r.note, &r.actor_id).await?, None).await?)
    }

    async fn resume_automation(&self, r: Request<pb::ResumeAutomationRequest>) -> R<pb::Automation> {
        let r = r.into_inner();
        let (a, readiness) = self.svc.resume(&r.id, r.expected_version, &r.actor_id).await?;
        ok(self.view(a, readiness).await?)
    }

    async fn delete_automation(&self, r: Request<pb::ActorRequest>) -> R<pb::Automation> {
        let r = r.into_inner();
        ok(self.view(self.svc.delete(&r.id, &r.actor_id).await?, None).await?)
    }

    async fn fire_automation(&self, r: Request<pb::FireAutomationRequest>) -> R<pb::Firing> {
        let r = r.into_inner();
        ok(firing(self.svc.fire(&r.id, doc("event", &r.event_json)?, &r.actor_id).await?))
    }

    async fn get_firing(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Firing> {
        ok(firing(self.svc.firing(&r.into_inner().id).await?))
    }

    async fn get_firing_trace(&self, r: Request<pb::GetByIdRequest>) -> R<pb::FiringTrace> {
        let t = self.svc.trace(&r.into_inner().id).await?;
        let parts = crate::trace_wire::trace(&t);
        ok(pb::FiringTrace { firing: Some(firing(t.firing)), ..parts })
    }

    async fn list_firings(&self, r: Request<pb::ListFiringsRequest>) -> R<pb::ListFiringsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.firings(&r.automation_id, &r.source, &r.state, &p).await?, |f| &f.id);
        ok(pb::ListFiringsResponse { data: rows.into_iter().map(firing).collect(), next_page })
    }

    async fn ingest(&self, r: Request<pb::IngestRequest>) -> R<pb::IngestResponse> {
        let r = r.into_inner();
        let signed = Signed {
            automation_id: r.automation_id,
            version: r.version,
            content_type: r.content_type,
            signature: r.signature,
            body: r.body,
        };
        let (result, replayed) = self.svc.ingest(signed).await?;
        let result = match result {
            Ingested::Fired(f) => pb::ingest_response::Result::Firing(firing(*f)),
            Ingested::Filtered(d) => {
                let env = self.svc.automation_environment(&d.automation_id).await?;
                pb::ingest_response::Result::Filtered(filtered(d, &env))
            }
        };
        ok(pb::IngestResponse { result: Some(result), replayed })
    }

    async fn list_filtered_deliveries(&self, r: Request<pb::ListFilteredRequest>) -> R<pb::ListFilteredResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, environment_id) = self.svc.filtered(&r.automation_id, &p).await?;
        let (rows, next_page) = p.finish(rows, |d| &d.id);
        ok(pb::ListFilteredResponse { data: rows.into_iter().map(|d| filtered(d, &environment_id)).collect(), next_page, environment_id })
    }

    async fn list_frontiers(&self, r: Request<pb::ListFrontiersRequest>) -> R<pb::ListFrontiersResponse> {
        let (rows, environment_id) = self.svc.frontiers(&r.into_inner().automation_id).await?;
        let data = rows.into_iter().map(|f| pb::Frontier { name: f.name, position: f.position, firing_id: f.firing_id }).collect();
        ok(pb::ListFrontiersResponse { data, environment_id })
    }

    async fn get_skill_proposal(&self, r: Request<pb::GetSkillProposalRequest>) -> R<pb::SkillProposal> {
        ok(skill_proposal(self.svc.skill_proposal(&r.into_inner().id).await?))
    }

    async fn list_skill_proposals(&self, r: Request<pb::ListSkillProposalsRequest>) -> R<pb::ListSkillProposalsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.skill_proposals(&r.environment_ids, &r.status, &p).await?, |s| &s.id);
        ok(pb::ListSkillProposalsResponse { data: rows.into_iter().map(skill_proposal).collect(), next_page })
    }

    async fn create_webhook_source(&self, r: Request<pb::CreateWebhookSourceRequest>) -> R<pb::WebhookSource> {
        let r = r.into_inner();
        let n = crate::provider_calls::NewSource {
            automation_id: r.automation_id,
            provider: r.provider,
            connection_id: r.connection_id,
            resource: doc("resource", &r.resource_json)?,
            events: r.events,
            mode: r.mode,
            actor: r.actor_id,
        };
        let (row, secret) = self.svc.create_webhook_source(n).await?;
        ok(crate::provider_wire::source(&row, secret))
    }

    async fn get_webhook_source(&self, r: Request<pb::GetByIdRequest>) -> R<pb::WebhookSource> {
        ok(crate::provider_wire::source(&self.svc.webhook_source(&r.into_inner().id).await?, None))
    }

    async fn list_webhook_sources(&self, r: Request<pb::ListWebhookSourcesRequest>) -> R<pb::ListWebhookSourcesResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let rows = self.svc.store.list_webhook_sources(&r.environment_ids, &r.automation_id, "", true, &p).await?;
        let (rows, next_page) = p.finish(rows, |x| &x.source.id);
        ok(pb::ListWebhookSourcesResponse { data: rows.iter().map(|x| crate::provider_wire::source(x, None)).collect(), next_page })
    }

    async fn delete_webhook_source(&self, r: Request<pb::ActorRequest>) -> R<pb::WebhookSource> {
        let r = r.into_inner();
        ok(crate::provider_wire::source(&self.svc.delete_webhook_source(&r.id, &r.actor_id).await?, None))
    }

    async fn get_provider_registration(&self, r: Request<pb::GetByIdRequest>) -> R<pb::ProviderRegistration> {
        ok(crate::provider_wire::registration(&self.svc.provider_registration(&r.into_inner().id).await?.registration, None))
    }

    async fn list_provider_registrations(&self, r: Request<pb::ListRegistrationsRequest>) -> R<pb::ListRegistrationsResponse> {
        let r = r.into_inner();
        if !matches!(r.status.as_str(), "" | "pending" | "active" | "degraded" | "revoked") {
            return Err(Error::invalid_field("status", "status is pending, active, degraded or revoked").into());
        }
        let p = PageRequest::standard(r.limit, &r.page)?;
        let rows = self.svc.store.list_webhook_sources(&r.environment_ids, "", &r.status, false, &p).await?;
        let (rows, next_page) = p.finish(rows, |x| &x.source.id);
        let data = rows.iter().map(|x| crate::provider_wire::registration(&x.registration, None)).collect();
        ok(pb::ListRegistrationsResponse { data, next_page })
    }

    async fn act_on_provider_registration(&self, r: Request<pb::RegistrationActionRequest>) -> R<pb::ProviderRegistration> {
        let r = r.into_inner();
        let (row, secret) = self.svc.act_on_registration(&r.id, &r.action, &r.actor_id).await?;
        ok(crate::provider_wire::registration(&row.registration, secret))
    }

    async fn list_provider_triggers(&self, _: Request<pb::ProviderTriggersRequest>) -> R<pb::ProviderTriggersResponse> {
        ok(pb::ProviderTriggersResponse { data: self.svc.provider_triggers().into_iter().map(crate::provider_wire::trigger).collect() })
    }

    async fn provider_ingest(&self, r: Request<pb::ProviderIngestRequest>) -> R<pb::ProviderIngestResponse> {
        use crate::provider_ingest::{ProviderDelivery, Received};
        let r = r.into_inner();
        let d = ProviderDelivery {
            provider: r.provider,
            webhook_source_id: r.webhook_source_id,
            headers: r.headers.into_iter().collect(),
            body: r.body,
        };
        let (received, replayed) = self.svc.provider_ingest(d).await?;
        let result = match received {
            Received::Ingested(Ingested::Fired(f)) => pb::provider_ingest_response::Result::Firing(firing(*f)),
            Received::Ingested(Ingested::Filtered(d)) => {
                let env = self.svc.automation_environment(&d.automation_id).await?;
                pb::provider_ingest_response::Result::Filtered(filtered(d, &env))
            }
            Received::Ignored(why) => pb::provider_ingest_response::Result::Ignored(why.into()),
        };
        ok(pb::ProviderIngestResponse { result: Some(result), replayed })
    }

    async fn decide_skill_proposal(&self, r: Request<pb::DecideSkillProposalRequest>) -> R<pb::SkillProposal> {
        let r = r.into_inner();
        ok(skill_proposal(self.svc.decide_skill_proposal(&r.id, r.adopt, &r.note, &r.actor_id).await?))
    }

    async fn create_graph(&self, r: Request<pb::CreateGraphRequest>) -> R<pb::GraphAnswer> {
        let r = r.into_inner();
        let layout = doc("layout", &r.layout_json)?;
        let (g, rev) = self.svc.create_graph(&r.created_by_principal_id, &doc("document", &r.document_json)?, layout, &r.actor_id).await?;
        ok(self.graph_written(&g, &rev, true).await)
    }

    async fn revise_graph(&self, r: Request<pb::ReviseGraphRequest>) -> R<pb::GraphAnswer> {
        let r = r.into_inner();
        let layout = r.layout_json.as_deref().map(|l| doc("layout", l)).transpose()?;
        let (g, rev, created) =
            self.svc.revise_graph(&r.id, &doc("document", &r.document_json)?, layout, r.expected_version, &r.actor_id).await?;
        ok(self.graph_written(&g, &rev, created).await)
    }

    async fn get_graph(&self, r: Request<pb::GetByIdRequest>) -> R<pb::GraphAnswer> {
        let g = self.svc.graph(&r.into_inner().id).await?;
        let drift = self.svc.drift(&g).await;
        ok(graph_answer(Graph_::Graph(answers::graph(&g, &drift, None)), wire::graph(&g, &drift), &g, false))
    }

    async fn list_graphs(&self, r: Request<pb::ListGraphsRequest>) -> R<pb::ListGraphsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.list_graphs(&r.environment_ids, &p).await?, |g| &g.id);
        let (mut graphs, mut text) = (vec![], vec![]);
        for g in rows {
            let drift = self.svc.drift(&g).await;
            graphs.push(answers::graph(&g, &drift, None));
            text.push(wire::graph(&g, &drift));
        }
        ok(graph_list(pb::ListGraphsResponse { graphs, next_page, ..Default::default() }, text))
    }

    async fn get_graph_revision(&self, r: Request<pb::GraphRevisionRequest>) -> R<pb::GraphAnswer> {
        let r = r.into_inner();
        let g = self.svc.graph(&r.id).await?;
        let rev = self.svc.graph_revision(&g, r.revision).await?;
        ok(graph_answer(Graph_::Revision(answers::revision(&rev)), wire::revision(&rev), &g, false))
    }

    async fn list_graph_revisions(&self, r: Request<pb::ListGraphItemsRequest>) -> R<pb::ListGraphsResponse> {
        let r = r.into_inner();
        let g = self.svc.graph(&r.id).await?;
        let p = PageRequest::standard(r.limit, &r.page)?;
        let rows = self.svc.graph_revisions(&r.id, p.before_number()?, p.fetch_limit()).await?;
        let (rows, next_page) = p.finish_numbered(rows, |x| x.revision);
        let typed = pb::ListGraphsResponse {
            revisions: rows.iter().map(answers::revision).collect(),
            next_page,
            environment_id: g.environment_id.to_string(),
            ..Default::default()
        };
        ok(graph_list(typed, rows.iter().map(wire::revision).collect()))
    }

    async fn plan_graph(&self, r: Request<pb::GraphRevisionRequest>) -> R<pb::GraphAnswer> {
        let r = r.into_inner();
        let g = self.svc.graph(&r.id).await?;
        let plan = self.svc.plan(&r.id, r.revision).await?;
        ok(graph_answer(Graph_::Plan(answers::plan(&plan)), plan.to_json(), &g, false))
    }

    async fn apply_graph(&self, r: Request<pb::ApplyGraphRequest>) -> R<pb::GraphAnswer> {
        let r = r.into_inner();
        let g = self.svc.graph(&r.id).await?;
        let a = self.svc.apply(&r.id, r.revision, &r.plan_sha256, r.ingest_secret.as_deref(), &r.actor_id).await?;
        let mut v = serde_json::json!({"graph_id": g.id, "revision": r.revision, "application": a.application.to_json(),
            "automation_id": a.automation_id, "action": a.action});
        if let Some(s) = &a.generated_secret {
            v["ingest_secret"] = serde_json::json!(s);
        }
        ok(graph_answer(Graph_::Applied(answers::applied(g.id.as_str(), r.revision, &a)), v, &g, false))
    }

    async fn list_graph_applications(&self, r: Request<pb::ListGraphItemsRequest>) -> R<pb::ListGraphsResponse> {
        let r = r.into_inner();
        let g = self.svc.graph(&r.id).await?;
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.graph_applications(&r.id, &p).await?, |a| &a.id);
        let typed = pb::ListGraphsResponse {
            applications: rows.iter().map(answers::application).collect(),
            next_page,
            environment_id: g.environment_id.to_string(),
            ..Default::default()
        };
        ok(graph_list(typed, rows.iter().map(|a| a.to_json()).collect()))
    }

    async fn delete_graph(&self, r: Request<pb::ActorRequest>) -> R<pb::GraphAnswer> {
        let r = r.into_inner();
        let g = self.svc.delete_graph(&r.id, &r.actor_id).await?;
        let drift = Drift::not_applied();
        ok(graph_answer(Graph_::Graph(answers::graph(&g, &drift, None)), wire::graph(&g, &drift), &g, false))
    }

    async fn test_graph_node(&self, r: Request<pb::GraphNodeTestRequest>) -> R<pb::GraphAnswer> {
        let r = r.into_inner();
        let g = self.svc.graph(&r.id).await?;
        let t = NodeTest {
            mode: r.mode,
            revision: r.revision,
            node: r.node,
            event: Some(doc("event", &r.event_json)?).filter(|e| !r.event_json.is_empty() || !e.is_null()),
            previous_output: Some(doc("previous_output", &r.previous_output_json)?).filter(|_| !r.previous_output_json.is_empty()),
        };
        let p = self.svc.node_test(&g, t).await?;
        ok(graph_answer(Graph_::Preview(answers::preview(&p)), p.to_json(), &g, false))
    }

    async fn test_graph_rule(&self, r: Request<pb::GraphRuleTestRequest>) -> R<pb::GraphAnswer> {
        let r = r.into_inner();
        let g = self.svc.graph(&r.id).await?;
        let given: serde_json::Map<String, Value> = r.answers.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
        let t = self.svc.rule_test(&g, r.revision, &r.node, &Value::Object(given)).await?;
        let text = serde_json::json!({"verdict": t.verdict.as_str(), "branch": t.branch});
        ok(graph_answer(Graph_::RuleTest(pb::RuleTest { verdict: t.verdict.as_str().into(), branch: t.branch.into() }), text, &g, false))
    }
}

impl SchedulerGrpc {
    /// A graph a write made, with the revision it wrote.
    async fn graph_written(&self, g: &Graph, rev: &Revision, created: bool) -> pb::GraphAnswer {
        let drift = self.svc.drift(g).await;
        let mut text = wire::graph(g, &drift);
        text["revision"] = wire::revision(rev);
        graph_answer(Graph_::Graph(answers::graph(g, &drift, Some(rev))), text, g, created)
    }
}

/// A graph answer: typed, and as the JSON text a 0.1.0 gateway reads.
#[allow(deprecated)] // json: the 0.1.0 text
fn graph_answer(resource: Graph_, text: Value, g: &Graph, created: bool) -> pb::GraphAnswer {
    pb::GraphAnswer {
        json: text.to_string(),
        environment_id: g.environment_id.to_string(),
        service_principal_id: g.service_principal_id.to_string(),
        created,
        resource: Some(resource),
    }
}

/// A page: `typed` holds its list, `text` each item as a 0.1.0 gateway
/// reads it.
#[allow(deprecated)] // data_json: the 0.1.0 text
fn graph_list(typed: pb::ListGraphsResponse, text: Vec<Value>) -> pb::ListGraphsResponse {
    pb::ListGraphsResponse { data_json: text.iter().map(Value::to_string).collect(), typed: true, ..typed }
}
