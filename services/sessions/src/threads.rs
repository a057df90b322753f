//! SessionThreads (api.md §15.2). Every Session has a primary thread from
//! creation, the one a single-agent Session runs on: the Session's status,
//! stop reason and log are the primary's. Its id is derived from the
//! Session's (`sess_X` → `sthr_X`), so it needs no row of its own and every
//! Session — also one created before threads existed — has it. A
//! coordinator's children (spawned by `thread_tools.rs`) live on the
//! Session's row.

use crate::catalog::Catalog;
use crate::log::Log;
use crate::model::*;
use crate::store::SessionsStore;
use checkfu_core::id::SessionThreadId;
use checkfu_core::time::rfc3339;
use checkfu_core::{Error, Result};
use serde_json::{Value, json};
use std::sync::Arc;

/// A thread as the API shows it: the primary's drawn from its Session,
/// a child's from its row.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadView {
    pub id: String,
    pub session_id: String,
    /// The primary's id for a child; `None` for the primary.
    pub parent_thread_id: Option<String>,
    pub agent_id: String,
    pub agent_version: i64,
    pub release_sha256: String,
    pub agent_name: String,
    pub status: SessionStatus,
    pub stop_reason: Option<StopReason>,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub archived_ms: Option<i64>,
    pub usage: Usage,
}

impl ThreadView {
    /// Its API JSON, as a 0.1.0 gateway reads it.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "type": "session_thread",
            "session_id": self.session_id,
            "parent_thread_id": self.parent_thread_id,
            "agent": {"agent_id": self.agent_id, "version": self.agent_version, "release_sha256": self.release_sha256,
                "name": self.agent_name},
            "status": self.status.as_str(),
            "stop_reason": self.stop_reason,
            "created_at": rfc3339(self.created_ms),
            "updated_at": rfc3339(self.updated_ms),
            "archived_at": self.archived_ms.map(rfc3339),
            "usage": self.usage,
            "stats": null,
        })
    }
}

/// SessionThreads and multiagent's platform tools (`thread_tools.rs`):
/// above the log and the catalog, asking governance before a thread is
/// spawned or messaged.
#[derive(Clone)]
pub struct Threads {
    pub(crate) store: Arc<dyn SessionsStore>,
    pub(crate) log: Log,
    pub(crate) catalog: Catalog,
    pub(crate) governance: Option<crate::upstream::Governance>,
}

impl Threads {
    /// The thread, if it is this Session's (404 else, also for another
    /// Session's thread).
    pub async fn thread(&self, session_id: &str, thread_id: &str) -> Result<ThreadView> {
        SessionThreadId::check("thread_id", thread_id)?;
        let s = self.log.session(session_id).await?;
        if primary_of(&s.id) == thread_id {
            return self.primary_view(&s).await;
        }
        let t = s.threads.iter().find(|t| t.id == thread_id).ok_or_else(|| Error::not_found("session_thread", thread_id))?;
        Ok(child_view(&s, t))
    }

    /// The Session's threads, the primary first; `status` filters.
    pub async fn threads(&self, session_id: &str, status: &str) -> Result<Vec<ThreadView>> {
        if !status.is_empty() && !["running", "idle", "rescheduling", "terminated"].contains(&status) {
            return Err(Error::invalid_field("status", "status must be running, idle, rescheduling or terminated"));
        }
        let s = self.log.session(session_id).await?;
        let mut out = vec![];
        if status.is_empty() || s.status.as_str() == status {
            out.push(self.primary_view(&s).await?);
        }
        out.extend(s.threads.iter().filter(|t| status.is_empty() || t.status.as_str() == status).map(|t| child_view(&s, t)));
        Ok(out)
    }

    /// Archives an idle, unparked child (again: the same answer). The
    /// primary is refused: archive the Session instead.
    pub async fn archive_thread(&self, session_id: &str, thread_id: &str, actor: &str) -> Result<ThreadView> {
        let s = self.log.session(session_id).await?;
        if primary_of(&s.id) == thread_id {
            return Err(Error::conflict("the primary thread is archived with its Session (POST /v1/sessions/{id}/archive)")
                .with_reason("primary_thread"));
        }
        self.thread(session_id, thread_id).await?;
        let cause = json!({"kind": "principal", "id": actor});
        self.log.transact(&s.id, |d| d.archive_child(thread_id, cause.clone())).await?;
        self.thread(session_id, thread_id).await
    }

    async fn primary_view(&self, s: &Session) -> Result<ThreadView> {
        let name = self.catalog.agent(s.agent_id.as_str()).await.map(|a| a.name).unwrap_or_default();
        Ok(ThreadView {
            id: primary_of(&s.id),
            session_id: s.id.to_string(),
            parent_thread_id: None,
            agent_id: s.agent_id.to_string(),
            agent_version: s.pins.agent_version,
            release_sha256: s.selection.release_sha256.clone(),
            agent_name: name,
            status: s.status,
            stop_reason: s.stop_reason.clone(),
            created_ms: s.created_ms,
            updated_ms: s.updated_ms,
            archived_ms: None,
            usage: s.usage,
        })
    }
}

/// A child thread as the API shows it.
fn child_view(s: &Session, t: &SessionThread) -> ThreadView {
    ThreadView {
        id: t.id.clone(),
        session_id: s.id.to_string(),
        parent_thread_id: Some(primary_of(&s.id)),
        agent_id: t.agent.agent_id.to_string(),
        agent_version: t.agent.version,
        release_sha256: t.agent.release_sha256.clone().unwrap_or_else(|| s.selection.release_sha256.clone()),
        agent_name: t.agent.name.clone(),
        status: t.status,
        stop_reason: t.stop_reason.clone(),
        created_ms: t.created_ms,
        updated_ms: t.updated_ms,
        archived_ms: t.archived_ms,
        usage: t.usage,
    }
}
