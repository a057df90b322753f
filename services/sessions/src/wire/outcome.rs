//! An Outcome on the mesh, typed (`JsonAnswer.outcome`, `JsonList.outcomes`).
//! What stays JSON text is what a model or a client wrote: each evaluation's
//! event payload, the report the grader read off the Run, and an output's
//! `acceptance` as its author gave it (docs/architecture.md, "JSON on the
//! mesh").

use crate::model::outcome::Outcome;
use checkfu_core::time::rfc3339_opt;
use checkfu_proto::sessions::v1 as pb;

pub fn outcome(o: &Outcome) -> pb::Outcome {
    let d = &o.definition;
    pb::Outcome {
        id: o.id.clone(),
        session_id: o.session_id.clone(),
        define_event_id: o.define_event_id.clone(),
        description: d.description.clone(),
        rubric: d.rubric.clone(),
        max_iterations: d.max_iterations,
        criteria: d
            .criteria
            .iter()
            .map(|c| pb::OutcomeCriterion { name: c.name.clone(), question: c.question.clone(), failure: c.failure.clone() })
            .collect(),
        report_declaration: d.report.as_ref().map(|r| pb::ReportDeclaration {
            extraction: r.extraction.clone(),
            outputs: r
                .outputs
                .iter()
                .map(|out| pb::DeclaredOutput {
                    name: out.name.clone(),
                    r#type: out.kind.clone(),
                    description: out.description.clone(),
                    acceptance_json: out.acceptance.as_ref().map(|a| a.to_string()).unwrap_or_default(),
                })
                .collect(),
        }),
        status: o.status.as_str().into(),
        reason: o.reason.clone(),
        iterations_used: o.iterations_used,
        evaluations_json: o.evaluations.iter().map(|e| e.to_string()).collect(),
        report_json: o.report.as_ref().map(|r| r.to_string()).unwrap_or_default(),
        usage: Some(pb::OutcomeUsage {
            input_tokens: o.usage.input_tokens,
            output_tokens: o.usage.output_tokens,
            cost_micro_usd: o.usage.cost_micro_usd,
        }),
        created_at: rfc3339_opt(Some(o.created_ms)),
        completed_at: rfc3339_opt(Some(o.completed_ms)),
    }
}
