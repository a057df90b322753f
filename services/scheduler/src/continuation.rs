//! `continue_selected` (api.md §18.4): a firing's prompt goes into an
//! existing Session as a later `user.message`, and the firing (or its
//! step) settles with the Run that message admitted.
//!
//! The input is recorded under its key `(firing, step, attempt)`, with an
//! event id minted for it, in the write that admits it; the sessions
//! service appends it as that event once, and only into a Session idle at
//! `end_turn`. So a retry, a recovery or a second replica rejoins the first
//! input and its Run — never the latest Run, never a second message. The
//! input's work ends at the first idle after it that does not wait; a Run
//! may end before its input is marked accepted (a fast model, a crash in
//! between): that idle then asks again, which answers the first input.

use crate::firing::Firing;
use crate::model::{ChildRequest, FiringState, Usage};
use crate::service::SchedulerService;
use crate::session_input::{Continuation, InputRecord, SessionInput};
use checkfu_core::id::{FiringId, TypedId};
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use checkfu_proto::sessions::v1 as ss;
use serde_json::{Value, json};

/// Why an input was refused, for the step or firing it fails.
pub fn refusal(e: &Error) -> &'static str {
    match e.details.get("reason").and_then(Value::as_str) {
        Some("session_busy") => "session_busy",
        Some("session_terminated") => "session_terminated",
        _ => "session_input_denied",
    }
}

fn denied(message: impl Into<String>) -> Error {
    Error::denied(message).with_reason("session_input_denied")
}

impl SchedulerService {
    /// Asks for a recorded input and marks it accepted. The service
    /// Principal must be the Session's or hold `act_as` on it, and the
    /// Session must be on the target's deployment; a refusal carries the
    /// reason [`refusal`] reads.
    pub(crate) async fn continue_child(&self, c: &ChildRequest, k: &Continuation) -> Result<SessionInput> {
        let s = match self.sessions.clone().get_session(ss::GetByIdRequest { id: c.session_id.clone() }).await {
            Ok(s) => s.into_inner(),
            Err(st) if st.code() == tonic::Code::NotFound => return Err(denied(format!("the Session {} does not exist", c.session_id))),
            Err(st) => return Err(st.into()),
        };
        if s.agent_deployment_id != c.agent_deployment_id {
            return Err(denied(format!("the Session {} is not on deployment {}", s.id, c.agent_deployment_id)));
        }
        if s.principal_id != c.principal_id && !self.acts_as(&c.principal_id, &s.principal_id, &s.environment_id).await? {
            return Err(denied(format!("{} is not the Session's Principal and lacks act_as on {}", c.principal_id, s.principal_id)));
        }
        #[allow(deprecated)] // caused_by_json: for a 0.1.0 sessions service
        let event = ss::InputEvent {
            r#type: "user.message".into(),
            payload_json: json!({"content": [{"type": "text", "text": c.prompt}]}).to_string(),
            authored_by: c.principal_id.clone(),
            caused_by: Some(ss::Cause { kind: "automation_firing".into(), id: c.firing_id.clone(), ..Default::default() }),
            caused_by_json: json!({"kind": "automation_firing", "id": c.firing_id}).to_string(),
        };
        let req =
            ss::AppendUserEventRequest { session_id: c.session_id.clone(), event: Some(event), continuation_event_id: k.event_id.clone() };
        let answer = self.sessions.clone().append_user_event(req).await.map_err(Error::from)?.into_inner();
        let e = answer.event.ok_or_else(|| Error::internal("the sessions service answered a continuation without its event"))?;
        if answer.run_id.is_empty() {
            return Err(Error::unavailable("the sessions service answered a continuation without its Run (an older release?)"));
        }
        let input = SessionInput { session_id: c.session_id.clone(), event_id: e.id, run_id: answer.run_id };
        self.store.accept_input(&k.key, &input, e.seq).await?;
        if !c.step_id.is_empty() {
            let (step, shown) = (c.step_id.clone(), input.clone());
            let record = move |_: &mut Firing, p: &mut crate::program::Program, _: i64| {
                if let Some(s) = p.steps.iter_mut().find(|s| s.id == step) {
                    s.input = Some(shown.clone());
                }
            };
            self.write_program(&FiringId::stored(c.firing_id.clone()), Box::new(record)).await?;
        }
        Ok(input)
    }

    async fn acts_as(&self, principal: &str, on: &str, environment_id: &str) -> Result<bool> {
        Ok(self.allowed(principal, "act_as", "principal", on, environment_id).await?)
    }

    /// A session event, for the inputs waiting on the Session. An input
    /// is done at the first idle after it that does not wait
    /// (`requires_action` and `budget_reached` idles wait: answering them
    /// starts the next Run of the same work), or when the Session is
    /// archived. An input the sessions service may have accepted but this
    /// store does not know as accepted is asked for again first.
    pub(crate) async fn on_input_event(&self, kind: &str, e: &Value, session_id: &str) -> Result<()> {
        let seq = e.get("seq").and_then(Value::as_i64).unwrap_or(i64::MAX);
        let stop = e.pointer("/payload/stop_reason/type").and_then(Value::as_str).unwrap_or_default();
        if crate::settle::ended(kind, stop, false).is_none() {
            return Ok(());
        }
        let mut open = self.store.open_inputs(session_id).await?;
        if open.iter().any(|(r, _)| r.accepted.is_none()) {
            for (_, req) in open.iter().filter(|(r, _)| r.accepted.is_none()) {
                self.ask_again(req).await?;
            }
            open = self.store.open_inputs(session_id).await?;
        }
        for (rec, _) in open.into_iter().filter(|(r, _)| r.accepted.is_some() && r.event_seq < seq) {
            let interrupted = stop == "end_turn" && self.interrupted_between(session_id, rec.event_seq, seq).await?;
            if let Some(ended) = crate::settle::ended(kind, stop, interrupted) {
                self.settle_input(&rec, ended).await?;
            }
        }
        Ok(())
    }

    /// Asks again for a recorded child or input (a crash or an outage left
    /// it unanswered); a refusal fails its step or firing.
    pub(crate) async fn ask_again(&self, c: &ChildRequest) -> Result<()> {
        let Some(mut f) = self.store.get_firing(&FiringId::stored(c.firing_id.clone())).await? else {
            match &c.continuation {
                Some(k) => self.store.drop_input(&k.key).await?,
                None => self.store.drop_child(&c.session_id).await?,
            }
            return Ok(());
        };
        if let Some(reason) = self.complete_child(&mut f, c).await? {
            let refused = vec![(c.step_id.clone(), c.session_id.clone(), reason)];
            self.advance_program(&f.id, Some(crate::steps::deny(refused))).await?;
        }
        self.after_settle(&f).await;
        Ok(())
    }

    /// Settles the firing or step an input waits on with how its work
    /// ended; the usage counted is that of its Runs alone.
    async fn settle_input(&self, rec: &InputRecord, (state, error): (FiringState, Option<(&str, String)>)) -> Result<()> {
        let Some(mut f) = self.store.get_firing(&FiringId::stored(rec.firing_id.clone())).await? else { return Ok(()) };
        if f.state != FiringState::Running {
            return Ok(());
        }
        let first_run = rec.accepted.as_ref().map(|i| i.run_id.clone()).unwrap_or_default();
        if f.program.is_some() {
            return self.settle_step(&f, &rec.session_id, crate::settle::step_outcome(&state, &error), Some(&first_run)).await;
        }
        f.usage = self.usage_since(&rec.session_id, &first_run).await?;
        f.settle(state, error, now_ms());
        self.store.update_firing(&f).await?;
        self.after_settle(&f).await;
        Ok(())
    }

    /// What a Session's Runs from `first_run` on used: an input's work
    /// (its Run, and those answering its waits), not what came before.
    pub(crate) async fn usage_since(&self, session_id: &str, first_run: &str) -> Result<Usage> {
        let mut total = Usage::default();
        let mut page = String::new();
        loop {
            let req = ss::ListRunsRequest { session_id: session_id.into(), limit: 100, page };
            let runs = self.sessions.clone().list_runs(req).await.map_err(Error::from)?.into_inner();
            for r in runs.data.iter().filter(|r| r.id.as_str() >= first_run) {
                total += Usage::from(r.usage.unwrap_or_default());
            }
            if runs.next_page.is_empty() {
                return Ok(total);
            }
            page = runs.next_page;
        }
    }

    /// Readiness `session_target` (§18.4): each continued Session exists,
    /// is not terminated, is on its target's deployment, and is the service
    /// Principal's or one it holds `act_as` on.
    pub(crate) async fn session_targets(&self, a: &crate::model::Automation) -> crate::model::Check {
        use crate::model::Check;
        let svc = a.service_principal_id.to_string();
        for (session, deployment) in a.target.continued_sessions() {
            let s = match self.sessions.clone().get_session(ss::GetByIdRequest { id: session.clone() }).await {
                Ok(s) => s.into_inner(),
                Err(st) if st.code() == tonic::Code::NotFound => {
                    return Check::fail("session_target", "the selected Session does not exist", Some(session));
                }
                Err(st) => return Check::unknown("session_target", st.message()),
            };
            if s.status == "terminated" {
                return Check::fail("session_target", "the selected Session is terminated", Some(session));
            }
            if s.agent_deployment_id != deployment {
                return Check::fail("session_target", format!("the selected Session is not on deployment {deployment}"), Some(session));
            }
            if s.principal_id != svc {
                match self.acts_as(&svc, &s.principal_id, &s.environment_id).await {
                    Ok(true) => {}
                    Ok(false) => {
                        let why = format!("{svc} is not the selected Session's Principal and lacks act_as on {}", s.principal_id);
                        return Check::fail("session_target", why, Some(session));
                    }
                    Err(e) => return Check::unknown("session_target", e.message),
                }
            }
        }
        Check::pass("session_target")
    }
}
