//! Step programs (api.md §12.8): the state a steps firing keeps, and the
//! pure rules that move it on. [`Program::advance`] settles every step
//! that can settle now (Decisions, Parse JSON steps, steps nothing can
//! reach) and names the `step_agent` steps to admit; the service records
//! that with the firing (a compare-and-set) before creating any child, so
//! a step is admitted once however often the program is advanced.
//!
//! The program is a snapshot of the applied revision: a firing keeps its
//! steps, edges and pins through waits and recovery, and never rereads the
//! graph.

use crate::connection_call::ConnectionCall;
use crate::evaluation::{CheckCall, Evaluation};
use crate::graph::checks::{Check, Rule};
use crate::graph::retry::Retry;
use crate::model::{MAX_PROMPT_BYTES, StepsTarget, render};
use crate::predicates::Predicate;
use checkfu_proto::scheduler::v1 as pb;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A step's outcome (§12.5): unfinished `running`, `waiting`,
/// `awaiting_approval`, `retrying` (with the failed `attempt`); settled
/// `completed` (a Decision adds `branch`), `failed` (with `reason`),
/// `denied`, `skipped`, `rejected`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i64>,
    /// Why a failure a `retry` would repeat was not: `effect_unknown` (a
    /// child left a tool call without its result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_withheld: Option<String>,
}

/// Failures an authored retry repeats (§18.6): those that left no effect
/// behind. Refusals, denials, verdicts, mismatches and failures whose
/// effect is unknown are never retried.
const RETRIED: &[&str] =
    &["child_failed", "session_busy", "call_not_sent", "check_provider_error", "check_answer_invalid", "memory_unavailable"];

/// One item of a `forEach` and its child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    pub index: usize,
    pub value: Value,
    /// Set when its child is admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_session_id: Option<String>,
    /// `completed` or `failed` once its child settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
}

/// How a reviewed step's Outcome ended (§18.2), kept for the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeRecord {
    pub step_id: String,
    pub outcome_id: String,
    pub session_id: String,
    /// `satisfied`, `max_iterations_reached`, `failed`, `interrupted`, or
    /// `active` (its grading could not be had).
    pub status: String,
    pub iterations_used: i64,
}

impl OutcomeRecord {
    /// The step's outcome by the Outcome's: satisfied → `completed`;
    /// exhausted → `rejected` (a negative verdict, not a failure);
    /// ungraded → `failed` `outcome_unavailable`; failed → `child_failed`.
    pub fn step_outcome(&self) -> Outcome {
        match self.status.as_str() {
            "satisfied" => Outcome::completed(),
            "max_iterations_reached" => Outcome { reason: Some("outcome_max_iterations_reached".into()), ..Outcome::of("rejected") },
            "failed" => Outcome::failed("child_failed"),
            _ => Outcome::failed("outcome_unavailable"),
        }
    }
}

/// One finished attempt of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub n: i64,
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Outcome {
    pub(crate) fn of(kind: &str) -> Outcome {
        Outcome { kind: kind.into(), reason: None, branch: None, attempt: None, retry_withheld: None }
    }
    pub fn failed(reason: &str) -> Outcome {
        Outcome { reason: Some(reason.into()), ..Outcome::of("failed") }
    }
    pub fn completed() -> Outcome {
        Outcome::of("completed")
    }
    /// A Decision's settled outcome: the arm it takes.
    pub fn branch(arm: &str, reason: Option<&str>) -> Outcome {
        Outcome { reason: reason.map(String::from), branch: Some(arm.into()), ..Outcome::of("completed") }
    }
    /// A refused or expired approval.
    pub fn denied(reason: Option<&str>) -> Outcome {
        Outcome { reason: reason.map(String::from), ..Outcome::of("denied") }
    }
    pub fn settled(&self) -> bool {
        !matches!(self.kind.as_str(), "running" | "waiting" | "awaiting_approval" | "retrying")
    }

    /// The reason of a failure an attempt ended in: `failed`, or a
    /// Decision's `error` arm.
    fn failure(&self) -> Option<&str> {
        match (self.kind.as_str(), self.branch.as_deref()) {
            ("failed", _) | ("completed", Some("error")) => self.reason.as_deref(),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub id: String,
    pub kind: String,
    #[serde(default)]
    pub outcome: Option<Outcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_session_id: Option<String>,
    /// What the step produced (a child's last message, a parsed value);
    /// kept for its dependents, never shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default)]
    pub started_ms: i64,
    #[serde(default)]
    pub settled_ms: i64,
    /// A `step_wait`'s end (its timer's due time), once waiting.
    #[serde(default)]
    pub wait_until_ms: i64,
    /// A `step_approval`'s ActionApproval, once governance made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_approval_id: Option<String>,
    /// A Check node's CheckEvaluation, once saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation_id: Option<String>,
    /// A Connection step's ConnectionCall for this attempt, once sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_call_id: Option<String>,
    /// A reviewed step's Outcome, once it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_id: Option<String>,
    /// A `continue_selected` step's input, once accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<crate::session_input::SessionInput>,
    /// The attempt under way (from 1 once admitted; more with `retry`).
    #[serde(default)]
    pub attempt: i64,
    /// Each finished attempt, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// A `forEach` step's items and their children.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<Item>,
}

/// One transition, for the trace (`n` gapless from 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    pub n: i64,
    pub step_id: String,
    pub outcome: Outcome,
    pub at_ms: i64,
}

/// A steps firing's program and its progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub target: StepsTarget,
    /// The trigger node this firing entered at.
    pub entry: String,
    /// `pending` or `settled`.
    pub state: String,
    /// `succeeded` or `failed` once settled.
    pub result: Option<String>,
    pub attempt: i64,
    pub steps: Vec<Step>,
    pub transitions: Vec<Transition>,
    /// The CheckEvaluations saved so far, in the order they settled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evaluations: Vec<Evaluation>,
    /// The Connection steps' calls, in the order they were sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub connection_calls: Vec<ConnectionCall>,
    /// Reviewed steps' Outcomes, in the order they ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outcomes: Vec<OutcomeRecord>,
    /// The Memory steps' answers, in the order they came.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<crate::memory_access::MemoryAccess>,
    /// The history steps' selections and moves, in the order they came.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<crate::history_record::HistoryReceipt>,
    /// The Skill steps' proposals and observations, in the order they came.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<crate::skill_record::SkillReceipt>,
    /// Retry timers this change armed (`{step}/retry{n}`, due ms), for the
    /// service to write with the program; never stored.
    #[serde(skip)]
    pub timers: Vec<(String, i64)>,
}

/// A `step_agent` to admit: its child's first message.
#[derive(Debug, Clone, PartialEq)]
pub struct Admit {
    pub step_id: String,
    pub prompt: String,
    /// The `forEach` item the child is for.
    pub item: Option<usize>,
    /// The Outcome reviewing the step (`user.define_outcome`'s fields but
    /// its description, which is the prompt).
    pub outcome: Option<Value>,
}

/// The most a reviewed step's rendered prompt may be: an Outcome's
/// description, in characters (§18.2).
pub const MAX_OUTCOME_DESCRIPTION_CHARS: usize = 4_096;

/// What an advance admitted: children to create and timers to arm.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Admitted {
    pub agents: Vec<Admit>,
    /// `(step id, until ms)` of each `step_wait` now waiting.
    pub waits: Vec<(String, i64)>,
    /// Each `step_approval` now awaiting its approval.
    pub approvals: Vec<String>,
}

impl Admitted {
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty() && self.waits.is_empty() && self.approvals.is_empty()
    }
}

/// An approval a step waits for and governance has not made yet.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalAsk {
    pub step_id: String,
    pub title: String,
    pub ttl_seconds: i64,
    /// A Connection step's call, frozen in the approval.
    pub call: Option<crate::connection_call::CallWork>,
}

fn node<'a>(t: &'a StepsTarget, id: &str) -> Option<&'a Value> {
    t.steps.iter().find(|n| n["id"] == id)
}

fn edge_parts(e: &Value) -> (&str, &str, Option<&str>) {
    (e["kind"].as_str().unwrap_or_default(), e["from"].as_str().unwrap_or_default(), e["to"].as_str())
}

/// A node's Check, for a check Decision or a `step_check`.
fn check_of(n: &Value) -> Option<Check> {
    let raw = if n["kind"] == "step_check" { &n["check"] } else { n["condition"].get("check")? };
    Check::parse(raw).ok()
}

fn is_control(kind: &str) -> bool {
    matches!(kind, "starts" | "then" | "continue" | "otherwise" | "uncertain" | "error")
}

/// Which trigger a firing from `source` enters at: its own kind's, and a
/// manual fire the webhook trigger, else the schedule one.
pub fn entry(t: &StepsTarget, source: &str) -> Option<String> {
    let triggers: Vec<&Value> = t.steps.iter().filter(|n| n["kind"] == "trigger").collect();
    let of = |kinds: &[&str]| {
        triggers
            .iter()
            .find(|n| kinds.contains(&n["trigger"]["kind"].as_str().unwrap_or_default()))
            .map(|n| n["id"].as_str().unwrap_or_default().to_string())
    };
    // A manual fire enters at the webhook, else the subscription, else
    // the schedule (api.md §18.10).
    match source {
        "schedule" => of(&["schedule", "schedule_once"]),
        "subscription" => of(&["subscription"]),
        _ => of(&["webhook"]).or_else(|| of(&["subscription"])).or_else(|| of(&["schedule", "schedule_once"])),
    }
}

impl Program {
    pub fn new(target: StepsTarget, entry: String) -> Program {
        let steps = target
            .steps
            .iter()
            // An outcome is part of the step it reviews, not a step.
            .filter(|n| n["kind"] != "trigger" && n["kind"] != "outcome")
            .map(|n| Step {
                id: n["id"].as_str().unwrap_or_default().to_string(),
                kind: n["kind"].as_str().unwrap_or_default().to_string(),
                outcome: None,
                child_session_id: None,
                output: None,
                started_ms: 0,
                settled_ms: 0,
                wait_until_ms: 0,
                action_approval_id: None,
                evaluation_id: None,
                connection_call_id: None,
                outcome_id: None,
                input: None,
                attempt: 0,
                attempts: vec![],
                items: vec![],
            })
            .collect();
        Program {
            target,
            entry,
            state: "pending".into(),
            result: None,
            attempt: 1,
            steps,
            transitions: vec![],
            evaluations: vec![],
            connection_calls: vec![],
            outcomes: vec![],
            memory: vec![],
            history: vec![],
            skills: vec![],
            timers: vec![],
        }
    }

    /// The timers this change armed, as the store keeps them
    /// (`{firing}/{suffix}`, due ms), taken to go with the write.
    pub fn take_timers(&mut self, firing: &checkfu_core::id::FiringId) -> Vec<(String, i64)> {
        self.timers.drain(..).map(|(suffix, until)| (format!("{firing}/{suffix}"), until)).collect()
    }

    /// Whether step `id` is `running`: the state a step the service answers
    /// (a Memory, history or Skill step) waits for its answer in.
    pub(crate) fn is_running(&self, id: &str) -> bool {
        self.step(id).and_then(|s| s.outcome.as_ref()).is_some_and(|o| o.kind == "running")
    }

    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// Records a step's new outcome (and its transition).
    pub fn set(&mut self, id: &str, outcome: Outcome, now: i64) {
        let n = self.transitions.len() as i64 + 1;
        if let Some(s) = self.steps.iter_mut().find(|s| s.id == id) {
            if s.started_ms == 0 {
                s.started_ms = now;
            }
            s.attempt = s.attempt.max(1);
            if outcome.settled() {
                s.settled_ms = now;
            }
            s.outcome = Some(outcome.clone());
            self.transitions.push(Transition { n, step_id: id.to_string(), outcome, at_ms: now });
        }
    }

    /// Ends a step's attempt with `outcome`: a failure its `retry` repeats
    /// (§18.6) makes it `retrying` until the backoff's end — a timer the
    /// service arms with this write — and anything else settles it. Each
    /// finished attempt is listed in `attempts`.
    pub fn settle_attempt(&mut self, id: &str, outcome: Outcome, now: i64) {
        let retry = node(&self.target, id).and_then(|n| Retry::parse(&n["retry"]).ok());
        let Some(step) = self.steps.iter_mut().find(|s| s.id == id) else { return };
        let n = step.attempt.max(1);
        let failure = outcome.failure().map(String::from);
        let kind = if failure.is_some() { "failed" } else { outcome.kind.as_str() };
        step.attempts.push(Attempt { n, outcome: kind.into(), reason: outcome.reason.clone() });
        if let (Some(reason), Some(r), None) = (failure, retry, &outcome.retry_withheld)
            && RETRIED.contains(&reason.as_str())
            && n < r.max_attempts
        {
            let until = now.saturating_add(r.wait_ms(n));
            step.wait_until_ms = until;
            self.timers.push((format!("{id}/retry{n}"), until));
            self.set(id, Outcome { reason: Some(reason), attempt: Some(n), ..Outcome::of("retrying") }, now);
            return;
        }
        self.set(id, outcome, now);
    }

    /// A retrying step's wait ended: its next attempt is admitted afresh
    /// by the next advance (a new child, call or evaluation). `false` when
    /// it is not retrying.
    pub fn retry_due(&mut self, id: &str) -> bool {
        let Some(s) = self.steps.iter_mut().find(|s| s.id == id) else { return false };
        if s.outcome.as_ref().is_none_or(|o| o.kind != "retrying") {
            return false;
        }
        s.attempt += 1;
        s.outcome = None;
        s.evaluation_id = None;
        s.connection_call_id = None;
        s.outcome_id = None;
        s.action_approval_id = None;
        s.child_session_id = None;
        s.output = None;
        true
    }

    /// The steps awaiting an approval not yet asked for: an approval
    /// step's (its title and TTL), or a Connection step's call.
    pub fn approvals_to_ask(&self, event: &Value) -> Vec<ApprovalAsk> {
        self.steps
            .iter()
            .filter(|s| s.action_approval_id.is_none() && s.outcome.as_ref().is_some_and(|o| o.kind == "awaiting_approval"))
            .filter_map(|s| {
                let n = node(&self.target, &s.id)?;
                let call = match s.kind.as_str() {
                    "step_connection" => Some(self.call_of(s, event)?),
                    _ => None,
                };
                let title = match &call {
                    Some(c) => format!("Call {} through {}", c.tool, c.connection_id),
                    None => n["title"].as_str().unwrap_or("Approve this step").to_string(),
                };
                Some(ApprovalAsk { step_id: s.id.clone(), title, ttl_seconds: n["ttlSeconds"].as_i64().unwrap_or(3_600), call })
            })
            .collect()
    }

    /// The Outcome reviewing a step, as `user.define_outcome` takes it
    /// (without its description): `None` when no outcome node reviews it.
    pub fn reviewed_by(&self, step: &str) -> Option<Value> {
        let e = self.target.edges.iter().find(|e| e["kind"] == "reviews" && e["from"] == step)?;
        let o = node(&self.target, e["to"].as_str()?)?;
        let mut define = serde_json::json!({"rubric": o["rubric"], "max_iterations": o["maxIterations"]});
        for (from, to) in [("criteria", "criteria"), ("report", "report")] {
            if let Some(v) = o.get(from).filter(|v| !v.is_null()) {
                define[to] = v.clone();
            }
        }
        Some(define)
    }

    /// The step a child Session belongs to.
    pub fn step_of_child(&self, session_id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| {
            s.child_session_id.as_deref() == Some(session_id) || s.items.iter().any(|it| it.child_session_id.as_deref() == Some(session_id))
        })
    }

    /// Whether an edge out of a settled source is taken; `None` while the
    /// source is unsettled.
    fn taken(&self, kind: &str, from: &str) -> Option<bool> {
        if kind == "starts" {
            return Some(from == self.entry);
        }
        let o = self.step(from)?.outcome.as_ref().filter(|o| o.settled())?;
        Some(match kind {
            "then" => o.kind == "completed",
            "continue" | "otherwise" | "uncertain" | "error" => o.kind == "completed" && o.branch.as_deref() == Some(kind),
            _ => false,
        })
    }

    /// What a binding as written (`{sourceNodeId, pointer}`) reads.
    pub(crate) fn read_bound(&self, event: &Value, b: &Value) -> Result<Value, &'static str> {
        self.read_binding(event, b["sourceNodeId"].as_str().unwrap_or_default(), b["pointer"].as_str().unwrap_or_default())
    }

    /// A value a binding reads: the event for a trigger, else a settled
    /// step's output; then the pointer. `Err(reason)` when unavailable.
    fn read_binding(&self, event: &Value, source: &str, pointer: &str) -> Result<Value, &'static str> {
        let whole = if node(&self.target, source).is_some_and(|n| n["kind"] == "trigger") {
            event
        } else {
            match self.step(source).filter(|s| s.outcome.as_ref().is_some_and(|o| o.kind == "completed")).and_then(|s| s.output.as_ref()) {
                Some(v) => v,
                None => return Err("binding_unavailable"),
            }
        };
        whole.pointer(pointer).cloned().ok_or("binding_unavailable")
    }

    /// The output an incoming `output` edge feeds into `id`.
    fn fed(&self, id: &str) -> Option<Option<&Value>> {
        let from = self.target.edges.iter().find(|e| e["kind"] == "output" && e["to"] == id)?["from"].as_str()?;
        Some(self.step(from).and_then(|s| s.output.as_ref()))
    }

    /// Settles what can settle now and names the `step_agent` steps to
    /// admit (none while `paused`). Settles the program when nothing is
    /// unfinished or runnable.
    pub fn advance(&mut self, event: &Value, paused: bool, now: i64) -> Admitted {
        let mut admit = Admitted::default();
        loop {
            let mut moved = false;
            for i in 0..self.steps.len() {
                if !paused && !self.steps[i].items.is_empty() && self.steps[i].outcome.as_ref().is_some_and(|o| o.kind == "running") {
                    let n = node(&self.target, &self.steps[i].id).cloned().unwrap_or(Value::Null);
                    let before = admit.agents.len();
                    self.next_items(i, &n, event, now, &mut admit.agents);
                    moved |= admit.agents.len() > before || self.steps[i].outcome.as_ref().is_some_and(|o| o.kind != "running");
                    continue;
                }
                if self.steps[i].outcome.is_some() {
                    continue;
                }
                let id = self.steps[i].id.clone();
                let incoming: Vec<(String, String)> = self
                    .target
                    .edges
                    .iter()
                    .map(edge_parts)
                    .filter(|(k, _, to)| is_control(k) && *to == Some(id.as_str()))
                    .map(|(k, f, _)| (k.to_string(), f.to_string()))
                    .collect();
                let resolved: Vec<Option<bool>> = incoming.iter().map(|(k, f)| self.taken(k, f)).collect();
                if resolved.iter().any(Option::is_none) {
                    continue;
                }
                let from_failed =
                    incoming.iter().any(|(_, f)| self.step(f).and_then(|s| s.outcome.as_ref()).is_some_and(|o| o.kind == "failed"));
                if from_failed || !resolved.contains(&Some(true)) {
                    self.set(&id, Outcome::of("skipped"), now);
                    moved = true;
                    continue;
                }
                if paused {
                    continue;
                }
                let n = node(&self.target, &id).cloned().unwrap_or(Value::Null);
                match self.steps[i].kind.as_str() {
                    "step_agent" if Program::fans_out(&n) => self.start_items(i, &n, event, now, &mut admit.agents),
                    "step_agent" => {
                        let outcome = self.reviewed_by(&id);
                        let prompt = self.prompt(&n, event).and_then(|p| match outcome {
                            Some(_) if p.chars().count() > MAX_OUTCOME_DESCRIPTION_CHARS => Err("rendered_prompt_too_large"),
                            _ => Ok(p),
                        });
                        match prompt {
                            Ok(p) => {
                                self.set(&id, Outcome::of("running"), now);
                                admit.agents.push(Admit { step_id: id, prompt: p, item: None, outcome });
                            }
                            Err(reason) => self.set(&id, Outcome::failed(reason), now),
                        }
                    }
                    "step_join" => {
                        let outcome = self.join(&n);
                        self.set(&id, outcome, now);
                    }
                    "step_parse_json" => {
                        let (outcome, output) = self.parse_json(&n, event);
                        self.steps[i].output = output;
                        self.set(&id, outcome, now);
                    }
                    "decision" if n["condition"]["kind"] == "check_result" => {
                        let outcome = self.reuse(&n);
                        self.set(&id, outcome, now);
                    }
                    "decision" if n["condition"]["kind"] != "check" => {
                        let outcome = self.decide(&n, event);
                        self.set(&id, outcome, now);
                    }
                    // A check Decision or a step_check waits for its
                    // evaluation, which the service asks for once this
                    // is recorded; its input must be there now.
                    "decision" | "step_check" => match self.check_input(&n, event) {
                        Ok(_) => self.set(&id, Outcome::of("running"), now),
                        Err(reason) => self.set(&id, Outcome::failed(reason), now),
                    },
                    // Governance decides, then the call is sent, after
                    // this is recorded (`calls.rs`).
                    "step_connection" => match self.call_arguments(&n, event) {
                        Ok(_) => self.set(&id, Outcome::of("running"), now),
                        Err(reason) => self.set(&id, Outcome::failed(reason), now),
                    },
                    // Sent after this is recorded (`memory_calls.rs`).
                    "step_memory_read" => self.set(&id, Outcome::of("running"), now),
                    "step_memory_write" => match self.memory_write_input(&n, event) {
                        Ok(_) => self.set(&id, Outcome::of("running"), now),
                        Err(reason) => self.set(&id, Outcome::failed(reason), now),
                    },
                    // Selected and recorded after this is recorded
                    // (`history_calls.rs`); a record whose required steps
                    // did not all complete leaves the frontier.
                    "step_select_history" => self.set(&id, Outcome::of("running"), now),
                    "step_record_history" => match self.record_due(&n) {
                        Some(()) => self.set(&id, Outcome::of("running"), now),
                        None => self.set(&id, Outcome::of("skipped"), now),
                    },
                    // Asked after this is recorded (`skill_calls.rs`),
                    // unless there is nothing to ask.
                    "step_skill_proposal" | "step_observe_skill_proposal" => {
                        let outcome = self.skill_at_once(&id, &n, event, now).unwrap_or_else(|| Outcome::of("running"));
                        self.set(&id, outcome, now);
                    }
                    "step_approval" => {
                        self.set(&id, Outcome::of("awaiting_approval"), now);
                        admit.approvals.push(id);
                    }
                    "step_wait" => {
                        let until = now.saturating_add(n["durationSeconds"].as_i64().unwrap_or(1).saturating_mul(1000));
                        self.steps[i].wait_until_ms = until;
                        self.set(&id, Outcome::of("waiting"), now);
                        admit.waits.push((id, until));
                    }
                    _ => self.set(&id, Outcome { reason: Some("not_executable".into()), ..Outcome::of("rejected") }, now),
                }
                moved = true;
            }
            if !moved {
                break;
            }
        }
        let unfinished = self.steps.iter().any(|s| s.outcome.as_ref().is_none_or(|o| !o.settled()));
        if !unfinished && self.state == "pending" {
            self.state = "settled".into();
            let failed = self.steps.iter().any(|s| s.outcome.as_ref().is_some_and(|o| o.kind == "failed"));
            self.result = Some(if failed { "failed" } else { "succeeded" }.into());
        }
        admit
    }

    /// A `step_agent`'s first message (§12.6): the producer's whole output
    /// with an incoming `output` edge; the prompt rendered against the
    /// event with `includeEvent`; else the prompt as written.
    fn prompt(&self, n: &Value, event: &Value) -> Result<String, &'static str> {
        let written = n["prompt"].as_str().unwrap_or_default();
        let text = match self.fed(n["id"].as_str().unwrap_or_default()) {
            Some(Some(Value::String(s))) => s.clone(),
            Some(Some(other)) => other.to_string(),
            Some(None) => return Err("binding_unavailable"),
            None if n["includeEvent"] == true && !event.is_null() => render(written, event).text,
            None => written.to_string(),
        };
        if text.len() > MAX_PROMPT_BYTES {
            return Err("rendered_prompt_too_large");
        }
        Ok(text)
    }

    fn parse_json(&self, n: &Value, event: &Value) -> (Outcome, Option<Value>) {
        let value = match self.read_bound(event, &n["inputBindings"]["content"]) {
            Ok(v) => v,
            Err(reason) => return (Outcome::failed(reason), None),
        };
        let Value::String(text) = value else { return (Outcome::failed("parse_json_input_not_text"), None) };
        let Ok(parsed) = serde_json::from_str::<Value>(&text) else { return (Outcome::failed("invalid_json"), None) };
        let valid = jsonschema::draft202012::new(&n["outputSchema"]).is_ok_and(|v| v.is_valid(&parsed));
        if !valid {
            return (Outcome::failed("schema_mismatch"), None);
        }
        (Outcome::completed(), Some(parsed))
    }

    /// A node's input from its `inputBindings` (an object of the values
    /// they read), else the output an incoming `output` edge feeds it;
    /// `None` when it has neither.
    fn bound_input(&self, n: &Value, event: &Value) -> Result<Option<Value>, &'static str> {
        if let Some(b) = n["inputBindings"].as_object().filter(|b| !b.is_empty()) {
            let mut input = serde_json::Map::new();
            for (name, b) in b {
                input.insert(name.clone(), self.read_bound(event, b)?);
            }
            return Ok(Some(Value::Object(input)));
        }
        match self.fed(n["id"].as_str().unwrap_or_default()) {
            Some(Some(v)) => Ok(Some(v.clone())),
            Some(None) => Err("binding_unavailable"),
            None => Ok(None),
        }
    }

    /// A Check node's input: bound, else fed, else the event (§18.1).
    fn check_input(&self, n: &Value, event: &Value) -> Result<Value, &'static str> {
        Ok(self.bound_input(n, event)?.unwrap_or_else(|| event.clone()))
    }

    /// All predicates → `continue`, else `otherwise`; an unresolvable
    /// binding or pointer fails the step (never routes).
    fn decide(&self, n: &Value, event: &Value) -> Outcome {
        let input = match self.bound_input(n, event) {
            Ok(Some(v)) => v,
            Ok(None) => return Outcome::failed("binding_unavailable"),
            Err(reason) => return Outcome::failed(reason),
        };
        let mut all = true;
        for p in n["condition"]["predicates"].as_array().into_iter().flatten() {
            let Ok(p) = Predicate::parse(p) else { return Outcome::failed("binding_unavailable") };
            if input.pointer(&p.pointer).is_none() {
                return Outcome::failed("pointer_missing");
            }
            all &= p.holds(&input);
        }
        Outcome::branch(if all { "continue" } else { "otherwise" }, None)
    }

    /// A `step_join` (§18.5): when every collected node completed, the
    /// object of their outputs by name; else `skipped`.
    fn join(&mut self, n: &Value) -> Outcome {
        let mut out = serde_json::Map::new();
        for (name, from) in n["collect"].as_object().into_iter().flatten() {
            let done = self.step(from.as_str().unwrap_or_default()).filter(|s| s.outcome.as_ref().is_some_and(|o| o.kind == "completed"));
            match done {
                Some(s) => {
                    out.insert(name.clone(), s.output.clone().unwrap_or(Value::Null));
                }
                None => return Outcome::of("skipped"),
            }
        }
        if let Some(s) = self.steps.iter_mut().find(|s| n["id"] == s.id.as_str()) {
            s.output = Some(Value::Object(out));
        }
        Outcome::completed()
    }

    /// A `check_result` Decision: its rule on the saved answers of its
    /// source, without a call; the `error` arm when they cannot be read.
    fn reuse(&self, n: &Value) -> Outcome {
        let source = n["condition"]["sourceNodeId"].as_str().unwrap_or_default();
        let answers = self
            .step(source)
            .and_then(|s| s.evaluation_id.as_deref())
            .and_then(|id| self.evaluations.iter().find(|e| e.id == id))
            .and_then(Evaluation::typed_answers);
        match (answers, Rule::parse(&n["condition"]["rule"])) {
            (Some(answers), Ok(rule)) => Outcome::branch(rule.verdict(&answers).arm(), None),
            _ => Outcome::branch("error", Some("check_evaluation_unreadable")),
        }
    }

    /// The Check nodes waiting for an evaluation: running, none saved.
    pub fn check_calls(&self, event: &Value) -> Vec<CheckCall> {
        self.steps
            .iter()
            .filter(|s| s.evaluation_id.is_none() && s.outcome.as_ref().is_some_and(|o| o.kind == "running"))
            .filter_map(|s| {
                let n = node(&self.target, &s.id)?;
                let check = check_of(n)?;
                let input = self.check_input(n, event).ok()?;
                Some(CheckCall { step_id: s.id.clone(), attempt: s.attempt.max(1), check, input })
            })
            .collect()
    }

    /// Saves an evaluation and settles its node's attempt by it: a Decision
    /// takes its verdict's arm, or `error` (with the error as its reason);
    /// a `step_check` completes with `{answers, verdict}`, or fails — each
    /// failure retried when the node's `retry` says so. `false` (nothing
    /// changed) when the node already has one for this attempt or is not
    /// waiting.
    pub fn evaluated(&mut self, e: Evaluation, now: i64) -> bool {
        let Some(i) = self.steps.iter().position(|s| s.id == e.step_id) else { return false };
        let step = &mut self.steps[i];
        if step.evaluation_id.is_some() || step.attempt.max(1) != e.attempt || step.outcome.as_ref().is_none_or(|o| o.kind != "running") {
            return false;
        }
        step.evaluation_id = Some(e.id.clone());
        let outcome = match (step.kind.as_str(), &e.verdict, &e.error) {
            ("step_check", Some(verdict), _) => {
                step.output = Some(serde_json::json!({"answers": e.answers, "verdict": verdict}));
                Outcome::completed()
            }
            ("step_check", None, error) => Outcome::failed(error.as_deref().unwrap_or("check_answer_invalid")),
            (_, Some(verdict), _) => Outcome::branch(crate::graph::checks::Answer::parse(verdict).map_or("error", |a| a.arm()), None),
            (_, None, error) => Outcome::branch("error", Some(error.as_deref().unwrap_or("check_answer_invalid"))),
        };
        let id = e.step_id.clone();
        self.evaluations.push(e);
        self.settle_attempt(&id, outcome, now);
        true
    }

    /// The program as a firing shows it (content-free).
    /// The typed form a firing shows.
    pub fn to_spec(&self) -> pb::FiringProgram {
        let at = |ms: i64| if ms > 0 { checkfu_core::time::rfc3339(ms) } else { String::new() };
        pb::FiringProgram {
            state: self.state.clone(),
            result: self.result.clone(),
            attempt: self.attempt,
            steps: self
                .steps
                .iter()
                .map(|s| pb::ProgramStep {
                    id: s.id.clone(),
                    kind: s.kind.clone(),
                    outcome: s.outcome.as_ref().map(|o| pb::StepOutcome {
                        kind: o.kind.clone(),
                        reason: o.reason.clone(),
                        branch: o.branch.clone(),
                        attempt: o.attempt,
                        retry_withheld: o.retry_withheld.clone(),
                    }),
                    started_at: at(s.started_ms),
                    settled_at: at(s.settled_ms),
                    child_session_id: s.child_session_id.clone(),
                    wait_until: at(s.wait_until_ms),
                    action_approval_id: s.action_approval_id.clone(),
                    evaluation_id: s.evaluation_id.clone(),
                    connection_call_id: s.connection_call_id.clone(),
                    outcome_id: s.outcome_id.clone(),
                    input: s.input.as_ref().map(|i| i.to_spec()),
                    attempt: s.attempt,
                    attempts: s
                        .attempts
                        .iter()
                        .map(|a| pb::StepAttempt { n: a.n, outcome: a.outcome.clone(), reason: a.reason.clone() })
                        .collect(),
                    items: s
                        .items
                        .iter()
                        .map(|i| pb::StepItem {
                            index: i.index as i64,
                            child_session_id: i.child_session_id.clone().filter(|c| !c.is_empty()),
                            outcome: i.outcome.clone(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target(steps: Value, edges: Value) -> StepsTarget {
        StepsTarget {
            program_sha256: String::new(),
            steps: serde_json::from_value(steps).expect("steps"),
            edges: serde_json::from_value(edges).expect("edges"),
        }
    }

    fn hook() -> Value {
        json!({"kind": "trigger", "id": "hook", "trigger": {"kind": "webhook", "dedupe_key": "/id"}})
    }

    fn decision_program() -> Program {
        let t = target(
            json!([hook(), {"kind": "decision", "id": "d", "inputBindings": {"flag": {"sourceNodeId": "hook", "pointer": "/flag"}},
                "condition": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/flag", "value": false}]}},
                {"kind": "step_agent", "id": "b", "prompt": "B"}]),
            json!([{"kind": "starts", "from": "hook", "to": "d"}, {"kind": "continue", "from": "d", "to": "b"}, {"kind": "otherwise", "from": "d", "to": null}]),
        );
        Program::new(t, "hook".into())
    }

    #[test]
    fn decisions_route_without_coercion_and_fail_on_missing_bindings() {
        let mut p = decision_program();
        assert_eq!(
            p.advance(&json!({"flag": false}), false, 1).agents,
            vec![Admit { step_id: "b".into(), prompt: "B".into(), item: None, outcome: None }]
        );
        assert_eq!(p.step("d").and_then(|s| s.outcome.clone()).and_then(|o| o.branch), Some("continue".into()));
        assert_eq!(p.state, "pending", "b runs");

        let mut p = decision_program();
        assert!(p.advance(&json!({"flag": "false"}), false, 1).is_empty());
        assert_eq!((p.state.as_str(), p.result.as_deref()), ("settled", Some("succeeded")), "otherwise → finish");
        assert_eq!(p.step("b").and_then(|s| s.outcome.clone()).map(|o| o.kind), Some("skipped".into()));

        let mut p = decision_program();
        assert!(p.advance(&json!({}), false, 1).is_empty());
        assert_eq!(p.step("d").and_then(|s| s.outcome.clone()), Some(Outcome::failed("binding_unavailable")));
        assert_eq!(p.result.as_deref(), Some("failed"));
        let ns: Vec<i64> = p.transitions.iter().map(|t| t.n).collect();
        assert_eq!(ns, [1, 2], "gapless");
    }

    #[test]
    fn parse_json_checks_text_json_and_schema_then_feeds_its_output() {
        let t = target(
            json!([hook(), {"kind": "step_parse_json", "id": "p", "inputBindings": {"content": {"sourceNodeId": "hook", "pointer": "/payload"}},
                "outputSchema": {"type": "object", "properties": {"escalate": {"type": "boolean"}}, "required": ["escalate"]}},
                {"kind": "decision", "id": "d", "condition": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/escalate", "value": true}]}},
                {"kind": "step_agent", "id": "b", "prompt": "B"}]),
            json!([{"kind": "starts", "from": "hook", "to": "p"}, {"kind": "then", "from": "p", "to": "d"}, {"kind": "output", "from": "p", "to": "d"},
                {"kind": "continue", "from": "d", "to": "b"}, {"kind": "otherwise", "from": "d", "to": null}]),
        );
        let run = |payload: Value| {
            let mut p = Program::new(t.clone(), "hook".into());
            let admitted = p.advance(&json!({"payload": payload}), false, 1);
            (p.step("p").and_then(|s| s.outcome.clone()).and_then(|o| o.reason), admitted.agents.len())
        };
        assert_eq!(run(json!("not json")), (Some("invalid_json".into()), 0));
        assert_eq!(run(json!("{\"escalate\":1}")), (Some("schema_mismatch".into()), 0));
        assert_eq!(run(json!({"escalate": true})), (Some("parse_json_input_not_text".into()), 0));
        assert_eq!(run(json!("{\"escalate\":true}")), (None, 1), "b runs");
    }

    #[test]
    fn output_edges_feed_the_producers_whole_output_and_pause_admits_nothing() {
        let t = target(
            json!([hook(), {"kind": "step_agent", "id": "a", "prompt": "P"}, {"kind": "step_agent", "id": "b", "prompt": "ignored"}]),
            json!([{"kind": "starts", "from": "hook", "to": "a"}, {"kind": "then", "from": "a", "to": "b"}, {"kind": "output", "from": "a", "to": "b"}]),
        );
        let mut p = Program::new(t, "hook".into());
        assert!(p.advance(&Value::Null, true, 1).is_empty(), "paused: nothing admitted");
        assert_eq!(
            p.advance(&Value::Null, false, 2).agents,
            vec![Admit { step_id: "a".into(), prompt: "P".into(), item: None, outcome: None }]
        );
        assert!(p.advance(&Value::Null, false, 3).is_empty(), "a is running: admitted once");
        if let Some(s) = p.steps.iter_mut().find(|s| s.id == "a") {
            s.output = Some(json!("echo: P"));
        }
        p.set("a", Outcome::completed(), 4);
        assert_eq!(
            p.advance(&Value::Null, false, 5).agents,
            vec![Admit { step_id: "b".into(), prompt: "echo: P".into(), item: None, outcome: None }]
        );
        p.set("b", Outcome::failed("child_failed"), 6);
        p.advance(&Value::Null, false, 7);
        assert_eq!((p.state.as_str(), p.result.as_deref()), ("settled", Some("failed")));
    }

    #[test]
    fn a_wait_arms_a_timer_once_and_its_dependents_follow_it() {
        let t = target(
            json!([hook(), {"kind": "step_wait", "id": "w", "durationSeconds": 5}, {"kind": "step_agent", "id": "a", "prompt": "A"}]),
            json!([{"kind": "starts", "from": "hook", "to": "w"}, {"kind": "then", "from": "w", "to": "a"}]),
        );
        let mut p = Program::new(t, "hook".into());
        let first = p.advance(&Value::Null, false, 1_000);
        assert_eq!((first.agents.len(), first.waits.clone()), (0, vec![("w".to_string(), 6_000)]));
        assert!(p.advance(&Value::Null, false, 2_000).is_empty(), "armed once");
        assert_eq!(checkfu_proto::firing_trace::program(&p.to_spec())["steps"][0]["outcome"]["kind"], "waiting");
        p.set("w", Outcome::completed(), 6_000);
        assert_eq!(p.advance(&Value::Null, false, 6_001).agents.len(), 1);
    }

    fn k() -> Value {
        json!({"modelRoutingProfileId": "mrp_e", "questions": [{"name": "billing", "question": "require: invoice"},
            {"name": "tech", "question": "uncertain: maybe"}], "rule": "billing"})
    }

    fn evaluation(step: &str, answers: Option<Value>, verdict: Option<&str>, error: Option<&str>) -> Evaluation {
        Evaluation {
            id: format!("ceval_{step}"),
            step_id: step.into(),
            attempt: 1,
            provider: "scripted".into(),
            model: "m".into(),
            qualification_id: Some("evq_1".into()),
            answers: answers.map(|a| serde_json::from_value(a).expect("answers")),
            verdict: verdict.map(String::from),
            error: error.map(String::from),
            usage: Default::default(),
            at_ms: 2,
        }
    }

    /// hook → d(check K) -otherwise→ r(check_result tech) -continue→ a.
    fn classify_and_route() -> Program {
        let arms = |from: &str, cont: Option<&str>, other: Option<&str>| {
            vec![
                json!({"kind": "continue", "from": from, "to": cont}),
                json!({"kind": "otherwise", "from": from, "to": other}),
                json!({"kind": "uncertain", "from": from, "to": null}),
                json!({"kind": "error", "from": from, "to": null}),
            ]
        };
        let mut edges = vec![json!({"kind": "starts", "from": "hook", "to": "d"})];
        edges.extend(arms("d", None, Some("r")));
        edges.extend(arms("r", Some("a"), None));
        let t = target(
            json!([hook(), {"kind": "decision", "id": "d", "condition": {"kind": "check", "check": k()}},
                {"kind": "decision", "id": "r", "condition": {"kind": "check_result", "sourceNodeId": "d", "rule": {"not": "tech"}}},
                {"kind": "step_agent", "id": "a", "prompt": "A"}]),
            Value::Array(edges),
        );
        Program::new(t, "hook".into())
    }

    #[test]
    fn a_check_waits_for_one_evaluation_and_a_check_result_reuses_its_answers() {
        let mut p = classify_and_route();
        let event = json!({"t": "hi"});
        assert!(p.advance(&event, false, 1).is_empty());
        assert_eq!(p.step("d").and_then(|s| s.outcome.clone()).map(|o| o.kind), Some("running".into()));
        let calls = p.check_calls(&event);
        assert_eq!(calls.len(), 1);
        assert_eq!((calls[0].step_id.as_str(), &calls[0].input), ("d", &event), "an unbound Check reads the event");
        let e = evaluation("d", Some(json!({"billing": "no", "tech": "no"})), Some("no"), None);
        assert!(p.evaluated(e.clone(), 2));
        assert!(!p.evaluated(evaluation("d", None, None, Some("check_provider_error")), 3), "saved once");
        assert!(p.check_calls(&event).is_empty(), "nothing asks again");
        let admitted = p.advance(&event, false, 3);
        assert_eq!(p.step("d").and_then(|s| s.outcome.clone()).and_then(|o| o.branch), Some("otherwise".into()));
        assert_eq!(p.step("r").and_then(|s| s.outcome.clone()).and_then(|o| o.branch), Some("continue".into()), "not tech=no: yes");
        assert_eq!(admitted.agents.len(), 1, "a runs");
        assert_eq!(p.evaluations, vec![e], "one evaluation for both Decisions");
        assert_eq!(p.to_spec().steps[0].evaluation_id.as_deref(), Some("ceval_d"));
    }

    #[test]
    fn an_evaluation_error_takes_the_error_arm_of_a_decision_and_fails_a_step_check() {
        let mut p = classify_and_route();
        p.advance(&json!({}), false, 1);
        p.evaluated(evaluation("d", None, None, Some("evaluator_unqualified")), 2);
        p.advance(&json!({}), false, 3);
        let d = p.step("d").and_then(|s| s.outcome.clone()).expect("settled");
        assert_eq!((d.branch.as_deref(), d.reason.as_deref()), (Some("error"), Some("evaluator_unqualified")));
        assert_eq!((p.state.as_str(), p.result.as_deref()), ("settled", Some("succeeded")), "the error arm ends it");

        let t = target(
            json!([hook(), {"kind": "step_check", "id": "c", "inputBindings": {"t": {"sourceNodeId": "hook", "pointer": "/t"}}, "check": k()},
                {"kind": "step_agent", "id": "a", "prompt": "A"}]),
            json!([{"kind": "starts", "from": "hook", "to": "c"}, {"kind": "then", "from": "c", "to": "a"}]),
        );
        let mut p = Program::new(t.clone(), "hook".into());
        p.advance(&json!({"t": "invoice"}), false, 1);
        assert_eq!(p.check_calls(&json!({"t": "invoice"}))[0].input, json!({"t": "invoice"}), "bound input");
        p.evaluated(evaluation("c", Some(json!({"billing": "yes", "tech": "yes"})), Some("yes"), None), 2);
        assert_eq!(
            p.step("c").and_then(|s| s.output.clone()),
            Some(json!({"answers": {"billing": "yes", "tech": "yes"}, "verdict": "yes"}))
        );
        assert_eq!(p.advance(&json!({}), false, 3).agents.len(), 1, "then: completed whatever the verdict");

        let mut p = Program::new(t.clone(), "hook".into());
        p.advance(&json!({"t": "boom"}), false, 1);
        p.evaluated(evaluation("c", None, None, Some("check_provider_error")), 2);
        p.advance(&json!({}), false, 3);
        assert_eq!(p.step("c").and_then(|s| s.outcome.clone()), Some(Outcome::failed("check_provider_error")));
        assert_eq!(p.step("a").and_then(|s| s.outcome.clone()).map(|o| o.kind), Some("skipped".into()));
        assert_eq!(p.result.as_deref(), Some("failed"));

        let mut p = Program::new(t, "hook".into());
        p.advance(&json!({}), false, 1);
        assert_eq!(p.step("c").and_then(|s| s.outcome.clone()), Some(Outcome::failed("binding_unavailable")), "never an evaluation");
    }

    #[test]
    fn a_retried_check_waits_between_attempts_and_settles_after_its_last() {
        let t = target(
            json!([hook(), {"kind": "step_check", "id": "c", "check": k(), "retry": {"maxAttempts": 3, "backoffSeconds": 1, "multiplier": 2}}]),
            json!([{"kind": "starts", "from": "hook", "to": "c"}]),
        );
        let mut p = Program::new(t.clone(), "hook".into());
        let event = json!({"t": "boom"});
        p.advance(&event, false, 1_000);
        let failing = |n: i64, error: &str| Evaluation { attempt: n, id: format!("ceval_{n}"), ..evaluation("c", None, None, Some(error)) };
        assert!(p.evaluated(failing(1, "check_provider_error"), 2_000));
        let c = p.step("c").cloned().expect("c");
        assert_eq!(c.outcome, Some(Outcome { reason: Some("check_provider_error".into()), attempt: Some(1), ..Outcome::of("retrying") }));
        assert_eq!(p.timers, vec![("c/retry1".to_string(), 3_000)], "backoff 1 s after attempt 1");
        assert!(p.check_calls(&event).is_empty(), "nothing is asked while it waits");
        p.timers.clear();
        assert!(p.retry_due("c") && !p.retry_due("c"), "once");
        p.advance(&event, false, 3_000);
        let calls = p.check_calls(&event);
        assert_eq!(calls.iter().map(|c| c.attempt).collect::<Vec<_>>(), vec![2], "a new evaluation for attempt 2");
        assert!(!p.evaluated(failing(1, "check_provider_error"), 3_100), "a late answer to attempt 1 is not attempt 2's");
        assert!(p.evaluated(failing(2, "check_answer_invalid"), 3_200));
        assert_eq!(p.timers, vec![("c/retry2".to_string(), 5_200)], "2 s: the multiplier");
        p.retry_due("c");
        p.advance(&event, false, 5_200);
        assert!(p.evaluated(failing(3, "check_provider_error"), 5_300));
        assert_eq!(p.step("c").and_then(|s| s.outcome.clone()), Some(Outcome::failed("check_provider_error")), "after the last");
        assert_eq!(p.step("c").map(|s| s.attempts.len()), Some(3));
        assert_eq!(p.evaluations.len(), 3, "one evaluation per attempt");
        p.advance(&event, false, 5_400);
        assert_eq!(p.result.as_deref(), Some("failed"));
        let kinds: Vec<&str> = p.transitions.iter().map(|t| t.outcome.kind.as_str()).collect();
        assert_eq!(kinds, ["running", "retrying", "running", "retrying", "running", "failed"]);

        // Never retried: an error that is no transient failure, or a verdict.
        let mut p = Program::new(t.clone(), "hook".into());
        p.advance(&event, false, 1);
        p.evaluated(failing(1, "evaluator_unqualified"), 2);
        assert_eq!(p.step("c").and_then(|s| s.outcome.clone()), Some(Outcome::failed("evaluator_unqualified")));
        let mut p = Program::new(t, "hook".into());
        p.advance(&event, false, 1);
        p.evaluated(evaluation("c", Some(json!({"billing": "no", "tech": "no"})), Some("no"), None), 2);
        assert_eq!(p.step("c").and_then(|s| s.outcome.clone()).map(|o| o.kind), Some("completed".into()));
        assert!(p.timers.is_empty());
    }

    #[test]
    fn a_failed_child_is_retried_only_when_it_left_no_call_of_unknown_effect() {
        let t = target(
            json!([hook(), {"kind": "step_agent", "id": "a", "prompt": "P", "retry": {"maxAttempts": 2, "backoffSeconds": 5}}]),
            json!([{"kind": "starts", "from": "hook", "to": "a"}]),
        );
        let mut p = Program::new(t.clone(), "hook".into());
        p.advance(&Value::Null, false, 1_000);
        p.settle_attempt("a", Outcome::failed("child_failed"), 2_000);
        assert_eq!(p.step("a").and_then(|s| s.outcome.clone()).map(|o| o.kind), Some("retrying".into()));
        assert_eq!(p.timers, vec![("a/retry1".to_string(), 7_000)]);
        p.retry_due("a");
        let again = p.advance(&Value::Null, false, 7_000);
        assert_eq!(again.agents.len(), 1, "a new child");
        assert_eq!(p.step("a").map(|s| s.attempt), Some(2));

        let mut p = Program::new(t.clone(), "hook".into());
        p.advance(&Value::Null, false, 1_000);
        let withheld = Outcome { retry_withheld: Some("effect_unknown".into()), ..Outcome::failed("child_failed") };
        p.settle_attempt("a", withheld.clone(), 2_000);
        assert_eq!(p.step("a").and_then(|s| s.outcome.clone()), Some(withheld), "settled, never repeated");
        assert!(p.timers.is_empty());

        let mut p = Program::new(t, "hook".into());
        p.advance(&Value::Null, false, 1_000);
        p.settle_attempt("a", Outcome::failed("child_interrupted"), 2_000);
        assert_eq!(p.step("a").and_then(|s| s.outcome.clone()), Some(Outcome::failed("child_interrupted")), "interrupts are never retried");
    }

    fn fan_out() -> StepsTarget {
        target(
            json!([hook(), {"kind": "step_agent", "id": "a", "prompt": "call lookup {{item.k}} #{{item_index}}",
                "forEach": {"items": {"sourceNodeId": "hook", "pointer": "/items"}, "maxItems": 3, "concurrency": 2}}]),
            json!([{"kind": "starts", "from": "hook", "to": "a"}]),
        )
    }

    /// What the service does with an admitted child: mints its Session.
    fn mint(p: &mut Program, admitted: &Admitted) -> Vec<String> {
        admitted
            .agents
            .iter()
            .map(|ad| {
                let id = format!("s{}", ad.item.expect("an item"));
                p.steps[0].items[ad.item.unwrap_or_default()].child_session_id = Some(id.clone());
                id
            })
            .collect()
    }

    #[test]
    fn for_each_starts_children_in_item_order_within_its_concurrency_and_keeps_item_order() {
        let mut p = Program::new(fan_out(), "hook".into());
        let event = json!({"items": [{"k": "x"}, {"k": "y"}, {"k": "z"}]});
        let first = p.advance(&event, false, 1);
        let prompts: Vec<(Option<usize>, String)> = first.agents.iter().map(|a| (a.item, a.prompt.clone())).collect();
        assert_eq!(prompts, vec![(Some(0), "call lookup x #0".to_string()), (Some(1), "call lookup y #1".to_string())]);
        assert_eq!(mint(&mut p, &first), ["s0", "s1"]);
        assert!(p.advance(&event, false, 2).agents.is_empty(), "two unsettled: no third");
        assert!(p.item_settled("a", "s1", &Outcome::completed(), Some(json!("out y"))), "the second finishes first");
        let next = p.advance(&event, false, 3);
        assert_eq!(next.agents.iter().map(|a| a.item).collect::<Vec<_>>(), vec![Some(2)]);
        mint(&mut p, &next);
        assert_eq!(p.step_of_child("s2").map(|s| s.id.as_str()), Some("a"));
        p.item_settled("a", "s2", &Outcome::completed(), Some(json!("out z")));
        p.advance(&event, false, 4);
        assert_eq!(p.step("a").and_then(|s| s.outcome.clone()).map(|o| o.kind), Some("running".into()), "s0 is unsettled");
        p.item_settled("a", "s0", &Outcome::completed(), Some(json!("out x")));
        p.advance(&event, false, 5);
        assert_eq!(p.step("a").and_then(|s| s.output.clone()), Some(json!(["out x", "out y", "out z"])), "item order");
        assert_eq!((p.state.as_str(), p.result.as_deref()), ("settled", Some("succeeded")));
    }

    #[test]
    fn a_refused_item_fails_alone_and_its_step_once_its_siblings_settled() {
        let event = json!({"items": [{"k": "x"}, {"k": "y"}, {"k": "z"}]});
        // Refused by the sessions service after it was asked.
        let mut p = Program::new(fan_out(), "hook".into());
        let first = p.advance(&event, false, 1);
        mint(&mut p, &first);
        p.child_refused("a", "s1", "child_admission_denied", 2);
        assert!(p.advance(&event, false, 3).agents.is_empty(), "nothing starts after a failure");
        assert_eq!(p.step("a").and_then(|s| s.outcome.clone()).map(|o| o.kind), Some("running".into()), "s0 still runs");
        p.item_settled("a", "s0", &Outcome::completed(), Some(json!("out x")));
        p.advance(&event, false, 4);
        assert_eq!(p.step("a").and_then(|s| s.outcome.clone()), Some(Outcome::failed("for_each_item_failed")));
        assert_eq!(p.steps[0].items[1].outcome.as_deref(), Some("child_admission_denied"));
        // Refused by the re-check before it was asked for.
        let mut p = Program::new(fan_out(), "hook".into());
        let first = p.advance(&event, false, 1);
        p.admission_refused(&first.agents[1], 2);
        mint(&mut p, &Admitted { agents: vec![first.agents[0].clone()], ..Admitted::default() });
        assert!(p.advance(&event, false, 3).agents.is_empty());
        p.item_settled("a", "s0", &Outcome::completed(), None);
        p.advance(&event, false, 4);
        assert_eq!(p.step("a").and_then(|s| s.outcome.clone()), Some(Outcome::failed("for_each_item_failed")));
        // A step with no items fails at once.
        let mut p = decision_program();
        p.advance(&json!({"flag": false}), false, 1);
        p.child_refused("b", "sess_b", "child_admission_denied", 2);
        assert_eq!(p.step("b").and_then(|s| s.outcome.clone()), Some(Outcome::failed("child_admission_denied")));
    }

    #[test]
    fn for_each_refuses_what_it_cannot_fan_out_and_stops_starting_after_a_failure() {
        for (event, reason) in [
            (json!({"items": [1, 2, 3, 4]}), "for_each_too_many_items"),
            (json!({"items": {}}), "for_each_not_array"),
            (json!({}), "binding_unavailable"),
        ] {
            let mut p = Program::new(fan_out(), "hook".into());
            assert!(p.advance(&event, false, 1).agents.is_empty(), "no child: {reason}");
            assert_eq!(p.step("a").and_then(|s| s.outcome.clone()), Some(Outcome::failed(reason)));
        }
        let mut p = Program::new(fan_out(), "hook".into());
        let event = json!({"items": [1, 2, 3]});
        let first = p.advance(&event, false, 1);
        mint(&mut p, &first);
        p.item_settled("a", "s0", &Outcome::failed("child_failed"), None);
        assert!(p.advance(&event, false, 2).agents.is_empty(), "after a failure none starts");
        p.item_settled("a", "s1", &Outcome::completed(), Some(json!("ok")));
        p.advance(&event, false, 3);
        assert_eq!(p.step("a").and_then(|s| s.outcome.clone()), Some(Outcome::failed("for_each_item_failed")));
        assert_eq!(p.step("a").map(|s| s.items.iter().filter(|i| i.child_session_id.is_some()).count()), Some(2));
    }

    #[test]
    fn a_join_gathers_completed_outputs_by_name_or_is_skipped() {
        let t = target(
            json!([hook(), {"kind": "step_agent", "id": "a", "prompt": "A"},
                {"kind": "step_parse_json", "id": "p", "inputBindings": {"content": {"sourceNodeId": "hook", "pointer": "/p"}}, "outputSchema": {}},
                {"kind": "step_join", "id": "j", "mode": "all_completed", "collect": {"x": "a", "y": "p"}},
                {"kind": "step_agent", "id": "b", "prompt": "ignored"}]),
            json!([{"kind": "starts", "from": "hook", "to": "a"}, {"kind": "starts", "from": "hook", "to": "p"},
                {"kind": "then", "from": "a", "to": "j"}, {"kind": "then", "from": "p", "to": "j"},
                {"kind": "then", "from": "j", "to": "b"}, {"kind": "output", "from": "j", "to": "b"}]),
        );
        let run = |payload: &str| {
            let mut p = Program::new(t.clone(), "hook".into());
            let event = json!({"p": payload});
            p.advance(&event, false, 1);
            if let Some(s) = p.steps.iter_mut().find(|s| s.id == "a") {
                s.output = Some(json!("echo: A"));
            }
            p.set("a", Outcome::completed(), 2);
            let admitted = p.advance(&event, false, 3);
            (p.step("j").and_then(|s| s.outcome.clone()).map(|o| o.kind), admitted.agents.first().map(|a| a.prompt.clone()))
        };
        assert_eq!(run("{\"k\":1}"), (Some("completed".into()), Some(r#"{"x":"echo: A","y":{"k":1}}"#.into())));
        assert_eq!(run("no"), (Some("skipped".into()), None), "p failed: the join is skipped");
    }

    #[test]
    fn a_reviewed_step_defines_its_outcome_with_the_prompt() {
        let t = target(
            json!([hook(), {"kind": "step_agent", "id": "a", "prompt": "say hello"},
                {"kind": "outcome", "id": "o", "rubric": "require: goodbye", "maxIterations": 3,
                 "criteria": [{"name": "kind", "question": "require: hello", "failure": "fail_closed"}]}]),
            json!([{"kind": "starts", "from": "hook", "to": "a"}, {"kind": "reviews", "from": "a", "to": "o"}]),
        );
        let mut p = Program::new(t.clone(), "hook".into());
        assert_eq!(p.steps.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["a"], "an outcome is not a step");
        let admitted = p.advance(&Value::Null, false, 1).agents;
        let define = json!({"rubric": "require: goodbye", "max_iterations": 3,
            "criteria": [{"name": "kind", "question": "require: hello", "failure": "fail_closed"}]});
        assert_eq!(admitted, vec![Admit { step_id: "a".into(), prompt: "say hello".into(), item: None, outcome: Some(define) }]);
        let mut long = t;
        long.steps[1]["prompt"] = json!("x".repeat(MAX_OUTCOME_DESCRIPTION_CHARS + 1));
        let mut p = Program::new(long, "hook".into());
        assert!(p.advance(&Value::Null, false, 1).agents.is_empty());
        assert_eq!(p.step("a").and_then(|s| s.outcome.clone()), Some(Outcome::failed("rendered_prompt_too_large")));
        let ended = |status: &str| {
            OutcomeRecord {
                step_id: "a".into(),
                outcome_id: "out_1".into(),
                session_id: "sess_1".into(),
                status: status.into(),
                iterations_used: 2,
            }
            .step_outcome()
        };
        assert_eq!(ended("satisfied"), Outcome::completed());
        assert_eq!(
            (ended("max_iterations_reached").kind.as_str(), ended("max_iterations_reached").reason.as_deref()),
            ("rejected", Some("outcome_max_iterations_reached"))
        );
        assert_eq!(ended("interrupted"), Outcome::failed("outcome_unavailable"));
        assert_eq!(ended("active"), Outcome::failed("outcome_unavailable"));
        assert_eq!(ended("failed"), Outcome::failed("child_failed"));
    }
}
