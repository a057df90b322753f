//! The wire: thin handlers that convert, call the service and map errors.
//! Which roles may call which RPC is checked before these run
//! (`checkfu_proto::mesh`).

use crate::automation::{AutomationWrite, AutomationWritten};
use crate::dreams::NewDream;
use crate::dreams::model::{Dream, DreamFilter, DreamStatus};
use crate::model::{Edit, Expect};
use crate::mounts::Written;
use crate::service::{MemoryService, NewStore, StorePatch};
use crate::store::StoreFilter;
use crate::{view, wire};
use checkfu_core::Error;
use checkfu_proto::memory::v1 as pb;
use serde_json::{Value, json};
use tonic::{Request, Response, Status};

pub struct MemoryGrpc {
    pub svc: MemoryService,
}

type R<T> = Result<Response<T>, Status>;

use pb::answer::Resource;

/// One resource, typed, and as the JSON text a 0.1.0 gateway reads.
#[allow(deprecated)] // json: the 0.1.0 text
fn answer(resource: Resource, text: Value, environment_id: &str, store_id: &str) -> R<pb::Answer> {
    Ok(Response::new(pb::Answer {
        json: text.to_string(),
        environment_id: environment_id.into(),
        memory_store_id: store_id.into(),
        resource: Some(resource),
    }))
}

/// A page: `typed` holds its list, `text` each item as a 0.1.0 gateway
/// reads it.
#[allow(deprecated)] // json: the 0.1.0 text
fn list(typed: pb::ListAnswer, text: impl IntoIterator<Item = Value>, next_page: String) -> R<pb::ListAnswer> {
    Ok(Response::new(pb::ListAnswer { json: text.into_iter().map(|v| v.to_string()).collect(), next_page, typed: true, ..typed }))
}

fn document_read(store_id: &str, n: i64, d: &crate::model::DocumentMeta, text: &str) -> R<pb::Answer> {
    answer(
        Resource::Document(pb::DocumentRead { store_version: n, document: Some(wire::document(d, Some(text))) }),
        json!({"memory_store_id": store_id, "store_version": n, "document": view::document(d, Some(text))}),
        "",
        store_id,
    )
}

/// A write's expectation on the wire: `expect_absent` is the API's `null`;
/// neither is a blind write, which the service refuses.
fn expectation(expect_absent: bool, expected_sha256: Option<String>) -> Option<Expect> {
    match (expect_absent, expected_sha256) {
        (true, _) => Some(Expect::Absent),
        (false, Some(s)) => Some(Expect::Sha(s)),
        (false, None) => None,
    }
}

fn parse_json(field: &str, s: &str) -> Result<Value, Error> {
    if s.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(s).map_err(|e| Error::invalid_field(field, format!("{field} is not JSON: {e}")))
}

fn store(s: &crate::model::Store) -> R<pb::Answer> {
    answer(Resource::Store(wire::store(s)), view::store(s), &s.environment_id, &s.id)
}

fn version(v: &crate::model::Version) -> R<pb::Answer> {
    answer(Resource::Version(wire::version(v)), view::version(v), "", &v.store_id)
}

#[tonic::async_trait]
impl pb::memory_service_server::MemoryService for MemoryGrpc {
    async fn get_service_info(&self, _: Request<pb::GetServiceInfoRequest>) -> R<pb::ServiceInfo> {
        Ok(Response::new(pb::ServiceInfo {
            role: "memory".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            owns: vec!["MemoryStores (versioned document trees)".into(), "MemoryProposals".into(), "Dreams".into()],
            serving_behaviour: true,
        }))
    }

    async fn create_store(&self, r: Request<pb::CreateStoreRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        let n = NewStore {
            environment_id: r.environment_id,
            name: r.name,
            description: r.description,
            metadata: parse_json("metadata", &r.metadata_json)?,
            owner_kind: r.owner_kind,
            owner_id: r.owner_id,
        };
        store(&self.svc.create_store(n, &r.actor_id).await?)
    }

    async fn get_store(&self, r: Request<pb::ActorRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        store(&self.svc.get_store(&r.id, &r.actor_id).await?)
    }

    async fn list_stores(&self, r: Request<pb::ListStoresRequest>) -> R<pb::ListAnswer> {
        let r = r.into_inner();
        let some = |s: String| (!s.is_empty()).then_some(s);
        let f = StoreFilter {
            environment_id: some(r.environment_id),
            owner_kind: some(r.owner_kind),
            owner_id: some(r.owner_id),
            include_archived: r.include_archived,
        };
        let (rows, next) = self.svc.list_stores(f, r.limit, &r.page, &r.actor_id).await?;
        list(pb::ListAnswer { stores: rows.iter().map(wire::store).collect(), ..Default::default() }, rows.iter().map(view::store), next)
    }

    async fn update_store(&self, r: Request<pb::UpdateStoreRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        let p = StorePatch {
            name: r.name,
            description: r.description,
            metadata: r.metadata_json.as_deref().map(|m| parse_json("metadata", m)).transpose()?,
            expected_version: r.expected_version,
        };
        store(&self.svc.update_store(&r.id, p, &r.actor_id).await?)
    }

    async fn archive_store(&self, r: Request<pb::ActorRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        store(&self.svc.archive_store(&r.id, &r.actor_id).await?)
    }

    async fn delete_store(&self, r: Request<pb::ActorRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        store(&self.svc.delete_store(&r.id, &r.actor_id).await?)
    }

    async fn read_document(&self, r: Request<pb::ReadDocumentRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        let (n, d, text) = self.svc.read_document(&r.store_id, &r.path, r.at_version, &r.actor_id).await?;
        document_read(&r.store_id, n, &d, &text)
    }

    async fn list_documents(&self, r: Request<pb::ListDocumentsRequest>) -> R<pb::ListAnswer> {
        let r = r.into_inner();
        let (n, rows, next) = self.svc.list_documents(&r.store_id, &r.path_prefix, r.at_version, r.limit, &r.page, &r.actor_id).await?;
        // A 0.1.0 gateway reads the version as the text's first entry.
        let head = std::iter::once(json!({"store_version": n}));
        let typed =
            pb::ListAnswer { store_version: n, documents: rows.iter().map(|d| wire::document(d, None)).collect(), ..Default::default() };
        list(typed, head.chain(rows.iter().map(|d| view::document(d, None))), next)
    }

    async fn write_document(&self, r: Request<pb::WriteDocumentRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        let expected = expectation(r.expect_absent, r.expected_sha256);
        let (n, d, text) = self.svc.write_document(&r.store_id, &r.path, &r.content, expected, &r.actor_id).await?;
        document_read(&r.store_id, n, &d, &text)
    }

    async fn automation_write(&self, r: Request<pb::AutomationWriteRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        let expected = expectation(r.expect_absent, r.expected_sha256);
        let w = AutomationWrite {
            store_id: r.store_id,
            path: r.path,
            content: r.content,
            expected,
            actor: r.actor_id,
            firing_id: r.firing_id,
            step_id: r.step_id,
        };
        let store_id = w.store_id.clone();
        match self.svc.automation_write(w).await? {
            AutomationWritten::Written { store_version, document, content } => document_read(&store_id, store_version, &document, &content),
            AutomationWritten::Proposed(p) => self.proposal(&p).await,
        }
    }

    async fn delete_document(&self, r: Request<pb::DeleteDocumentRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        let (n, sha) = self.svc.delete_document(&r.store_id, &r.path, &r.expected_sha256, &r.actor_id).await?;
        answer(
            Resource::Deleted(pb::DocumentDeleted { store_version: n, path: r.path.clone(), content_sha256: sha.clone() }),
            json!({"memory_store_id": r.store_id, "store_version": n, "deleted": {"path": r.path, "content_sha256": sha}}),
            "",
            &r.store_id,
        )
    }

    async fn list_versions(&self, r: Request<pb::ListVersionsRequest>) -> R<pb::ListAnswer> {
        let r = r.into_inner();
        let (rows, next) = self.svc.versions(&r.store_id, r.limit, &r.page, &r.actor_id).await?;
        list(
            pb::ListAnswer { versions: rows.iter().map(wire::version).collect(), ..Default::default() },
            rows.iter().map(view::version),
            next,
        )
    }

    async fn get_version(&self, r: Request<pb::GetVersionRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        version(&self.svc.version(&r.store_id, r.version, &r.actor_id).await?)
    }

    async fn create_proposal(&self, r: Request<pb::CreateProposalRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        #[allow(deprecated)] // changes_json: a 0.1.0 gateway's
        let changes = if r.changes.is_empty() && !r.changes_json.is_empty() {
            pb::ProposedChange::list_from_json(&parse_json("changes", &r.changes_json)?)?
        } else {
            r.changes
        };
        let p = self.svc.create_proposal(&r.store_id, wire::proposed_edits(changes), &r.rationale, &r.actor_id).await?;
        self.proposal(&p).await
    }

    async fn get_proposal(&self, r: Request<pb::ActorRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        self.proposal(&self.svc.get_proposal(&r.id, &r.actor_id).await?).await
    }

    async fn list_proposals(&self, r: Request<pb::ListProposalsRequest>) -> R<pb::ListAnswer> {
        let r = r.into_inner();
        let (rows, next) = self.svc.list_proposals(&r.store_id, &r.status, r.limit, &r.page, &r.actor_id).await?;
        let (mut typed, mut text) = (Vec::with_capacity(rows.len()), Vec::with_capacity(rows.len()));
        for p in &rows {
            let texts = self.svc.proposal_texts(p).await?;
            typed.push(wire::proposal(p, &texts));
            text.push(view::proposal(p, &texts));
        }
        list(pb::ListAnswer { proposals: typed, ..Default::default() }, text, next)
    }

    async fn decide_proposal(&self, r: Request<pb::DecideProposalRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        self.proposal(&self.svc.decide(&r.id, r.approve, &r.note, &r.actor_id).await?).await
    }

    async fn mount(&self, r: Request<pb::MountRequest>) -> R<pb::MountResponse> {
        let r = r.into_inner();
        let store_version = self.svc.mount(&r.store_id, &r.access, &r.principal_id, &r.environment_id, &r.session_id).await?;
        Ok(Response::new(pb::MountResponse { store_version }))
    }

    async fn materialize(&self, r: Request<pb::MaterializeRequest>) -> R<pb::MaterializeResponse> {
        let r = r.into_inner();
        Ok(Response::new(
            match self.svc.materialize(&r.store_id, r.at_version, &r.principal_id, &r.session_id, &r.run_id, r.check_only).await? {
                Ok(files) => pb::MaterializeResponse {
                    files: files
                        .into_iter()
                        .map(|f| pb::MountedFile { path: f.path, sha256: f.sha256, size_bytes: f.size_bytes })
                        .collect(),
                    refused: String::new(),
                },
                Err(why) => pb::MaterializeResponse { files: vec![], refused: why.into() },
            },
        ))
    }

    async fn writeback(&self, r: Request<pb::WritebackRequest>) -> R<pb::WritebackResponse> {
        let r = r.into_inner();
        let edits = r
            .changes
            .into_iter()
            .map(|c| Edit { path: c.path, content: c.content, expected: c.expected_sha256.map(Expect::Sha).unwrap_or(Expect::Absent) })
            .collect();
        let w = self.svc.writeback(&r.store_id, &r.principal_id, &r.session_id, &r.run_id, edits).await?;
        Ok(Response::new(match w {
            #[allow(deprecated)] // changes_json: a 0.1.0 sessions service's
            Written::Committed(v) => pb::WritebackResponse {
                outcome: "committed".into(),
                store_version: v.store_version,
                changes_json: serde_json::to_string(&v.changes).unwrap_or_default(),
                changes: v.changes.iter().map(wire::version_change).collect(),
                ..Default::default()
            },
            Written::Proposed { proposal, reason } => pb::WritebackResponse {
                outcome: "proposed".into(),
                store_version: proposal.base_version,
                memory_proposal_id: proposal.id.to_string(),
                reason: reason.as_str().into(),
                base_version: proposal.base_version,
                ..Default::default()
            },
            Written::Unchanged(head) => pb::WritebackResponse { outcome: "unchanged".into(), store_version: head, ..Default::default() },
            Written::Refused(why) => pb::WritebackResponse { outcome: "refused".into(), reason: why.into(), ..Default::default() },
        }))
    }

    async fn get_content(&self, r: Request<pb::GetContentRequest>) -> R<pb::GetContentResponse> {
        let content = self.svc.content(&r.into_inner().sha256).await?;
        Ok(Response::new(pb::GetContentResponse { content }))
    }

    async fn create_dream(&self, r: Request<pb::CreateDreamRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        let n = NewDream {
            memory_store_id: r.memory_store_id,
            session_ids: r.session_ids,
            model_routing_profile_id: r.model_routing_profile_id,
            instructions: r.instructions,
            review: r.review,
        };
        dream(&self.svc.create_dream(n, &r.actor_id).await?)
    }

    async fn get_dream(&self, r: Request<pb::ActorRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        dream(&self.svc.get_dream(&r.id, &r.actor_id).await?)
    }

    async fn list_dreams(&self, r: Request<pb::ListDreamsRequest>) -> R<pb::ListAnswer> {
        let r = r.into_inner();
        let status = Some(r.status).filter(|s| !s.is_empty()).map(|s| DreamStatus::parse("status", &s)).transpose()?;
        let environment_ids = if r.environment_id.is_empty() {
            vec![]
        } else {
            checkfu_core::id::EnvironmentId::check("environment_id", &r.environment_id)?;
            vec![r.environment_id]
        };
        let f = DreamFilter { environment_ids, status, include_archived: r.include_archived };
        let (rows, next) = self.svc.list_dreams(f, r.limit, &r.page, &r.actor_id).await?;
        list(pb::ListAnswer { dreams: rows.iter().map(wire::dream).collect(), ..Default::default() }, rows.iter().map(view::dream), next)
    }

    async fn cancel_dream(&self, r: Request<pb::ActorRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        dream(&self.svc.cancel_dream(&r.id, &r.actor_id).await?)
    }

    async fn archive_dream(&self, r: Request<pb::ActorRequest>) -> R<pb::Answer> {
        let r = r.into_inner();
        dream(&self.svc.archive_dream(&r.id, &r.actor_id).await?)
    }
}

fn dream(d: &Dream) -> R<pb::Answer> {
    answer(Resource::Dream(wire::dream(d)), view::dream(d), &d.environment_id, &d.input_store_id)
}

impl MemoryGrpc {
    async fn proposal(&self, p: &crate::model::Proposal) -> R<pb::Answer> {
        let texts = self.svc.proposal_texts(p).await?;
        answer(Resource::Proposal(wire::proposal(p, &texts)), view::proposal(p, &texts), "", &p.store_id)
    }
}
