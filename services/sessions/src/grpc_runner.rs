//! Thin gRPC handlers for the runner protocol (`checkfu.runner.v1`).

use crate::grpc::json_or_null;
use crate::runs::Lease;
use crate::service::SessionsService;
use checkfu_core::Error;
use checkfu_core::id::{RunId, SessionId};
use checkfu_proto::runner::v1 as pb;
use checkfu_proto::runner::v1::runner_service_server::RunnerService as Rpc;
use std::time::Duration;
use tonic::{Request, Response, Status};

pub struct RunnerGrpc {
    pub svc: SessionsService,
}

type R<T> = Result<Response<T>, Status>;

fn run_event(e: crate::model::Event) -> pb::RunEvent {
    pb::RunEvent {
        seq: e.seq,
        r#type: e.event_type,
        payload_json: e.payload.to_string(),
        run_id: e.run_id.map(String::from).unwrap_or_default(),
    }
}

fn lease(l: Option<pb::LeaseRef>) -> Result<Lease, Error> {
    let l = l.ok_or_else(|| Error::invalid_field("lease", "the lease is required"))?;
    let session_id = (!l.session_id.is_empty()).then(|| SessionId::parse("lease.session_id", &l.session_id)).transpose()?;
    Ok(Lease { run_id: RunId::parse("lease.run_id", &l.run_id)?, lease_id: l.lease_id, generation: l.generation, session_id })
}

#[tonic::async_trait]
impl Rpc for RunnerGrpc {
    async fn claim(&self, r: Request<pb::ClaimRequest>) -> R<pb::ClaimResponse> {
        let r = r.into_inner();
        let work = self.svc.claim(&r.runner_id, Duration::from_millis(u64::from(r.wait_ms))).await?;
        let work = work.map(|w| pb::WorkItem {
            session_id: w.session.id.clone().into(),
            run_id: w.run.id.clone().into(),
            lease: Some(pb::LeaseRef {
                run_id: w.lease.run_id.into(),
                lease_id: w.lease.lease_id,
                generation: w.lease.generation,
                session_id: w.lease.session_id.map(String::from).unwrap_or_default(),
            }),
            // Scoped capability tokens arrive with self-hosted runners; the
            // managed plane reaches the gateways inside the mesh.
            capability_token: String::new(),
            execution_pins_json: w.run.execution_pins.to_string(),
            routing_profile_id: w.session.pins.model_routing_profile_id.clone().into(),
            instructions: w.session.selection.instructions.clone(),
            tools_json: serde_json::to_string(&w.tools).unwrap_or_else(|_| "[]".into()),
            principal_id: w.session.principal_id.clone().into(),
            environment_id: w.session.environment_id.clone().into(),
            start_seq: w.run.start_seq,
            budget_reached: w.session.budget.as_ref().is_some_and(|b| !b.open()),
            traceparent: w.run.traceparent.clone(),
            tail: w.tail.into_iter().map(run_event).collect(),
        });
        Ok(Response::new(pb::ClaimResponse { work }))
    }

    async fn heartbeat(&self, r: Request<pb::LeaseRef>) -> R<pb::HeartbeatResponse> {
        let l = lease(Some(r.into_inner()))?;
        let held = self.svc.heartbeat(&l).await?;
        Ok(Response::new(pb::HeartbeatResponse {
            status: if held { "ok" } else { "lost" }.into(),
            lease_expires_in_ms: if held { self.svc.lease_ms } else { 0 },
        }))
    }

    async fn read_events(&self, r: Request<pb::ReadEventsRequest>) -> R<pb::ReadEventsResponse> {
        let r = r.into_inner();
        let events = self.svc.read_for_run(&lease(r.lease)?, r.after_seq, r.limit).await?;
        let data = events
            .into_iter()
            .map(|e| pb::RunEvent {
                seq: e.seq,
                r#type: e.event_type,
                payload_json: e.payload.to_string(),
                run_id: e.run_id.map(String::from).unwrap_or_default(),
            })
            .collect();
        Ok(Response::new(pb::ReadEventsResponse { data }))
    }

    async fn append_events(&self, r: Request<pb::AppendEventsRequest>) -> R<pb::AppendEventsResponse> {
        let r = r.into_inner();
        let events =
            r.events.into_iter().map(|e| Ok((e.r#type, json_or_null("payload", &e.payload_json)?))).collect::<Result<Vec<_>, Error>>()?;
        let a = self.svc.append_for_run(&lease(r.lease)?, events).await?;
        Ok(Response::new(pb::AppendEventsResponse { seqs: a.seqs, budget_reached: a.budget_reached }))
    }

    async fn publish_deltas(&self, r: Request<pb::PublishDeltasRequest>) -> R<pb::PublishDeltasResponse> {
        let r = r.into_inner();
        let mut chunks = r.chunks;
        if !r.text.is_empty() {
            chunks.insert(0, r.text);
        }
        self.svc.publish_delta(&lease(r.lease)?, &r.event_type, &r.preview_id, r.start, &chunks).await?;
        Ok(Response::new(pb::PublishDeltasResponse {}))
    }

    async fn complete(&self, r: Request<pb::CompleteRequest>) -> R<pb::CompleteResponse> {
        let r = r.into_inner();
        let stop = json_or_null("stop_reason", &r.stop_reason_json)?;
        let events =
            r.events.into_iter().map(|e| Ok((e.r#type, json_or_null("payload", &e.payload_json)?))).collect::<Result<Vec<_>, Error>>()?;
        self.svc.complete(&lease(r.lease)?, stop, r.last_seen_seq, events).await?;
        Ok(Response::new(pb::CompleteResponse {}))
    }
}
