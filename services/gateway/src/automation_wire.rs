//! An Automation's and a firing's typed parts, rendered as the public JSON
//! shows them: from the typed message, or from the JSON text a 0.1.0
//! scheduler sent instead (kept on the wire until the release after it).

use crate::json_text::doc as text;
use checkfu_proto::firing_trace;
use checkfu_proto::scheduler::v1 as pb;
use serde_json::{Map, Value, json};

/// `[{kind, ..., next_at}]`: each trigger as written, with when the
/// pending occurrence is due on the timed one.
#[allow(deprecated)]
pub fn triggers(a: &pb::Automation) -> Value {
    match &a.triggers {
        Some(l) => pb::Trigger::list_to_json(&l.triggers),
        None => text(&a.triggers_json),
    }
}

/// `{kind:"agent", ...}` or `{kind:"steps", ...}`.
#[allow(deprecated)]
pub fn target(a: &pb::Automation) -> Value {
    match &a.target {
        Some(t) => t.to_json(),
        None => text(&a.target_json),
    }
}

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
    match &a.readiness {
        Some(r) => readiness_of(r),
        None => text(&a.readiness_json),
    }
}

/// A readiness (an Automation's, or a plan's if applied now).
pub fn readiness_of(r: &pb::Readiness) -> Value {
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

/// A steps firing's `{state, result, attempt, steps}`; `null` for an
/// Agent target.
#[allow(deprecated)]
pub fn firing_program(f: &pb::Firing) -> Value {
    f.program.as_ref().map(firing_trace::program).unwrap_or_else(|| text(&f.program_json))
}

/// A steps firing's progress; `null` for an Agent target.
#[allow(deprecated)]
pub fn trace_steps(t: &pb::FiringTrace) -> Value {
    t.steps.as_ref().map(firing_trace::steps).unwrap_or_else(|| text(&t.steps_json))
}

#[allow(deprecated)]
pub fn trace_receipts(t: &pb::FiringTrace) -> Value {
    t.receipts.as_ref().map(firing_trace::receipts).unwrap_or_else(|| text(&t.receipts_json))
}

#[allow(deprecated)]
pub fn trace_evidence(t: &pb::FiringTrace) -> Value {
    t.evidence.as_ref().map(firing_trace::evidence).unwrap_or_else(|| text(&t.evidence_json))
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

        let triggers_text = json!([{"kind": "schedule", "cron": "0 9 * * *", "timezone": "Europe/Berlin", "next_at": "2030-01-01T08:00:00.000Z"},
            {"kind": "webhook", "dedupe_key": "/id", "next_at": null,
             "admission_filter": {"kind": "predicates", "predicates": [{"kind": "contains", "pointer": "/title", "value": "bug"}]}}]);
        let target_text = json!({"kind": "agent", "agent_deployment_id": "dep_1", "deployment_revision": 3, "prompt": "triage",
            "budget": {"limit": 100, "metric": "model_tokens"}, "session_target": {"mode": "start_new"}});
        let typed = pb::Automation {
            triggers: Some(pb::TriggerList {
                triggers: vec![
                    pb::Trigger {
                        kind: Some(pb::trigger::Kind::Schedule(pb::ScheduleTrigger {
                            cron: "0 9 * * *".into(),
                            timezone: "Europe/Berlin".into(),
                        })),
                        next_at: Some("2030-01-01T08:00:00.000Z".into()),
                    },
                    pb::Trigger {
                        kind: Some(pb::trigger::Kind::Webhook(pb::WebhookTrigger {
                            dedupe_key: "/id".into(),
                            admission_filter: vec![pb::Predicate {
                                kind: "contains".into(),
                                pointer: "/title".into(),
                                value_json: "\"bug\"".into(),
                            }],
                        })),
                        next_at: Some(String::new()),
                    },
                ],
            }),
            target: Some(pb::Target {
                kind: Some(pb::target::Kind::Agent(pb::AgentTarget {
                    agent_deployment_id: "dep_1".into(),
                    deployment_revision: Some(3),
                    prompt: "triage".into(),
                    budget: Some(pb::ChildBudget { limit: 100, metric: "model_tokens".into() }),
                    session_target: Some(pb::SessionTarget { mode: "start_new".into(), session: None }),
                    input: None,
                })),
            }),
            ..Default::default()
        };
        let old = pb::Automation { triggers_json: triggers_text.to_string(), target_json: target_text.to_string(), ..Default::default() };
        for a in [&typed, &old] {
            assert_eq!((triggers(a), target(a)), (triggers_text.clone(), target_text.clone()));
        }
        let steps = pb::Target {
            kind: Some(pb::target::Kind::Steps(pb::StepsTarget {
                program_sha256: "ab".into(),
                steps_json: vec![r#"{"id":"s1","kind":"step_wait"}"#.into()],
                edges_json: vec![r#"{"from":"t","to":"s1"}"#.into()],
            })),
        };
        assert_eq!(
            target(&pb::Automation { target: Some(steps), ..Default::default() }),
            json!({"kind": "steps", "program_sha256": "ab", "steps": [{"id": "s1", "kind": "step_wait"}], "edges": [{"from": "t", "to": "s1"}]})
        );

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

        let program = json!({"state": "pending", "result": null, "attempt": 1, "steps": [
            {"id": "ask", "kind": "step_agent", "outcome": {"kind": "completed"}, "started_at": "2026-01-01T00:00:00Z",
             "settled_at": "2026-01-01T00:00:02Z", "child_session_id": "sess_1"},
            {"id": "route", "kind": "decision", "outcome": {"kind": "completed", "branch": "yes"}, "started_at": "2026-01-01T00:00:02Z",
             "settled_at": "2026-01-01T00:00:02Z"},
            {"id": "hold", "kind": "step_wait", "outcome": {"kind": "waiting"}, "started_at": "2026-01-01T00:00:02Z", "settled_at": null,
             "wait_until": "2026-01-01T01:00:00Z"},
            {"id": "ok", "kind": "step_approval", "outcome": null, "started_at": null, "settled_at": null}]});
        let step = |id: &str, kind: &str, outcome: Option<(&str, Option<&str>)>, started: &str, settled: &str| pb::ProgramStep {
            id: id.into(),
            kind: kind.into(),
            outcome: outcome.map(|(k, b)| pb::StepOutcome {
                kind: k.into(),
                reason: None,
                branch: b.map(String::from),
                attempt: None,
                retry_withheld: None,
            }),
            started_at: started.into(),
            settled_at: settled.into(),
            ..Default::default()
        };
        let typed = pb::Firing {
            program: Some(pb::FiringProgram {
                state: "pending".into(),
                result: None,
                attempt: 1,
                steps: vec![
                    pb::ProgramStep {
                        child_session_id: Some("sess_1".into()),
                        ..step("ask", "step_agent", Some(("completed", None)), "2026-01-01T00:00:00Z", "2026-01-01T00:00:02Z")
                    },
                    step("route", "decision", Some(("completed", Some("yes"))), "2026-01-01T00:00:02Z", "2026-01-01T00:00:02Z"),
                    pb::ProgramStep {
                        wait_until: "2026-01-01T01:00:00Z".into(),
                        ..step("hold", "step_wait", Some(("waiting", None)), "2026-01-01T00:00:02Z", "")
                    },
                    step("ok", "step_approval", None, "", ""),
                ],
            }),
            ..Default::default()
        };
        let old = pb::Firing { program_json: program.to_string(), ..Default::default() };
        for f in [&typed, &old] {
            assert_eq!(firing_program(f), program);
        }
        assert_eq!(firing_program(&pb::Firing { program_json: "null".into(), ..Default::default() }), Value::Null, "an Agent target's");
    }

    #[test]
    fn a_trace_renders_the_same_typed_or_from_a_0_1_0_schedulers_text() {
        let steps = json!({"state": "settled", "result": "succeeded", "attempt": 1, "outcomes": [
            {"n": 1, "step_id": "s1", "kind": "succeeded", "at": "2026-01-01T00:00:00Z"},
            {"n": 2, "step_id": "s2", "kind": "branched", "at": "2026-01-01T00:00:01Z", "reason": "r", "branch": "yes"}]});
        let receipts = json!({"sessions": [{"step_id": "s1", "session_id": "sess_1", "status": "idle", "stop_reason": {"type": "end_turn"}}],
            "approvals": [{"step_id": "s3", "action_approval_id": "apr_1", "status": "approved"}],
            "waits": [{"step_id": "s4", "until": "2026-01-01T00:01:00Z", "elapsed": true}]});
        let evidence = json!({"complete": false, "missing": [{"kind": "session", "id": "sess_2"}]});
        let typed = pb::FiringTrace {
            steps: Some(pb::StepsProgress {
                state: "settled".into(),
                result: Some("succeeded".into()),
                attempt: 1,
                outcomes: vec![
                    pb::StepTransition {
                        n: 1,
                        step_id: "s1".into(),
                        kind: "succeeded".into(),
                        at: "2026-01-01T00:00:00Z".into(),
                        reason: None,
                        branch: None,
                        attempt: None,
                    },
                    pb::StepTransition {
                        n: 2,
                        step_id: "s2".into(),
                        kind: "branched".into(),
                        at: "2026-01-01T00:00:01Z".into(),
                        reason: Some("r".into()),
                        branch: Some("yes".into()),
                        attempt: None,
                    },
                ],
            }),
            receipts: Some(pb::FiringReceipts {
                sessions: vec![pb::SessionReceipt {
                    step_id: Some("s1".into()),
                    session_id: "sess_1".into(),
                    status: "idle".into(),
                    stop_reason: Some(checkfu_proto::sessions::v1::StopReason { r#type: 1, ..Default::default() }),
                    stop_reason_json: String::new(),
                }],
                approvals: vec![pb::ApprovalReceipt {
                    step_id: "s3".into(),
                    action_approval_id: "apr_1".into(),
                    status: "approved".into(),
                }],
                waits: vec![pb::WaitReceipt { step_id: "s4".into(), until: "2026-01-01T00:01:00Z".into(), elapsed: true }],
                evaluations: vec![],
                connection_calls: vec![],
                outcomes: vec![],
                inputs: vec![],
                memory: vec![],
                history: vec![],
                skills: vec![],
                screens: vec![],
            }),
            evidence: Some(pb::FiringEvidence {
                complete: false,
                missing: vec![pb::MissingRecord { kind: "session".into(), id: "sess_2".into() }],
            }),
            ..Default::default()
        };
        let old = pb::FiringTrace {
            steps_json: steps.to_string(),
            receipts_json: receipts.to_string(),
            evidence_json: evidence.to_string(),
            ..Default::default()
        };
        // A 0.1.0 scheduler's text predates evaluations.
        let mut typed_receipts = receipts.clone();
        typed_receipts["evaluations"] = json!([]);
        typed_receipts["connection_calls"] = json!([]);
        typed_receipts["outcomes"] = json!([]);
        typed_receipts["inputs"] = json!([]);
        typed_receipts["memory"] = json!([]);
        typed_receipts["history"] = json!([]);
        typed_receipts["skills"] = json!([]);
        typed_receipts["screens"] = json!([]);
        for (t, receipts) in [(&typed, &typed_receipts), (&old, &receipts)] {
            assert_eq!((trace_steps(t), trace_receipts(t), trace_evidence(t)), (steps.clone(), receipts.clone(), evidence.clone()));
        }
        let agent = pb::FiringTrace { steps_json: "null".into(), ..Default::default() };
        assert_eq!(trace_steps(&agent), Value::Null, "an Agent target has no steps");
    }
}
