//! The public JSON of a firing's and a firing trace's typed parts: the
//! gateway renders an answer with it, and the scheduler writes it as the
//! JSON text a 0.1.0 gateway reads — one rendering for both.

use crate::scheduler::v1::{FiringEvidence, FiringProgram, FiringReceipts, SessionInput, StepsProgress};
use serde_json::{Value, json};

/// A firing's `program`: `{state, result, attempt, steps:[{id, kind,
/// outcome, started_at, settled_at, child_session_id?, wait_until?,
/// action_approval_id?, evaluation_id?, connection_call_id?, outcome_id?,
/// input?:{session_id, event_id, run_id}, attempt?, attempts?, items?}]}`
/// (`attempt` and `attempts` once the step was reached; `items` for a
/// `forEach`).
pub fn program(p: &FiringProgram) -> Value {
    let at = |s: &str| if s.is_empty() { Value::Null } else { json!(s) };
    let steps: Vec<Value> = p
        .steps
        .iter()
        .map(|s| {
            let outcome = s.outcome.as_ref().map(|o| {
                let mut v = json!({"kind": o.kind});
                if let Some(r) = &o.reason {
                    v["reason"] = json!(r);
                }
                if let Some(b) = &o.branch {
                    v["branch"] = json!(b);
                }
                if let Some(n) = o.attempt {
                    v["attempt"] = json!(n);
                }
                if let Some(w) = &o.retry_withheld {
                    v["retry_withheld"] = json!(w);
                }
                v
            });
            let mut v =
                json!({"id": s.id, "kind": s.kind, "outcome": outcome, "started_at": at(&s.started_at), "settled_at": at(&s.settled_at)});
            if let Some(c) = &s.child_session_id {
                v["child_session_id"] = json!(c);
            }
            if !s.wait_until.is_empty() {
                v["wait_until"] = json!(s.wait_until);
            }
            if let Some(a) = &s.action_approval_id {
                v["action_approval_id"] = json!(a);
            }
            if let Some(e) = &s.evaluation_id {
                v["evaluation_id"] = json!(e);
            }
            if let Some(c) = &s.connection_call_id {
                v["connection_call_id"] = json!(c);
            }
            if let Some(o) = &s.outcome_id {
                v["outcome_id"] = json!(o);
            }
            if let Some(i) = &s.input {
                v["input"] = session_input(i);
            }
            if s.attempt > 0 {
                v["attempt"] = json!(s.attempt);
                let attempts: Vec<Value> = s.attempts.iter().map(|a| json!({"n": a.n, "outcome": a.outcome, "reason": a.reason})).collect();
                v["attempts"] = json!(attempts);
            }
            if !s.items.is_empty() {
                let items: Vec<Value> = s
                    .items
                    .iter()
                    .map(|i| json!({"index": i.index, "child_session_id": i.child_session_id, "outcome": i.outcome}))
                    .collect();
                v["items"] = json!(items);
            }
            v
        })
        .collect();
    json!({"state": p.state, "result": p.result, "attempt": p.attempt, "steps": steps})
}

/// `{state, result, attempt, outcomes:[{n, step_id, kind, at, reason?, branch?, attempt?}]}`.
pub fn steps(p: &StepsProgress) -> Value {
    let outcomes: Vec<Value> = p
        .outcomes
        .iter()
        .map(|o| {
            let mut v = json!({"n": o.n, "step_id": o.step_id, "kind": o.kind, "at": o.at});
            if let Some(r) = &o.reason {
                v["reason"] = json!(r);
            }
            if let Some(b) = &o.branch {
                v["branch"] = json!(b);
            }
            if let Some(n) = o.attempt {
                v["attempt"] = json!(n);
            }
            v
        })
        .collect();
    json!({"state": p.state, "result": p.result, "attempt": p.attempt, "outcomes": outcomes})
}

/// `{sessions:[{step_id, session_id, status, stop_reason}], approvals, waits,
/// evaluations:[{id, step_id, attempt, provider, model, qualification_id,
/// answers, verdict, error, usage:{input_tokens, output_tokens,
/// cost_micro_usd}, at}], connection_calls:[{id, step_id, attempt, tool,
/// tool_source_id, connection_id, arguments_sha256, status, error_code,
/// sent_at}], outcomes:[{step_id, outcome_id, session_id, status,
/// iterations_used}], inputs:[{step_id, session_id, event_id, run_id}]}`
/// (an Agent target's input has `step_id: null`).
#[allow(deprecated)] // stop_reason_json: a 0.1.0 sessions service's text, passed on
pub fn receipts(r: &FiringReceipts) -> Value {
    let sessions: Vec<Value> = r
        .sessions
        .iter()
        .map(|s| {
            let stop = crate::views::stop_reason(s.stop_reason.as_ref(), &s.stop_reason_json);
            json!({"step_id": s.step_id, "session_id": s.session_id, "status": s.status, "stop_reason": stop})
        })
        .collect();
    let approvals: Vec<Value> =
        r.approvals.iter().map(|a| json!({"step_id": a.step_id, "action_approval_id": a.action_approval_id, "status": a.status})).collect();
    let waits: Vec<Value> = r.waits.iter().map(|w| json!({"step_id": w.step_id, "until": w.until, "elapsed": w.elapsed})).collect();
    let evaluations: Vec<Value> = r
        .evaluations
        .iter()
        .map(|e| {
            let answers = if e.answers.is_empty() { Value::Null } else { json!(e.answers.iter().collect::<std::collections::BTreeMap<_, _>>()) };
            json!({"id": e.id, "step_id": e.step_id, "attempt": e.attempt, "provider": e.provider, "model": e.model,
                "qualification_id": e.qualification_id, "answers": answers, "verdict": e.verdict, "error": e.error,
                "usage": {"input_tokens": e.input_tokens, "output_tokens": e.output_tokens, "cost_micro_usd": e.cost_micro_usd}, "at": e.at})
        })
        .collect();
    let connection_calls: Vec<Value> = r
        .connection_calls
        .iter()
        .map(|c| {
            json!({"id": c.id, "step_id": c.step_id, "attempt": c.attempt, "tool": c.tool, "tool_source_id": c.tool_source_id,
                "connection_id": c.connection_id, "arguments_sha256": c.arguments_sha256, "status": c.status,
                "error_code": c.error_code, "sent_at": c.sent_at})
        })
        .collect();
    let outcomes: Vec<Value> = r
        .outcomes
        .iter()
        .map(|o| {
            json!({"step_id": o.step_id, "outcome_id": o.outcome_id, "session_id": o.session_id, "status": o.status,
                "iterations_used": o.iterations_used})
        })
        .collect();
    let inputs: Vec<Value> = r
        .inputs
        .iter()
        .map(|i| {
            let mut v = i.input.as_ref().map(session_input).unwrap_or_else(|| json!({}));
            v["step_id"] = if i.step_id.is_empty() { Value::Null } else { json!(i.step_id) };
            v
        })
        .collect();
    let memory: Vec<Value> = r
        .memory
        .iter()
        .map(|m| {
            json!({"step_id": m.step_id, "attempt": m.attempt, "memory_store_id": m.memory_store_id, "path": m.path,
                "operation": m.operation, "result": m.result, "store_version": m.store_version, "content_sha256": m.content_sha256,
                "memory_proposal_id": m.memory_proposal_id, "error": m.error, "at": m.at})
        })
        .collect();
    let history: Vec<Value> = r
        .history
        .iter()
        .map(|h| {
            let base = if h.base.is_empty() { Value::Null } else { json!(h.base) };
            let through = if h.through.is_empty() { Value::Null } else { json!(h.through) };
            json!({"step_id": h.step_id, "operation": h.operation, "frontier": h.frontier, "base": base, "through": through,
                "session_ids": h.session_ids, "result": h.result, "error": h.error, "at": h.at})
        })
        .collect();
    let skills: Vec<Value> = r
        .skills
        .iter()
        .map(|k| {
            json!({"step_id": k.step_id, "operation": k.operation, "skill_proposal_id": k.skill_proposal_id, "disposition": k.disposition,
                "skill_id": k.skill_id, "version": k.version, "result": k.result, "error": k.error, "at": k.at})
        })
        .collect();
    let screens: Vec<Value> = r
        .screens
        .iter()
        .map(|s| {
            let step_id = if s.step_id.is_empty() { Value::Null } else { json!(s.step_id) };
            json!({"step_id": step_id, "session_id": s.session_id, "event_id": s.event_id, "seq": s.seq, "verdict": s.verdict,
                "released": s.released, "content_sha256": s.content_sha256, "at": s.at})
        })
        .collect();
    json!({"sessions": sessions, "approvals": approvals, "waits": waits, "evaluations": evaluations, "connection_calls": connection_calls,
        "outcomes": outcomes, "inputs": inputs, "memory": memory, "history": history, "skills": skills, "screens": screens})
}

fn session_input(i: &SessionInput) -> Value {
    json!({"session_id": i.session_id, "event_id": i.event_id, "run_id": i.run_id})
}

/// `{complete, missing:[{kind, id}]}`.
pub fn evidence(e: &FiringEvidence) -> Value {
    let missing: Vec<Value> = e.missing.iter().map(|m| json!({"kind": m.kind, "id": m.id})).collect();
    json!({"complete": e.complete, "missing": missing})
}
