//! Outcomes (api.md §14, `docs/outcomes.md`): the revise-until-done loop.
//!
//! The state machine is in [`Draft`] (pure, committed with the events that
//! record it): a definition admits the first Run; a primary Run that settles
//! `end_turn` starts a grading (`outcome.evaluation_started`) and keeps the
//! Session `running`; the grading itself — evidence, digest, the grader's
//! call through the model gateway — runs after that commit
//! ([`Outcomes::grade`]) and ends in a second commit that records
//! `outcome.evaluation_completed` and idles the Session or admits the
//! revision Run. A grading a crash interrupted is picked up again by the
//! sweeper; the second commit checks the grading is still the one it
//! started, so a repeat changes nothing.

use crate::draft::{Draft, system};
use crate::input::Input;
use crate::log::Log;
use crate::model::outcome::*;
use crate::model::*;
use crate::store::SessionsStore;
use crate::store::View;
use checkfu_core::events::EventType;
use checkfu_core::id::{EventId, OutcomeId, SessionId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use checkfu_proto::modelgateway::v1 as mg;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// A grading older than this with nobody at it is started again.
const STALE_GRADING_MS: i64 = 60_000;

/// What a grading found: the verdicts and what they cost.
#[derive(Debug, Clone)]
pub(crate) struct Verdicts {
    pub judgments: Vec<Value>,
    pub report: Value,
    pub explanation: String,
    pub feedback: String,
    pub usage: OutcomeUsage,
    pub digest: String,
}

impl Verdicts {
    /// No grader's word: nothing judged, nothing spent.
    fn none(digest: String) -> Verdicts {
        Verdicts {
            judgments: vec![],
            report: Value::Null,
            explanation: String::new(),
            feedback: String::new(),
            usage: OutcomeUsage::default(),
            digest,
        }
    }
}

/// The `outcome.evaluation_completed` payload, for the Outcome as it now is.
fn evaluation(o: &Outcome, iteration: i64, result: &str, reason: Option<&str>, v: &Verdicts) -> Value {
    json!({
        "outcome_id": o.id,
        "iteration": iteration,
        "result": result,
        "reason": reason,
        "outcome_status": o.status.as_str(),
        "explanation": v.explanation,
        "feedback": v.feedback,
        "judgments": v.judgments,
        "report": v.report,
        "evaluation_input_sha256": (!v.digest.is_empty()).then_some(&v.digest),
        "usage": v.usage,
    })
}

fn verdict_of(j: &Value) -> &str {
    j.get("verdict").and_then(Value::as_str).unwrap_or("unresolved")
}

impl Draft {
    fn outcome_active(&self) -> bool {
        self.session.outcome.as_ref().is_some_and(Outcome::active)
    }

    /// `user.define_outcome`: accepted only at a settled boundary — a new
    /// Session, or one idle `end_turn` — with no `active` Outcome (else
    /// 409). The echo names the new Outcome; a Run starts with the
    /// description as its user turn.
    pub(crate) fn define_outcome(&mut self, input: &Input) -> Result<EventId> {
        let definition = Definition::parse(&input.payload)?;
        let stop = self.session.stop_reason.as_ref().map(StopReason::kind);
        let settled = self.run.is_none() && self.session.status == SessionStatus::Idle && matches!(stop, None | Some("end_turn"));
        if !settled || self.outcome_active() {
            return Err(Error::conflict(
                "an Outcome is defined only at a settled boundary: a new Session, or one idle end_turn with no active Outcome",
            )
            .with_reason("outcome_not_settled"));
        }
        let id = OutcomeId::mint().to_string();
        let mut payload = input.payload.clone();
        payload["outcome_id"] = json!(id);
        let seq = self.next_seq();
        let echo = self.push(input.event_type, None, Value::String(input.authored_by.clone()), input.caused_by.clone(), payload);
        self.session.last_user_message_seq = seq;
        self.session.outcome = Some(Outcome {
            id,
            session_id: self.session.id.to_string(),
            define_event_id: echo.to_string(),
            definition,
            status: OutcomeStatus::Active,
            reason: None,
            iterations_used: 0,
            evaluations: vec![],
            report: None,
            usage: OutcomeUsage::default(),
            created_ms: self.now_ms,
            completed_ms: 0,
            grading: None,
            last_unavailable_sha256: None,
            interrupt_requested: false,
        });
        let cause = json!({"kind": "event", "id": echo});
        if self.admission_closed() {
            self.pause_for_budget(cause);
        } else {
            self.admit_run(seq, cause);
        }
        Ok(echo)
    }

    /// Ends the active Outcome outside a grading (`interrupted` by the user,
    /// or `failed`): an `outcome.evaluation_completed` with no
    /// `evaluation_started` before it and zero usage.
    fn end_outcome(&mut self, status: OutcomeStatus, result: &str, reason: &str, cause: Value) {
        let Some(o) = self.session.outcome.as_mut().filter(|o| o.active()) else { return };
        o.status = status;
        o.reason = Some(reason.into());
        o.grading = None;
        o.completed_ms = self.now_ms;
        let payload = evaluation(o, o.iterations_used + 1, result, Some(reason), &Verdicts::none(String::new()));
        o.record(payload.clone());
        self.push(EventType::OutcomeEvaluationCompleted, None, system(), cause, payload);
    }

    /// A `user.interrupt` that reaches the primary: an Outcome being graded
    /// or waiting ends `interrupted` now; one whose Run is under way ends
    /// when that Run stops (its end is not graded). True when the Session
    /// was handled here (a grading stopped: it idles).
    pub(crate) fn interrupt_outcome(&mut self, cause: Value) -> bool {
        if !self.outcome_active() {
            return false;
        }
        let grading = self.session.outcome.as_ref().is_some_and(|o| o.grading.is_some());
        if self.run.as_ref().is_some_and(|r| r.status == RunStatus::Running) {
            if let Some(o) = self.session.outcome.as_mut() {
                o.interrupt_requested = true;
            }
            return false;
        }
        self.end_outcome(OutcomeStatus::Interrupted, "interrupted", "user.interrupt", cause.clone());
        if grading {
            self.set_status(SessionStatus::Idle, Some(StopReason::EndTurn), cause);
            return true;
        }
        false
    }

    /// Archiving ends an active Outcome `failed` (`session_archived`).
    pub(crate) fn archive_outcome(&mut self, cause: Value) {
        self.end_outcome(OutcomeStatus::Failed, "failed", "session_archived", cause);
    }

    /// A primary Run settles `end_turn` with an active Outcome and no input
    /// waiting: the Run completes, the Session stays `running`, and a
    /// grading starts (`outcome.evaluation_started`). False when no grading
    /// is due (the caller settles the Run as usual).
    pub(crate) fn start_grading(&mut self, kind: &str, input_waiting: bool, cause: Value) -> bool {
        let due = self.session.outcome.as_ref().is_some_and(|o| o.active() && !o.interrupt_requested);
        if !due || kind != "end_turn" || input_waiting {
            return false;
        }
        let Some(run_id) = self.settle_run(StopReason::EndTurn, cause.clone()) else { return false };
        let started_seq = self.next_seq();
        let Some(o) = self.session.outcome.as_mut() else { return false };
        let iteration = o.iterations_used + 1;
        o.grading = Some(Grading { iteration, run_id: run_id.to_string(), started_seq, started_ms: self.now_ms });
        let payload = json!({"outcome_id": o.id, "iteration": iteration});
        self.push(EventType::OutcomeEvaluationStarted, Some(&run_id), system(), cause, payload);
        true
    }

    /// After a primary Run settled without a grading: a failed Run fails
    /// the Outcome; one an interrupt stopped ends it `interrupted`.
    pub(crate) fn outcome_after_run(&mut self, kind: &str, cause: Value) {
        let interrupted = self.session.outcome.as_ref().is_some_and(|o| o.active() && o.interrupt_requested);
        match kind {
            "retries_exhausted" => self.end_outcome(OutcomeStatus::Failed, "failed", "retries_exhausted", cause),
            "end_turn" if interrupted => self.end_outcome(OutcomeStatus::Interrupted, "interrupted", "user.interrupt", cause),
            _ => {}
        }
    }

    /// Records a grading's verdicts (§14.2's table), if the grading is
    /// still the one `g` names; false when it is not (stale, or ended).
    pub(crate) fn finish_grading(&mut self, g: &Grading, v: Option<Verdicts>) -> bool {
        let Some(o) = self.session.outcome.as_mut() else { return false };
        if o.grading.as_ref() != Some(g) || !o.active() {
            return false;
        }
        let i = g.iteration;
        let max = o.definition.max_iterations;
        let unchanged = v.is_none();
        let v = v.unwrap_or_else(|| Verdicts::none(o.last_unavailable_sha256.clone().unwrap_or_default()));
        let any = |want: &str| v.judgments.iter().any(|j| verdict_of(j) == want);
        let (result, reason, status) = if unchanged {
            ("interrupted", Some("outcome.evidence_unchanged"), OutcomeStatus::Interrupted)
        } else if any("false") && i < max {
            ("needs_revision", None, OutcomeStatus::Active)
        } else if any("false") {
            ("max_iterations_reached", None, OutcomeStatus::MaxIterationsReached)
        } else if any("unresolved") {
            ("interrupted", Some("outcome.evaluation_unavailable"), OutcomeStatus::Active)
        } else {
            ("satisfied", None, OutcomeStatus::Satisfied)
        };
        o.grading = None;
        o.status = status;
        o.reason = reason.map(str::to_string);
        if result != "interrupted" {
            o.iterations_used = i;
        }
        if reason == Some("outcome.evaluation_unavailable") {
            o.last_unavailable_sha256 = Some(v.digest.clone());
        }
        if status != OutcomeStatus::Active {
            o.completed_ms = self.now_ms;
        }
        if result == "satisfied" {
            o.report = Some(v.report.clone());
        }
        o.usage.input_tokens += v.usage.input_tokens;
        o.usage.output_tokens += v.usage.output_tokens;
        o.usage.cost_micro_usd += v.usage.cost_micro_usd;
        let payload = evaluation(o, i, result, reason, &v);
        o.record(payload.clone());
        let outcome_id = o.id.clone();
        // The grader's cost joins the Session's usage and its Budget.
        let add = Usage {
            input_tokens: v.usage.input_tokens,
            output_tokens: v.usage.output_tokens,
            model_spend_micro_usd: v.usage.cost_micro_usd,
        };
        self.session.usage.add(add);
        if let Some(b) = self.session.budget.as_mut() {
            b.charge(add);
        }
        let completed_seq = self.next_seq();
        self.push(EventType::OutcomeEvaluationCompleted, None, system(), json!({"kind": "outcome", "id": outcome_id}), payload);
        let cause = json!({"kind": "outcome", "id": outcome_id});
        let input_waiting = self.session.last_user_message_seq > g.started_seq;
        if result == "needs_revision" || input_waiting {
            if self.admission_closed() {
                self.pause_for_budget(cause);
            } else {
                let trigger = if input_waiting { self.session.last_user_message_seq } else { completed_seq };
                self.admit_run(trigger, cause);
            }
        } else {
            self.set_status(SessionStatus::Idle, Some(StopReason::EndTurn), cause);
        }
        true
    }
}

/// A declared output's acceptance (`{values?, min?, max?}`, checked at
/// definition) as the grader is told it.
fn acceptance(a: &Value) -> mg::Acceptance {
    use mg::report_value::Value as V;
    let scalar = |v: &Value| {
        let value = match v {
            Value::String(t) => V::Text(t.clone()),
            Value::Bool(b) => V::Boolean(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => V::Integer(i),
                (None, Some(u)) => V::Unsigned(u),
                _ => V::Number(n.as_f64().unwrap_or_default()),
            },
            _ => return None,
        };
        Some(mg::ReportValue { value: Some(value) })
    };
    mg::Acceptance {
        values: a["values"].as_array().map(|l| l.iter().filter_map(scalar).collect()).unwrap_or_default(),
        min: a["min"].as_f64(),
        max: a["max"].as_f64(),
    }
}

/// The hex SHA-256 of the canonical encoding of what the grader sees:
/// equal inputs, equal digest.
pub(crate) fn evaluation_digest(d: &Definition, message: &str, files: &[(String, String)]) -> String {
    let canonical = json!({
        "rubric": d.rubric,
        "criteria": d.criteria,
        "report": d.report_json(),
        "evidence": {
            "message": message,
            "files": files.iter().map(|(p, s)| json!({"path": p, "sha256": s})).collect::<Vec<_>>(),
        },
    });
    checkfu_core::sha256_hex(canonical.to_string().as_bytes())
}

/// Outcomes above the log: the grading after a commit started it, the
/// sweeper for gradings nobody finished, and the grader's call.
#[derive(Clone)]
pub struct Outcomes {
    pub(crate) store: Arc<dyn SessionsStore>,
    pub(crate) log: Log,
    pub(crate) models: Option<crate::upstream::Models>,
}

impl Outcomes {
    /// Carries out the Session's grading under way, if any.
    pub async fn grade(&self, session_id: &SessionId) -> Result<()> {
        let session = self.log.session(session_id.as_str()).await?;
        let Some(o) = session.outcome.clone() else { return Ok(()) };
        let Some(g) = o.grading.clone() else { return Ok(()) };
        let (message, files) = self.evidence(&session, &g).await?;
        let digest = evaluation_digest(&o.definition, &message, &files);
        let verdicts = if o.last_unavailable_sha256.as_deref() == Some(digest.as_str()) {
            None
        } else {
            Some(self.ask_grader(&session, &o.definition, &message, &files, digest).await)
        };
        self.log.transact(session_id, |d| Ok(d.finish_grading(&g, verdicts.clone()))).await?;
        Ok(())
    }

    /// The graded Run's last primary-thread `agent.message` text, and the
    /// files it captured, by path.
    async fn evidence(&self, session: &Session, g: &Grading) -> Result<(String, Vec<(String, String)>)> {
        let mut message = String::new();
        let mut after = 0;
        loop {
            let page = self.store.list_events(&session.id, &View::PrimaryOwn, after, 1000, &["agent.message".to_string()]).await?;
            for e in &page {
                if e.seq >= g.started_seq {
                    break;
                }
                if e.run_id.as_ref().is_some_and(|r| r.as_str() == g.run_id) && e.thread_id.is_none() {
                    message = checkfu_core::events::text_of(&e.payload, "content");
                }
            }
            match page.last() {
                Some(last) if page.len() == 1000 && last.seq < g.started_seq => after = last.seq,
                _ => break,
            }
        }
        let mut files: Vec<(String, String)> = self
            .store
            .all_files(&session.id)
            .await?
            .into_iter()
            .filter(|f| f.run_id.as_str() == g.run_id && f.status == FileStatus::Captured)
            .map(|f| (f.path, f.sha256))
            .collect();
        files.sort();
        Ok((message, files))
    }

    /// The grader's verdicts; a grader that cannot answer (after the
    /// gateway's fallbacks) leaves every judgment `unresolved`.
    async fn ask_grader(&self, session: &Session, d: &Definition, message: &str, files: &[(String, String)], digest: String) -> Verdicts {
        // `acceptance_json` too, for a 0.1.0 model gateway until the release after it.
        #[allow(deprecated)]
        let task = mg::TaskRequest {
            routing_profile_id: session.pins.model_routing_profile_id.to_string(),
            environment_id: session.environment_id.to_string(),
            task: Some(mg::task_request::Task::Grade(mg::GradeTask {
                rubric: d.rubric.clone(),
                criteria: d.criteria.iter().map(|c| mg::Criterion { name: c.name.clone(), question: c.question.clone() }).collect(),
                report: d
                    .report
                    .iter()
                    .flat_map(|r| r.outputs.iter())
                    .map(|o| mg::ReportOutput {
                        name: o.name.clone(),
                        r#type: o.kind.clone(),
                        description: o.description.clone().unwrap_or_default(),
                        acceptance: o.acceptance.as_ref().map(acceptance),
                        acceptance_json: o.acceptance.as_ref().map(Value::to_string).unwrap_or_default(),
                    })
                    .collect(),
                evidence_message: message.to_string(),
                evidence_files: files.iter().map(|(p, s)| mg::EvidenceFile { path: p.clone(), sha256: s.clone() }).collect(),
            })),
        };
        let answered = match &self.models {
            Some(m) => m.clone().run_task(task).await.map(|r| r.into_inner()).map_err(Error::from),
            None => Err(Error::unavailable("no model gateway is configured for grading")),
        };
        match answered {
            Ok(mg::TaskResponse { answer: Some(mg::task_response::Answer::Grade(a)), usage, cost_micro_usd, .. }) => {
                let u = usage.unwrap_or_default();
                Verdicts {
                    judgments: a.judgments.iter().map(|j| json!({"source": j.source, "name": j.name, "verdict": j.verdict})).collect(),
                    report: serde_json::from_str(&a.report_json).unwrap_or(Value::Null),
                    explanation: a.explanation,
                    feedback: a.feedback,
                    usage: OutcomeUsage { input_tokens: u.input_tokens, output_tokens: u.output_tokens, cost_micro_usd },
                    digest,
                }
            }
            other => {
                let why = match other {
                    Err(e) => e.message,
                    Ok(_) => "the model gateway answered another task".into(),
                };
                tracing::warn!(session_id = %session.id, error = %why, "the grader could not answer; the evaluation is unresolved");
                let mut judgments = vec![json!({"source": "rubric", "name": "rubric", "verdict": "unresolved"})];
                judgments.extend(d.criteria.iter().map(|c| json!({"source": "criterion", "name": c.name, "verdict": "unresolved"})));
                judgments.extend(
                    d.report
                        .iter()
                        .flat_map(|r| r.outputs.iter())
                        .map(|o| json!({"source": "report", "name": o.name, "verdict": "unresolved"})),
                );
                Verdicts {
                    judgments,
                    report: Value::Null,
                    explanation: format!("unresolved grader unavailable: {why}"),
                    feedback: String::new(),
                    usage: OutcomeUsage::default(),
                    digest,
                }
            }
        }
    }

    /// Starts the grading a commit just recorded, in the background.
    fn spawn_grading(&self, id: SessionId) {
        let svc = self.clone();
        tokio::spawn(async move {
            if let Err(e) = svc.grade(&id).await {
                tracing::warn!(session_id = %id, error = %e.message, "a grading stopped; the sweeper takes it up again");
            }
        });
    }

    /// Gradings nobody finished (their process died): started again.
    pub async fn resume_gradings(&self) -> Result<usize> {
        let mut n = 0;
        for id in self.store.grading_sessions(100).await? {
            let s = self.log.session(id.as_str()).await?;
            let stale = s.outcome.as_ref().and_then(|o| o.grading.as_ref()).is_some_and(|g| now_ms() - g.started_ms > STALE_GRADING_MS);
            if stale {
                self.grade(&id).await?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Grades what commits start as they start it (`log::Gradings`), and
    /// every `every` takes up gradings nobody finished. The two run side by
    /// side: a sweep grading a stale Session does not hold up a fresh one.
    pub async fn run_grading_sweeper(self, every: Duration, stop: tokio_util::sync::CancellationToken) {
        tokio::join!(self.grade_as_started(&stop), self.resume_every(every, &stop));
    }

    async fn grade_as_started(&self, stop: &tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                due = self.log.gradings.next() => due.into_iter().for_each(|id| self.spawn_grading(id)),
            }
        }
    }

    async fn resume_every(&self, every: Duration, stop: &tokio_util::sync::CancellationToken) {
        loop {
            if let Err(e) = self.resume_gradings().await {
                tracing::warn!(error = %e.message, "could not resume gradings");
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }

    pub async fn get_outcome(&self, id: &str) -> Result<Outcome> {
        OutcomeId::check("id", id)?;
        self.store.get_outcome(id).await?.ok_or_else(|| Error::not_found("outcome", id))
    }

    pub async fn list_outcomes(&self, session_id: &str, page: &PageRequest) -> Result<Vec<Outcome>> {
        let s = self.log.session(session_id).await?;
        self.store.list_outcomes(&s.id, page).await
    }
}

/// The API JSON of an Outcome, as a 0.1.0 gateway reads it (`JsonAnswer.json`).
pub fn view(o: &Outcome) -> Value {
    let at = |ms: i64| if ms == 0 { Value::Null } else { Value::String(checkfu_core::time::rfc3339(ms)) };
    json!({
        "id": o.id,
        "type": "outcome",
        "session_id": o.session_id,
        "define_event_id": o.define_event_id,
        "description": o.definition.description,
        "rubric": o.definition.rubric,
        "max_iterations": o.definition.max_iterations,
        "criteria": o.definition.criteria,
        "report_declaration": o.definition.report_json(),
        "status": o.status.as_str(),
        "reason": o.reason,
        "iterations_used": o.iterations_used,
        "evaluations": o.evaluations,
        "report": o.report,
        "usage": o.usage,
        "created_at": at(o.created_ms),
        "completed_at": at(o.completed_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acceptance_keeps_each_values_kind_for_the_grader() {
        use mg::report_value::Value as V;
        let a = acceptance(&json!({"values": [5, 5.5, "ok", true, 18446744073709551615u64], "min": 1, "max": 9.5}));
        let kinds: Vec<_> = a.values.into_iter().filter_map(|v| v.value).collect();
        assert_eq!(kinds, [V::Integer(5), V::Number(5.5), V::Text("ok".into()), V::Boolean(true), V::Unsigned(u64::MAX)]);
        assert_eq!((a.min, a.max), (Some(1.0), Some(9.5)));
        assert!(acceptance(&json!({"min": 2})).values.is_empty(), "no values listed");
    }
}
