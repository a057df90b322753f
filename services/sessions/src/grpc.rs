//! Thin gRPC handlers for the catalog and sessions: convert, call, map errors.

use crate::live::Item;
use crate::model::*;
use crate::service::{NewSession, SessionsService};
use crate::store::SessionFilter;
use crate::wire::budget::{budget, metric_or_default};
use crate::wire::catalog::{agent, agent_version, deployment, deployment_input, sandbox_profile, sandbox_revision};
use crate::wire::runner::runner;
use crate::wire::session::{event, input, names, run, session, session_file};
use crate::wire::thread::{thread, thread_answer};
use crate::wire::{definition, json_or_null};
use checkfu_core::page::PageRequest;
use checkfu_core::time::rfc3339;
use checkfu_core::{Error, Result};
use checkfu_proto::sessions::v1 as pb;
use checkfu_proto::sessions::v1::sessions_service_server::SessionsService as Rpc;
use serde_json::Value;
use std::pin::Pin;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

pub struct SessionsGrpc {
    pub svc: SessionsService,
}

type R<T> = std::result::Result<Response<T>, Status>;

fn ok<T>(v: T) -> R<T> {
    Ok(Response::new(v))
}

impl SessionsGrpc {
    /// The wire form of a Session, saying whether it waits for a Runner and
    /// what its sandbox is.
    async fn view(&self, s: Session) -> Result<pb::Session> {
        let sandbox = self.svc.runs.sandbox_state(&s.id).await?;
        let mounts = self.svc.runs.memory_resources(&s.id).await?;
        self.view_with(s, sandbox.as_ref(), mounts).await
    }

    async fn view_with(&self, s: Session, sandbox: Option<&SandboxState>, mounts: Vec<MemoryMount>) -> Result<pb::Session> {
        let queued = self.svc.runs.queued_for_pool(&s).await?;
        let connection_ids = self
            .svc
            .catalog
            .pinned_version(&s.agent_id, s.pins.agent_version)
            .await?
            .map(|v| v.definition.connection_ids())
            .unwrap_or_default();
        // The JSON text fields for 0.1.0 readers, until the release after it.
        #[allow(deprecated)]
        let answer = pb::Session {
            queued_for_pool: queued,
            sandbox_json: crate::wire::session::sandbox_json(sandbox),
            sandbox: sandbox.map(crate::wire::session::sandbox),
            connection_ids,
            resources_json: crate::wire::session::resources_json(&mounts),
            memory_resources: mounts.iter().map(crate::wire::session::memory_resource).collect(),
            ..session(s)
        };
        Ok(answer)
    }
}

type EventStream = Pin<Box<dyn Stream<Item = std::result::Result<pb::StreamItem, Status>> + Send>>;

#[tonic::async_trait]
impl Rpc for SessionsGrpc {
    #[allow(deprecated)] // draft_json: a 0.1.0 gateway's
    async fn create_agent(&self, r: Request<pb::CreateAgentRequest>) -> R<pb::Agent> {
        let r = r.into_inner();
        let draft = match r.draft {
            Some(d) => definition::definition(d)?,
            None => match json_or_null("draft", &r.draft_json)? {
                Value::Null => AgentDefinition::default(),
                v => definition::from_json(v)?,
            },
        };
        ok(agent(self.svc.catalog.create_agent(&r.environment_id, &r.name, draft).await?))
    }
    async fn get_agent(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Agent> {
        ok(agent(self.svc.catalog.agent(&r.into_inner().id).await?))
    }
    async fn list_agents(&self, r: Request<pb::ListInEnvironmentsRequest>) -> R<pb::ListAgentsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.catalog.list_agents(&r.environment_ids, &p).await?, |a| &a.id);
        ok(pb::ListAgentsResponse { data: rows.into_iter().map(agent).collect(), next_page })
    }
    async fn update_agent(&self, r: Request<pb::UpdateAgentRequest>) -> R<pb::Agent> {
        let r = r.into_inner();
        #[allow(deprecated)] // draft_json: a 0.1.0 gateway's
        let draft = match (r.draft, r.draft_json) {
            (Some(d), _) => Some(definition::definition(d)?),
            (None, Some(text)) => Some(definition::from_json(json_or_null("draft", &text)?)?),
            (None, None) => None,
        };
        ok(agent(self.svc.catalog.update_agent(&r.id, r.name.as_deref(), draft, r.expected_version).await?))
    }
    async fn archive_agent(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Agent> {
        ok(agent(self.svc.catalog.archive_agent(&r.into_inner().id).await?))
    }
    async fn publish_agent_version(&self, r: Request<pb::PublishAgentVersionRequest>) -> R<pb::AgentVersion> {
        let r = r.into_inner();
        ok(agent_version(self.svc.catalog.publish_agent_version(&r.agent_id, &r.published_by, r.expected_version).await?))
    }
    async fn get_agent_version(&self, r: Request<pb::GetAgentVersionRequest>) -> R<pb::AgentVersion> {
        let r = r.into_inner();
        ok(agent_version(self.svc.catalog.agent_version(&r.agent_id, r.version).await?))
    }
    async fn list_agent_versions(&self, r: Request<pb::ListAgentVersionsRequest>) -> R<pb::ListAgentVersionsResponse> {
        let r = r.into_inner();
        let (rows, next_page) = self.svc.catalog.list_agent_versions(&r.agent_id, r.limit, &r.page).await?;
        ok(pb::ListAgentVersionsResponse { data: rows.into_iter().map(agent_version).collect(), next_page })
    }

    async fn create_sandbox_profile(&self, r: Request<pb::CreateSandboxProfileRequest>) -> R<pb::SandboxProfile> {
        let r = r.into_inner();
        #[allow(deprecated)] // a 0.1.0 caller's spec_json
        let spec = crate::wire::sandbox::spec_input(r.spec, &r.spec_json)?;
        let (p, _) = self.svc.catalog.create_sandbox_profile(&r.environment_id, &r.name, spec).await?;
        ok(sandbox_profile(p))
    }
    async fn publish_sandbox_revision(&self, r: Request<pb::PublishSandboxRevisionRequest>) -> R<pb::SandboxRevision> {
        let r = r.into_inner();
        #[allow(deprecated)] // a 0.1.0 caller's spec_json
        let spec = crate::wire::sandbox::spec_input(r.spec, &r.spec_json)?;
        ok(sandbox_revision(self.svc.catalog.publish_sandbox_revision(&r.profile_id, spec).await?))
    }
    async fn archive_sandbox_profile(&self, r: Request<pb::GetByIdRequest>) -> R<pb::SandboxProfile> {
        ok(sandbox_profile(self.svc.catalog.archive_sandbox_profile(&r.into_inner().id).await?))
    }
    async fn get_sandbox_profile(&self, r: Request<pb::GetByIdRequest>) -> R<pb::SandboxProfile> {
        ok(sandbox_profile(self.svc.catalog.sandbox_profile(&r.into_inner().id).await?))
    }
    async fn get_sandbox_revision(&self, r: Request<pb::GetSandboxRevisionRequest>) -> R<pb::SandboxRevision> {
        let r = r.into_inner();
        ok(sandbox_revision(self.svc.catalog.sandbox_revision(&r.profile_id, r.revision).await?))
    }
    async fn list_sandbox_profiles(&self, r: Request<pb::ListInEnvironmentsRequest>) -> R<pb::ListSandboxProfilesResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.catalog.list_sandbox_profiles(&r.environment_ids, &p).await?, |a| &a.id);
        ok(pb::ListSandboxProfilesResponse { data: rows.into_iter().map(sandbox_profile).collect(), next_page })
    }

    async fn create_deployment(&self, r: Request<pb::CreateDeploymentRequest>) -> R<pb::Deployment> {
        let r = r.into_inner();
        let input = deployment_input(r.input)?;
        ok(deployment(self.svc.catalog.create_deployment(&r.environment_id, &r.key, &r.agent_id, &input).await?))
    }
    async fn create_deployment_revision(&self, r: Request<pb::CreateDeploymentRevisionRequest>) -> R<pb::Deployment> {
        let r = r.into_inner();
        let input = deployment_input(r.input)?;
        ok(deployment(self.svc.catalog.create_deployment_revision(&r.id, &input).await?))
    }
    async fn get_deployment(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Deployment> {
        ok(deployment(self.svc.catalog.deployment(&r.into_inner().id).await?))
    }
    async fn list_deployments(&self, r: Request<pb::ListInEnvironmentsRequest>) -> R<pb::ListDeploymentsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.catalog.list_deployments(&r.environment_ids, &p).await?, |a| &a.id);
        ok(pb::ListDeploymentsResponse { data: rows.into_iter().map(deployment).collect(), next_page })
    }

    async fn create_session(&self, r: Request<pb::CreateSessionRequest>) -> R<pb::Session> {
        let r = r.into_inner();
        #[allow(deprecated)] // a 0.1.0 caller's tools_json and skills_json
        let req = NewSession {
            deployment_id: r.agent_deployment_id,
            principal_id: r.principal_id,
            title: r.title,
            metadata: json_or_null("metadata", &r.metadata_json)?,
            instructions: r.instructions,
            tools: names("tools", r.tools, &r.tools_json)?,
            skills: names("skills", r.skills, &r.skills_json)?,
            initial_events: r
                .initial_events
                .into_iter()
                .enumerate()
                .map(|(i, e)| input(e).map_err(|e| Error { message: format!("initial_events[{i}]: {}", e.message), ..e }))
                .collect::<Result<_>>()?,
            budget: r.budget.map(|b| (b.limit, metric_or_default(&b.metric))),
            resources: r.resource_file_ids,
            memory: r
                .memory_mounts
                .into_iter()
                .map(|m| crate::model::MountRequest { store_id: m.memory_store_id, access: m.access, mount_name: m.mount_name })
                .collect(),
            deployment_revision: r.deployment_revision,
            id: r.session_id,
            connection_vault_ids: r.connection_vault_ids,
            delivery_screen: r.delivery_screen.map(|s| s.to_domain("delivery_screen")).transpose()?,
        };
        let made = self.svc.create_session(req).await?;
        if made.events.is_empty() {
            // A caller-minted id that named an existing Session: as it is now.
            return ok(self.view(made.session).await?);
        }
        // Just made: no sandbox yet, and the mounts it pinned.
        ok(self.view_with(made.session, None, made.mounts).await?)
    }
    async fn get_session(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Session> {
        ok(self.view(self.svc.log.session(&r.into_inner().id).await?).await?)
    }
    async fn list_sessions(&self, r: Request<pb::ListSessionsRequest>) -> R<pb::ListSessionsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let f = SessionFilter {
            environment_ids: r.environment_ids,
            status: r.status,
            deployment_id: r.agent_deployment_id,
            principal_id: r.principal_id,
            ascending: r.ascending,
        };
        let (rows, next_page) = p.finish(self.svc.list_sessions(&f, &p).await?, |s| &s.id);
        // One query for the page's sandboxes, not one per Session.
        let ids: Vec<_> = rows.iter().map(|s| s.id.clone()).collect();
        let sandboxes = self.svc.runs.sandbox_states(&ids).await?;
        let mut data = Vec::with_capacity(rows.len());
        for s in rows {
            let sandbox = sandboxes.get(&s.id).cloned();
            let mounts = self.svc.runs.memory_resources(&s.id).await?;
            data.push(self.view_with(s, sandbox.as_ref(), mounts).await?);
        }
        ok(pb::ListSessionsResponse { data, next_page })
    }
    async fn archive_session(&self, r: Request<pb::ArchiveSessionRequest>) -> R<pb::Session> {
        let r = r.into_inner();
        checkfu_core::id::PrincipalId::check("actor_id", &r.actor_id)?;
        ok(session(self.svc.archive(&r.id, &r.actor_id).await?))
    }
    async fn update_selection(&self, r: Request<pb::UpdateSelectionRequest>) -> R<pb::Session> {
        let r = r.into_inner();
        #[allow(deprecated)] // a 0.1.0 caller's tools_json and skills_json
        let (tools, skills) = (names("tools", r.tools, &r.tools_json)?, names("skills", r.skills, &r.skills_json)?);
        ok(session(self.svc.update_selection(&r.id, tools, skills, &r.actor_id).await?))
    }
    async fn poll_work(&self, r: Request<pb::PollWorkRequest>) -> R<pb::PollWorkResponse> {
        ok(crate::grpc_work::poll(&self.svc.runs, r.into_inner()).await?)
    }
    async fn ack_work(&self, r: Request<pb::WorkRequest>) -> R<pb::WorkItem> {
        let r = r.into_inner();
        ok(crate::grpc_work::work(self.svc.runs.ack_work(&r.profile_id, &r.work_id, &r.credential).await?))
    }
    async fn heartbeat_work(&self, r: Request<pb::HeartbeatWorkRequest>) -> R<pb::HeartbeatWorkResponse> {
        ok(crate::grpc_work::heartbeat(&self.svc.runs, r.into_inner()).await?)
    }
    async fn stop_work(&self, r: Request<pb::StopWorkRequest>) -> R<pb::WorkItem> {
        let r = r.into_inner();
        ok(crate::grpc_work::work(self.svc.runs.stop_work(&r.profile_id, &r.work_id, &r.credential, r.force).await?))
    }
    async fn get_work(&self, r: Request<pb::WorkRequest>) -> R<pb::WorkItem> {
        let r = r.into_inner();
        ok(crate::grpc_work::work(self.svc.runs.work_of(&r.profile_id, &r.work_id).await?))
    }
    async fn update_work(&self, r: Request<pb::UpdateWorkRequest>) -> R<pb::WorkItem> {
        let r = r.into_inner();
        let patch: Value =
            serde_json::from_str(&r.metadata_patch_json).map_err(|_| Error::invalid_field("metadata", "metadata must be JSON"))?;
        ok(crate::grpc_work::work(self.svc.runs.update_work_metadata(&r.profile_id, &r.work_id, &patch).await?))
    }
    async fn list_work(&self, r: Request<pb::ListWorkRequest>) -> R<pb::ListWorkResponse> {
        ok(crate::grpc_work::list(&self.svc.runs, r.into_inner()).await?)
    }
    async fn work_stats(&self, r: Request<pb::WorkStatsRequest>) -> R<pb::WorkStatsResponse> {
        ok(crate::grpc_work::stats(&self.svc.runs, r.into_inner()).await?)
    }
    async fn verify_work_token(&self, r: Request<pb::VerifyWorkTokenRequest>) -> R<pb::WorkScope> {
        ok(crate::grpc_work::verify(&self.svc.runs, r.into_inner()).await?)
    }
    async fn send_tool_result(&self, r: Request<pb::SendToolResultRequest>) -> R<pb::AppendUserEventResponse> {
        let (e, replayed) = crate::grpc_work::send_tool_result(&self.svc.runs, r.into_inner()).await?;
        ok(pb::AppendUserEventResponse { event: Some(event(e)), replayed, run_id: String::new() })
    }

    async fn append_user_event(&self, r: Request<pb::AppendUserEventRequest>) -> R<pb::AppendUserEventResponse> {
        let r = r.into_inner();
        let e = input(r.event.ok_or_else(|| Error::invalid("an event is required"))?)?;
        if !r.continuation_event_id.is_empty() {
            let c = self.svc.log.continue_session(&r.session_id, e, &r.continuation_event_id).await?;
            return ok(pb::AppendUserEventResponse { event: Some(event(c.event)), replayed: c.replayed, run_id: c.run_id });
        }
        let (e, replayed) = self.svc.append_user_event(&r.session_id, e).await?;
        ok(pb::AppendUserEventResponse { event: Some(event(e)), replayed, run_id: String::new() })
    }
    async fn list_events(&self, r: Request<pb::ListEventsRequest>) -> R<pb::ListEventsResponse> {
        let r = r.into_inner();
        let (rows, has_more) = self.svc.log.list_events(&r.session_id, &r.view, r.after_seq, r.limit, &r.types).await?;
        ok(pb::ListEventsResponse { data: rows.into_iter().map(event).collect(), has_more })
    }

    type SubscribeEventsStream = EventStream;

    async fn subscribe_events(&self, r: Request<pb::SubscribeEventsRequest>) -> R<Self::SubscribeEventsStream> {
        let r = r.into_inner();
        // Subscribed before the answer: nothing published after it is missed.
        let feed = self.svc.log.open_feed(&r.session_id).await?;
        let (tx, mut rx) = mpsc::channel::<Item>(256);
        let (out_tx, out_rx) = mpsc::channel::<std::result::Result<pb::StreamItem, Status>>(256);
        let svc = self.svc.clone();
        let forward_tx = out_tx.clone();
        tokio::spawn(async move {
            let after_seq = (!r.live_only).then_some(r.after_seq);
            let followed = svc.log.follow(feed, after_seq, r.delta_types, tx).await;
            if let Err(e) = followed {
                let _ = forward_tx.send(Err(Status::from(e))).await;
            }
        });
        tokio::spawn(async move {
            use pb::stream_item::Item as I;
            while let Some(item) = rx.recv().await {
                let item = match item {
                    Item::Event(e) => I::Event(event(e)),
                    Item::Delta(d) => I::Delta(pb::Delta {
                        kind: d.kind.into(),
                        event_type: d.event_type,
                        preview_id: d.preview_id,
                        text: d.text,
                        run_id: d.run_id,
                        session_thread_id: d.thread_id,
                    }),
                };
                if out_tx.send(Ok(pb::StreamItem { item: Some(item) })).await.is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(out_rx))))
    }

    async fn get_run(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Run> {
        ok(run(self.svc.run(&r.into_inner().id).await?))
    }
    async fn list_runs(&self, r: Request<pb::ListRunsRequest>) -> R<pb::ListRunsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.list_runs(&r.session_id, &p).await?, |x| &x.id);
        ok(pb::ListRunsResponse { data: rows.into_iter().map(run).collect(), next_page })
    }

    async fn get_outcome(&self, r: Request<pb::GetByIdRequest>) -> R<pb::JsonAnswer> {
        let o = self.svc.outcomes.get_outcome(&r.into_inner().id).await?;
        #[allow(deprecated)] // json: a 0.1.0 gateway's
        let answer = pb::JsonAnswer {
            json: crate::outcomes::view(&o).to_string(),
            outcome: Some(crate::wire::outcome::outcome(&o)),
            session_id: o.session_id,
            thread: None,
        };
        ok(answer)
    }

    async fn list_outcomes(&self, r: Request<pb::ListRunsRequest>) -> R<pb::JsonList> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.outcomes.list_outcomes(&r.session_id, &p).await?, |o| o.id.as_str());
        #[allow(deprecated)] // json: a 0.1.0 gateway's
        let list = pb::JsonList {
            json: rows.iter().map(|o| crate::outcomes::view(o).to_string()).collect(),
            next_page,
            threads: vec![],
            outcomes: rows.iter().map(crate::wire::outcome::outcome).collect(),
        };
        ok(list)
    }

    async fn list_threads(&self, r: Request<pb::ListThreadsRequest>) -> R<pb::JsonList> {
        let r = r.into_inner();
        let rows = self.svc.threads.threads(&r.session_id, &r.status).await?;
        #[allow(deprecated)] // json: a 0.1.0 gateway's
        let list = pb::JsonList {
            json: rows.iter().map(|t| t.to_json().to_string()).collect(),
            next_page: String::new(),
            threads: rows.into_iter().map(thread).collect(),
            outcomes: vec![],
        };
        ok(list)
    }

    async fn get_thread(&self, r: Request<pb::ThreadRequest>) -> R<pb::JsonAnswer> {
        let r = r.into_inner();
        ok(thread_answer(self.svc.threads.thread(&r.session_id, &r.thread_id).await?))
    }

    async fn archive_thread(&self, r: Request<pb::ThreadRequest>) -> R<pb::JsonAnswer> {
        let r = r.into_inner();
        ok(thread_answer(self.svc.threads.archive_thread(&r.session_id, &r.thread_id, &r.actor_id).await?))
    }

    async fn get_session_sandbox(&self, r: Request<pb::GetByIdRequest>) -> R<pb::SandboxRevision> {
        let s = self.svc.log.session(&r.into_inner().id).await?;
        ok(sandbox_revision(self.svc.catalog.sandbox_revision(&s.pins.sandbox_profile_id, s.pins.sandbox_profile_revision).await?))
    }

    async fn resolve_approval(&self, r: Request<pb::GetByIdRequest>) -> R<pb::ResolveApprovalResponse> {
        ok(pb::ResolveApprovalResponse { recorded: self.svc.approvals.resolve_approval(&r.into_inner().id).await? })
    }

    async fn attach_budget(&self, r: Request<pb::AttachBudgetRequest>) -> R<pb::Budget> {
        let r = r.into_inner();
        let nb = r.budget.unwrap_or_default();
        let (b, s) = self.svc.budgets.attach_budget(&r.session_id, nb.limit, &metric_or_default(&nb.metric), &r.actor_id).await?;
        ok(budget(b, &s))
    }

    async fn get_budget(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Budget> {
        let s = self.svc.budgets.budget_session(&r.into_inner().id).await?;
        let b = s.budget.clone().ok_or_else(|| Error::internal("the budget's session lost it"))?;
        ok(budget(b, &s))
    }

    async fn list_budgets(&self, r: Request<pb::ListInEnvironmentsRequest>) -> R<pb::ListBudgetsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.budgets.list_budgets(&r.environment_ids, &p).await?, Session::budget_id);
        let data = rows.into_iter().filter_map(|s| s.budget.clone().map(|b| budget(b, &s))).collect();
        ok(pb::ListBudgetsResponse { data, next_page })
    }

    async fn update_budget(&self, r: Request<pb::UpdateBudgetRequest>) -> R<pb::Budget> {
        use crate::model::BudgetChange;
        let r = r.into_inner();
        let change = match (r.action.as_str(), r.limit) {
            ("pause", _) => BudgetChange::Pause,
            ("resume", _) => BudgetChange::Resume,
            ("detach", _) => BudgetChange::Detach,
            ("", Some(limit)) => BudgetChange::Limit { limit, expected_version: r.expected_version },
            ("", None) => return Err(Error::invalid_field("limit", "limit is required").into()),
            (other, _) => return Err(Error::invalid_field("action", format!("unknown budget action {other:?}")).into()),
        };
        let detached = matches!(change, BudgetChange::Detach);
        let (b, s) = self.svc.budgets.change_budget(&r.id, change, &r.actor_id).await?;
        let mut out = budget(b, &s);
        if detached {
            out.status = "detached".into();
        }
        ok(out)
    }

    async fn update_session(&self, r: Request<pb::UpdateSessionRequest>) -> R<pb::Session> {
        let r = r.into_inner();
        let metadata = match r.metadata_json.as_deref() {
            Some(m) => Some(serde_json::from_str(m).map_err(|_| Error::invalid_field("metadata", "metadata must be a JSON object"))?),
            None => None,
        };
        ok(session(self.svc.update_session(&r.id, r.title, metadata, &r.actor_id).await?))
    }

    async fn list_session_files(&self, r: Request<pb::ListRunsRequest>) -> R<pb::ListSessionFilesResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.runs.list_files(&r.session_id, &p).await?, |f: &SessionFile| &f.id);
        ok(pb::ListSessionFilesResponse { data: rows.into_iter().map(session_file).collect(), next_page })
    }

    async fn read_session_file(&self, r: Request<pb::ReadSessionFileRequest>) -> R<pb::FileWindow> {
        let r = r.into_inner();
        let (f, data) = self.svc.runs.read_file(&r.session_id, &r.path, r.offset, r.length).await?;
        ok(pb::FileWindow { data: data.to_vec(), file: Some(session_file(f)) })
    }

    async fn create_runner_pairing(&self, r: Request<pb::CreateRunnerPairingRequest>) -> R<pb::RunnerPairing> {
        let r = r.into_inner();
        let new = crate::runners::NewPairing {
            environment_id: &r.environment_id,
            principal_id: &r.principal_id,
            pool: &r.pool,
            ttl_seconds: r.ttl_seconds,
            created_by: &r.created_by,
        };
        let (p, code) = self.svc.runs.runners.create_pairing(new).await?;
        ok(pb::RunnerPairing {
            id: p.id.into(),
            environment_id: p.environment_id.into(),
            principal_id: p.principal_id.into(),
            pool: p.pool,
            code,
            expires_at: rfc3339(p.expires_ms),
            created_at: rfc3339(p.created_ms),
        })
    }

    async fn get_runner(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Runner> {
        ok(runner(self.svc.runs.runners.get(&r.into_inner().id).await?))
    }

    async fn list_runners(&self, r: Request<pb::ListInEnvironmentsRequest>) -> R<pb::ListRunnersResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.svc.runs.runners.list(&r.environment_ids, &p).await?, |x: &Runner| &x.id);
        ok(pb::ListRunnersResponse { data: rows.into_iter().map(runner).collect(), next_page })
    }

    async fn revoke_runner(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Runner> {
        ok(runner(self.svc.runs.revoke_runner(&r.into_inner().id).await?))
    }

    async fn verify_capability(&self, r: Request<pb::VerifyCapabilityRequest>) -> R<pb::CapabilityScope> {
        let r = r.into_inner();
        let c = self.svc.runs.verify_capability(&r.token).await?;
        if !r.runner_credential.is_empty() && self.svc.runs.runners.authenticate(&r.runner_credential).await?.id.as_str() != c.runner_id {
            return Err(Error::new(checkfu_core::Code::PermissionDenied, "the capability token belongs to another runner").into());
        }
        ok(pb::CapabilityScope {
            expires_in_ms: (c.expires_ms - checkfu_core::time::now_ms()).max(0),
            run_id: c.run_id,
            session_id: c.session_id,
            environment_id: c.environment_id,
            runner_id: c.runner_id,
            routing_profile_id: c.routing_profile_id,
            tools: c.tools,
        })
    }
}
