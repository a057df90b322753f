//! Thin gRPC handlers: convert, call, map errors.

use crate::model::{Automation, Firing, Readiness};
use crate::service::{AutomationChange, NewAutomation, SchedulerService};
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};
use checkfu_proto::scheduler::v1 as pb;
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

fn automation(a: Automation, r: &Readiness) -> pb::Automation {
    pb::Automation {
        id: a.id.into(),
        environment_id: a.environment_id.into(),
        name: a.name,
        service_principal_id: a.service_principal_id.into(),
        status: a.status.as_str().into(),
        pause_reason_json: serde_json::to_string(&a.pause_reason).unwrap_or_else(|_| "null".into()),
        triggers_json: Value::Array(a.triggers).to_string(),
        target_json: a.target.to_json().to_string(),
        readiness_json: r.to_json().to_string(),
        managed_by_json: a.managed_by.to_string(),
        metadata_json: a.metadata.to_string(),
        version: a.version,
        created_ms: a.created_ms,
        updated_ms: a.updated_ms,
    }
}

fn firing(f: Firing) -> pb::Firing {
    pb::Firing {
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
    }
}

impl SchedulerGrpc {
    /// The Automation with its readiness evaluated now.
    async fn view(&self, a: Automation) -> pb::Automation {
        let r = self.svc.readiness(&a).await;
        automation(a, &r)
    }
}

#[tonic::async_trait]
impl Rpc for SchedulerGrpc {
    async fn create_automation(&self, r: Request<pb::CreateAutomationRequest>) -> R<pb::AutomationWrite> {
        let r = r.into_inner();
        let new = NewAutomation {
            environment_id: r.environment_id,
            name: r.name,
            service_principal_id: r.service_principal_id,
            triggers: doc("triggers", &r.triggers_json)?,
            target: doc("target", &r.target_json)?,
            metadata: doc("metadata", &r.metadata_json)?,
            actor_id: r.actor_id,
        };
        let (a, readiness) = self.svc.create(new).await?;
        ok(pb::AutomationWrite { automation: Some(automation(a, &readiness)), ingest_secret: String::new() })
    }

    async fn get_automation(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Automation> {
        ok(self.view(self.svc.automation(&r.into_inner().id).await?).await)
    }

    async fn list_automations(&self, r: Request<pb::ListAutomationsRequest>) -> R<pb::ListAutomationsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.list(&r.environment_ids, &r.status, &p).await?, |a| &a.id);
        let mut data = Vec::with_capacity(rows.len());
        for a in rows {
            data.push(self.view(a).await);
        }
        ok(pb::ListAutomationsResponse { data, next_page })
    }

    async fn update_automation(&self, r: Request<pb::UpdateAutomationRequest>) -> R<pb::AutomationWrite> {
        let r = r.into_inner();
        let ch = AutomationChange {
            name: r.name,
            triggers: r.triggers_json.as_deref().map(|t| doc("triggers", t)).transpose()?,
            target: r.target_json.as_deref().map(|t| doc("target", t)).transpose()?,
            metadata: r.metadata_json.as_deref().map(|m| doc("metadata", m)).transpose()?,
            expected_version: r.expected_version,
            actor_id: r.actor_id,
        };
        if r.ingest_secret.is_some() {
            return Err(Error::invalid_field(
                "ingest_secret",
                "an ingest secret goes with a webhook trigger, which this installation does not offer yet",
            )
            .with_reason("capability_unavailable")
            .into());
        }
        let a = self.svc.update(&r.id, ch).await?;
        ok(pb::AutomationWrite { automation: Some(self.view(a).await), ingest_secret: String::new() })
    }

    async fn pause_automation(&self, r: Request<pb::PauseAutomationRequest>) -> R<pb::Automation> {
        let r = r.into_inner();
        ok(self.view(self.svc.pause(&r.id, r.expected_version, &r.note, &r.actor_id).await?).await)
    }

    async fn resume_automation(&self, r: Request<pb::ResumeAutomationRequest>) -> R<pb::Automation> {
        let r = r.into_inner();
        ok(self.view(self.svc.resume(&r.id, r.expected_version, &r.actor_id).await?).await)
    }

    async fn delete_automation(&self, r: Request<pb::ActorRequest>) -> R<pb::Automation> {
        let r = r.into_inner();
        ok(self.view(self.svc.delete(&r.id, &r.actor_id).await?).await)
    }

    async fn fire_automation(&self, r: Request<pb::FireAutomationRequest>) -> R<pb::Firing> {
        let r = r.into_inner();
        ok(firing(self.svc.fire(&r.id, doc("event", &r.event_json)?, &r.actor_id).await?))
    }

    async fn get_firing(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Firing> {
        ok(firing(self.svc.firing(&r.into_inner().id).await?))
    }

    async fn get_firing_trace(&self, r: Request<pb::GetByIdRequest>) -> R<pb::FiringTrace> {
        let (f, receipts, evidence) = self.svc.trace(&r.into_inner().id).await?;
        ok(pb::FiringTrace {
            firing: Some(firing(f)),
            steps_json: "null".into(),
            receipts_json: receipts.to_string(),
            evidence_json: evidence.to_string(),
        })
    }

    async fn list_firings(&self, r: Request<pb::ListFiringsRequest>) -> R<pb::ListFiringsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.firings(&r.automation_id, &r.source, &r.state, &p).await?, |f| &f.id);
        ok(pb::ListFiringsResponse { data: rows.into_iter().map(firing).collect(), next_page })
    }
}
