//! Thin gRPC handlers for the runner protocol (`checkfu.runner.v1`).

use crate::model::Lease;
use crate::model::{Claimant, Runner};
use crate::runs::Runs;
use crate::threads::Threads;
use crate::wire::json_or_null;
use checkfu_core::id::{RunId, SessionId};
use checkfu_core::{Code, Error, Role};
use checkfu_proto::runner::v1 as pb;
use checkfu_proto::runner::v1::runner_service_server::RunnerService as Rpc;
use std::time::Duration;
use tonic::{Request, Response, Status};

/// The runner protocol over Runs; its two platform-tool calls (a spawn or
/// a message between threads) go to Threads, which governs them.
pub struct RunnerGrpc {
    pub runs: Runs,
    pub threads: Threads,
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

fn thread_call(r: pb::ThreadToolRequest) -> Result<crate::thread_tools::ThreadCall, Error> {
    if r.input_json.len() > 256 * 1024 {
        return Err(Error::invalid_field("input_json", "a platform tool's input is limited to 256 KiB"));
    }
    Ok(crate::thread_tools::ThreadCall {
        lease: lease(r.lease)?,
        tool_use_id: r.tool_use_id,
        name: r.name,
        input: json_or_null("input", &r.input_json)?,
        approval_id: r.action_approval_id,
        standing_approval_id: r.standing_approval_id,
    })
}

/// The self-hosted Runner a call through the public edge comes from (its
/// credential in `authorization`), or `None` for the managed runner inside
/// the mesh. Any other caller was refused by the mesh already.
async fn self_hosted<T>(runs: &Runs, r: &Request<T>) -> Result<Option<Runner>, Status> {
    if checkfu_proto::mesh::caller(r).is_some_and(|c| c.is(Role::Runner)) {
        return Ok(None);
    }
    let bearer = r.metadata().get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let Some(credential) = bearer else {
        return Err(Error::new(Code::MissingKey, "the runner credential is missing (authorization: Bearer crr_...)").into());
    };
    Ok(Some(runs.runners.authenticate(credential.trim()).await?))
}

#[tonic::async_trait]
impl Rpc for RunnerGrpc {
    async fn redeem(&self, r: Request<pb::RedeemRequest>) -> R<pb::RedeemResponse> {
        let r = r.into_inner();
        let (runner, credential) = self.runs.runners.redeem(&r.pairing_code, &r.name).await?;
        Ok(Response::new(pb::RedeemResponse {
            runner_id: runner.id.into(),
            credential,
            environment_id: runner.environment_id.into(),
            pool: runner.pool,
            principal_id: runner.principal_id.into(),
        }))
    }

    async fn claim(&self, r: Request<pb::ClaimRequest>) -> R<pb::ClaimResponse> {
        let claimant = match self_hosted(&self.runs, &r).await? {
            Some(runner) => Claimant::SelfHosted(runner),
            None => Claimant::from(r.get_ref().runner_id.as_str()),
        };
        let r = r.into_inner();
        let work = self.runs.claim(claimant, Duration::from_millis(u64::from(r.wait_ms))).await?;
        #[allow(deprecated)] // the JSON text too, for 0.1.0 runners
        let work = work.map(|w| pb::WorkItem {
            session_id: w.session.id.clone().into(),
            run_id: w.run.id.clone().into(),
            lease: Some(pb::LeaseRef {
                run_id: w.lease.run_id.into(),
                lease_id: w.lease.lease_id,
                generation: w.lease.generation,
                session_id: w.lease.session_id.map(String::from).unwrap_or_default(),
            }),
            capability_token: w.capability,
            placement: w.run.placement.clone(),
            sandbox: Some(crate::wire::sandbox::work_sandbox(&w.sandbox)),
            sandbox_json: serde_json::to_string(&w.sandbox).unwrap_or_default(),
            execution_pins_json: crate::wire::run_state::execution_pins_json(&w.run.execution_pins),
            execution_pins: Some(crate::wire::run_state::execution_pins(&w.run.execution_pins)),
            routing_profile_id: w.session.pins.model_routing_profile_id.clone().into(),
            instructions: w.instructions.clone(),
            tools_json: serde_json::to_string(&w.tools).unwrap_or_else(|_| "[]".into()),
            tools: w.tools.iter().map(crate::wire::tools::declaration).collect(),
            principal_id: w.session.principal_id.clone().into(),
            environment_id: w.session.environment_id.clone().into(),
            start_seq: w.run.start_seq,
            budget_reached: w.session.budget.as_ref().is_some_and(|b| !b.open()),
            traceparent: w.run.traceparent.clone(),
            tail: w.tail.into_iter().map(run_event).collect(),
            session_thread_id: w.run.thread_id.clone().unwrap_or_default(),
            external_tools: matches!(w.session.pins.execution, crate::model::Execution::ExternalTools { .. }),
        });
        Ok(Response::new(pb::ClaimResponse { work }))
    }

    async fn heartbeat(&self, r: Request<pb::LeaseRef>) -> R<pb::HeartbeatResponse> {
        self_hosted(&self.runs, &r).await?;
        let l = lease(Some(r.into_inner()))?;
        let held = self.runs.heartbeat(&l).await?;
        let capability_token = if held { self.runs.capability_for(&l).await? } else { String::new() };
        Ok(Response::new(pb::HeartbeatResponse {
            status: if held { "ok" } else { "lost" }.into(),
            lease_expires_in_ms: if held { self.runs.log.lease_ms } else { 0 },
            capability_token,
        }))
    }

    async fn read_events(&self, r: Request<pb::ReadEventsRequest>) -> R<pb::ReadEventsResponse> {
        self_hosted(&self.runs, &r).await?;
        let r = r.into_inner();
        let events = self.runs.read_for_run(&lease(r.lease)?, r.after_seq, r.limit, r.wait_ms).await?;
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
        self_hosted(&self.runs, &r).await?;
        let r = r.into_inner();
        let events = r
            .events
            .into_iter()
            .map(|e| Ok((e.r#type, json_or_null("payload", &e.payload_json)?, e.id)))
            .collect::<Result<Vec<_>, Error>>()?;
        let a = self.runs.append_for_run(&lease(r.lease)?, events).await?;
        Ok(Response::new(pb::AppendEventsResponse { seqs: a.seqs, budget_reached: a.budget_reached }))
    }

    async fn publish_deltas(&self, r: Request<pb::PublishDeltasRequest>) -> R<pb::PublishDeltasResponse> {
        self_hosted(&self.runs, &r).await?;
        let r = r.into_inner();
        let mut chunks = r.chunks;
        if !r.text.is_empty() {
            chunks.insert(0, r.text);
        }
        self.runs.publish_delta(&lease(r.lease)?, &r.event_type, &r.preview_id, r.start, &chunks).await?;
        Ok(Response::new(pb::PublishDeltasResponse {}))
    }

    async fn complete(&self, r: Request<pb::CompleteRequest>) -> R<pb::CompleteResponse> {
        self_hosted(&self.runs, &r).await?;
        let r = r.into_inner();
        #[allow(deprecated)] // a 0.1.0 runner sends only the JSON text
        let stop = crate::wire::run_state::runner_stop(r.stop_reason, &r.stop_reason_json)?;
        let events = r
            .events
            .into_iter()
            .map(|e| Ok((e.r#type, json_or_null("payload", &e.payload_json)?, e.id)))
            .collect::<Result<Vec<_>, Error>>()?;
        self.runs.complete(&lease(r.lease)?, stop, r.last_seen_seq, events).await?;
        Ok(Response::new(pb::CompleteResponse {}))
    }

    async fn decide_thread_tool(&self, r: Request<pb::ThreadToolRequest>) -> R<pb::ThreadToolDecision> {
        self_hosted(&self.runs, &r).await?;
        let d = self.threads.decide_thread_tool(&thread_call(r.into_inner())?).await?;
        Ok(Response::new(pb::ThreadToolDecision {
            disposition: d.disposition,
            error_type: d.error_type,
            reason: d.reason,
            matched_rule_id: d.matched_rule_id,
            action_approval_id: d.approval_id,
            approval_expires_at: d.approval_expires_at,
            standing_approval_id: d.standing_approval_id,
        }))
    }

    async fn call_thread_tool(&self, r: Request<pb::ThreadToolRequest>) -> R<pb::ThreadToolResult> {
        self_hosted(&self.runs, &r).await?;
        let (content, is_error) = self.threads.call_thread_tool(&thread_call(r.into_inner())?).await?;
        Ok(Response::new(pb::ThreadToolResult { content_json: content.to_string(), is_error }))
    }

    async fn release(&self, r: Request<pb::LeaseRef>) -> R<pb::ReleaseResponse> {
        self_hosted(&self.runs, &r).await?;
        self.runs.release(&lease(Some(r.into_inner()))?).await?;
        Ok(Response::new(pb::ReleaseResponse {}))
    }

    async fn ended_sandboxes(&self, r: Request<pb::EndedSandboxesRequest>) -> R<pb::EndedSandboxesResponse> {
        if self_hosted(&self.runs, &r).await?.is_some() {
            return Err(Error::new(Code::PermissionDenied, "only the managed runner keeps Kubernetes sandboxes").into());
        }
        let ended = self.runs.ended_sandboxes(&r.into_inner().session_ids).await?;
        Ok(Response::new(pb::EndedSandboxesResponse { ended }))
    }

    async fn plan_files(&self, r: Request<pb::FilesRequest>) -> R<pb::FilesResponse> {
        self_hosted(&self.runs, &r).await?;
        let r = r.into_inner();
        let planned = self.runs.plan_files(&lease(r.lease)?, offered(r.files)).await?;
        let files =
            planned.into_iter().map(|(o, s, upload)| pb::FileDecision { path: o.path, status: s.as_str().into(), upload }).collect();
        Ok(Response::new(pb::FilesResponse { files }))
    }

    async fn record_files(&self, r: Request<pb::FilesRequest>) -> R<pb::FilesResponse> {
        self_hosted(&self.runs, &r).await?;
        let r = r.into_inner();
        let done = self.runs.record_files(&lease(r.lease)?, offered(r.files)).await?;
        let files = done.into_iter().map(|(o, s)| pb::FileDecision { path: o.path, status: s.as_str().into(), upload: false }).collect();
        Ok(Response::new(pb::FilesResponse { files }))
    }

    async fn put_blob(&self, r: Request<tonic::Streaming<pb::BlobChunk>>) -> R<pb::PutBlobResponse> {
        use futures_util::StreamExt;
        self_hosted(&self.runs, &r).await?;
        let mut stream = r.into_inner();
        let Some(first) = stream.next().await.transpose()? else {
            return Err(Error::invalid_field("chunks", "send at least one chunk").into());
        };
        let l = lease(first.lease)?;
        let head = futures_util::stream::iter([Ok(bytes::Bytes::from(first.data))]);
        let rest = stream.map(|c| c.map(|c| bytes::Bytes::from(c.data)).map_err(Error::from));
        let mut all = head.chain(rest);
        let size = self.runs.put_blob(&l, &first.kind, &first.sha256, &mut all).await?;
        Ok(Response::new(pb::PutBlobResponse { size: size as i64 }))
    }

    async fn missing_blobs(&self, r: Request<pb::MissingBlobsRequest>) -> R<pb::MissingBlobsResponse> {
        self_hosted(&self.runs, &r).await?;
        let r = r.into_inner();
        let missing = self.runs.missing_blobs(&lease(r.lease)?, &r.kind, r.sha256s).await?;
        Ok(Response::new(pb::MissingBlobsResponse { missing }))
    }

    type GetBlobStream = std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::BlobData, Status>> + Send>>;

    async fn get_blob(&self, r: Request<pb::GetBlobRequest>) -> R<Self::GetBlobStream> {
        self_hosted(&self.runs, &r).await?;
        let r = r.into_inner();
        let l = lease(r.lease)?;
        if r.kind == "memory" {
            // A memory document (at most 256 KiB): one chunk, from the
            // memory service.
            let data = self.runs.memory_content(&l, &r.sha256).await?.into_bytes();
            return Ok(Response::new(Box::pin(futures_util::stream::iter([Ok(pb::BlobData { data })]))));
        }
        let size = self.runs.blob_size(&l, &r.kind, &r.sha256).await?;
        let runs = self.runs.clone();
        let stream = futures_util::stream::unfold(0u64, move |at| {
            let (runs, l, kind, sha) = (runs.clone(), l.clone(), r.kind.clone(), r.sha256.clone());
            async move {
                if at >= size {
                    return None;
                }
                let next = runs.read_blob(&l, &kind, &sha, at, BLOB_CHUNK).await;
                match next {
                    Ok(data) if !data.is_empty() => Some((Ok(pb::BlobData { data: data.to_vec() }), at + data.len() as u64)),
                    Ok(_) => None,
                    Err(e) => Some((Err(Status::from(e)), size)),
                }
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn writeback_memory(&self, r: Request<pb::WritebackMemoryRequest>) -> R<pb::WritebackMemoryResponse> {
        self_hosted(&self.runs, &r).await?;
        let r = r.into_inner();
        let changes = r.changes.into_iter().map(|c| crate::memory::FileChange { path: c.path, content: c.content }).collect();
        self.runs.writeback_memory(&lease(r.lease)?, &r.mount_name, changes, r.skipped).await?;
        Ok(Response::new(pb::WritebackMemoryResponse {}))
    }

    async fn record_snapshot(&self, r: Request<pb::RecordSnapshotRequest>) -> R<pb::RecordSnapshotResponse> {
        self_hosted(&self.runs, &r).await?;
        let r = r.into_inner();
        let unenforced = r.unenforced.into_iter().map(|u| crate::model::Unenforced { field: u.field, reason: u.reason }).collect();
        self.runs.record_snapshot(&lease(r.lease)?, &r.manifest_sha256, unenforced).await?;
        Ok(Response::new(pb::RecordSnapshotResponse {}))
    }
}

/// The chunk a blob download sends at a time.
const BLOB_CHUNK: u64 = 1024 * 1024;

fn offered(files: Vec<pb::OfferedFile>) -> Vec<crate::model::Offered> {
    files.into_iter().map(|f| crate::model::Offered { path: f.path, size: f.size, sha256: f.sha256 }).collect()
}
