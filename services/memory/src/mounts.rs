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

    /// The files of a mount at `at` (every path, by path); `Err` with the
    /// refusal when the Principal may no longer read the store or it is
    /// gone.
    pub async fn materialize(
        &self,
        store_id: &str,
        at: i64,
        principal: &str,
        session_id: &str,
        run_id: &str,
    ) -> Result<std::result::Result<Vec<Mounted>, &'static str>> {
        self.available()?;
        let Some(s) = self.db.get_store(store_id).await? else { return Ok(Err("store_deleted")) };
        if !self.allowed(principal, "read", "memory_store", &s.id, &s.environment_id).await? {
            return Ok(Err("permission.denied"));
        }
        let at = (at != s.head_version).then_some(at.min(s.head_version));
        let mut out = vec![];
        let mut after = String::new();
        loop {
            let page = self.db.documents(store_id, "", at, &after, 1000).await?;
            let full = page.len() == 1000;
            let last = page.last().map(|d| d.path.clone());
            out.extend(page.into_iter().map(|d| Mounted { path: d.path, sha256: d.sha256, size_bytes: d.size_bytes }));
            match last {
                Some(p) if full => after = p,
                _ => break,
            }
        }
        self.audit(
            principal,
            "memory_store.materialized",
            store_id,
            json!({"session_id": session_id, "run_id": run_id, "files": out.len()}),
        )
        .await;
        Ok(Ok(out))
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
        let source = Actor::session(session_id);
        let rationale = format!("written by session {session_id} in run {run_id}");
        if s.review == Review::Proposal {
            let p = self.propose(&s, staged, ProposalReason::SharedOwner, source, &rationale).await?;
            self.audit(
                principal,
                "memory_proposal.created",
                store_id,
                json!({"memory_proposal_id": p.id, "session_id": session_id, "reason": "shared_owner"}),
            )
            .await;
            return Ok(Written::Proposed { proposal: p, reason: ProposalReason::SharedOwner });
        }
        let c = Commit {
            store_id: s.id.clone(),
            changes: staged.clone(),
            actor: source.clone(),
            via: Via::Writeback,
            approves: None,
            allow_archived: false,
            now_ms: now_ms(),
        };
        match self.db.commit(&c).await? {
            Committed::Version(v) => {
                self.audit(
                    principal,
                    "memory_document.written",
                    store_id,
                    json!({"store_version": v.store_version, "session_id": session_id, "run_id": run_id}),
                )
                .await;
                Ok(Written::Committed(v))
            }
            Committed::Unchanged(head) => Ok(Written::Unchanged(head)),
            Committed::Mismatch { .. } => {
                let now = self.db.get_store(store_id).await?.unwrap_or(s);
                let p = self.propose(&now, staged, ProposalReason::WritebackConflict, source, &rationale).await?;
                self.audit(
                    principal,
                    "memory_proposal.created",
                    store_id,
                    json!({"memory_proposal_id": p.id, "session_id": session_id, "reason": "writeback_conflict"}),
                )
                .await;
                Ok(Written::Proposed { proposal: p, reason: ProposalReason::WritebackConflict })
            }
            Committed::Archived | Committed::Decided => Ok(Written::Refused("store_archived")),
        }
    }

    /// The text of a digest the store holds.
    pub async fn content(&self, sha256: &str) -> Result<String> {
        check_sha("sha256", sha256)?;
        self.contents.text(sha256).await
    }
}
