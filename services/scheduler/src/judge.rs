//! Evaluating Check nodes (api.md §18.1). A Check node is marked `running`
//! in the write that reaches it; its evaluation — one model-gateway task of
//! purpose `decision`, called only under an active qualification — runs
//! after that write, off the caller's path, and its CheckEvaluation is
//! saved in the same compare-and-set that settles the node. A crash before
//! that write leaves the node `running` with no evaluation, and recovery
//! asks again; once saved, nothing asks again.
//!
//! Every outcome is recorded, errors included: `evaluator_unqualified` (no
//! provider was called), `check_provider_error` (the gateway's candidates
//! failed), `check_answer_invalid` (a reply not exactly the shape asked
//! for) and `check_input_too_large` (nothing sent).

use crate::evaluation::{CheckCall, Evaluation, EvaluationUsage, MAX_CHECK_INPUT_BYTES, read_reply};
use crate::firing::Firing;
use crate::model::{Automation, Readiness};
use crate::service::SchedulerService;
use checkfu_core::id::CheckEvaluationId;
use checkfu_core::time::now_ms;
use checkfu_proto::modelgateway::v1 as mg;
use futures_util::future::BoxFuture;

impl SchedulerService {
    /// Starts the evaluations `f`'s program waits for and this replica is
    /// not already making (`in_flight.rs`): none while paused; refused
    /// authority fails the nodes `admission_denied` with nothing called.
    ///
    /// Boxed (and so declared `Send`): evaluations save through
    /// `advance_program`, which starts evaluations in turn.
    pub(crate) fn evaluate_checks<'a>(&'a self, f: &'a Firing, a: &'a Automation) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(p) = f.program.as_ref() else { return };
            let calls = p.check_calls(&f.event);
            let calls = self.take_in_flight(f, a, calls, |c: &CheckCall| (c.step_id.as_str(), c.attempt), Readiness::admits).await;
            for call in calls {
                let (svc, environment) = (self.clone(), a.environment_id.to_string());
                let step = (call.step_id.clone(), call.attempt);
                let ask = async move { Some(svc.judge(&environment, &call).await) };
                self.answer_later(f.id.clone(), step, "a Check's evaluation", ask, |f, p, e: &Evaluation, now| {
                    if p.evaluated(e.clone(), now) {
                        f.usage.input_tokens += e.usage.input_tokens;
                        f.usage.output_tokens += e.usage.output_tokens;
                        f.usage.model_spend_micro_usd += e.usage.cost_micro_usd;
                    }
                });
            }
        })
    }

    /// One evaluation of a Check on its input.
    async fn judge(&self, environment_id: &str, call: &CheckCall) -> Evaluation {
        let mut e = Evaluation {
            id: CheckEvaluationId::mint().to_string(),
            step_id: call.step_id.clone(),
            attempt: call.attempt,
            provider: String::new(),
            model: String::new(),
            qualification_id: None,
            answers: None,
            verdict: None,
            error: None,
            usage: EvaluationUsage::default(),
            at_ms: 0,
        };
        let input = call.input.to_string();
        if input.len() > MAX_CHECK_INPUT_BYTES {
            e.error = Some("check_input_too_large".into());
            e.at_ms = now_ms();
            return e;
        }
        let check = &call.check;
        let task = mg::TaskRequest {
            routing_profile_id: check.model_routing_profile_id.clone(),
            environment_id: environment_id.into(),
            task: Some(mg::task_request::Task::Check(mg::CheckTask {
                instructions: check.instructions.clone(),
                questions: check.questions.iter().map(|q| mg::Criterion { name: q.name.clone(), question: q.question.clone() }).collect(),
                input_json: input,
                effort: check.tier.clone().unwrap_or_default(),
            })),
        };
        match self.models.clone().run_task(task).await {
            Ok(r) => {
                let r = r.into_inner();
                let usage = r.usage.unwrap_or_default();
                e.usage = EvaluationUsage {
                    input_tokens: usage.input_tokens,
                    output_tokens: usage.output_tokens,
                    cost_micro_usd: r.cost_micro_usd,
                };
                e.qualification_id = Some(r.qualification_id).filter(|q| !q.is_empty());
                (e.provider, e.model) = (r.provider, r.model);
                let reply = match r.answer {
                    Some(mg::task_response::Answer::Check(c)) => c.reply_json,
                    _ => String::new(),
                };
                match read_reply(check, &reply) {
                    Some((answers, verdict)) => {
                        e.answers = Some(answers.into_iter().map(|(k, v)| (k, v.as_str().to_string())).collect());
                        e.verdict = Some(verdict.as_str().into());
                    }
                    None => e.error = Some("check_answer_invalid".into()),
                }
            }
            Err(status) => {
                let err = checkfu_core::Error::from(status);
                let unqualified = err.details["reason"] == "evaluator_unqualified";
                if !unqualified {
                    tracing::warn!(step_id = %call.step_id, error = %err.message, "a Check's evaluator failed");
                }
                e.error = Some(if unqualified { "evaluator_unqualified" } else { "check_provider_error" }.into());
            }
        }
        e.at_ms = now_ms();
        e
    }
}
