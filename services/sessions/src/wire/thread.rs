//! SessionThreads.

use super::session::usage;
use crate::threads::ThreadView;
use checkfu_core::time::{rfc3339, rfc3339_opt};
use checkfu_proto::sessions::v1 as pb;

/// A thread typed, and as the JSON a 0.1.0 gateway reads.
#[allow(deprecated)] // json: a 0.1.0 gateway's
pub(crate) fn thread_answer(t: ThreadView) -> pb::JsonAnswer {
    pb::JsonAnswer { json: t.to_json().to_string(), session_id: t.session_id.clone(), thread: Some(thread(t)), outcome: None }
}

pub(crate) fn thread(t: ThreadView) -> pb::SessionThread {
    pb::SessionThread {
        stop_reason: t.stop_reason.as_ref().map(super::run_state::stop_reason),
        usage: Some(usage(t.usage)),
        id: t.id,
        session_id: t.session_id,
        parent_thread_id: t.parent_thread_id.unwrap_or_default(),
        agent: Some(pb::ThreadAgent {
            agent_id: t.agent_id,
            version: t.agent_version,
            release_sha256: t.release_sha256,
            name: t.agent_name,
        }),
        status: t.status.as_str().into(),
        created_at: rfc3339(t.created_ms),
        updated_at: rfc3339(t.updated_ms),
        archived_at: rfc3339_opt(t.archived_ms),
    }
}
