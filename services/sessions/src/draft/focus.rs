//! Child threads inside a [`Draft`] (api.md §15). A draft decides for one
//! thread at a time: by default the primary (the Session's own status,
//! stop reason and Run); [`Draft::focus`] swaps a child's state into those
//! same places, so admission, settling, waits, interrupts and Budget pauses
//! are the one state machine for every thread. [`Draft::unfocus`] swaps
//! back; the service unfocuses every draft before committing it.
//!
//! While a child is in focus, events belong to its view, and its status
//! events are `session.thread_status_*`, each cross-posted to the primary
//! view (a copy with its own id and seq naming the original).

use super::{Draft, system};
use crate::model::outcome::Outcome;
use crate::model::*;
use checkfu_core::events::EventType;
use checkfu_core::id::{EventId, RunId};
use checkfu_core::{Error, Result};
use serde_json::{Value, json};

/// The primary's state, put aside while a child is in focus.
#[derive(Debug, Clone)]
pub(crate) struct Focus {
    index: usize,
    status: SessionStatus,
    stop_reason: Option<StopReason>,
    last_user_message_seq: i64,
    run: Option<Run>,
    outcome: Option<Outcome>,
}

impl Focus {
    /// The focused child's position in the Session's threads.
    pub(crate) fn index(&self) -> usize {
        self.index
    }
}

impl Draft {
    /// The child thread in focus, `None` for the primary.
    pub fn focused(&self) -> Option<&SessionThread> {
        self.focus.as_ref().map(|f| &self.session.threads[f.index])
    }

    /// Puts the child `thread_id` in focus (the primary's own id, or
    /// `None`, puts the primary back).
    pub fn focus(&mut self, thread_id: Option<&str>) -> Result<()> {
        let primary = crate::model::primary_of(&self.session.id);
        let thread_id = thread_id.filter(|t| *t != primary);
        if self.focused().map(|t| t.id.as_str()) == thread_id {
            return Ok(());
        }
        self.unfocus();
        let Some(thread_id) = thread_id else { return Ok(()) };
        let index =
            self.session.threads.iter().position(|t| t.id == thread_id).ok_or_else(|| Error::not_found("session_thread", thread_id))?;
        let t = self.session.threads[index].clone();
        let run = self.child_runs.iter().position(|r| r.thread_id.as_deref() == Some(thread_id)).map(|i| self.child_runs.remove(i));
        self.focus = Some(Focus {
            index,
            status: std::mem::replace(&mut self.session.status, t.status),
            stop_reason: std::mem::replace(&mut self.session.stop_reason, t.stop_reason),
            last_user_message_seq: std::mem::replace(&mut self.session.last_user_message_seq, t.last_user_message_seq),
            run: std::mem::replace(&mut self.run, run),
            outcome: self.session.outcome.take(),
        });
        Ok(())
    }

    /// Puts the Run `run_id`'s thread in focus; false when it is no active
    /// Run of this Session.
    pub fn focus_run(&mut self, run_id: &RunId) -> bool {
        if self.run.as_ref().is_some_and(|r| &r.id == run_id) {
            return true;
        }
        let thread = match self.child_runs.iter().find(|r| &r.id == run_id) {
            Some(r) => r.thread_id.clone(),
            None if self.focus.is_some() => {
                self.unfocus();
                return self.run.as_ref().is_some_and(|r| &r.id == run_id);
            }
            None => return false,
        };
        self.focus(thread.as_deref()).is_ok()
    }

    /// Puts the primary back in focus, writing the child's state back.
    pub fn unfocus(&mut self) {
        let Some(f) = self.focus.take() else { return };
        let now = self.now_ms;
        let status = std::mem::replace(&mut self.session.status, f.status);
        let stop_reason = std::mem::replace(&mut self.session.stop_reason, f.stop_reason);
        let lums = std::mem::replace(&mut self.session.last_user_message_seq, f.last_user_message_seq);
        let run = std::mem::replace(&mut self.run, f.run);
        self.session.outcome = f.outcome;
        let t = &mut self.session.threads[f.index];
        if t.status != status || t.stop_reason != stop_reason || t.last_user_message_seq != lums {
            t.updated_ms = now;
        }
        if status != SessionStatus::Running {
            t.queued = 0;
        }
        (t.status, t.stop_reason, t.last_user_message_seq) = (status, stop_reason, lums);
        if let Some(r) = run {
            self.child_runs.push(r);
        }
    }

    /// Whether another runner than `runner_id` holds a live lease on one of
    /// the Session's other threads' Runs: it owns the Session's one sandbox
    /// while they run, so their Runs go to it (api.md §15.5). Asked with
    /// the primary in focus.
    pub(crate) fn owner_other_than(&self, runner_id: &str, except: &RunId) -> bool {
        self.run
            .iter()
            .chain(&self.child_runs)
            .any(|r| &r.id != except && r.status == RunStatus::Running && r.lease_expires_ms >= self.now_ms && r.runner_id != runner_id)
    }

    /// Charges usage to the thread in focus (the Session's total and its
    /// Budget are charged by the caller).
    pub(crate) fn charge_thread(&mut self, add: Usage) {
        if let Some(f) = &self.focus {
            self.session.threads[f.index].usage.add(add);
        }
    }

    /// A status change of the child in focus: `session.thread_status_*` in
    /// its view, then the cross-post. A wait's cross-post names the
    /// cross-posts of what it waits on, so the primary view is whole.
    pub(crate) fn thread_status(
        &mut self,
        status: SessionStatus,
        stop_reason: Option<StopReason>,
        caused_by: Value,
        run_id: Option<RunId>,
    ) {
        let Some(name) = self.focused().map(|t| t.agent.name.clone()) else { return };
        let (ty, mut payload) = match status {
            SessionStatus::Idle => (EventType::SessionThreadStatusIdle, json!({"agent_name": name, "stop_reason": stop_reason})),
            SessionStatus::Running => (EventType::SessionThreadStatusRunning, json!({"agent_name": name})),
            SessionStatus::Rescheduling => (EventType::SessionThreadStatusRescheduled, json!({"agent_name": name})),
            SessionStatus::Terminated => (EventType::SessionThreadStatusTerminated, json!({"agent_name": name})),
        };
        let own = self.push(ty, run_id.as_ref(), system(), caused_by, payload.clone());
        if let Some(ids) = payload.pointer("/stop_reason/event_ids").and_then(Value::as_array).cloned() {
            let posted: Vec<Value> =
                ids.iter().filter_map(Value::as_str).map(|id| self.cross_post(id).map_or_else(|| json!(id), |c| json!(c))).collect();
            payload["stop_reason"]["event_ids"] = Value::Array(posted);
        }
        self.cross_post_as(&own, payload);
    }

    /// Copies this draft's event `id` into the primary view; answers the
    /// copy's id (`None` if the draft holds no such event).
    pub(crate) fn cross_post(&mut self, id: &str) -> Option<EventId> {
        let payload = self.events.iter().find(|e| e.id.as_str() == id)?.payload.clone();
        let own = self.events.iter().find(|e| e.id.as_str() == id)?.id.clone();
        self.cross_post_as(&own, payload)
    }

    fn cross_post_as(&mut self, id: &EventId, payload: Value) -> Option<EventId> {
        let original = self.events.iter().find(|e| &e.id == id)?.clone();
        let copy = EventId::mint();
        self.events.push(NewEvent { id: copy.clone(), origin_event_id: Some(original.id), payload, ..original });
        Some(copy)
    }

    /// Events the primary view shows although the child is in focus.
    pub(crate) fn push_primary(&mut self, event_type: EventType, caused_by: Value, payload: Value) -> EventId {
        let id = self.push(event_type, None, system(), caused_by, payload);
        if let Some(e) = self.events.last_mut() {
            e.thread_id = None;
        }
        id
    }
}

impl Draft {
    /// Puts in focus the thread a settle input answers (`id` is the tool
    /// use it answers): the thread named, which must wait on it, or else
    /// the only thread that does (api.md §15.4).
    pub(crate) fn focus_waiter(&mut self, named: Option<&str>, id: &str) -> Result<()> {
        self.unfocus();
        let primary = crate::model::primary_of(&self.session.id);
        let holders: Vec<Option<String>> =
            self.session.thread_waits().into_iter().filter(|(_, ids)| ids.iter().any(|w| w == id)).map(|(t, _)| t).collect();
        let no_wait = || Error::conflict(format!("no tool use {id:?} is waiting in this thread")).with_reason("no_such_wait");
        let target = match named {
            Some(t) => {
                let t = (t != primary).then(|| t.to_string());
                if !holders.contains(&t) {
                    return Err(no_wait());
                }
                t
            }
            None if holders.len() > 1 => {
                return Err(Error::conflict(format!("several threads wait on {id:?}: name one with session_thread_id"))
                    .with_reason("ambiguous_origin"));
            }
            None => match holders.into_iter().next() {
                Some(t) => t,
                None => return Err(no_wait()),
            },
        };
        self.focus(target.as_deref())
    }

    /// Interrupts the child in focus: its Run settles at once (its runner
    /// loses the lease at its next write), a wait is given up; an idle
    /// thread is untouched.
    pub(crate) fn interrupt_child(&mut self, cause: Value) {
        if self.run.is_some() {
            self.complete_run(StopReason::EndTurn, cause);
        } else if self.session.status == SessionStatus::Idle && !self.session.waiting_ids().is_empty() {
            self.set_status(SessionStatus::Idle, Some(StopReason::EndTurn), cause);
        }
    }

    /// Interrupts every child that is not archived (an interrupt naming no
    /// thread).
    pub(crate) fn interrupt_children(&mut self, cause: Value) {
        let ids: Vec<String> = self.session.threads.iter().filter(|t| !t.archived()).map(|t| t.id.clone()).collect();
        for id in ids {
            if self.focus(Some(&id)).is_ok() {
                self.interrupt_child(cause.clone());
            }
        }
        self.unfocus();
    }

    /// Archives the child `thread_id`: idle and waiting on nothing, it
    /// terminates (cross-posted) and frees its slot. Answers whether it
    /// changed (an archived one stays as it is).
    pub(crate) fn archive_child(&mut self, thread_id: &str, cause: Value) -> Result<bool> {
        self.focus(Some(thread_id))?;
        let t = self.focused().cloned().ok_or_else(|| Error::not_found("session_thread", thread_id))?;
        if t.archived() {
            return Ok(false);
        }
        let parked = !self.session.waiting_ids().is_empty();
        if self.session.status != SessionStatus::Idle || parked {
            let why = if parked { "it waits on a tool result or an approval (interrupt it first)" } else { "it is running" };
            return Err(Error::conflict(format!("thread {thread_id} cannot be archived: {why}")).with_reason("thread_busy"));
        }
        let stop = self.session.stop_reason.clone();
        self.set_status(SessionStatus::Terminated, stop, cause);
        if let Some(f) = &self.focus {
            let i = f.index;
            self.session.threads[i].archived_ms = Some(self.now_ms);
        }
        self.unfocus();
        Ok(true)
    }

    /// Terminates every child still live (the Session is archived).
    pub(crate) fn terminate_children(&mut self, cause: Value) {
        let ids: Vec<String> =
            self.session.threads.iter().filter(|t| t.status != SessionStatus::Terminated).map(|t| t.id.clone()).collect();
        for id in ids {
            if self.focus(Some(&id)).is_ok() {
                if self.run.is_some() {
                    self.settle_run(StopReason::Terminated, cause.clone());
                }
                let stop = self.session.stop_reason.clone();
                self.set_status(SessionStatus::Terminated, stop, cause.clone());
            }
        }
        self.unfocus();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::session;

    const CHILD: &str = "sthr_01jx00000000000000000000c1";

    fn with_child() -> Draft {
        let mut s = session("sess_01jx0000000000000000000000");
        s.status = SessionStatus::Running;
        s.threads.push(SessionThread {
            id: CHILD.into(),
            agent: ThreadAgent { agent_id: "agt_b".into(), version: 2, release_sha256: Some("ab".into()), name: "B".into() },
            status: SessionStatus::Idle,
            stop_reason: None,
            usage: Usage::default(),
            last_user_message_seq: 0,
            queued: 0,
            spawned_by_tool_use_id: "toolu_1".into(),
            created_ms: 1,
            updated_ms: 1,
            archived_ms: None,
        });
        Draft::new(s, None, 1_000)
    }

    #[test]
    fn a_focused_child_runs_its_own_state_machine_and_the_primary_is_left_as_it_was() {
        let mut d = with_child();
        d.focus(Some(CHILD)).expect("a child");
        assert_eq!(d.session.status, SessionStatus::Idle, "the child's status is in place");
        d.admit_run(1, json!({"kind": "event", "id": "evt_1"}));
        let run = d.run.clone().expect("the child's Run");
        assert_eq!(run.thread_id.as_deref(), Some(CHILD));
        assert_eq!((run.execution_pins.agent_id.as_str(), run.execution_pins.agent_version), ("agt_b", 2));
        d.unfocus();
        assert_eq!(d.session.status, SessionStatus::Running, "the primary's status is back");
        assert!(d.run.is_none(), "the primary has no Run");
        assert_eq!(d.child_runs.len(), 1);
        assert_eq!(d.session.threads[0].status, SessionStatus::Running, "the child's status is written back");
        assert!(d.focus_run(&run.id), "its Run brings the child back into focus");
        assert_eq!(d.focused().map(|t| t.id.as_str()), Some(CHILD));
    }

    #[test]
    fn a_childs_status_events_are_in_its_view_and_cross_posted() {
        let mut d = with_child();
        d.focus(Some(CHILD)).expect("a child");
        d.admit_run(1, json!({"kind": "event", "id": "evt_1"}));
        let types: Vec<(&str, Option<&str>, bool)> =
            d.events.iter().map(|e| (e.event_type.as_str(), e.thread_id.as_deref(), e.origin_event_id.is_some())).collect();
        assert_eq!(
            types,
            [
                ("run.created", Some(CHILD), false),
                ("session.thread_status_running", Some(CHILD), false),
                ("session.thread_status_running", Some(CHILD), true)
            ]
        );
        assert_eq!(d.events[2].origin_event_id.as_ref(), Some(&d.events[1].id));
        assert_eq!(d.events[1].payload["agent_name"], "B");
        assert!(!d.events.iter().any(|e| e.event_type.starts_with("session.status_")), "the Session's own status is the primary's");
    }

    #[test]
    fn a_runner_holding_one_threads_lease_owns_the_sessions_sandbox() {
        let mut d = with_child();
        d.focus(Some(CHILD)).expect("a child");
        d.admit_run(1, json!({"kind": "event", "id": "evt_1"}));
        let held = d.claim_run("rnr_a", 15_000).expect("claimed");
        d.unfocus();
        let next = RunId::mint();
        assert!(d.owner_other_than("rnr_b", &next), "another runner waits for the owner");
        assert!(!d.owner_other_than("rnr_a", &next), "the owner takes it");
        assert!(!d.owner_other_than("rnr_b", &held.id), "a Run is not its own owner");
        d.now_ms += 60_000;
        assert!(!d.owner_other_than("rnr_b", &next), "an expired lease owns nothing");
    }

    #[test]
    fn a_wait_is_answered_in_the_thread_that_holds_it() {
        let mut d = with_child();
        let wait = StopReason::RequiresAction(Wait {
            event_ids: vec!["evt_u".into()],
            waiting_on: vec!["ctu_1".into()],
            approvals: Default::default(),
        });
        d.session.threads[0].stop_reason = Some(wait);
        d.focus_waiter(None, "ctu_1").expect("the only thread waiting on it");
        assert_eq!(d.focused().map(|t| t.id.as_str()), Some(CHILD));
        let primary = crate::model::primary_of(&d.session.id);
        assert_eq!(d.focus_waiter(Some(&primary), "ctu_1").expect_err("not the primary's").details["reason"], "no_such_wait");
        assert_eq!(d.focus_waiter(None, "ctu_9").expect_err("nobody's").details["reason"], "no_such_wait");
        d.session.stop_reason = Some(StopReason::RequiresAction(Wait {
            event_ids: vec!["evt_p".into()],
            waiting_on: vec!["ctu_1".into()],
            approvals: Default::default(),
        }));
        d.session.status = SessionStatus::Idle;
        assert_eq!(d.focus_waiter(None, "ctu_1").expect_err("two hold it").details["reason"], "ambiguous_origin");
    }
}
