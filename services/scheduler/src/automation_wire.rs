//! An Automation's and a firing's structured parts on the mesh, typed:
//! pause reason, readiness, who manages it, a firing's error and graph.
//! Until the release after 0.1.0 the JSON text fields they replace are
//! written too (docs/architecture.md, "JSON on the mesh").

use crate::model::{PauseReason, Readiness};
use checkfu_proto::scheduler::v1 as pb;
use serde_json::Value;

pub fn pause_reason(p: &PauseReason) -> pb::PauseReason {
    pb::PauseReason { code: p.code.clone(), note: p.note.clone() }
}

pub fn readiness(r: &Readiness) -> pb::Readiness {
    pb::Readiness {
        state: r.state().into(),
        checked_at: checkfu_core::time::rfc3339(r.checked_ms),
        checks: r
            .checks
            .iter()
            .map(|c| pb::ReadinessCheck {
                name: c.name.into(),
                status: c.status.into(),
                reason: c.reason.clone(),
                resource_id: c.resource_id.clone(),
            })
            .collect(),
    }
}

/// `{kind:"direct"}` or `{kind:"graph", graph_id, revision}` as kept.
pub fn managed_by(v: &Value) -> pb::ManagedBy {
    pb::ManagedBy {
        kind: v["kind"].as_str().unwrap_or("direct").into(),
        graph_id: v["graph_id"].as_str().unwrap_or_default().into(),
        revision: v["revision"].as_i64(),
    }
}

/// A firing's `{reason, message}`.
pub fn firing_error(v: &Value) -> pb::FiringError {
    pb::FiringError { reason: v["reason"].as_str().unwrap_or_default().into(), message: v["message"].as_str().unwrap_or_default().into() }
}

/// A firing's `{graph_id, revision}`; none for a direct Automation's.
pub fn graph_ref(v: &Value) -> Option<pb::GraphRef> {
    let graph_id = v["graph_id"].as_str()?;
    Some(pb::GraphRef { graph_id: graph_id.into(), revision: v["revision"].as_i64() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Check;
    use serde_json::json;

    #[test]
    fn each_part_keeps_what_its_json_said() {
        let r = Readiness { checks: vec![Check::pass("target"), Check::fail("budget", "spent", Some("bud_1".into()))], checked_ms: 0 };
        let w = readiness(&r);
        assert_eq!((w.state.as_str(), w.checks.len()), ("blocked", 2));
        assert_eq!((w.checks[1].reason.as_deref(), w.checks[1].resource_id.as_deref()), (Some("spent"), Some("bud_1")));
        assert_eq!(managed_by(&json!({"kind": "graph", "graph_id": "agr_1", "revision": 3})).revision, Some(3));
        assert_eq!(managed_by(&json!({"kind": "direct"})).graph_id, "");
        assert_eq!(firing_error(&json!({"reason": "budget", "message": "spent"})).message, "spent");
        assert_eq!(graph_ref(&Value::Null), None);
        assert_eq!(graph_ref(&json!({"graph_id": "agr_1", "revision": null})).map(|g| g.revision), Some(None));
    }
}
