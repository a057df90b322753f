//! A firing's trace on the mesh, typed; until the release after 0.1.0 the
//! JSON text fields it replaced are written too (docs/architecture.md,
//! "JSON on the mesh").

use crate::program::Program;
use crate::trace::{Receipts, Trace};
use checkfu_core::time::rfc3339;
use checkfu_proto::firing_trace;
use checkfu_proto::scheduler::v1 as pb;
use serde_json::Value;

/// The trace's parts; the caller adds the firing itself. The JSON text is
/// the typed parts rendered as the gateway renders them.
#[allow(deprecated)] // the JSON text fields, for 0.1.0 readers
pub fn trace(t: &Trace) -> pb::FiringTrace {
    let steps = t.firing.program.as_ref().map(progress);
    let receipts = receipts(&t.receipts, t.firing.program.as_ref());
    let evidence = pb::FiringEvidence {
        complete: t.evidence.missing.is_empty(),
        missing: t.evidence.missing.iter().map(|(kind, id)| pb::MissingRecord { kind: (*kind).into(), id: id.clone() }).collect(),
    };
    pb::FiringTrace {
        steps_json: steps.as_ref().map(firing_trace::steps).unwrap_or(Value::Null).to_string(),
        receipts_json: firing_trace::receipts(&receipts).to_string(),
        evidence_json: firing_trace::evidence(&evidence).to_string(),
        steps,
        receipts: Some(receipts),
        evidence: Some(evidence),
        firing: None,
    }
}

#[allow(deprecated)] // stop_reason_json: a 0.1.0 sessions service's text, passed on
fn receipts(r: &Receipts, p: Option<&Program>) -> pb::FiringReceipts {
    pb::FiringReceipts {
        inputs: r.inputs.iter().map(|(step_id, i)| pb::InputReceipt { step_id: step_id.clone(), input: Some(i.to_spec()) }).collect(),
        sessions: r
            .sessions
            .iter()
            .map(|s| pb::SessionReceipt {
                step_id: s.step_id.clone(),
                session_id: s.session_id.clone(),
                status: s.status.clone(),
                stop_reason: s.stop_reason.clone(),
                stop_reason_json: s.stop_reason_json.clone(),
            })
            .collect(),
        approvals: r
            .approvals
            .iter()
            .map(|a| pb::ApprovalReceipt {
                step_id: a.step_id.clone(),
                action_approval_id: a.action_approval_id.clone(),
                status: a.status.clone(),
            })
            .collect(),
        waits: r
            .waits
            .iter()
            .map(|w| pb::WaitReceipt { step_id: w.step_id.clone(), until: rfc3339(w.until_ms), elapsed: w.elapsed })
            .collect(),
        evaluations: p.iter().flat_map(|p| p.evaluations.iter()).map(evaluation).collect(),
        connection_calls: p.iter().flat_map(|p| p.connection_calls.iter()).map(connection_call).collect(),
        outcomes: p
            .iter()
            .flat_map(|p| p.outcomes.iter())
            .map(|o| pb::OutcomeReceipt {
                step_id: o.step_id.clone(),
                outcome_id: o.outcome_id.clone(),
                session_id: o.session_id.clone(),
                status: o.status.clone(),
                iterations_used: o.iterations_used,
            })
            .collect(),
        memory: p.iter().flat_map(|p| p.memory.iter()).map(memory).collect(),
        history: p
            .iter()
            .flat_map(|p| p.history.iter())
            .map(|h| pb::HistoryReceipt {
                step_id: h.step_id.clone(),
                operation: h.operation.clone(),
                frontier: h.frontier.clone(),
                base: h.base.clone(),
                through: h.through.clone(),
                session_ids: h.session_ids.clone(),
                result: h.result.clone(),
                error: h.error.clone(),
                at: rfc3339(h.at_ms),
            })
            .collect(),
        skills: p
            .iter()
            .flat_map(|p| p.skills.iter())
            .map(|k| pb::SkillReceipt {
                step_id: k.step_id.clone(),
                operation: k.operation.clone(),
                skill_proposal_id: k.skill_proposal_id.clone(),
                disposition: k.disposition.clone(),
                skill_id: k.skill_id.clone(),
                version: k.version,
                result: k.result.clone(),
                error: k.error.clone(),
                at: rfc3339(k.at_ms),
            })
            .collect(),
        screens: r
            .screens
            .iter()
            .map(|s| pb::ScreenReceipt {
                step_id: s.step_id.clone().unwrap_or_default(),
                session_id: s.session_id.clone(),
                event_id: s.event_id.clone(),
                seq: s.seq,
                verdict: s.verdict.clone(),
                released: s.released,
                content_sha256: s.content_sha256.clone(),
                at: s.at.clone(),
            })
            .collect(),
    }
}

fn memory(m: &crate::memory_access::MemoryAccess) -> pb::MemoryReceipt {
    pb::MemoryReceipt {
        step_id: m.step_id.clone(),
        attempt: m.attempt,
        memory_store_id: m.memory_store_id.clone(),
        path: m.path.clone(),
        operation: m.operation.clone(),
        result: m.result.clone(),
        store_version: m.store_version,
        content_sha256: m.content_sha256.clone(),
        memory_proposal_id: m.memory_proposal_id.clone(),
        error: m.error.clone(),
        at: rfc3339(m.at_ms),
    }
}

fn connection_call(c: &crate::connection_call::ConnectionCall) -> pb::ConnectionCallReceipt {
    pb::ConnectionCallReceipt {
        id: c.id.clone(),
        step_id: c.step_id.clone(),
        attempt: c.attempt,
        tool: c.tool.clone(),
        tool_source_id: c.tool_source_id.clone(),
        connection_id: c.connection_id.clone(),
        arguments_sha256: c.arguments_sha256.clone(),
        status: c.status.clone(),
        error_code: c.error_code.clone(),
        sent_at: rfc3339(c.sent_at_ms),
    }
}

fn evaluation(e: &crate::evaluation::Evaluation) -> pb::EvaluationReceipt {
    pb::EvaluationReceipt {
        id: e.id.clone(),
        step_id: e.step_id.clone(),
        attempt: e.attempt,
        provider: e.provider.clone(),
        model: e.model.clone(),
        qualification_id: e.qualification_id.clone(),
        answers: e.answers.clone().unwrap_or_default().into_iter().collect(),
        verdict: e.verdict.clone(),
        error: e.error.clone(),
        input_tokens: e.usage.input_tokens,
        output_tokens: e.usage.output_tokens,
        cost_micro_usd: e.usage.cost_micro_usd,
        at: rfc3339(e.at_ms),
    }
}

fn progress(p: &Program) -> pb::StepsProgress {
    pb::StepsProgress {
        state: p.state.clone(),
        result: p.result.clone(),
        attempt: p.attempt,
        outcomes: p
            .transitions
            .iter()
            .map(|t| pb::StepTransition {
                n: t.n,
                step_id: t.step_id.clone(),
                kind: t.outcome.kind.clone(),
                at: rfc3339(t.at_ms),
                reason: t.outcome.reason.clone(),
                branch: t.outcome.branch.clone(),
                attempt: t.outcome.attempt,
            })
            .collect(),
    }
}
