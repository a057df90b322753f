//! SessionThreads (api.md §15.2). Every Session has a primary thread from
//! creation, the one a single-agent Session runs on: the Session's status,
//! stop reason and log are the primary's. Its id is derived from the
//! Session's (`sess_X` → `sthr_X`), so it needs no row of its own and every
//! Session — also one created before threads existed — has it. A
//! coordinator's children (spawned by `thread_tools.rs`) live on the
//! Session's row.

use crate::model::*;
use crate::service::SessionsService;
use checkfu_core::id::SessionThreadId;
use checkfu_core::time::rfc3339;
use checkfu_core::{Error, Result};
use serde_json::{Value, json};

impl SessionsService {
    /// The thread's API JSON, if it is this Session's (404 else, also for
    /// another Session's thread).
    pub async fn thread(&self, session_id: &str, thread_id: &str) -> Result<Value> {
        SessionThreadId::check("thread_id", thread_id)?;
        let s = self.log.session(session_id).await?;
        if primary_of(&s.id) == thread_id {
            return self.primary_view(&s).await;
        }
        let t = s.threads.iter().find(|t| t.id == thread_id).ok_or_else(|| Error::not_found("session_thread", thread_id))?;
        Ok(child_view(&s, t))
    }

    /// The Session's threads, the primary first; `status` filters.
    pub async fn threads(&self, session_id: &str, status: &str) -> Result<Vec<Value>> {
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
    pub async fn archive_thread(&self, session_id: &str, thread_id: &str, actor: &str) -> Result<Value> {
        let s = self.log.session(session_id).await?;
        if primary_of(&s.id) == thread_id {
            return Err(Error::conflict("the primary thread is archived with its Session (POST /v1/sessions/{id}/archive)")
                .with_reason("primary_thread"));
        }
        self.thread(session_id, thread_id).await?;
        let cause = json!({"kind": "principal", "id": actor});
        self.transact(&s.id, |d| d.archive_child(thread_id, cause.clone())).await?;
        self.thread(session_id, thread_id).await
    }

    async fn primary_view(&self, s: &Session) -> Result<Value> {
        let name = self.catalog.agent(s.agent_id.as_str()).await.map(|a| a.name).unwrap_or_default();
        Ok(json!({
            "id": primary_of(&s.id),
            "type": "session_thread",
            "session_id": s.id,
            "parent_thread_id": null,
            "agent": {"agent_id": s.agent_id, "version": s.pins.agent_version, "release_sha256": s.selection.release_sha256, "name": name},
            "status": s.status.as_str(),
            "stop_reason": s.stop_reason,
            "created_at": rfc3339(s.created_ms),
            "updated_at": rfc3339(s.updated_ms),
            "archived_at": null,
            "usage": s.usage,
            "stats": null,
        }))
    }
}

/// A child thread's API JSON.
fn child_view(s: &Session, t: &SessionThread) -> Value {
    json!({
        "id": t.id,
        "type": "session_thread",
        "session_id": s.id,
        "parent_thread_id": primary_of(&s.id),
        "agent": {
            "agent_id": t.agent.agent_id,
            "version": t.agent.version,
            "release_sha256": t.agent.release_sha256.as_deref().unwrap_or(&s.selection.release_sha256),
            "name": t.agent.name,
        },
        "status": t.status.as_str(),
        "stop_reason": t.stop_reason,
        "created_at": rfc3339(t.created_ms),
        "updated_at": rfc3339(t.updated_ms),
        "archived_at": t.archived_ms.map(rfc3339),
        "usage": t.usage,
        "stats": null,
    })
}
