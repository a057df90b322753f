//! A Session's child threads (api.md §15). The primary thread is the
//! Session itself (its status, stop reason and Runs); each child keeps its
//! own status, stop reason, usage and Runs here, on the Session's row, so a
//! change to any thread commits with the Session's events in one
//! compare-and-set.

use super::{SessionStatus, Usage};
use serde::{Deserialize, Serialize};

/// The primary thread's id of a Session.
pub fn primary_of(session_id: &checkfu_core::id::SessionId) -> String {
    format!(
        "{}_{}",
        <checkfu_core::id::SessionThreadId as checkfu_core::id::TypedId>::PREFIX,
        &session_id.as_str()[session_id.find('_').map_or(0, |i| i + 1)..]
    )
}

/// At most this many non-archived threads per Session, the primary
/// included.
pub const MAX_THREADS: usize = 25;
/// At most this many messages a busy thread holds undelivered.
pub const MAX_QUEUED_MESSAGES: i64 = 100;

/// The AgentVersion a thread runs, frozen when it was spawned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadAgent {
    pub agent_id: String,
    pub version: i64,
    /// `None` for a `self` member: this version, whose digest is the
    /// Session's.
    pub release_sha256: Option<String>,
    pub name: String,
}

/// A child thread: persistent, with its own context and Runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionThread {
    pub id: String,
    pub agent: ThreadAgent,
    pub status: SessionStatus,
    pub stop_reason: Option<super::StopReason>,
    pub usage: Usage,
    /// Seq of the newest message delivered to it (its "user" turns).
    pub last_user_message_seq: i64,
    /// Messages recorded while it ran that its Run has not read yet
    /// (counted from the Run's start; reset when it idles).
    #[serde(default)]
    pub queued: i64,
    pub spawned_by_tool_use_id: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub archived_ms: Option<i64>,
}

impl SessionThread {
    pub fn archived(&self) -> bool {
        self.archived_ms.is_some()
    }

    /// Idle and waiting on nothing: it may be archived.
    pub fn settled(&self) -> bool {
        self.status == SessionStatus::Idle && !waits(&self.stop_reason)
    }
}

/// Whether a stop reason is a `requires_action` wait.
pub fn waits(stop_reason: &Option<super::StopReason>) -> bool {
    stop_reason.as_ref().is_some_and(|r| r.wait().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_core::id::{SessionId, SessionThreadId};

    #[test]
    fn the_primary_thread_id_follows_the_session_id() {
        let sid = SessionId::parse("id", "sess_01jx0000000000000000000000").unwrap();
        assert_eq!(primary_of(&sid), "sthr_01jx0000000000000000000000");
        assert!(SessionThreadId::check("t", &primary_of(&SessionId::mint())).is_ok());
    }
}
