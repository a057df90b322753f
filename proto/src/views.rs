//! The public JSON of typed mesh values that more than one service shows:
//! the gateway's views, the runner's tools and a firing trace's receipts
//! (`firing_trace`). Each reads the typed message and, from a 0.1.0 peer that
//! sends only the JSON text field it replaced, that text.

use crate::sessions::v1::{ExecutionPins, StopReason, StopReasonType};
use serde_json::{Value, json};

impl StopReasonType {
    /// The `type` the API shows; `None` for an unspecified one.
    pub fn api_name(self) -> Option<&'static str> {
        Some(match self {
            StopReasonType::Unspecified => return None,
            StopReasonType::EndTurn => "end_turn",
            StopReasonType::RequiresAction => "requires_action",
            StopReasonType::RetriesExhausted => "retries_exhausted",
            StopReasonType::BudgetReached => "budget_reached",
            StopReasonType::Terminated => "terminated",
        })
    }

    /// The type an API name names; unspecified for any other text.
    pub fn from_api_name(name: &str) -> StopReasonType {
        const ALL: [StopReasonType; 5] = [
            StopReasonType::EndTurn,
            StopReasonType::RequiresAction,
            StopReasonType::RetriesExhausted,
            StopReasonType::BudgetReached,
            StopReasonType::Terminated,
        ];
        ALL.into_iter().find(|t| t.api_name() == Some(name)).unwrap_or(StopReasonType::Unspecified)
    }
}

/// A stop reason as the API shows it: `{"type": ...}`, and for a
/// `requires_action` wait its `event_ids`, `waiting_on` and (when any)
/// `approvals`. `null` when there is none.
pub fn stop_reason(typed: Option<&StopReason>, json_text: &str) -> Value {
    let Some(r) = typed else { return text(json_text) };
    let kind = StopReasonType::try_from(r.r#type).unwrap_or(StopReasonType::Unspecified);
    let Some(name) = kind.api_name() else { return Value::Null };
    let mut v = json!({"type": name});
    if kind == StopReasonType::RequiresAction {
        v["event_ids"] = json!(r.event_ids);
        v["waiting_on"] = json!(r.waiting_on);
        if !r.approvals.is_empty() {
            v["approvals"] = json!(r.approvals);
        }
    }
    v
}

/// A Run's execution pins as the API shows them (`session_thread_id` only
/// for a child thread's Run).
pub fn execution_pins(typed: Option<&ExecutionPins>, json_text: &str) -> Value {
    let Some(p) = typed else { return text(json_text) };
    let mut v = json!({
        "agent_id": p.agent_id,
        "agent_version": p.agent_version,
        "release_sha256": p.release_sha256,
        "deployment_id": p.deployment_id,
        "deployment_revision": p.deployment_revision,
        "harness": p.harness,
        "model_routing_profile_id": p.model_routing_profile_id,
        "sandbox_profile_revision": p.sandbox_profile_revision,
        "instructions_sha256": p.instructions_sha256,
    });
    if !p.session_thread_id.is_empty() {
        v["session_thread_id"] = json!(p.session_thread_id);
    }
    v
}

fn text(s: &str) -> Value {
    if s.is_empty() { Value::Null } else { serde_json::from_str(s).unwrap_or(Value::Null) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_reason_shows_its_wait_only_when_it_waits() {
        let end = StopReason { r#type: StopReasonType::EndTurn as i32, ..Default::default() };
        assert_eq!(stop_reason(Some(&end), ""), json!({"type": "end_turn"}));
        let wait = StopReason {
            r#type: StopReasonType::RequiresAction as i32,
            event_ids: vec!["evt_1".into()],
            waiting_on: vec!["ctu_1".into()],
            approvals: Default::default(),
        };
        assert_eq!(stop_reason(Some(&wait), ""), json!({"type": "requires_action", "event_ids": ["evt_1"], "waiting_on": ["ctu_1"]}));
        assert_eq!(stop_reason(None, r#"{"type":"budget_reached"}"#), json!({"type": "budget_reached"}), "a 0.1.0 peer's text");
        assert_eq!(stop_reason(None, ""), Value::Null);
        assert_eq!(stop_reason(Some(&StopReason::default()), ""), Value::Null);
    }

    #[test]
    fn every_stop_reason_type_has_one_api_name() {
        for t in [
            StopReasonType::EndTurn,
            StopReasonType::RequiresAction,
            StopReasonType::RetriesExhausted,
            StopReasonType::BudgetReached,
            StopReasonType::Terminated,
        ] {
            assert_eq!(StopReasonType::from_api_name(t.api_name().expect("named")), t);
        }
        assert_eq!(StopReasonType::Unspecified.api_name(), None);
        assert_eq!(StopReasonType::from_api_name("max_tokens"), StopReasonType::Unspecified);
    }

    #[test]
    fn execution_pins_show_the_thread_of_a_child_run_only() {
        let p = ExecutionPins { agent_id: "agt_1".into(), agent_version: 3, ..Default::default() };
        let v = execution_pins(Some(&p), "");
        assert_eq!((v["agent_id"].clone(), v["agent_version"].clone()), (json!("agt_1"), json!(3)));
        assert!(v.get("session_thread_id").is_none());
        let child = ExecutionPins { session_thread_id: "sthr_1".into(), ..p };
        assert_eq!(execution_pins(Some(&child), "")["session_thread_id"], "sthr_1");
        assert_eq!(execution_pins(None, r#"{"agent_id":"agt_9"}"#)["agent_id"], "agt_9");
    }
}
