//! Why a Session, one of its threads, or a Run stopped. The public API shows
//! it as `stop_reason` (`{"type": ...}`, a wait with the events it waits
//! on); the store keeps it as that JSON; the mesh carries it as the
//! `StopReason` message.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
        assert!(serde_json::to_value(StopReason::RequiresAction(Wait { approvals: BTreeMap::new(), ..wait.wait().cloned().expect("a wait") }))
            .is_ok_and(|v| v == no_approvals));
        assert_eq!(serde_json::to_value(StopReason::EndTurn).expect("json"), json!({"type": "end_turn"}));
        for kind in ["end_turn", "requires_action", "retries_exhausted", "budget_reached", "terminated"] {
            assert_eq!(StopReason::of_kind(kind).map(|r| r.kind()), Some(kind));
        }
        assert_eq!(StopReason::of_kind("max_tokens"), None);
    }
}
