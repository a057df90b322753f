//! What a Run executes and why a Session, one of its threads, or a Run
//! stopped. The public API shows them as `execution_pins` and `stop_reason`
//! (`{"type": ...}`, a wait with what it waits on); the store keeps that
//! JSON; the mesh carries the `ExecutionPins` and `StopReason` messages.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StopReason {
    /// The agent ended its turn.
    EndTurn,
    /// It waits for custom tool results or ActionApprovals.
    RequiresAction(Wait),
    /// The model kept failing after every retry.
    RetriesExhausted,
    /// The Session's Budget closed admission.
    BudgetReached,
    /// The Session (or the thread) was archived while the Run was live.
    Terminated,
}

/// What a `requires_action` stop waits for.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Wait {
    /// The events that asked (`agent.custom_tool_use`,
    /// `action_approval.pending`, ...).
    #[serde(default)]
    pub event_ids: Vec<String>,
    /// The tool use ids not answered yet.
    #[serde(default)]
    pub waiting_on: Vec<String>,
    /// Tool use id → the ActionApproval it waits for.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub approvals: BTreeMap<String, String>,
}

/// The stored form, read strictly first.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Stored {
    EndTurn,
    RequiresAction(Wait),
    RetriesExhausted,
    BudgetReached,
    Terminated,
}

/// Read as stored; a reason written before it was typed may carry more than
/// its type (a runner's own fields were kept as sent), which only its type
/// decides.
impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        if let Ok(stored) = serde_json::from_value::<Stored>(v.clone()) {
            return Ok(match stored {
                Stored::EndTurn => StopReason::EndTurn,
                Stored::RequiresAction(w) => StopReason::RequiresAction(w),
                Stored::RetriesExhausted => StopReason::RetriesExhausted,
                Stored::BudgetReached => StopReason::BudgetReached,
                Stored::Terminated => StopReason::Terminated,
            });
        }
        let kind = v.get("type").and_then(serde_json::Value::as_str).unwrap_or_default();
        StopReason::of_kind(kind).ok_or_else(|| serde::de::Error::custom(format!("not a stop reason: {v}")))
    }
}

impl StopReason {
    /// The `type` the API shows.
    pub fn kind(&self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::RequiresAction(_) => "requires_action",
            StopReason::RetriesExhausted => "retries_exhausted",
            StopReason::BudgetReached => "budget_reached",
            StopReason::Terminated => "terminated",
        }
    }

    /// The reason a `type` names, with no wait details (what a runner
    /// reports: the sessions service works out what a wait waits on).
    pub fn of_kind(kind: &str) -> Option<StopReason> {
        Some(match kind {
            "end_turn" => StopReason::EndTurn,
            "requires_action" => StopReason::RequiresAction(Wait::default()),
            "retries_exhausted" => StopReason::RetriesExhausted,
            "budget_reached" => StopReason::BudgetReached,
            "terminated" => StopReason::Terminated,
            _ => return None,
        })
    }

    /// The wait, when it is one.
    pub fn wait(&self) -> Option<&Wait> {
        match self {
            StopReason::RequiresAction(w) => Some(w),
            _ => None,
        }
    }
}

/// What a Run executes, pinned when it is admitted: the agent version (a
/// child thread's own), the Deployment revision and what it pins, and the
/// Session's instructions.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecutionPins {
    pub agent_id: String,
    pub agent_version: i64,
    pub release_sha256: String,
    pub deployment_id: String,
    pub deployment_revision: i64,
    pub harness: String,
    pub model_routing_profile_id: String,
    pub sandbox_profile_revision: i64,
    pub instructions_sha256: String,
    /// A child thread's Run: the thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_thread_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_json_is_the_one_the_api_always_showed() {
        let wait = StopReason::RequiresAction(Wait {
            event_ids: vec!["evt_1".into()],
            waiting_on: vec!["ctu_1".into()],
            approvals: BTreeMap::from([("ctu_1".into(), "aapr_1".into())]),
        });
        let shown = json!({"type": "requires_action", "event_ids": ["evt_1"], "waiting_on": ["ctu_1"], "approvals": {"ctu_1": "aapr_1"}});
        assert_eq!(serde_json::to_value(&wait).expect("json"), shown);
        assert_eq!(serde_json::from_value::<StopReason>(shown).expect("read back"), wait);
        let no_approvals = json!({"type": "requires_action", "event_ids": ["evt_1"], "waiting_on": ["ctu_1"]});
        assert!(
            serde_json::to_value(StopReason::RequiresAction(Wait { approvals: BTreeMap::new(), ..wait.wait().cloned().expect("a wait") }))
                .is_ok_and(|v| v == no_approvals)
        );
        assert_eq!(serde_json::to_value(StopReason::EndTurn).expect("json"), json!({"type": "end_turn"}));
        for kind in ["end_turn", "requires_action", "retries_exhausted", "budget_reached", "terminated"] {
            assert_eq!(StopReason::of_kind(kind).map(|r| r.kind()), Some(kind));
        }
        assert_eq!(StopReason::of_kind("max_tokens"), None);
        let kept = json!({"type": "end_turn", "note": "a runner's own field"});
        assert_eq!(serde_json::from_value::<StopReason>(kept).expect("read by its type"), StopReason::EndTurn);
        assert!(serde_json::from_value::<StopReason>(json!({"type": "max_tokens"})).is_err());
    }

    #[test]
    fn execution_pins_show_a_thread_only_for_a_child_run() {
        let primary = ExecutionPins { agent_id: "agt_1".into(), agent_version: 2, ..ExecutionPins::default() };
        let shown = serde_json::to_value(&primary).expect("json");
        assert_eq!(shown["agent_version"], 2);
        assert!(shown.get("session_thread_id").is_none());
        let child = ExecutionPins { session_thread_id: Some("sthr_1".into()), ..primary };
        assert_eq!(serde_json::to_value(&child).expect("json")["session_thread_id"], "sthr_1");
        assert_eq!(serde_json::from_value::<ExecutionPins>(serde_json::to_value(&child).expect("json")).expect("back"), child);
    }
}
