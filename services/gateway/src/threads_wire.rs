//! A Session's threads and Outcomes (api.md §14–15). A thread crosses the
//! mesh typed and is rendered here; an Outcome's JSON is still the sessions
//! service's, passed on, and its shape below is for the OpenAPI document
//! (schemathesis checks every answer against it).

use crate::views::Usage;
use checkfu_core::Error;
use checkfu_proto::sessions::v1 as ss;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// The agent a thread runs: its version, pinned when the thread began.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ThreadAgent {
    pub agent_id: String,
    pub version: i64,
    pub release_sha256: String,
    pub name: String,
}

/// One thread of a Session: the primary (its id derived from the
/// Session's), or a child a coordinator spawned.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SessionThread {
    pub id: String,
    /// `session_thread`.
    #[schema(rename = "type")]
    #[serde(rename = "type")]
    pub kind: String,
    pub session_id: String,
    /// The primary's id for a child; null for the primary.
    pub parent_thread_id: Option<String>,
    pub agent: ThreadAgent,
    /// `idle`, `running`, `rescheduling` or `terminated`.
    pub status: String,
    #[schema(value_type = Option<Object>)]
    pub stop_reason: Option<Value>,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
    #[schema(value_type = Object)]
    pub usage: Usage,
    #[schema(value_type = Option<Object>)]
    pub stats: Option<Value>,
}

/// A thread from its typed form, or from a 0.1.0 sessions service's JSON.
pub fn thread(typed: Option<&ss::SessionThread>, json_text: &str) -> Result<SessionThread, Error> {
    let Some(t) = typed else {
        return serde_json::from_str(json_text).map_err(|e| Error::internal(format!("a 0.1.0 thread answer is unreadable: {e}")));
    };
    let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let agent = t.agent.clone().unwrap_or_default();
    let usage = t.usage.unwrap_or_default();
    Ok(SessionThread {
        id: t.id.clone(),
        kind: "session_thread".into(),
        session_id: t.session_id.clone(),
        parent_thread_id: opt(&t.parent_thread_id),
        agent: ThreadAgent { agent_id: agent.agent_id, version: agent.version, release_sha256: agent.release_sha256, name: agent.name },
        status: t.status.clone(),
        stop_reason: Some(checkfu_proto::views::stop_reason(t.stop_reason.as_ref(), "")).filter(|v| !v.is_null()),
        created_at: t.created_at.clone(),
        updated_at: t.updated_at.clone(),
        archived_at: opt(&t.archived_at),
        usage: Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            model_spend_micro_usd: usage.model_spend_micro_usd,
        },
        stats: None,
    })
}

/// An Outcome: what done means for a Session, graded each iteration.
#[derive(ToSchema)]
#[allow(dead_code, reason = "the OpenAPI shape of the JSON the sessions service renders")]
pub struct Outcome {
    pub id: String,
    /// `outcome`.
    #[schema(rename = "type")]
    pub kind: String,
    pub session_id: String,
    pub define_event_id: String,
    pub description: String,
    pub rubric: String,
    pub max_iterations: i64,
    /// `{name, question, failure}` each.
    #[schema(value_type = Vec<Object>)]
    pub criteria: Vec<Value>,
    #[schema(value_type = Option<Object>)]
    pub report_declaration: Option<Value>,
    /// `pending`, `running`, `satisfied`, `max_iterations_reached`, `failed` or `interrupted`.
    pub status: String,
    pub reason: Option<String>,
    pub iterations_used: i64,
    #[schema(value_type = Vec<Object>)]
    pub evaluations: Vec<Value>,
    #[schema(value_type = Option<Object>)]
    pub report: Option<Value>,
    #[schema(value_type = Object)]
    pub usage: Value,
    pub created_at: String,
    pub completed_at: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_proto::sessions::v1::{StopReason, StopReasonType};
    use serde_json::json;

    #[test]
    fn a_thread_renders_the_same_typed_or_from_a_0_1_0_services_json() {
        let text = json!({"id": "sthr_2", "type": "session_thread", "session_id": "sess_1", "parent_thread_id": "sthr_1",
            "agent": {"agent_id": "agt_1", "version": 3, "release_sha256": "ab", "name": "helper"}, "status": "idle",
            "stop_reason": {"type": "end_turn"}, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:01Z",
            "archived_at": null, "usage": {"input_tokens": 5, "output_tokens": 7, "model_spend_micro_usd": 9}, "stats": null});
        let typed = ss::SessionThread {
            id: "sthr_2".into(),
            session_id: "sess_1".into(),
            parent_thread_id: "sthr_1".into(),
            agent: Some(ss::ThreadAgent { agent_id: "agt_1".into(), version: 3, release_sha256: "ab".into(), name: "helper".into() }),
            status: "idle".into(),
            stop_reason: Some(StopReason { r#type: StopReasonType::EndTurn as i32, ..Default::default() }),
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:01Z".into(),
            archived_at: String::new(),
            usage: Some(ss::Usage { input_tokens: 5, output_tokens: 7, model_spend_micro_usd: 9 }),
        };
        let from_typed = json!(thread(Some(&typed), "").expect("typed"));
        assert_eq!(from_typed, text);
        assert_eq!(json!(thread(None, &text.to_string()).expect("0.1.0 text")), text);
        let primary = ss::SessionThread { parent_thread_id: String::new(), stop_reason: None, ..typed };
        let v = json!(thread(Some(&primary), "").expect("typed"));
        assert_eq!((v["parent_thread_id"].clone(), v["stop_reason"].clone()), (json!(null), json!(null)), "absent is null");
        assert!(thread(None, "not json").is_err(), "an unreadable answer is an error, not an empty thread");
    }
}
