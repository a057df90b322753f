//! An Automation's Memory write (api.md §18.7): a graph's
//! `step_memory_write`, sent by the scheduler for the Automation's service
//! Principal. It is the API's compare-and-set (§13.2) — an expectation is
//! required, a mismatch never creates — recorded `via:"automation"`, and a
//! store reviewed by proposal takes it as a MemoryProposal instead.
//!
//! The scheduler sends it with the key `<firing>/<step>` and, after a
//! crash, sends it again: the key makes the second send answer what the
//! first did (the same version, read as it was then, or the same proposal)
//! rather than a `sha_mismatch` against its own write.

use crate::model::*;
use crate::service::{MemoryService, Need, archived, checked_write};
use crate::store::{Commit, Committed};
use checkfu_core::id::{FiringId, ProposalId};
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use serde_json::json;

/// What a graph step asks to write.
#[derive(Debug, Clone)]
pub struct AutomationWrite {
    pub store_id: String,
    pub path: String,
    pub content: String,
    pub expected: Option<Expect>,
    /// The Automation's service Principal: the version's actor.
    pub actor: String,
    pub firing_id: String,
    pub step_id: String,
}

/// What the write did.
#[derive(Debug, Clone)]
pub enum AutomationWritten {
    /// Committed (or already so): the document as of `store_version`.
    Written { store_version: i64, document: DocumentMeta, content: String },
    /// The store takes changes by proposal.
    Proposed(Proposal),
}

impl MemoryService {
    pub async fn automation_write(&self, w: AutomationWrite) -> Result<AutomationWritten> {
        let expected = checked_write(&w.path, &w.content, w.expected.clone())?;
        FiringId::check("firing_id", &w.firing_id)?;
        if w.step_id.is_empty() || w.step_id.len() > 64 {
            return Err(Error::invalid_field("step_id", "step_id is 1 to 64 bytes"));
        }
        let key = format!("{}/{}", w.firing_id, w.step_id);
        let s = self.store_for(&w.store_id, &w.actor, Need::Write).await?;
        let staged = Staged { path: w.path.clone(), content: Some(self.contents.stage(&w.content).await?), expected };
        if s.review == Review::Proposal {
            return self.propose_for_firing(&s, staged, &w, &key).await.map(AutomationWritten::Proposed);
        }
        let c = Commit {
            store_id: s.id.clone(),
            changes: vec![staged],
            actor: Actor::principal(&w.actor),
            via: Via::Automation,
            approves: None,
            allow_archived: false,
            key,
            now_ms: now_ms(),
        };
        let at = match self.db.commit(&c).await? {
            Committed::Version(v) => {
                let details = json!({"store_version": v.store_version, "changes": v.changes, "automation_firing_id": w.firing_id, "step_id": w.step_id});
                self.audit(&w.actor, "memory_document.written", &s.id, details).await;
                v.store_version
            }
            Committed::Replayed(v) => v.store_version,
            Committed::Unchanged(head) => head,
            Committed::Mismatch { path, current, head_version } => return Err(sha_mismatch(&path, current.as_deref(), head_version)),
            Committed::Archived | Committed::Decided => return Err(archived(&s)),
        };
        let document = self
            .db
            .document(&s.id, &w.path, Some(at))
            .await?
            .ok_or_else(|| Error::internal("a written document is missing at its version"))?;
        let content = self.contents.text(&document.sha256).await?;
        Ok(AutomationWritten::Written { store_version: at, document, content })
    }

    /// One proposal per `<firing>/<step>`, whatever the sends.
    async fn propose_for_firing(&self, s: &Store, staged: Staged, w: &AutomationWrite, key: &str) -> Result<Proposal> {
        if s.status == StoreStatus::Archived {
            return Err(archived(s));
        }
        let p = Proposal {
            id: ProposalId::mint(),
            store_id: s.id.clone(),
            status: ProposalStatus::Open,
            base_version: s.head_version,
            changes: vec![staged],
            reason: ProposalReason::Requested,
            source: Actor { kind: ActorKind::AutomationFiring.as_str().into(), id: w.firing_id.clone() },
            rationale: format!("written by step {} of automation firing {}", w.step_id, w.firing_id),
            created_ms: now_ms(),
            decided_by: String::new(),
            decided_ms: 0,
            decision_note: String::new(),
            applied_version: 0,
        };
        let kept = self.db.propose_once(&p, key).await?;
        if kept.id == p.id {
            let details = json!({"memory_proposal_id": p.id, "paths": [w.path], "automation_firing_id": w.firing_id, "step_id": w.step_id});
            self.audit(&w.actor, "memory_proposal.created", &s.id, details).await;
        }
        Ok(kept)
    }
}
