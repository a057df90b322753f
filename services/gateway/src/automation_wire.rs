//! An Automation's and a firing's typed parts, rendered as the public JSON
//! shows them: from the typed message, or from the JSON text a 0.1.0
//! scheduler sent instead (kept on the wire until the release after it).

use crate::json_text::doc as text;
use checkfu_proto::scheduler::v1 as pb;
use serde_json::{Map, Value, json};

/// `null`, or `{code, note}`.
#[allow(deprecated)]
pub fn pause_reason(a: &pb::Automation) -> Value {
    match &a.pause_reason {
        Some(p) => json!({"code": p.code, "note": p.note}),
        None => text(&a.pause_reason_json),
    }
}

/// `{state, checked_at, checks:[{name, status, reason, resource_id?}]}`.
#[allow(deprecated)]
pub fn readiness(a: &pb::Automation) -> Value {
    let Some(r) = &a.readiness else { return text(&a.readiness_json) };
    let checks: Vec<Value> = r
        .checks
        .iter()
        .map(|c| {
            let mut o = Map::new();
            o.insert("name".into(), json!(c.name));
            o.insert("status".into(), json!(c.status));
            o.insert("reason".into(), json!(c.reason));
            if let Some(id) = &c.resource_id {
                o.insert("resource_id".into(), json!(id));
            }
            Value::Object(o)
        })
        .collect();
    json!({"state": r.state, "checked_at": r.checked_at, "checks": checks})
}

/// `{kind:"direct"}`, or `{kind:"graph", graph_id, revision?}`.
#[allow(deprecated)]
pub fn managed_by(a: &pb::Automation) -> Value {
    let Some(m) = &a.managed_by else { return text(&a.managed_by_json) };
    if m.kind != "graph" {
        return json!({"kind": m.kind});
    }
    let mut o = json!({"kind": "graph", "graph_id": m.graph_id});
    if let Some(r) = m.revision {
        o["revision"] = json!(r);
    }
    o
}

/// `null`, or `{reason, message}`.
#[allow(deprecated)]
pub fn firing_error(f: &pb::Firing) -> Value {
    match &f.error {
        Some(e) => json!({"reason": e.reason, "message": e.message}),
        None => text(&f.error_json),
    }
}

/// `null`, or `{graph_id, revision}`.
#[allow(deprecated)]
pub fn firing_graph(f: &pb::Firing) -> Value {
    match &f.graph {
        Some(g) => json!({"graph_id": g.graph_id, "revision": g.revision}),
        None => text(&f.graph_json),
    }
}

#[cfg(test)]
#[allow(deprecated)]
mod tests {
    use super::*;

    /// The typed parts render exactly as the scheduler's JSON said them.
    #[test]
    fn typed_and_0_1_0_answers_render_alike() {
        let pause = json!({"code": "manual", "note": null});
        let ready = json!({"state": "blocked", "checked_at": "2026-01-01T00:00:00Z",
            "checks": [{"name": "target", "status": "pass", "reason": null}, {"name": "budget", "status": "fail", "reason": "spent", "resource_id": "bud_1"}]});
        let graph = json!({"kind": "graph", "graph_id": "agr_1", "revision": 2});
        let typed = pb::Automation {
            pause_reason: Some(pb::PauseReason { code: "manual".into(), note: None }),
            readiness: Some(pb::Readiness {
                state: "blocked".into(),
                checked_at: "2026-01-01T00:00:00Z".into(),
                checks: vec![
                    pb::ReadinessCheck { name: "target".into(), status: "pass".into(), reason: None, resource_id: None },
                    pb::ReadinessCheck {
                        name: "budget".into(),
                        status: "fail".into(),
                        reason: Some("spent".into()),
                        resource_id: Some("bud_1".into()),
                    },
                ],
            }),
            managed_by: Some(pb::ManagedBy { kind: "graph".into(), graph_id: "agr_1".into(), revision: Some(2) }),
            ..Default::default()
        };
        let old = pb::Automation {
            pause_reason_json: pause.to_string(),
            readiness_json: ready.to_string(),
            managed_by_json: graph.to_string(),
            ..Default::default()
        };
        for a in [&typed, &old] {
            assert_eq!((pause_reason(a), readiness(a), managed_by(a)), (pause.clone(), ready.clone(), graph.clone()));
        }
        let direct =
            pb::Automation { managed_by: Some(pb::ManagedBy { kind: "direct".into(), ..Default::default() }), ..Default::default() };
        assert_eq!((managed_by(&direct), pause_reason(&direct)), (json!({"kind": "direct"}), Value::Null));

        let typed = pb::Firing {
            error: Some(pb::FiringError { reason: "budget".into(), message: "spent".into() }),
            graph: Some(pb::GraphRef { graph_id: "agr_1".into(), revision: None }),
            ..Default::default()
        };
        let old = pb::Firing {
            error_json: r#"{"reason":"budget","message":"spent"}"#.into(),
            graph_json: r#"{"graph_id":"agr_1","revision":null}"#.into(),
            ..Default::default()
        };
        for f in [&typed, &old] {
            assert_eq!(firing_error(f), json!({"reason": "budget", "message": "spent"}));
            assert_eq!(firing_graph(f), json!({"graph_id": "agr_1", "revision": null}));
        }
        assert_eq!((firing_error(&pb::Firing::default()), firing_graph(&pb::Firing::default())), (Value::Null, Value::Null));
    }
}
