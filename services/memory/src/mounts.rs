//! A Session's mounts (api.md §13.4), asked for by sessions: pinning a
//! store at creation, the files a mount shows, and the writeback of what a
//! read-write mount changed. Permissions are checked again at every
//! materialisation and writeback, for the Session's Principal.

use crate::model::*;
use crate::service::{MemoryService, Need, archived};
use crate::store::{Commit, Committed};
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use serde_json::json;

/// What a writeback did.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    Committed(Version),
    Proposed {
        proposal: Proposal,
        reason: ProposalReason,
    },
    Unchanged(i64),
    /// Nothing kept: `permission.denied` or `store_archived`.
    Refused(&'static str),
}

/// One file a mount shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mounted {
    pub path: String,
    pub sha256: String,
    pub size_bytes: i64,
}

impl MemoryService {
    /// Checks `principal` may mount the store as asked and pins its head.
    pub async fn mount(&self, store_id: &str, access: &str, principal: &str, environment_id: &str, session_id: &str) -> Result<i64> {
        let access = Access::parse("access", access)?;
        let s = self.store_for(store_id, principal, Need::Read).await?;
        if s.environment_id != environment_id {
            return Err(Error::invalid_field("resources", format!("memory store {store_id} is in another Environment"))
                .with_reason("environment_mismatch"));
        }
        if access == Access::ReadWrite {
            self.require(principal, Need::Write, &s).await?;
        }
        if s.status == StoreStatus::Archived {
            return Err(archived(&s));
        }
        self.db.record_mount(store_id, session_id).await?;
        self.audit(
            principal,
            "memory_store.mounted",
            store_id,
            json!({"session_id": session_id, "access": access.as_str(), "store_version": s.head_version}),
        )
        .await;
        Ok(s.head_version)
    }

    /// The files of a mount at `at` (every path, by path; none when
    /// `check_only`, for a mount that already holds them); `Err` with the
    /// refusal when the Principal may no longer read the store or it is
    /// gone.
    pub async fn materialize(
        &self,
        store_id: &str,
        at: i64,
        principal: &str,
        session_id: &str,
        run_id: &str,
        check_only: bool,
    ) -> Result<std::result::Result<Vec<Mounted>, &'static str>> {
        self.available()?;
        let Some(s) = self.db.get_store(store_id).await? else { return Ok(Err("store_deleted")) };
        if !self.allowed(principal, "read", "memory_store", &s.id, &s.environment_id).await? {
            return Ok(Err("permission.denied"));
        }
        let at = (at != s.head_version).then_some(at.min(s.head_version));
        let out = if check_only { vec![] } else { self.every_document(store_id, at).await? };
        self.audit(
            principal,
            "memory_store.materialized",
            store_id,
            json!({"session_id": session_id, "run_id": run_id, "files": out.len()}),
        )
        .await;
        Ok(Ok(out))
    }

    /// Every document of the store as of `at` (the head when `None`), by path.
    async fn every_document(&self, store_id: &str, at: Option<i64>) -> Result<Vec<Mounted>> {
        const PAGE: i64 = 1000;
        let mut out = vec![];
        loop {
            let after = out.last().map(|m: &Mounted| m.path.clone()).unwrap_or_default();
            let page = self.db.documents(store_id, "", at, &after, PAGE).await?;
            let full = page.len() as i64 == PAGE;
            out.extend(page.into_iter().map(|d| Mounted { path: d.path, sha256: d.sha256, size_bytes: d.size_bytes }));
            if !full {
                return Ok(out);
            }
        }
    }

    /// Commits what a read-write mount changed as one version expecting
    /// what the mount last took from the store. A proposal store gets a
    /// `shared_owner` proposal; a direct store whose expectations do not
    /// all hold gets a `writeback_conflict` proposal — never dropped.
    pub async fn writeback(&self, store_id: &str, principal: &str, session_id: &str, run_id: &str, edits: Vec<Edit>) -> Result<Written> {
        self.available()?;
        let Some(s) = self.db.get_store(store_id).await? else { return Ok(Written::Refused("store_deleted")) };
        if !self.allowed(principal, "write", "memory_store", &s.id, &s.environment_id).await? {
            return Ok(Written::Refused("permission.denied"));
        }
        if s.status == StoreStatus::Archived {
            return Ok(Written::Refused("store_archived"));
        }
        if edits.is_empty() {
            return Ok(Written::Unchanged(s.head_version));
        }
        if edits.len() > MAX_CHANGES {
            return Err(Error::invalid_field("changes", format!("a writeback carries at most {MAX_CHANGES} changes")));
        }
        for e in &edits {
            check_path("changes.path", &e.path)?;
            if let Some(c) = &e.content {
                check_content("changes.content", c)?;
            }
        }
        let staged = self.stage_edits(edits).await?;
        let reason = if s.review == Review::Proposal {
            ProposalReason::SharedOwner
        } else {
            let c = Commit {
                store_id: s.id.clone(),
                changes: staged.clone(),
                actor: Actor::session(session_id),
                via: Via::Writeback,
                approves: None,
                allow_archived: false,
                key: String::new(),
                now_ms: now_ms(),
            };
            match self.db.commit(&c).await? {
                Committed::Version(v) | Committed::Replayed(v) => {
                    let details = json!({"store_version": v.store_version, "session_id": session_id, "run_id": run_id});
                    self.audit(principal, "memory_document.written", store_id, details).await;
                    return Ok(Written::Committed(v));
                }
                Committed::Unchanged(head) => return Ok(Written::Unchanged(head)),
                Committed::Archived | Committed::Decided => return Ok(Written::Refused("store_archived")),
                Committed::Mismatch { .. } => ProposalReason::WritebackConflict,
            }
        };
        // Never dropped: a conflict is proposed against the head that moved.
        let base = match reason {
            ProposalReason::WritebackConflict => self.db.get_store(store_id).await?.unwrap_or(s),
            _ => s,
        };
        let rationale = format!("written by session {session_id} in run {run_id}");
        let p = self.propose(&base, staged, reason, Actor::session(session_id), &rationale).await?;
        let details = json!({"memory_proposal_id": p.id, "session_id": session_id, "reason": reason.as_str()});
        self.audit(principal, "memory_proposal.created", store_id, details).await;
        Ok(Written::Proposed { proposal: p, reason })
    }

    /// The text of a digest the store holds.
    pub async fn content(&self, sha256: &str) -> Result<String> {
        check_sha("sha256", sha256)?;
        self.contents.text(sha256).await
    }
}
