//! The typed stop reasons and execution pins on the mesh. Until the release
//! after 0.1.0 the JSON text fields they replace are written too (peers of
//! 0.1.0 read only those) and a 0.1.0 runner's JSON stop reason is still
//! read; docs/architecture.md lists what goes then.

use crate::model::{ExecutionPins, StopReason};
use checkfu_core::{Error, Result};
use checkfu_proto::sessions::v1 as pb;
use pb::StopReasonType as T;

pub fn stop_reason(r: &StopReason) -> pb::StopReason {
    let wait = r.wait().cloned().unwrap_or_default();
    pb::StopReason {
        r#type: stop_type(r) as i32,
        event_ids: wait.event_ids,
        waiting_on: wait.waiting_on,
        approvals: wait.approvals.into_iter().collect(),
    }
}

fn stop_type(r: &StopReason) -> T {
    match r {
        StopReason::EndTurn => T::EndTurn,
        StopReason::RequiresAction(_) => T::RequiresAction,
        StopReason::RetriesExhausted => T::RetriesExhausted,
        StopReason::BudgetReached => T::BudgetReached,
        StopReason::Terminated => T::Terminated,
    }
}

/// A runner's stop: the typed one, else (a 0.1.0 runner) its JSON text.
/// A `requires_action` stop's waits are worked out from the log, so only
/// the type counts.
pub fn runner_stop(typed: i32, json: &str) -> Result<StopReason> {
    let kind = match T::try_from(typed).unwrap_or(T::Unspecified) {
        T::Unspecified => {
            let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
            v.get("type").and_then(serde_json::Value::as_str).unwrap_or_default().to_string()
        }
        t => t.api_name().unwrap_or_default().to_string(),
    };
    StopReason::of_kind(&kind).ok_or_else(|| {
        Error::invalid_field("stop_reason", "stop_reason.type must be end_turn, requires_action, retries_exhausted or budget_reached")
    })
}

/// A stop reason as the 0.1.0 JSON text field carried it.
pub fn stop_reason_json(r: Option<&StopReason>) -> String {
    r.and_then(|r| serde_json::to_string(r).ok()).unwrap_or_default()
}

pub fn execution_pins(p: &ExecutionPins) -> pb::ExecutionPins {
    pb::ExecutionPins {
        agent_id: p.agent_id.clone(),
        agent_version: p.agent_version,
        release_sha256: p.release_sha256.clone(),
        deployment_id: p.deployment_id.clone(),
        deployment_revision: p.deployment_revision,
        harness: p.harness.clone(),
        model_routing_profile_id: p.model_routing_profile_id.clone(),
        sandbox_profile_revision: p.sandbox_profile_revision,
        instructions_sha256: p.instructions_sha256.clone(),
        session_thread_id: p.session_thread_id.clone().unwrap_or_default(),
    }
}

/// Execution pins as the 0.1.0 JSON text field carried them.
pub fn execution_pins_json(p: &ExecutionPins) -> String {
    serde_json::to_string(p).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Wait;

    #[test]
    fn a_runner_stop_is_read_typed_or_from_a_0_1_0_runners_json() {
        assert_eq!(runner_stop(T::BudgetReached as i32, "").expect("typed"), StopReason::BudgetReached);
        assert_eq!(runner_stop(T::EndTurn as i32, r#"{"type":"retries_exhausted"}"#).expect("typed wins"), StopReason::EndTurn);
        assert_eq!(runner_stop(0, r#"{"type":"retries_exhausted"}"#).expect("json"), StopReason::RetriesExhausted);
        assert_eq!(runner_stop(T::RequiresAction as i32, "").expect("typed"), StopReason::RequiresAction(Wait::default()));
        assert!(runner_stop(0, r#"{"type":"max_tokens"}"#).is_err());
        assert!(runner_stop(0, "").is_err());
        assert!(runner_stop(99, "").is_err(), "an unknown type is no stop");
    }

    #[test]
    fn the_typed_and_the_json_forms_say_the_same() {
        let wait = StopReason::RequiresAction(Wait {
            event_ids: vec!["evt_1".into()],
            waiting_on: vec!["ctu_1".into()],
            approvals: [("ctu_1".to_string(), "aapr_1".to_string())].into(),
        });
        let typed = stop_reason(&wait);
        assert_eq!(typed.r#type, T::RequiresAction as i32);
        assert_eq!(typed.approvals.get("ctu_1").map(String::as_str), Some("aapr_1"));
        let json: serde_json::Value = serde_json::from_str(&stop_reason_json(Some(&wait))).expect("json");
        assert_eq!(json["type"], "requires_action");
        assert_eq!(json["waiting_on"][0], "ctu_1");
        assert_eq!(stop_reason_json(None), "");
    }
}
