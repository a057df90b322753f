//! MemoryProposals (api.md §13.3): changes that wait for a human with
//! `approve`. Approving applies them all as one version, each checked
//! against the head as a direct write is; a mismatch leaves it `open`.

use crate::model::*;
use crate::service::{MemoryService, Need, archived};
use crate::store::{Commit, Committed, Decision};
use checkfu_core::id::ProposalId;
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use checkfu_proto::governance::v1 as gov;
use serde_json::json;

/// Checks `[1..1000]` proposed changes, one per path, each with an
/// expectation.
pub fn check_changes(changes: Vec<ProposedEdit>) -> Result<Vec<Edit>> {
    if changes.is_empty() || changes.len() > MAX_CHANGES {
        return Err(Error::invalid_field("changes", format!("changes holds 1 to {MAX_CHANGES} entries")));
    }
    let mut out: Vec<Edit> = Vec::with_capacity(changes.len());
    for (i, w) in changes.into_iter().enumerate() {
        let field = format!("changes[{i}]");
        check_path(&format!("{field}.path"), &w.path)?;
        if let Some(c) = &w.content {
            check_content(&format!("{field}.content"), c)?;
        }
        let expected = match w.expected {
            None => {
                return Err(Error::invalid_field(
                    &format!("{field}.expected_sha256"),
                    "expected_sha256 is required (null when the path must not exist)",
                ));
            }
            Some(Expect::Sha(sha)) => {
                check_sha(&format!("{field}.expected_sha256"), &sha)?;
                Expect::Sha(sha)
            }
            Some(Expect::Absent) => Expect::Absent,
        };
        if out.iter().any(|e| e.path == w.path) {
            return Err(Error::invalid_field(&format!("{field}.path"), format!("{} appears twice", w.path)));
        }
        out.push(Edit { path: w.path, content: w.content, expected });
    }
    Ok(out)
}

impl MemoryService {
    /// Stages edits' content (uploading large content first).
    pub(crate) async fn stage_edits(&self, edits: Vec<Edit>) -> Result<Vec<Staged>> {
        let mut out = Vec::with_capacity(edits.len());
        for e in edits {
            let content = match &e.content {
                Some(text) => Some(self.contents.stage(text).await?),
                None => None,
            };
            out.push(Staged { path: e.path, content, expected: e.expected });
        }
        Ok(out)
    }

    /// Records an open proposal (no permission check: callers decided).
    pub(crate) async fn propose(
        &self,
        s: &Store,
        changes: Vec<Staged>,
        reason: ProposalReason,
        source: Actor,
        rationale: &str,
    ) -> Result<Proposal> {
        let p = Proposal {
            id: ProposalId::mint(),
            store_id: s.id.clone(),
            status: ProposalStatus::Open,
            base_version: s.head_version,
            changes,
            reason,
            source,
            rationale: rationale.into(),
            created_ms: now_ms(),
            decided_by: String::new(),
            decided_ms: 0,
            decision_note: String::new(),
            applied_version: 0,
        };
        self.db.insert_proposal(&p).await?;
        Ok(p)
    }

    pub async fn create_proposal(&self, store_id: &str, changes: Vec<ProposedEdit>, rationale: &str, actor: &str) -> Result<Proposal> {
        let edits = check_changes(changes)?;
        if rationale.len() > MAX_NOTE_BYTES {
            return Err(Error::invalid_field("rationale", format!("rationale holds at most {MAX_NOTE_BYTES} bytes")));
        }
        let s = self.store_for(store_id, actor, Need::Write).await?;
        if s.status == StoreStatus::Archived {
            return Err(archived(&s));
        }
        let staged = self.stage_edits(edits).await?;
        let p = self.propose(&s, staged, ProposalReason::Requested, Actor::principal(actor), rationale).await?;
        self.audit(
            actor,
            "memory_proposal.created",
            store_id,
            json!({"memory_proposal_id": p.id, "paths": p.changes.iter().map(|c| &c.path).collect::<Vec<_>>()}),
        )
        .await;
        Ok(p)
    }

    /// The proposal, if the actor may read its store.
    pub async fn get_proposal(&self, id: &str, actor: &str) -> Result<Proposal> {
        self.available()?;
        ProposalId::check("id", id)?;
        let p = self.db.get_proposal(id).await?.ok_or_else(|| Error::not_found("memory_proposal", id))?;
        self.store_for(&p.store_id, actor, Need::Read).await?;
        self.audit(actor, "memory_proposal.read", &p.store_id, json!({"memory_proposal_id": id})).await;
        Ok(p)
    }

    pub async fn list_proposals(
        &self,
        store_id: &str,
        status: &str,
        limit: u32,
        page: &str,
        actor: &str,
    ) -> Result<(Vec<Proposal>, String)> {
        if store_id.is_empty() {
            return Err(Error::invalid_field("memory_store_id", "memory_store_id is required"));
        }
        if !status.is_empty() {
            ProposalStatus::parse("status", status)?;
        }
        self.store_for(store_id, actor, Need::Read).await?;
        let page = PageRequest::standard(limit, page)?;
        let rows = self.db.list_proposals(store_id, status, &page).await?;
        self.audit(actor, "memory_proposal.listed", store_id, json!({"status": status})).await;
        Ok(page.finish(rows, |p| p.id.as_str()))
    }

    /// Approves (applying every change as one version) or rejects. Needs
    /// `approve` and a human; a second decision is 409, and an archived
    /// store takes only a rejection.
    pub async fn decide(&self, id: &str, approve: bool, note: &str, actor: &str) -> Result<Proposal> {
        self.available()?;
        ProposalId::check("id", id)?;
        if note.len() > MAX_NOTE_BYTES {
            return Err(Error::invalid_field("note", format!("note holds at most {MAX_NOTE_BYTES} bytes")));
        }
        let p = self.db.get_proposal(id).await?.ok_or_else(|| Error::not_found("memory_proposal", id))?;
        let s = self.store_for(&p.store_id, actor, Need::Approve).await?;
        let who = self.governance.clone().get_principal(gov::GetByIdRequest { id: actor.into() }).await.map_err(Error::from)?.into_inner();
        if who.kind != "human" {
            return Err(Error::denied("only a human Principal decides a memory proposal")
                .with_details(json!({"principal_kind": who.kind}))
                .with_reason("human_required"));
        }
        if p.status != ProposalStatus::Open {
            return Err(decided(&p));
        }
        let d = Decision { proposal_id: p.id.clone(), decided_by: actor.into(), note: note.into() };
        if !approve {
            if !self.db.reject_proposal(&d, now_ms()).await? {
                return Err(decided(&p));
            }
            self.audit(actor, "memory_proposal.rejected", &s.id, json!({"memory_proposal_id": id})).await;
            return self.db.get_proposal(id).await?.ok_or_else(|| Error::not_found("memory_proposal", id));
        }
        if s.status == StoreStatus::Archived {
            return Err(archived(&s));
        }
        let c = Commit {
            store_id: s.id.clone(),
            changes: p.changes.clone(),
            actor: Actor::principal(actor),
            via: Via::Proposal,
            approves: Some(d),
            allow_archived: false,
            key: String::new(),
            now_ms: now_ms(),
        };
        match self.db.commit(&c).await? {
            Committed::Version(_) | Committed::Replayed(_) | Committed::Unchanged(_) => {}
            Committed::Mismatch { path, current, head_version } => return Err(sha_mismatch(&path, current.as_deref(), head_version)),
            Committed::Archived => return Err(archived(&s)),
            Committed::Decided => return Err(decided(&p)),
        }
        let p = self.db.get_proposal(id).await?.ok_or_else(|| Error::not_found("memory_proposal", id))?;
        self.audit(actor, "memory_proposal.approved", &s.id, json!({"memory_proposal_id": id, "applied_version": p.applied_version})).await;
        Ok(p)
    }
}

fn decided(p: &Proposal) -> Error {
    Error::conflict(format!("memory proposal {} is already {}", p.id, p.status.as_str())).with_reason("proposal_decided")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(path: &str, content: Option<&str>, expected: Option<Expect>) -> ProposedEdit {
        ProposedEdit { path: path.into(), content: content.map(str::to_string), expected }
    }

    #[test]
    fn changes_need_an_expectation_and_distinct_paths() {
        let sha = "a".repeat(64);
        let ok =
            check_changes(vec![edit("/a", Some("x"), Some(Expect::Absent)), edit("/b", None, Some(Expect::Sha(sha.clone())))]).expect("ok");
        assert_eq!(ok[0].expected, Expect::Absent);
        assert_eq!(ok[1].content, None);
        for (bad, field) in [
            (vec![], "changes"),
            (vec![edit("/a", Some("x"), None)], "changes[0].expected_sha256"),
            (vec![edit("a", Some("x"), Some(Expect::Absent))], "changes[0].path"),
            (vec![edit("/a", Some("x"), Some(Expect::Absent)), edit("/a", Some("y"), Some(Expect::Absent))], "changes[1].path"),
            (vec![edit("/a", Some("x"), Some(Expect::Sha("nope".into())))], "changes[0].expected_sha256"),
            ((0..=MAX_CHANGES).map(|i| edit(&format!("/{i}"), Some("x"), Some(Expect::Absent))).collect(), "changes"),
        ] {
            let e = check_changes(bad).expect_err(field);
            assert_eq!(e.details["field"], field);
        }
    }
}
