//! The rules that move a `step_connection` on (api.md §18.3), on the
//! program: the arguments it sends, the work it waits on, and how a call
//! and its answer are recorded. The service (`calls.rs`) asks governance
//! and the capability gateway, and writes what these decide.

use crate::connection_call::{CallAnswer, CallWork, ConnectionCall};
use crate::program::{Outcome, Program, Step};
use serde_json::{Map, Value, json};

impl Program {
    /// A Connection step's arguments: those written, each bound key
    /// replaced by what its binding reads, checked against the tool's
    /// schema pinned when planned (`arguments_invalid`).
    pub(crate) fn call_arguments(&self, n: &Value, event: &Value) -> Result<Value, &'static str> {
        let mut arguments = n["arguments"].as_object().cloned().unwrap_or_default();
        for (key, b) in n["argumentBindings"].as_object().into_iter().flatten() {
            arguments.insert(key.clone(), self.read_bound(event, b)?);
        }
        let arguments = Value::Object(arguments);
        if arguments.to_string().len() > crate::graph::document::MAX_ARGUMENTS_BYTES {
            return Err("arguments_invalid");
        }
        let schema = n.get("inputSchema").filter(|s| s.is_object()).cloned().unwrap_or_else(|| json!({}));
        match jsonschema::draft202012::new(&schema) {
            Ok(v) if v.is_valid(&arguments) => Ok(arguments),
            _ => Err("arguments_invalid"),
        }
    }

    /// The Connection steps that are `running` with no call sent for their
    /// attempt: each to govern, then call.
    pub fn call_work(&self, event: &Value) -> Vec<CallWork> {
        self.steps
            .iter()
            .filter(|s| s.kind == "step_connection" && s.outcome.as_ref().is_some_and(|o| o.kind == "running"))
            .filter(|s| !self.connection_calls.iter().any(|c| c.step_id == s.id && c.attempt == s.attempt.max(1)))
            .filter_map(|s| self.call_of(s, event))
            .collect()
    }

    /// The call a Connection step's attempt would make (to govern, send or
    /// freeze in an approval); `None` for another kind of step or when its
    /// arguments cannot be had.
    pub(crate) fn call_of(&self, s: &Step, event: &Value) -> Option<CallWork> {
        let n = self.target.steps.iter().find(|n| n["id"] == s.id.as_str() && n["kind"] == "step_connection")?;
        Some(CallWork {
            step_id: s.id.clone(),
            attempt: s.attempt.max(1),
            tool: n["tool"].as_str().unwrap_or_default().to_string(),
            tool_source_id: n["toolSourceId"].as_str().unwrap_or_default().to_string(),
            connection_id: n["connectionId"].as_str().unwrap_or_default().to_string(),
            arguments: self.call_arguments(n, event).ok()?,
            approved: s.action_approval_id.is_some(),
        })
    }

    /// Whether a Connection step's `attempt` is still `running` with no call
    /// sent: a decision governance made for it still applies.
    pub fn call_pending(&self, step: &str, attempt: i64) -> bool {
        self.step(step).is_some_and(|s| {
            s.attempt.max(1) == attempt && s.connection_call_id.is_none() && s.outcome.as_ref().is_some_and(|o| o.kind == "running")
        })
    }

    /// Records a call about to leave, arming the timer that takes it as
    /// indeterminate if no answer is recorded by its deadline: `false`
    /// (nothing changed) when the step moved on or its attempt already has
    /// one.
    pub fn call_sent(&mut self, call: ConnectionCall) -> bool {
        let Some(step) = self.steps.iter_mut().find(|s| s.id == call.step_id) else { return false };
        let running = step.outcome.as_ref().is_some_and(|o| o.kind == "running");
        if !running || step.attempt.max(1) != call.attempt || step.connection_call_id.is_some() {
            return false;
        }
        step.connection_call_id = Some(call.id.clone());
        self.timers.push((format!("{}/call{}", call.step_id, call.attempt), call.deadline_ms));
        self.connection_calls.push(call);
        true
    }

    /// A call's answer: the call takes its status and the step's attempt
    /// settles by it. `false` when the call was settled already (another
    /// replica took it as indeterminate, say).
    pub fn call_answered(&mut self, call_id: &str, answer: &CallAnswer, now: i64) -> bool {
        let Some(call) = self.connection_calls.iter_mut().find(|c| c.id == call_id) else { return false };
        if call.settled() {
            return false;
        }
        let (status, reason) = match answer.outcome.as_str() {
            "succeeded" => (Some("succeeded"), None),
            "failed" => (Some("failed"), Some("tool_error")),
            "not_sent" => (Some("failed"), Some("call_not_sent")),
            _ => (None, Some("effect_indeterminate")),
        };
        call.status = status.map(String::from);
        call.error_code = Some(answer.code.clone()).filter(|c| !c.is_empty());
        if status.is_none() && call.error_code.is_none() {
            call.error_code = Some("no_answer".into());
        }
        let step_id = call.step_id.clone();
        match reason {
            None => {
                if let Some(s) = self.steps.iter_mut().find(|s| s.id == step_id) {
                    s.output = answer.output.clone();
                }
                self.settle_attempt(&step_id, Outcome::completed(), now);
            }
            Some(reason) => self.settle_attempt(&step_id, Outcome::failed(reason), now),
        }
        true
    }

    /// A call's deadline passed: unanswered, it is taken as indeterminate
    /// — its step fails `effect_indeterminate` and the call is never sent
    /// again. `false` when it was answered.
    pub fn call_deadline(&mut self, step_id: &str, attempt: i64, now: i64) -> bool {
        let Some(id) =
            self.connection_calls.iter().find(|c| c.step_id == step_id && c.attempt == attempt && !c.settled()).map(|c| c.id.clone())
        else {
            return false;
        };
        self.call_answered(&id, &CallAnswer { outcome: "indeterminate".into(), code: String::new(), output: None }, now)
    }

    /// A step's output on success: the result's text and its structured
    /// content (or null).
    pub fn call_output(content: String, structured: Option<Value>) -> Value {
        let mut o = Map::new();
        o.insert("content".into(), Value::String(content));
        o.insert("structured_content".into(), structured.unwrap_or(Value::Null));
        Value::Object(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StepsTarget;

    fn program(retry: Value) -> Program {
        let steps = vec![
            json!({"kind": "trigger", "id": "hook", "trigger": {"kind": "webhook", "dedupe_key": "/id"}}),
            json!({"kind": "step_connection", "id": "c", "toolSource": "T", "tool": "add", "arguments": {"a": 2},
                "argumentBindings": {"b": {"sourceNodeId": "hook", "pointer": "/b"}}, "retry": retry,
                "toolSourceId": "tsrc_1", "connectionId": "conn_1",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}),
        ];
        let edges = vec![json!({"kind": "starts", "from": "hook", "to": "c"})];
        Program::new(StepsTarget { program_sha256: String::new(), steps, edges }, "hook".into())
    }

    fn call(p: &Program, id: &str, now: i64) -> ConnectionCall {
        let w = &p.call_work(&json!({"b": 3}))[0];
        ConnectionCall {
            id: id.into(),
            step_id: w.step_id.clone(),
            attempt: w.attempt,
            tool: w.tool.clone(),
            tool_source_id: w.tool_source_id.clone(),
            connection_id: w.connection_id.clone(),
            arguments_sha256: String::new(),
            status: None,
            error_code: None,
            sent_at_ms: now,
            deadline_ms: now + 40_000,
        }
    }

    fn answer(outcome: &str, code: &str) -> CallAnswer {
        CallAnswer { outcome: outcome.into(), code: code.into(), output: None }
    }

    #[test]
    fn a_call_is_recorded_once_and_settles_its_step_by_its_answer() {
        let mut p = program(Value::Null);
        let event = json!({"b": 3});
        p.advance(&event, false, 1);
        assert_eq!(p.step("c").and_then(|s| s.outcome.clone()), Some(Outcome::of("running")));
        let work = p.call_work(&event);
        assert_eq!(work.len(), 1);
        assert_eq!(work[0].arguments, json!({"a": 2, "b": 3}), "the bound key is filled");
        assert_eq!((work[0].tool_source_id.as_str(), work[0].connection_id.as_str(), work[0].approved), ("tsrc_1", "conn_1", false));
        let sent = call(&p, "ccall_1", 10);
        assert!(p.call_sent(sent.clone()));
        assert_eq!(p.timers, [("c/call1".to_string(), 40_010)], "its deadline is armed with it");
        assert!(!p.call_sent(ConnectionCall { id: "ccall_2".into(), ..sent }), "one call per attempt");
        assert!(p.call_work(&event).is_empty(), "sent: it waits on its answer or its deadline");
        let ok = CallAnswer { output: Some(Program::call_output("5".into(), Some(json!({"result": 5})))), ..answer("succeeded", "") };
        assert!(p.call_answered("ccall_1", &ok, 20));
        assert!(!p.call_answered("ccall_1", &answer("failed", "mcp.error"), 21), "answered once");
        assert!(!p.call_deadline("c", 1, 50_000), "an answered call has no deadline");
        let c = p.step("c").unwrap();
        assert_eq!(c.outcome, Some(Outcome::completed()));
        assert_eq!(c.output, Some(json!({"content": "5", "structured_content": {"result": 5}})));
        assert_eq!(p.connection_calls[0].status.as_deref(), Some("succeeded"));
        assert!(p.call_work(&event).is_empty());
        p.advance(&event, false, 30);
        assert_eq!(p.result.as_deref(), Some("succeeded"));
    }

    #[test]
    fn only_a_call_that_never_left_is_retried() {
        let retry = json!({"maxAttempts": 3, "backoffSeconds": 1});
        let event = json!({"b": 3});
        // Not sent: retried as a new attempt with a new call.
        let mut p = program(retry.clone());
        p.advance(&event, false, 1);
        assert!(p.call_sent(call(&p, "ccall_1", 10)));
        assert!(p.call_answered("ccall_1", &answer("not_sent", "connection.unavailable"), 20));
        assert_eq!(p.step("c").and_then(|s| s.outcome.as_ref()).map(|o| o.kind.as_str()), Some("retrying"));
        assert_eq!(p.connection_calls[0].error_code.as_deref(), Some("connection.unavailable"));
        assert!(p.retry_due("c"));
        p.advance(&event, false, 1_100);
        let work = p.call_work(&event);
        assert_eq!(work[0].attempt, 2, "attempt 2 has no call yet");
        assert!(p.call_sent(call(&p, "ccall_2", 1_200)));
        assert!(p.call_answered("ccall_2", &answer("failed", "tool.is_error"), 1_300));
        assert_eq!(p.step("c").and_then(|s| s.outcome.clone()), Some(Outcome::failed("tool_error")), "a definite failure is not retried");

        // Indeterminate (a timeout, or the deadline after a crash): never again.
        for how in ["answer", "deadline"] {
            let mut p = program(retry.clone());
            p.advance(&event, false, 1);
            assert!(p.call_sent(call(&p, "ccall_3", 10)));
            if how == "answer" {
                assert!(p.call_answered("ccall_3", &answer("indeterminate", "mcp.timeout"), 20));
            } else {
                assert!(p.call_deadline("c", 1, 40_010));
            }
            assert_eq!(p.step("c").and_then(|s| s.outcome.clone()), Some(Outcome::failed("effect_indeterminate")), "{how}");
            assert_eq!(p.connection_calls[0].status, None, "{how}: the answer is unknown");
            assert!(p.timers.iter().all(|(t, _)| !t.contains("retry")), "{how}: no retry is armed");
        }
    }

    #[test]
    fn arguments_are_held_to_the_pinned_schema() {
        let mut p = program(Value::Null);
        p.advance(&json!({"b": "three"}), false, 1);
        assert_eq!(p.step("c").and_then(|s| s.outcome.clone()), Some(Outcome::failed("arguments_invalid")));
        let mut p = program(Value::Null);
        p.advance(&json!({}), false, 1);
        assert_eq!(p.step("c").and_then(|s| s.outcome.clone()), Some(Outcome::failed("binding_unavailable")));
    }

    #[test]
    fn an_approval_freezes_the_call_it_would_make() {
        let mut p = program(Value::Null);
        let event = json!({"b": 3});
        p.advance(&event, false, 1);
        p.set("c", Outcome::of("awaiting_approval"), 2);
        let asks = p.approvals_to_ask(&event);
        let call = asks[0].call.as_ref().expect("a call to freeze");
        assert_eq!((call.tool.as_str(), call.connection_id.as_str(), &call.arguments), ("add", "conn_1", &json!({"a": 2, "b": 3})));
        if let Some(s) = p.steps.iter_mut().find(|s| s.id == "c") {
            s.action_approval_id = Some("apr_1".into());
        }
        assert!(p.approvals_to_ask(&event).is_empty(), "asked once");
        p.set("c", Outcome::of("running"), 3);
        assert!(p.call_work(&event)[0].approved, "approved: not asked again");
    }
}
