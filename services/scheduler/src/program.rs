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

use crate::model::{MAX_PROMPT_BYTES, StepsTarget, render};
use crate::predicates::Predicate;
use checkfu_proto::scheduler::v1 as pb;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A step's outcome (§12.5): unfinished `running`, `waiting`,
/// `awaiting_approval`; settled `completed` (a Decision adds `branch`),
/// `failed` (with `reason`), `denied`, `skipped`, `rejected`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

impl Outcome {
    fn of(kind: &str) -> Outcome {
        Outcome { kind: kind.into(), reason: None, branch: None }
    }
    pub fn failed(reason: &str) -> Outcome {
        Outcome { kind: "failed".into(), reason: Some(reason.into()), branch: None }
    }
    pub fn completed() -> Outcome {
        Outcome::of("completed")
    }
    /// A refused or expired approval.
    pub fn denied(reason: Option<&str>) -> Outcome {
        Outcome { kind: "denied".into(), reason: reason.map(String::from), branch: None }
    }
    pub fn settled(&self) -> bool {
        !matches!(self.kind.as_str(), "running" | "waiting" | "awaiting_approval")
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
}

/// A `step_agent` to admit: its child's first message.
#[derive(Debug, Clone, PartialEq)]
pub struct Admit {
    pub step_id: String,
    pub prompt: String,
}

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

fn node<'a>(t: &'a StepsTarget, id: &str) -> Option<&'a Value> {
    t.steps.iter().find(|n| n["id"] == id)
}

fn edge_parts(e: &Value) -> (&str, &str, Option<&str>) {
    (e["kind"].as_str().unwrap_or_default(), e["from"].as_str().unwrap_or_default(), e["to"].as_str())
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
    match source {
        "schedule" => of(&["schedule", "schedule_once"]),
        _ => of(&["webhook"]).or_else(|| of(&["schedule", "schedule_once"])),
    }
}

impl Program {
    pub fn new(target: StepsTarget, entry: String) -> Program {
        let steps = target
            .steps
            .iter()
            .filter(|n| n["kind"] != "trigger")
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
            })
            .collect();
        Program { target, entry, state: "pending".into(), result: None, attempt: 1, steps, transitions: vec![] }
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
            if outcome.settled() {
                s.settled_ms = now;
            }
            s.outcome = Some(outcome.clone());
            self.transitions.push(Transition { n, step_id: id.to_string(), outcome, at_ms: now });
        }
    }

    /// The step a child Session belongs to.
    pub fn step_of_child(&self, session_id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.child_session_id.as_deref() == Some(session_id))
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
            "continue" | "otherwise" => o.kind == "completed" && o.branch.as_deref() == Some(kind),
            _ => false,
        })
    }

    /// A value a binding reads: the event for a trigger, else a settled
    /// step's output; then the pointer. `Err(reason)` when unavailable.
    fn read(&self, event: &Value, source: &str, pointer: &str) -> Result<Value, &'static str> {
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
                    "step_agent" => {
                        let prompt = self.prompt(&n, event);
                        match prompt {
                            Ok(p) => {
                                self.set(&id, Outcome::of("running"), now);
                                admit.agents.push(Admit { step_id: id, prompt: p });
                            }
                            Err(reason) => self.set(&id, Outcome::failed(reason), now),
                        }
                    }
                    "step_parse_json" => {
                        let (outcome, output) = self.parse_json(&n, event);
                        self.steps[i].output = output;
                        self.set(&id, outcome, now);
                    }
                    "decision" => {
                        let outcome = self.decide(&n, event);
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
                    _ => self.set(&id, Outcome { kind: "rejected".into(), reason: Some("not_executable".into()), branch: None }, now),
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
        let b = &n["inputBindings"]["content"];
        let value = match self.read(event, b["sourceNodeId"].as_str().unwrap_or_default(), b["pointer"].as_str().unwrap_or_default()) {
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

    /// All predicates → `continue`, else `otherwise`; an unresolvable
    /// binding or pointer fails the step (never routes).
    fn decide(&self, n: &Value, event: &Value) -> Outcome {
        let bindings = n["inputBindings"].as_object().filter(|b| !b.is_empty());
        let input = match bindings {
            Some(b) => {
                let mut input = serde_json::Map::new();
                for (name, b) in b {
                    match self.read(event, b["sourceNodeId"].as_str().unwrap_or_default(), b["pointer"].as_str().unwrap_or_default()) {
                        Ok(v) => {
                            input.insert(name.clone(), v);
                        }
                        Err(reason) => return Outcome::failed(reason),
                    }
                }
                Value::Object(input)
            }
            None => match self.fed(n["id"].as_str().unwrap_or_default()) {
                Some(Some(v)) => v.clone(),
                _ => return Outcome::failed("binding_unavailable"),
            },
        };
        let mut all = true;
        for p in n["condition"]["predicates"].as_array().into_iter().flatten() {
            let Ok(p) = Predicate::parse(p) else { return Outcome::failed("binding_unavailable") };
            if input.pointer(&p.pointer).is_none() {
                return Outcome::failed("pointer_missing");
            }
            all &= p.holds(&input);
        }
        Outcome { kind: "completed".into(), reason: None, branch: Some(if all { "continue" } else { "otherwise" }.into()) }
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
                    }),
                    started_at: at(s.started_ms),
                    settled_at: at(s.settled_ms),
                    child_session_id: s.child_session_id.clone(),
                    wait_until: at(s.wait_until_ms),
                    action_approval_id: s.action_approval_id.clone(),
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
        assert_eq!(p.advance(&json!({"flag": false}), false, 1).agents, vec![Admit { step_id: "b".into(), prompt: "B".into() }]);
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
        assert_eq!(p.advance(&Value::Null, false, 2).agents, vec![Admit { step_id: "a".into(), prompt: "P".into() }]);
        assert!(p.advance(&Value::Null, false, 3).is_empty(), "a is running: admitted once");
        if let Some(s) = p.steps.iter_mut().find(|s| s.id == "a") {
            s.output = Some(json!("echo: P"));
        }
        p.set("a", Outcome::completed(), 4);
        assert_eq!(p.advance(&Value::Null, false, 5).agents, vec![Admit { step_id: "b".into(), prompt: "echo: P".into() }]);
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
}
