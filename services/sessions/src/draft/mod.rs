//! A Session being changed in memory: the pure state machine that applies
//! user input ([`Input`]) and the runtime's writes to a Session, producing
//! the events and Runs one commit stores. The child-thread focus of a
//! change is in `focus.rs`.

mod focus;

use crate::input::Input;
use crate::model::*;
use checkfu_core::events::EventType;
use checkfu_core::id::{EventId, RunId};
use checkfu_core::{Error, Result};
use serde_json::{Value, json};

/// A Session being changed in memory, with the events and runs the change
/// produces. The store later commits exactly this, or nothing.
#[derive(Debug, Clone)]
pub struct Draft {
    pub session: Session,
    pub run: Option<Run>,
    pub events: Vec<NewEvent>,
    pub runs: Vec<Run>,
    pub now_ms: i64,
    /// Set by a claim: its precondition, re-checked at commit.
    pub claim_guard: Option<crate::store::ClaimGuard>,
    /// The change answers a client (an accepted input): it must be on disk
    /// before the answer, not only written.
    pub flush: bool,
    /// The Run this change admits, if any.
    pub admitted: Option<RunId>,
    /// The child threads' active Runs (the one in focus is `run`).
    pub child_runs: Vec<Run>,
    /// The child thread decided for, if not the primary (`focus.rs`).
    pub(crate) focus: Option<focus::Focus>,
}

/// An ActionApproval's outcome, as governance recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub approval_id: String,
    pub tool_use_id: String,
    /// `approve` or `deny` (an expired approval is a `deny`).
    pub decision: String,
    /// `approved`, `denied` or `expired`.
    pub status: String,
    pub responder_principal_id: String,
    /// A denial's message for the agent, when one was given.
    pub deny_message: String,
}

/// Who wrote system events: the platform itself.
pub fn system() -> Value {
    Value::Null
}

impl Draft {
    pub fn new(session: Session, run: Option<Run>, now_ms: i64) -> Draft {
        Draft {
            session,
            run,
            events: vec![],
            runs: vec![],
            now_ms,
            claim_guard: None,
            flush: false,
            admitted: None,
            child_runs: vec![],
            focus: None,
        }
    }

    /// The seq the next pushed event will get.
    pub fn next_seq(&self) -> i64 {
        self.session.last_seq + self.events.len() as i64 + 1
    }

    pub fn push(&mut self, event_type: EventType, run_id: Option<&RunId>, authored_by: Value, caused_by: Value, payload: Value) -> EventId {
        self.push_as(EventId::mint(), event_type, run_id, authored_by, caused_by, payload)
    }

    /// As [`Draft::push`], with the event's id chosen (a Run's proposed one).
    pub fn push_as(
        &mut self,
        id: EventId,
        event_type: EventType,
        run_id: Option<&RunId>,
        authored_by: Value,
        caused_by: Value,
        payload: Value,
    ) -> EventId {
        let thread_id = self.focused().map(|t| t.id.clone());
        self.events.push(NewEvent {
            id: id.clone(),
            event_type: event_type.as_str().to_string(),
            run_id: run_id.cloned(),
            thread_id,
            origin_event_id: None,
            authored_by,
            caused_by,
            payload,
            created_ms: self.now_ms,
        });
        id
    }

    /// Records a run change, replacing an earlier change of the same run;
    /// a run put back unchanged writes nothing.
    pub fn put_run(&mut self, run: Run) {
        if self.run.as_ref() == Some(&run) && !self.runs.iter().any(|r| r.id == run.id) {
            return;
        }
        self.runs.retain(|r| r.id != run.id);
        self.runs.push(run.clone());
        self.run = if run.status == RunStatus::Completed { None } else { Some(run) };
    }

    pub(crate) fn set_status(&mut self, status: SessionStatus, stop_reason: Option<StopReason>, caused_by: Value) {
        let run_id = self.run.as_ref().map(|r| r.id.clone());
        self.set_status_for(status, stop_reason, caused_by, run_id);
    }

    fn set_status_for(&mut self, status: SessionStatus, stop_reason: Option<StopReason>, caused_by: Value, run_id: Option<RunId>) {
        self.session.status = status;
        self.session.stop_reason = stop_reason.clone();
        if self.focused().is_some() {
            return self.thread_status(status, stop_reason, caused_by, run_id);
        }
        let (ty, payload) = match status {
            SessionStatus::Idle => (EventType::SessionStatusIdle, json!({"stop_reason": stop_reason})),
            SessionStatus::Running => (EventType::SessionStatusRunning, json!({})),
            SessionStatus::Rescheduling => (EventType::SessionStatusRescheduled, json!({})),
            SessionStatus::Terminated => (EventType::SessionStatusTerminated, json!({})),
        };
        self.push(ty, run_id.as_ref(), system(), caused_by, payload);
    }

    /// Admits a Run for the input at `trigger_seq`: `run.created` with its
    /// execution pins, then `session.status_running`.
    pub fn admit_run(&mut self, trigger_seq: i64, caused_by: Value) {
        let s = &self.session;
        let child = self.focused();
        let pins = ExecutionPins {
            agent_id: child.map_or(s.agent_id.as_str(), |t| t.agent.agent_id.as_str()).to_string(),
            agent_version: child.map_or(s.pins.agent_version, |t| t.agent.version),
            release_sha256: child.and_then(|t| t.agent.release_sha256.clone()).unwrap_or_else(|| s.selection.release_sha256.clone()),
            deployment_id: s.deployment_id.to_string(),
            deployment_revision: s.deployment_revision,
            harness: s.pins.harness.clone(),
            model_routing_profile_id: s.pins.model_routing_profile_id.to_string(),
            sandbox_profile_revision: s.pins.sandbox_profile_revision,
            instructions_sha256: s.selection.instructions_sha256.clone(),
            session_thread_id: child.map(|t| t.id.clone()),
        };
        let run = Run {
            id: RunId::mint(),
            session_id: s.id.clone(),
            status: RunStatus::Queued,
            stop_reason: None,
            execution_pins: pins.clone(),
            usage: Usage::default(),
            start_seq: trigger_seq,
            lease_id: String::new(),
            generation: 0,
            lease_expires_ms: 0,
            runner_id: String::new(),
            created_ms: self.now_ms,
            completed_ms: None,
            traceparent: checkfu_telemetry::current_traceparent(),
            placement: placement_of(&s.environment_id, &s.pins.execution),
            thread_id: child.map(|t| t.id.clone()),
        };
        let run_id = run.id.clone();
        self.admitted = Some(run_id.clone());
        self.put_run(run);
        self.push(EventType::RunCreated, Some(&run_id), system(), caused_by.clone(), json!({"run_id": run_id, "execution_pins": pins}));
        self.set_status(SessionStatus::Running, None, caused_by);
    }

    /// Claims the active Run for `runner_id` under a fresh lease: the next
    /// generation, held for `lease_ms`. The caller has checked that it is
    /// claimable.
    pub fn claim_run(&mut self, runner_id: &str, lease_ms: i64) -> Option<Run> {
        let run = self.run.clone()?;
        let next = Run {
            status: RunStatus::Running,
            lease_id: checkfu_core::id::new_id("lease"),
            generation: run.generation + 1,
            lease_expires_ms: self.now_ms + lease_ms,
            runner_id: runner_id.to_string(),
            ..run
        };
        self.put_run(next.clone());
        Some(next)
    }

    /// Settles the active Run and idles the Session with `stop_reason`.
    pub fn complete_run(&mut self, stop_reason: StopReason, caused_by: Value) {
        if let Some(run_id) = self.settle_run(stop_reason.clone(), caused_by.clone()) {
            self.set_status_for(SessionStatus::Idle, Some(stop_reason), caused_by, Some(run_id));
        }
    }

    /// Settles the active Run (`run.completed`) without changing the
    /// Session's status; answers the Run's id, `None` when there is none.
    pub(crate) fn settle_run(&mut self, stop_reason: StopReason, caused_by: Value) -> Option<RunId> {
        let mut run = self.run.clone()?;
        run.status = RunStatus::Completed;
        run.stop_reason = Some(stop_reason.clone());
        run.completed_ms = Some(self.now_ms);
        let run_id = run.id.clone();
        let usage = run.usage;
        self.push(
            EventType::RunCompleted,
            Some(&run_id),
            system(),
            caused_by,
            json!({"run_id": run_id, "stop_reason": stop_reason, "usage": usage}),
        );
        self.put_run(run);
        Some(run_id)
    }

    pub fn terminate(&mut self, caused_by: Value) {
        if self.run.is_some() {
            self.complete_run(StopReason::Terminated, caused_by.clone());
        }
        self.set_status(SessionStatus::Terminated, self.session.stop_reason.clone(), caused_by);
    }

    /// Ends the wait for `id`; the last one resumes the Session with a new
    /// Run triggered by `cause_event`.
    fn settle_wait(&mut self, id: &str, trigger_seq: i64, cause_event: &str) {
        let remaining: Vec<String> = self.session.waiting_ids().into_iter().filter(|w| w != id).collect();
        if remaining.is_empty() {
            self.admit_run(trigger_seq, json!({"kind": "event", "id": cause_event}));
        } else if let Some(StopReason::RequiresAction(wait)) = self.session.stop_reason.as_mut() {
            wait.waiting_on = remaining;
            wait.approvals.remove(id);
        }
    }

    /// Accepts a result for a waited-on custom tool use.
    fn settle_custom_result(&mut self, input: &Input, id: &str) -> EventId {
        let seq = self.next_seq();
        let event_id =
            self.push(input.event_type, None, Value::String(input.authored_by.clone()), input.caused_by.clone(), input.payload.clone());
        self.settle_wait(id, seq, &event_id);
        event_id
    }

    /// Records an approval's outcome and, when the Session still waits on
    /// it, ends that wait. Returns the `action_approval.resolved` event id,
    /// or `None` when the Session no longer waits on it.
    pub fn resolve_approval(&mut self, r: &Resolved, cause: Value) -> Option<EventId> {
        // The thread whose wait holds it (a child's, possibly).
        self.focus_waiter(None, &r.tool_use_id).ok()?;
        if self.session.waiting_approval(&r.tool_use_id).as_deref() != Some(r.approval_id.as_str()) {
            return None;
        }
        let seq = self.next_seq();
        let mut payload = json!({
            "action_approval_id": r.approval_id,
            "tool_use_id": r.tool_use_id,
            "decision": r.decision,
            "status": r.status,
            "responder_principal_id": (!r.responder_principal_id.is_empty()).then_some(&r.responder_principal_id),
        });
        if !r.deny_message.is_empty() {
            payload["deny_message"] = Value::String(r.deny_message.clone());
        }
        let id = self.push(EventType::ActionApprovalResolved, None, system(), cause, payload);
        self.settle_wait(&r.tool_use_id, seq, &id);
        Some(id)
    }

    /// Applies a `user.tool_confirmation` whose decision governance has
    /// already taken: the echo, then the resolution. Returns the echo's id.
    pub fn confirm(&mut self, input: &Input, r: &Resolved) -> Result<EventId> {
        if self.session.status == SessionStatus::Terminated {
            return Err(Error::conflict("the session is terminated and accepts no events"));
        }
        // Governance took the decision already; if its outcome reached the
        // Session first (the sweeper raced this call), the echo is still
        // recorded, in the thread named.
        if self.focus_waiter(input.thread_id.as_deref(), &r.tool_use_id).is_err() {
            let _ = self.focus(input.thread_id.as_deref());
        }
        let echo =
            self.push(input.event_type, None, Value::String(input.authored_by.clone()), input.caused_by.clone(), input.payload.clone());
        self.resolve_approval(r, json!({"kind": "event", "id": echo}));
        Ok(echo)
    }

    /// A `user.interrupt` naming a child: recorded in its view; it stops.
    /// A thread not of this Session is refused (400), an archived one 409.
    fn interrupt_one(&mut self, input: &Input, thread_id: &str) -> Result<EventId> {
        let Some(t) = self.session.threads.iter().find(|t| t.id == thread_id) else {
            return Err(Error::invalid_field("payload.session_thread_id", format!("{thread_id} is not a thread of this Session")));
        };
        if t.archived() {
            return Err(Error::conflict(format!("thread {thread_id} is archived")).with_reason("thread_archived"));
        }
        self.focus(Some(thread_id))?;
        let id =
            self.push(input.event_type, None, Value::String(input.authored_by.clone()), input.caused_by.clone(), input.payload.clone());
        self.interrupt_child(json!({"kind": "event", "id": id}));
        Ok(id)
    }

    fn waiting_on_action(&self) -> bool {
        self.session.status == SessionStatus::Idle
            && matches!(self.session.stop_reason, Some(StopReason::RequiresAction(_) | StopReason::BudgetReached))
    }

    /// Applies one user input. Returns the id of the echoed event.
    pub fn apply(&mut self, input: &Input) -> Result<EventId> {
        self.flush = true;
        if self.session.status == SessionStatus::Terminated {
            return Err(Error::conflict("the session is terminated and accepts no events"));
        }
        if matches!(input.event_type, EventType::UserToolConfirmation | EventType::UserCustomToolResult) {
            let key = if input.event_type == EventType::UserToolConfirmation { "tool_use_id" } else { "custom_tool_use_id" };
            let id = input.payload.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
            // The thread whose wait it answers (api.md §15.4).
            self.focus_waiter(input.thread_id.as_deref(), &id)?;
            if input.event_type == EventType::UserCustomToolResult
                && self.session.waiting_ids().contains(&id)
                && self.session.waiting_approval(&id).is_none()
            {
                return Ok(self.settle_custom_result(input, &id));
            }
            return Err(Error::conflict(format!("no tool use {id:?} is waiting for this session")).with_reason("no_such_wait"));
        }
        let primary = crate::model::primary_of(&self.session.id);
        let child = input.thread_id.as_deref().filter(|t| *t != primary);
        if input.event_type == EventType::UserInterrupt
            && let Some(t) = child
        {
            return self.interrupt_one(input, t);
        }
        if self.waiting_on_action() && !input.is_settle() {
            return Err(Error::conflict(
                "the session is waiting for a settle event (user.tool_confirmation, user.custom_tool_result or user.interrupt)",
            )
            .with_details(json!({"stop_reason": self.session.stop_reason}))
            .with_reason("settle_only"));
        }
        if input.event_type == EventType::UserDefineOutcome {
            return self.define_outcome(input);
        }
        let seq = self.next_seq();
        let caused_by = input.caused_by.clone();
        let run_id = self.run.as_ref().map(|r| r.id.clone());
        let echo_run = if input.event_type == EventType::UserMessage { None } else { run_id.clone() };
        let id = input.event_id.clone().unwrap_or_else(EventId::mint);
        let id = self.push_as(
            id,
            input.event_type,
            echo_run.as_ref(),
            Value::String(input.authored_by.clone()),
            caused_by,
            input.payload.clone(),
        );
        let cause = json!({"kind": "event", "id": id});
        // An interrupt naming no thread reaches every child too.
        if input.event_type == EventType::UserInterrupt && input.thread_id.is_none() {
            self.interrupt_children(cause.clone());
        }
        // An interrupt for the primary reaches its Outcome.
        if input.event_type == EventType::UserInterrupt && self.interrupt_outcome(cause.clone()) {
            return Ok(id);
        }
        match input.event_type {
            EventType::UserMessage => {
                self.session.last_user_message_seq = seq;
                if self.session.status == SessionStatus::Idle && self.admission_closed() {
                    // Kept, and run once the Budget re-opens.
                    self.pause_for_budget(cause);
                } else if self.session.status == SessionStatus::Idle {
                    self.admit_run(seq, cause);
                }
            }
            // A Run no execution plane has claimed yet stops right here; a
            // claimed one stops at its next boundary.
            EventType::UserInterrupt if self.run.as_ref().is_some_and(|r| r.status == RunStatus::Queued) => {
                self.complete_run(StopReason::EndTurn, cause);
            }
            // An interrupt also ends a wait for tool results.
            EventType::UserInterrupt
                if self.session.status == SessionStatus::Idle && self.run.is_none() && !self.session.waiting_ids().is_empty() =>
            {
                self.set_status_for(SessionStatus::Idle, Some(StopReason::EndTurn), cause, None);
            }
            _ => {}
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Input;
    use crate::store::conformance::{run, session};

    const ME: &str = "prin_0000000000000000000000000a";

    fn input(event_type: &str, payload: Value) -> Input {
        Input::parse(event_type, payload, ME, json!({"kind": "principal", "id": ME})).expect("valid input")
    }

    fn message(text: &str) -> Input {
        input("user.message", json!({"content": [{"type": "text", "text": text}]}))
    }

    fn types(d: &Draft) -> Vec<&str> {
        d.events.iter().map(|e| e.event_type.as_str()).collect()
    }

    fn idle() -> Draft {
        Draft::new(session("sess_1"), None, 1_000)
    }

    fn waiting(on: &[&str]) -> Draft {
        let mut s = session("sess_1");
        let on: Vec<String> = on.iter().map(|s| s.to_string()).collect();
        s.stop_reason = Some(StopReason::RequiresAction(Wait { waiting_on: on.clone(), event_ids: on, approvals: Default::default() }));
        Draft::new(s, None, 1_000)
    }

    #[test]
    fn parsing_refuses_what_no_rule_accepts() {
        let cause = || json!({"kind": "principal", "id": ME});
        let refused = |t: &str, p: Value| Input::parse(t, p, ME, cause()).expect_err(t).details;
        assert!(Input::parse("agent.message", json!({}), ME, cause()).is_err(), "only user events come from clients");
        assert!(Input::parse("user.message", json!({"content": []}), ME, cause()).is_err(), "empty content");
        assert!(Input::parse("user.message", json!({"content": [{"type": "image"}]}), ME, cause()).is_err());
        assert!(Input::parse("user.message", json!({"content": [{"type": "audio"}]}), ME, cause()).is_err());
        assert!(Input::parse("user.message", json!({"content": [{"type": "text", "text": "x"}]}), "", cause()).is_err());
        assert!(
            Input::parse("user.message", json!({"content": [{"type": "text", "text": "x"}]}), ME, json!({"kind": "principal"})).is_err()
        );
        let big = "x".repeat(MAX_TEXT_BYTES + 1);
        assert!(Input::parse("user.message", json!({"content": [{"type": "text", "text": big}]}), ME, cause()).is_err());
        assert_eq!(refused("user.tool_confirmation", json!({"tool_use_id": "t", "result": "maybe"}))["field"], "payload.result");
        assert_eq!(
            refused("user.define_outcome", json!({"description": "d", "rubric": "r", "max_iterations": 21}))["field"],
            "payload.max_iterations"
        );
        assert_eq!(refused("user.interrupt", json!({"session_thread_id": "nope"}))["field"], "payload.session_thread_id");
    }

    #[test]
    fn a_message_to_an_idle_session_admits_a_run() {
        let mut d = idle();
        d.apply(&message("hi")).expect("accepted");
        assert_eq!(types(&d), ["user.message", "run.created", "session.status_running"]);
        assert_eq!(d.session.status, SessionStatus::Running);
        assert_eq!(d.session.last_user_message_seq, 1, "the message's seq");
        let run = d.run.as_ref().expect("a run");
        assert_eq!((run.status, run.start_seq), (RunStatus::Queued, 1));
        assert!(d.flush, "an accepted input is flushed before its answer");
    }

    #[test]
    fn a_message_to_a_running_session_joins_its_run() {
        let mut s = session("sess_1");
        s.status = SessionStatus::Running;
        let mut d = Draft::new(s, Some(run("run_1", "sess_1", RunStatus::Running, 5_000)), 1_000);
        d.apply(&message("and also")).expect("accepted");
        assert_eq!(types(&d), ["user.message"], "steering: no second Run");
        assert_eq!(d.events[0].run_id, None, "a message belongs to no Run yet");
        assert!(d.runs.is_empty());
    }

    #[test]
    fn a_terminated_session_accepts_nothing() {
        let mut s = session("sess_1");
        s.status = SessionStatus::Terminated;
        let mut d = Draft::new(s, None, 1_000);
        let e = d.apply(&message("hello?")).expect_err("refused");
        assert_eq!(e.code, checkfu_core::Code::Conflict);
        assert!(d.events.is_empty());
    }

    #[test]
    fn a_waiting_session_accepts_only_what_settles_its_wait() {
        let mut d = waiting(&["ctu_1", "ctu_2"]);
        assert_eq!(d.apply(&message("hi")).expect_err("not a settle").code, checkfu_core::Code::Conflict);
        let result =
            |id: &str| input("user.custom_tool_result", json!({"custom_tool_use_id": id, "content": [{"type": "text", "text": "42"}]}));
        assert!(d.apply(&result("ctu_9")).is_err(), "nothing waits on ctu_9");
        d.apply(&result("ctu_1")).expect("settles one");
        assert_eq!(types(&d), ["user.custom_tool_result"], "one of two: still waiting");
        assert_eq!(d.session.waiting_ids(), ["ctu_2"]);
        d.apply(&result("ctu_2")).expect("settles the last");
        assert_eq!(types(&d), ["user.custom_tool_result", "user.custom_tool_result", "run.created", "session.status_running"]);
    }

    #[test]
    fn an_interrupt_ends_a_queued_run_and_a_wait() {
        let mut d = idle();
        d.apply(&message("go")).expect("accepted");
        d.apply(&input("user.interrupt", json!({}))).expect("accepted");
        assert_eq!(&types(&d)[3..], ["user.interrupt", "run.completed", "session.status_idle"]);
        assert!(d.run.is_none(), "no Run left");
        assert_eq!(d.session.stop_reason, Some(StopReason::EndTurn));

        let mut w = waiting(&["ctu_1"]);
        w.apply(&input("user.interrupt", json!({}))).expect("an interrupt settles a wait");
        assert!(w.session.waiting_ids().is_empty());
        assert_eq!(types(&w), ["user.interrupt", "session.status_idle"]);
    }

    #[test]
    fn a_closed_budget_keeps_the_message_and_pauses() {
        let mut s = session("sess_1");
        let mut b = crate::model::Budget::new(10, "model_tokens", 0, "").expect("budget");
        b.consumed = 10;
        s.budget = Some(b);
        let mut d = Draft::new(s, None, 1_000);
        d.apply(&message("more")).expect("kept");
        assert_eq!(types(&d), ["user.message", "session.usage", "session.status_idle"]);
        assert_eq!(d.session.stop_reason, Some(StopReason::BudgetReached));
        assert!(d.run.is_none(), "no Run admitted");
    }
}
