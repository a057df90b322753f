//! The Dream worker: takes the oldest pending Dream (or one whose worker
//! died: its lease ran out), reads the input store at the pinned version,
//! asks the model when the Dream has one, runs the deterministic pass, and
//! writes the output store, its versions (or review proposal) and the
//! Dream's completion in one transaction — so a crash or a cancel leaves
//! no store behind, and a taken-over Dream makes the same one.

use super::curate::{Tree, curate, diff};
use super::model::*;
use crate::model::*;
use crate::service::MemoryService;
use crate::store::{Commit, DreamOutput};
use checkfu_core::id::ProposalId;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::sessions::v1 as ss;
use serde_json::{Value, json};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often an idle worker looks for Dreams a dead worker left.
const IDLE_POLL: Duration = Duration::from_secs(5);
/// The most message text a model Dream reads from its Sessions.
const MAX_MESSAGE_CHARS: usize = 1024 * 1024;

/// Runs Dreams until `stop`.
pub async fn work(svc: MemoryService, stop: CancellationToken) {
    let holder = checkfu_core::id::DreamId::mint().to_string();
    loop {
        let next = svc.db.next_dream(now_ms()).await;
        match next {
            Ok(Some(d)) => {
                let id = d.id.clone();
                if let Err(e) = svc.run_dream(d, &holder).await {
                    tracing::warn!(dream_id = %id, error = %e.message, "a Dream's run stopped; it is taken up again when its lease runs out");
                    tokio::time::sleep(IDLE_POLL).await;
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e.message, "could not look for Dreams to run"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = svc.dreams_wake.notified() => {}
            _ = tokio::time::sleep(IDLE_POLL) => {}
        }
    }
}

impl MemoryService {
    /// Claims `d` and carries it out. An `Err` is the platform failing (the
    /// store unreachable): the Dream stays claimed and is taken up again
    /// later; a Dream that cannot be done is recorded `failed`.
    pub(crate) async fn run_dream(&self, d: Dream, holder: &str) -> Result<()> {
        let now = now_ms();
        let claimed = Dream {
            status: DreamStatus::Running,
            started_ms: if d.started_ms == 0 { now } else { d.started_ms },
            lease_holder: holder.into(),
            lease_expires_ms: now + LEASE_MS,
            version: d.version + 1,
            ..d.clone()
        };
        if !self.db.update_dream(&claimed, d.version).await? {
            return Ok(());
        }
        match self.dream_output(&claimed).await {
            Ok(out) => {
                if !self.db.complete_dream(&out).await? {
                    return Ok(());
                }
                self.woke();
                let done = &out.dream;
                self.audit(
                    &done.created_by,
                    "memory_store.created",
                    &out.store.id,
                    json!({"dream_id": done.id, "created_from": out.store.created_from}),
                )
                .await;
                self.audit(
                    &done.created_by,
                    "dream.completed",
                    &done.input_store_id,
                    json!({"dream_id": done.id, "output_store_id": out.store.id}),
                )
                .await;
                Ok(())
            }
            Err(e) if e.code == checkfu_core::Code::Internal => Err(e),
            Err(e) => {
                let failed = Dream {
                    status: DreamStatus::Failed,
                    ended_ms: now_ms(),
                    error: Some(DreamError { kind: e.code.as_type().into(), message: e.message.clone() }),
                    lease_holder: String::new(),
                    lease_expires_ms: 0,
                    version: claimed.version + 1,
                    ..claimed.clone()
                };
                if self.db.update_dream(&failed, claimed.version).await? {
                    self.audit(&d.created_by, "dream.failed", &d.input_store_id, json!({"dream_id": d.id, "error": failed.error})).await;
                }
                Ok(())
            }
        }
    }

    /// Everything the completed Dream writes.
    async fn dream_output(&self, d: &Dream) -> Result<DreamOutput> {
        let input = self.store(&d.input_store_id).await.map_err(|_| Error::conflict("the input store was deleted"))?;
        let before = self.tree_at(&input, d.input_store_version).await?;
        let mut stats = DreamStats { documents_read: before.len() as i64, ..Default::default() };
        let mut usage = DreamUsage::default();
        let mut working = before.clone();
        if let (DreamMode::Model, Some(profile)) = (d.mode, &d.routing_profile_id) {
            let messages = self.user_messages(&d.session_ids).await?;
            stats.sessions_read = d.session_ids.len() as i64;
            stats.messages_read = messages.len() as i64;
            let task = mg::TaskRequest {
                routing_profile_id: profile.clone(),
                environment_id: d.environment_id.clone(),
                task: Some(mg::task_request::Task::Dream(mg::DreamTask {
                    instructions: d.instructions.clone(),
                    messages,
                    documents: before.iter().map(|(p, c)| mg::TaskDocument { path: p.clone(), content: c.clone() }).collect(),
                })),
            };
            let answer = self.models.clone().run_task(task).await.map_err(Error::from)?.into_inner();
            let u = answer.usage.unwrap_or_default();
            usage = DreamUsage { input_tokens: u.input_tokens, output_tokens: u.output_tokens, cost_micro_usd: answer.cost_micro_usd };
            let Some(mg::task_response::Answer::Dream(changes)) = answer.answer else {
                return Err(Error::unavailable("the model gateway answered another task"));
            };
            for c in changes.changes {
                check_path("path", &c.path).map_err(|e| Error::invalid(format!("the model proposed an unusable change: {}", e.message)))?;
                match c.content {
                    Some(text) => {
                        check_content("content", &text)
                            .map_err(|e| Error::invalid(format!("the model proposed an unusable change: {}", e.message)))?;
                        working.insert(c.path, text);
                    }
                    None => {
                        working.remove(&c.path);
                    }
                }
            }
        }
        let curated = curate(&working);
        stats.duplicate_documents_removed = curated.duplicate_documents_removed;
        stats.duplicate_lines_removed = curated.duplicate_lines_removed;
        let changes = diff(&before, &curated.tree);
        stats.documents_written = changes.iter().filter(|(_, c)| c.is_some()).count() as i64;
        stats.documents_removed = changes.len() as i64 - stats.documents_written;

        let now = now_ms();
        let actor = Actor { kind: ActorKind::Dream.as_str().into(), id: d.id.clone() };
        let store = Store {
            id: checkfu_core::id::MemoryStoreId::parse("output_store_id", &d.output_store_id)?,
            environment_id: input.environment_id.clone(),
            name: format!("{} ({})", input.name, d.id),
            description: input.description.clone(),
            metadata: input.metadata.clone(),
            owner: input.owner.clone(),
            review: input.review,
            head_version: 0,
            status: StoreStatus::Active,
            created_from: Some(CreatedFrom {
                memory_store_id: input.id.to_string(),
                store_version: d.input_store_version,
                dream_id: d.id.clone(),
            }),
            created_by: d.created_by.clone(),
            created_ms: now,
            updated_ms: now,
            archived_ms: 0,
            version: 1,
        };
        let mut copied = Vec::with_capacity(before.len());
        for (path, text) in &before {
            copied.push(Staged { path: path.clone(), content: Some(self.contents.stage(text).await?), expected: Expect::Absent });
        }
        let mut staged = Vec::with_capacity(changes.len());
        for (path, text) in &changes {
            let content = match text {
                Some(t) => Some(self.contents.stage(t).await?),
                None => None,
            };
            let expected = match before.get(path) {
                Some(old) => Expect::Sha(checkfu_core::sha256_hex(old.as_bytes())),
                None => Expect::Absent,
            };
            staged.push(Staged { path: path.clone(), content, expected });
        }
        let commit = |changes: Vec<Staged>, via: Via| Commit {
            store_id: store.id.clone(),
            changes,
            actor: actor.clone(),
            via,
            approves: None,
            allow_archived: false,
            key: String::new(),
            now_ms: now,
        };
        let (changes, proposal) = match (staged.is_empty(), d.review) {
            (true, _) => (None, None),
            (false, false) => (Some(commit(staged, Via::Dream)), None),
            (false, true) => {
                let p = Proposal {
                    id: ProposalId::mint(),
                    store_id: store.id.clone(),
                    status: ProposalStatus::Open,
                    base_version: 1,
                    changes: staged,
                    reason: ProposalReason::DreamReview,
                    source: actor.clone(),
                    rationale: format!("the changes of Dream {}", d.id),
                    created_ms: now,
                    decided_by: String::new(),
                    decided_ms: 0,
                    decision_note: String::new(),
                    applied_version: 0,
                };
                (None, Some(p))
            }
        };
        // The output's rows are copied before it exists, so whoever could
        // use the input can use the output the moment it is shown. The
        // copy is idempotent: a taken-over Dream does not double them.
        if self.db.get_dream(&d.id).await?.is_none_or(|now| now.version != d.version) {
            return Err(Error::conflict("the Dream was canceled"));
        }
        self.governance
            .clone()
            .copy_permission_assignments(gov::CopyPermissionAssignmentsRequest {
                resource_kind: "memory_store".into(),
                from_resource_id: input.id.to_string(),
                to_resource_id: store.id.to_string(),
                environment_id: store.environment_id.to_string(),
                actor_id: d.created_by.clone(),
            })
            .await
            .map_err(Error::from)?;
        let done = Dream {
            status: DreamStatus::Completed,
            ended_ms: now_ms(),
            output_proposal_id: proposal.as_ref().map(|p| p.id.to_string()),
            stats,
            usage,
            lease_holder: String::new(),
            lease_expires_ms: 0,
            version: d.version + 1,
            ..d.clone()
        };
        Ok(DreamOutput {
            events: vec![Self::event(&store, "memory_store.created")],
            copy: commit(copied, Via::Copy),
            expected_version: d.version,
            dream: done,
            store,
            changes,
            proposal,
        })
    }

    /// The store's documents at version `n`, with their text.
    async fn tree_at(&self, s: &Store, n: i64) -> Result<Tree> {
        let at = (n != s.head_version).then_some(n);
        let mut tree = Tree::new();
        let mut after = String::new();
        loop {
            let page = self.db.documents(&s.id, "", at, &after, 1000).await?;
            for d in &page {
                tree.insert(d.path.clone(), self.contents.text(&d.sha256).await?);
            }
            match page.last() {
                Some(last) if page.len() == 1000 => after = last.path.clone(),
                _ => return Ok(tree),
            }
        }
    }

    /// The text of every `user.message` of the Sessions, in the listed
    /// order and by `seq`.
    async fn user_messages(&self, session_ids: &[String]) -> Result<Vec<String>> {
        let mut out = vec![];
        let mut chars = 0usize;
        for id in session_ids {
            let mut after_seq = 0;
            loop {
                let req = ss::ListEventsRequest {
                    session_id: id.clone(),
                    after_seq,
                    limit: 500,
                    types: vec!["user.message".into()],
                    view: String::new(),
                };
                let page = self.sessions.clone().list_events(req).await.map_err(Error::from)?.into_inner();
                for e in &page.data {
                    after_seq = e.seq;
                    let payload: Value = serde_json::from_str(&e.payload_json).unwrap_or_default();
                    let text = checkfu_core::events::text_of(&payload, "content");
                    chars += text.len();
                    if chars > MAX_MESSAGE_CHARS {
                        return Err(Error::invalid(format!(
                            "the Sessions hold over {MAX_MESSAGE_CHARS} bytes of user messages; dream over fewer"
                        )));
                    }
                    out.push(text);
                }
                if !page.has_more || page.data.is_empty() {
                    break;
                }
            }
        }
        Ok(out)
    }
}
