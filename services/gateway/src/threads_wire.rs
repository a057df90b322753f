//! A Session's threads and Outcomes (api.md §14–15): they cross the mesh
//! typed and are rendered here (or read from a 0.1.0 sessions service's
//! JSON).

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
fn thread(typed: Option<&ss::SessionThread>, json_text: &str) -> Result<SessionThread, Error> {
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
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Outcome {
    pub id: String,
    /// `outcome`.
    #[schema(rename = "type")]
    #[serde(rename = "type")]
    pub kind: String,
    pub session_id: String,
    pub define_event_id: String,
    pub description: String,
    pub rubric: String,
    pub max_iterations: i64,
    /// `{name, question, failure}` each.
    #[schema(value_type = Vec<Object>)]
    pub criteria: Vec<Criterion>,
    #[schema(value_type = Option<Object>)]
    pub report_declaration: Option<ReportDeclaration>,
    /// `pending`, `running`, `satisfied`, `max_iterations_reached`, `failed` or `interrupted`.
    pub status: String,
    pub reason: Option<String>,
    pub iterations_used: i64,
    #[schema(value_type = Vec<Object>)]
    pub evaluations: Vec<Value>,
    #[schema(value_type = Option<Object>)]
    pub report: Option<Value>,
    #[schema(value_type = Object)]
    pub usage: OutcomeUsage,
    pub created_at: String,
    pub completed_at: Option<String>,
}

// The parts of an Outcome; the OpenAPI document shows them as objects.

#[derive(Debug, Serialize, Deserialize)]
pub struct Criterion {
    pub name: String,
    pub question: String,
    pub failure: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ReportDeclaration {
    pub extraction: String,
    pub outputs: Vec<DeclaredOutput>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DeclaredOutput {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// As its author wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance: Option<Value>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct OutcomeUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_micro_usd: i64,
}

/// An Outcome from its typed form, or from a 0.1.0 sessions service's JSON.
fn outcome(typed: Option<&ss::Outcome>, json_text: &str) -> Result<Outcome, Error> {
    let Some(o) = typed else {
        return serde_json::from_str(json_text).map_err(|e| Error::internal(format!("a 0.1.0 Outcome answer is unreadable: {e}")));
    };
    let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let json = |s: &str| (!s.is_empty()).then(|| crate::json_text::doc(s));
    let usage = o.usage.unwrap_or_default();
    Ok(Outcome {
        id: o.id.clone(),
        kind: "outcome".into(),
        session_id: o.session_id.clone(),
        define_event_id: o.define_event_id.clone(),
        description: o.description.clone(),
        rubric: o.rubric.clone(),
        max_iterations: o.max_iterations,
        criteria: o
            .criteria
            .iter()
            .map(|c| Criterion { name: c.name.clone(), question: c.question.clone(), failure: c.failure.clone() })
            .collect(),
        report_declaration: o.report_declaration.as_ref().map(|r| ReportDeclaration {
            extraction: r.extraction.clone(),
            outputs: r
                .outputs
                .iter()
                .map(|d| DeclaredOutput {
                    name: d.name.clone(),
                    kind: d.r#type.clone(),
                    description: d.description.clone(),
                    acceptance: json(&d.acceptance_json),
                })
                .collect(),
        }),
        status: o.status.clone(),
        reason: o.reason.clone(),
        iterations_used: o.iterations_used,
        evaluations: o.evaluations_json.iter().map(|e| crate::json_text::doc(e)).collect(),
        report: json(&o.report_json),
        usage: OutcomeUsage { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens, cost_micro_usd: usage.cost_micro_usd },
        created_at: o.created_at.clone(),
        completed_at: opt(&o.completed_at),
    })
}

/// The thread a sessions answer carries (typed, or a 0.1.0 service's JSON).
#[allow(deprecated)] // json: a 0.1.0 sessions service's
pub fn thread_of(r: &ss::JsonAnswer) -> Result<SessionThread, Error> {
    thread(r.thread.as_ref(), &r.json)
}

/// The threads a sessions list carries.
#[allow(deprecated)] // json: a 0.1.0 sessions service's
pub fn threads_of(r: &ss::JsonList) -> Result<Vec<SessionThread>, Error> {
    if r.threads.is_empty() {
        return r.json.iter().map(|j| thread(None, j)).collect();
    }
    r.threads.iter().map(|t| thread(Some(t), "")).collect()
}

/// The Outcome a sessions answer carries.
#[allow(deprecated)] // json: a 0.1.0 sessions service's
pub fn outcome_of(r: &ss::JsonAnswer) -> Result<Outcome, Error> {
    outcome(r.outcome.as_ref(), &r.json)
}

/// The Outcomes a sessions list carries.
#[allow(deprecated)] // json: a 0.1.0 sessions service's
pub fn outcomes_of(r: &ss::JsonList) -> Result<Vec<Outcome>, Error> {
    if r.outcomes.is_empty() {
        return r.json.iter().map(|j| outcome(None, j)).collect();
    }
    r.outcomes.iter().map(|o| outcome(Some(o), "")).collect()
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

    #[test]
    fn an_outcome_renders_the_same_typed_or_from_a_0_1_0_services_json() {
        let text = json!({"id": "out_1", "type": "outcome", "session_id": "sess_1", "define_event_id": "evt_1",
            "description": "say hello", "rubric": "require: hello", "max_iterations": 3,
            "criteria": [{"name": "greets", "question": "does it greet?", "failure": "no greeting"}],
            "report_declaration": {"extraction": "read it", "outputs": [
                {"name": "count", "type": "integer", "acceptance": {"min": 1, "values": [1, 2]}},
                {"name": "note", "type": "string", "description": "why"}]},
            "status": "satisfied", "reason": null, "iterations_used": 2,
            "evaluations": [{"iteration": 1, "result": "needs_revision"}, {"iteration": 2, "result": "satisfied", "explanation": "ok"}],
            "report": {"count": 2, "note": "fine"},
            "usage": {"input_tokens": 10, "output_tokens": 4, "cost_micro_usd": 3},
            "created_at": "2026-01-01T00:00:00Z", "completed_at": "2026-01-01T00:00:05Z"});
        let typed = ss::Outcome {
            id: "out_1".into(),
            session_id: "sess_1".into(),
            define_event_id: "evt_1".into(),
            description: "say hello".into(),
            rubric: "require: hello".into(),
            max_iterations: 3,
            criteria: vec![ss::OutcomeCriterion {
                name: "greets".into(),
                question: "does it greet?".into(),
                failure: "no greeting".into(),
            }],
            report_declaration: Some(ss::ReportDeclaration {
                extraction: "read it".into(),
                outputs: vec![
                    ss::DeclaredOutput {
                        name: "count".into(),
                        r#type: "integer".into(),
                        description: None,
                        acceptance_json: r#"{"min":1,"values":[1,2]}"#.into(),
                    },
                    ss::DeclaredOutput {
                        name: "note".into(),
                        r#type: "string".into(),
                        description: Some("why".into()),
                        acceptance_json: String::new(),
                    },
                ],
            }),
            status: "satisfied".into(),
            reason: None,
            iterations_used: 2,
            evaluations_json: text["evaluations"].as_array().expect("list").iter().map(Value::to_string).collect(),
            report_json: text["report"].to_string(),
            usage: Some(ss::OutcomeUsage { input_tokens: 10, output_tokens: 4, cost_micro_usd: 3 }),
            created_at: "2026-01-01T00:00:00Z".into(),
            completed_at: "2026-01-01T00:00:05Z".into(),
        };
        assert_eq!(json!(outcome(Some(&typed), "").expect("typed")), text);
        assert_eq!(json!(outcome(None, &text.to_string()).expect("0.1.0 text")), text);
        let open = ss::Outcome { report_declaration: None, report_json: String::new(), completed_at: String::new(), ..typed };
        let v = json!(outcome(Some(&open), "").expect("typed"));
        assert_eq!((&v["report_declaration"], &v["report"], &v["completed_at"]), (&json!(null), &json!(null), &json!(null)));
    }
}
