//! Running step programs (api.md §12.8) against the store and the other
//! services: each change to a program — a child settled, a resume, a
//! deletion — is applied to the stored program with a compare-and-set,
//! then the program advances; the `step_agent` steps it admits are recorded
//! (as pending children, with minted Session ids) in that same write, and
//! only then created. So a step is admitted once, across crashes and
//! duplicate or late notifications, and recovery rejoins the original
//! child instead of replacing it. Check nodes it reaches are evaluated
//! after that write (`judge.rs`).

use crate::firing::Firing;
use crate::model::*;
use crate::program::{ApprovalAsk, Outcome, OutcomeRecord, Program};
use crate::service::SchedulerService;
use checkfu_core::Result;
use checkfu_core::id::{FiringId, SessionId, TypedId};
use checkfu_core::time::now_ms;
use checkfu_proto::sessions::v1 as ss;
use serde_json::{Value, json};

/// A change applied to a program before it advances.
pub type Change = Box<dyn Fn(&mut Firing, &mut Program, i64) + Send + Sync>;

/// Records children (or inputs) refused at admission — nothing was
/// created or appended — each `(step, session id, reason)`: a `forEach`
/// item fails on its own — the step fails once its started siblings
/// settled — and any other step fails now.
pub(crate) fn deny(children: Vec<(String, String, String)>) -> Change {
    Box::new(move |_: &mut Firing, p: &mut Program, now: i64| {
        for (step, session, reason) in &children {
            p.child_refused(step, session, reason, now);
        }
    })
}

/// Fails the steps still `running` among `steps` with `reason`.
pub(crate) fn fail_running(steps: Vec<String>, reason: &'static str) -> Change {
    Box::new(move |_: &mut Firing, p: &mut Program, now: i64| {
        for step in &steps {
            if p.step(step).and_then(|s| s.outcome.as_ref()).is_some_and(|o| o.kind == "running") {
                p.set(step, Outcome::failed(reason), now);
            }
        }
    })
}

impl SchedulerService {
    /// Applies `change` (if any) and advances the firing's program, writing
    /// both with one compare-and-set; then creates the children admitted.
    pub(crate) async fn advance_program(&self, id: &FiringId, change: Option<Change>) -> Result<()> {
        let mut change = change;
        for _ in 0..8 {
            let Some(mut f) = self.store.get_firing(id).await? else { return Ok(()) };
            if f.state != FiringState::Running {
                return Ok(());
            }
            let Some(mut p) = f.program.take() else { return Ok(()) };
            let now = now_ms();
            if let Some(c) = &change {
                c(&mut f, &mut p, now);
            }
            let a = self.store.get_automation(&f.automation_id).await?;
            let mut children = vec![];
            let mut waits: Vec<(String, i64)> = vec![];
            match a.as_ref().filter(|a| a.deleted_ms == 0) {
                None => {
                    // Deleted: an unfinished program settles failed.
                    p.state = "settled".into();
                    p.result = Some("failed".into());
                    f.settle(FiringState::Failed, Some(("automation_deleted", "the Automation was deleted".into())), now);
                }
                Some(a) => {
                    let paused = a.status == AutomationStatus::Paused;
                    let mut admits = p.advance(&f.event, paused, now);
                    while !admits.is_empty() {
                        waits.extend(admits.waits.iter().map(|(step, until)| (format!("{}/{step}", f.id), *until)));
                        // Authority is re-checked at each admission.
                        let ready = admits.agents.is_empty() || self.readiness(a).await.admits();
                        for ad in admits.agents {
                            let node = p.target.steps.iter().find(|n| n["id"] == ad.step_id.as_str()).cloned().unwrap_or(Value::Null);
                            if !ready {
                                p.set(&ad.step_id, Outcome::failed("child_admission_denied"), now);
                                continue;
                            }
                            // A continue_selected step's input goes into its Session (§18.4).
                            let continued =
                                node["sessionTarget"]["session"].as_str().filter(|_| node["sessionTarget"]["mode"] == "continue_selected");
                            let attempt = p.step(&ad.step_id).map_or(1, |s| s.attempt.max(1));
                            let child = ChildRequest {
                                session_id: continued.map_or_else(|| SessionId::mint().to_string(), String::from),
                                step_id: ad.step_id.clone(),
                                agent_deployment_id: node["agentDeploymentId"].as_str().unwrap_or_default().to_string(),
                                deployment_revision: node["deploymentRevision"].as_i64(),
                                principal_id: a.service_principal_id.to_string(),
                                title: format!("{} / {}", a.name, ad.step_id).chars().take(200).collect(),
                                metadata: match ad.item {
                                    Some(i) => {
                                        json!({"automation_id": a.id, "automation_firing_id": f.id, "step_id": ad.step_id, "item_index": i})
                                    }
                                    None => json!({"automation_id": a.id, "automation_firing_id": f.id, "step_id": ad.step_id}),
                                },
                                prompt: ad.prompt,
                                budget: serde_json::from_value(node["budget"].clone()).ok(),
                                firing_id: f.id.to_string(),
                                outcome: ad.outcome,
                                continuation: continued
                                    .map(|_| crate::session_input::Continuation::new(f.id.as_str(), &ad.step_id, attempt)),
                                delivery_screen: node.get("deliveryScreen").and_then(|d| graph_screen(d).ok()),
                            };
                            if let Some(s) = p.steps.iter_mut().find(|s| s.id == ad.step_id) {
                                match ad.item.and_then(|i| s.items.get_mut(i)) {
                                    Some(item) => item.child_session_id = Some(child.session_id.clone()),
                                    None => s.child_session_id = Some(child.session_id.clone()),
                                }
                            }
                            children.push(child);
                        }
                        admits = p.advance(&f.event, paused, now);
                    }
                    // Retry timers the change armed go with this write.
                    waits.extend(p.take_timers(&f.id));
                    if p.state == "settled" {
                        let failed = p.steps.iter().find(|s| s.outcome.as_ref().is_some_and(|o| o.kind == "failed"));
                        match failed {
                            Some(s) => {
                                let reason = s.outcome.as_ref().and_then(|o| o.reason.clone()).unwrap_or_default();
                                let message = format!("step {} failed ({reason})", s.id);
                                f.settle(FiringState::Failed, Some((reason.as_str(), message)), now);
                            }
                            None => f.settle(FiringState::Succeeded, None, now),
                        }
                    }
                }
            }
            f.program = Some(p);
            let expected = f.version;
            f.version += 1;
            if !self.store.update_program(&f, expected, &children, &waits).await? {
                continue;
            }
            let mut denied = vec![];
            for c in &children {
                if let Some(reason) = self.complete_child(&mut f, c).await? {
                    denied.push((c.step_id.clone(), c.session_id.clone(), reason));
                }
            }
            if !waits.is_empty() {
                self.timer_wake.notify_one();
            }
            // Steps awaiting an approval governance has not made yet (just
            // admitted, or before a crash) ask for it; asking again answers
            // the same one.
            if let (Some(a), Some(p)) = (a.as_ref().filter(|a| a.deleted_ms == 0), f.program.as_ref()) {
                let asks = p.approvals_to_ask(&f.event);
                if !asks.is_empty() {
                    self.request_approvals(a, &f.id, asks).await?;
                }
            }
            if let (Some(a), true) = (a.as_ref().filter(|a| a.deleted_ms == 0), f.state == FiringState::Running) {
                self.evaluate_checks(&f, a).await;
                self.run_connection_steps(&f, a).await;
                self.run_memory_steps(&f, a).await;
                self.run_history_steps(&f, a).await;
                self.run_skill_steps(&f, a).await;
            }
            if !denied.is_empty() {
                // Refused children fail their steps; the program moves on.
                change = Some(deny(denied));
                continue;
            }
            if f.state != FiringState::Running {
                self.after_settle(&f).await;
            }
            return Ok(());
        }
        Err(checkfu_core::Error::conflict("a step program changed concurrently too often; it advances on its next event"))
    }

    /// A step's child settled: the step takes its outcome (and, completed,
    /// the child's last `agent.message` as its output), the firing the
    /// child's usage; then the program advances.
    /// A continued Session's step (`run` its input's first Run) counts the
    /// usage of its Runs, not the Session's.
    pub(crate) async fn settle_step(&self, f: &Firing, session_id: &str, outcome: Outcome, run: Option<&str>) -> Result<()> {
        let Some(step) = f.program.as_ref().and_then(|p| p.step_of_child(session_id)).map(|s| s.id.clone()) else { return Ok(()) };
        // A reviewed step settles by its Outcome, not by the idle alone.
        let reviewed = f.program.as_ref().is_some_and(|p| p.reviewed_by(&step).is_some());
        let (outcome, record) = match reviewed {
            true if outcome.kind == "completed" => {
                let o = self.child_outcome(session_id).await?;
                (o.as_ref().map_or(Outcome::failed("outcome_unavailable"), OutcomeRecord::step_outcome), o)
            }
            _ => (outcome, None),
        };
        // A completed child delivered its last message — unless its screen
        // withheld it (§18.8): a negative verdict, not a failure.
        let (outcome, output) = match outcome.kind.as_str() {
            "completed" => match self.last_message(session_id).await? {
                Some(text) => (outcome, Some(Value::String(text))),
                None => (Outcome { reason: Some("delivery_blocked".into()), ..Outcome::of("rejected") }, None),
            },
            _ => (outcome, None),
        };
        // A failed child is retried only if it left no call whose effect is
        // unknown (§18.6).
        let retried = f
            .program
            .as_ref()
            .and_then(|p| p.target.steps.iter().find(|n| n["id"] == step.as_str()))
            .is_some_and(|n| n.get("retry").is_some_and(|r| !r.is_null()));
        let mut outcome = outcome;
        if retried && outcome.reason.as_deref() == Some("child_failed") && self.tool_call_unanswered(session_id).await? {
            outcome.retry_withheld = Some("effect_unknown".into());
        }
        let u = match run {
            Some(first_run) => self.usage_since(session_id, first_run).await?,
            None => {
                let s = self
                    .sessions
                    .clone()
                    .get_session(ss::GetByIdRequest { id: session_id.into() })
                    .await
                    .map_err(checkfu_core::Error::from)?
                    .into_inner();
                Usage::from(s.usage.unwrap_or_default())
            }
        };
        let session = session_id.to_string();
        let change = move |f: &mut Firing, p: &mut Program, now: i64| {
            if p.step(&step).and_then(|s| s.outcome.as_ref()).is_none_or(|o| o.kind != "running") {
                return;
            }
            if let Some(r) = &record {
                if let Some(s) = p.steps.iter_mut().find(|s| s.id == step) {
                    s.outcome_id = Some(r.outcome_id.clone());
                }
                p.outcomes.push(OutcomeRecord { step_id: step.clone(), ..r.clone() });
            }
            if p.step(&step).is_some_and(|s| !s.items.is_empty()) {
                // A forEach child: its item settles; the advance moves on.
                if !p.item_settled(&step, &session, &outcome, output.clone()) {
                    return;
                }
            } else {
                if let Some(s) = p.steps.iter_mut().find(|s| s.id == step) {
                    s.output = output.clone();
                }
                p.settle_attempt(&step, outcome.clone(), now);
            }
            f.usage += u;
        };
        self.advance_program(&f.id, Some(Box::new(change))).await
    }

    /// The Outcome a reviewed step's child was started with, as it stands
    /// now.
    async fn child_outcome(&self, session_id: &str) -> Result<Option<OutcomeRecord>> {
        let req = ss::ListRunsRequest { session_id: session_id.into(), limit: 1, page: String::new() };
        let list = self.sessions.clone().list_outcomes(req).await.map_err(checkfu_core::Error::from)?.into_inner();
        Ok(list.outcomes.into_iter().next().map(|o| OutcomeRecord {
            step_id: String::new(),
            outcome_id: o.id,
            session_id: session_id.to_string(),
            status: o.status,
            iterations_used: o.iterations_used,
        }))
    }

    /// Whether a Session's log holds a tool call without its result — a
    /// call whose effect is unknown, which a retry must not repeat.
    async fn tool_call_unanswered(&self, session_id: &str) -> Result<bool> {
        let types = ["agent.tool_use", "agent.custom_tool_use", "agent.tool_result", "user.tool_result", "user.custom_tool_result"];
        let mut open = std::collections::BTreeSet::new();
        self.each_event(session_id, &types, |e| {
            let p: Value = serde_json::from_str(&e.payload_json).unwrap_or(Value::Null);
            let id = p["tool_use_id"].as_str().or(p["custom_tool_use_id"].as_str()).unwrap_or_default().to_string();
            if e.r#type.ends_with("_use") {
                open.insert(id);
            } else {
                open.remove(&id);
            }
        })
        .await?;
        Ok(!open.is_empty())
    }

    /// The text of a Session's last `agent.message` (`""` if none).
    /// The text of a child's last `agent.message`; `None` when the
    /// Session's delivery screen withheld its last message (§18.8): its
    /// last `message.screened` came after its last delivered message.
    pub(crate) async fn last_message(&self, session_id: &str) -> Result<Option<String>> {
        let mut last = None;
        self.each_event(session_id, &["agent.message", "message.screened"], |e| last = Some((e.r#type.clone(), e.payload_json.clone())))
            .await?;
        let Some((kind, payload)) = last else { return Ok(Some(String::new())) };
        let payload: Value = serde_json::from_str(&payload).unwrap_or(Value::Null);
        if kind == "message.screened" {
            // Released, its message follows; a screened last is withheld.
            return Ok(None);
        }
        let text: Vec<&str> = payload["content"].as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect();
        Ok(Some(text.join("")))
    }

    /// Reads a Session's events of `types` in order, a page at a time.
    pub(crate) async fn each_event(&self, session_id: &str, types: &[&str], mut read: impl FnMut(&ss::Event)) -> Result<()> {
        const PAGE: u32 = 1000;
        let mut after = 0;
        loop {
            let req = ss::ListEventsRequest {
                session_id: session_id.into(),
                after_seq: after,
                limit: PAGE,
                types: types.iter().map(|t| t.to_string()).collect(),
                view: String::new(),
            };
            let page = self.sessions.clone().list_events(req).await.map_err(checkfu_core::Error::from)?.into_inner().data;
            page.iter().for_each(&mut read);
            match page.last() {
                Some(e) if page.len() == PAGE as usize => after = e.seq,
                _ => return Ok(()),
            }
        }
    }

    /// Asks governance for each step's ActionApproval — an approval
    /// step's, or the call a Connection step would make — and records its
    /// id with the step (and `action_approval.pending` in the outbox).
    async fn request_approvals(&self, a: &Automation, firing: &FiringId, asks: Vec<ApprovalAsk>) -> Result<()> {
        let mut made = vec![];
        for ask in asks {
            let (frozen, attempt) = match &ask.call {
                Some(c) => (
                    Some(checkfu_proto::governance::v1::FrozenAction {
                        principal_id: a.service_principal_id.to_string(),
                        agent_id: String::new(),
                        tool: c.tool.clone(),
                        connection_id: c.connection_id.clone(),
                        arguments_json: c.arguments.to_string(),
                        arguments_sha256: checkfu_core::sha256_hex(c.arguments.to_string()),
                    }),
                    c.attempt,
                ),
                None => (None, 0),
            };
            let req = checkfu_proto::governance::v1::RequestStepApprovalRequest {
                environment_id: a.environment_id.to_string(),
                automation_firing_id: firing.to_string(),
                step_id: ask.step_id.clone(),
                principal_id: a.service_principal_id.to_string(),
                title: ask.title,
                ttl_seconds: ask.ttl_seconds,
                frozen,
                attempt,
            };
            let approval = self.governance.clone().request_step_approval(req).await.map_err(checkfu_core::Error::from)?.into_inner();
            made.push((ask.step_id, approval.id));
        }
        let records: Vec<_> =
            made.iter().map(|(_, id)| checkfu_bus::resource_record("action_approval.pending", &a.environment_id, id)).collect();
        let change = move |_: &mut Firing, p: &mut Program, _: i64| {
            for (step, id) in &made {
                if let Some(s) = p.steps.iter_mut().find(|s| &s.id == step) {
                    s.action_approval_id = Some(id.clone());
                }
            }
        };
        self.write_program(firing, Box::new(change)).await?;
        self.store.record_events(&records).await?;
        self.woke();
        Ok(())
    }

    /// Applies `change` to the stored program alone (no advance).
    pub(crate) async fn write_program(&self, id: &FiringId, change: Change) -> Result<()> {
        for _ in 0..8 {
            let Some(mut f) = self.store.get_firing(id).await? else { return Ok(()) };
            let Some(mut p) = f.program.take() else { return Ok(()) };
            change(&mut f, &mut p, now_ms());
            // Timers the change armed go with this write.
            let waits = p.take_timers(&f.id);
            f.program = Some(p);
            let expected = f.version;
            f.version += 1;
            if self.store.update_program(&f, expected, &[], &waits).await? {
                if !waits.is_empty() {
                    self.timer_wake.notify_one();
                }
                return Ok(());
            }
        }
        Err(checkfu_core::Error::conflict("a step program changed concurrently too often"))
    }

    /// Settles the steps whose approvals were decided or expired: approve
    /// → `completed` (a Connection step runs again, to call), deny →
    /// `denied`, expiry → `denied` (`approval_expired`); then tells
    /// governance they are recorded.
    pub async fn settle_approvals(&self) -> Result<usize> {
        let req = checkfu_proto::governance::v1::ListRequest { limit: 100, page: String::new() };
        let decided =
            self.governance.clone().list_unsettled_step_approvals(req).await.map_err(checkfu_core::Error::from)?.into_inner().data;
        let n = decided.len();
        for ap in decided {
            let outcome = match (ap.status.as_str(), ap.decision.as_str()) {
                ("approved", _) => Outcome::completed(),
                ("expired", _) => Outcome::denied(Some("approval_expired")),
                _ => Outcome::denied(None),
            };
            let decision = ap.decision.clone();
            if let Ok(firing) = FiringId::parse("automation_firing_id", &ap.automation_firing_id) {
                let step = ap.step_id.clone();
                let change = move |_: &mut Firing, p: &mut Program, now: i64| {
                    let Some(s) = p.step(&step).filter(|s| s.outcome.as_ref().is_some_and(|o| o.kind == "awaiting_approval")) else {
                        return;
                    };
                    if s.kind == "step_connection" {
                        let next = if outcome.kind == "completed" { Outcome::of("running") } else { outcome.clone() };
                        p.set(&step, next, now);
                        return;
                    }
                    if let Some(s) = p.steps.iter_mut().find(|s| s.id == step) {
                        s.output = Some(json!({"decision": decision}));
                    }
                    p.set(&step, outcome.clone(), now);
                };
                self.advance_program(&firing, Some(Box::new(change))).await?;
            }
            let settled = checkfu_proto::governance::v1::GetByIdRequest { id: ap.id.clone() };
            self.governance.clone().mark_approval_settled(settled).await.map_err(checkfu_core::Error::from)?;
            let env = checkfu_core::id::EnvironmentId::stored(ap.environment_id.clone());
            self.store.record_events(&[checkfu_bus::resource_record("action_approval.resolved", &env, &ap.id)]).await?;
            self.woke();
        }
        Ok(n)
    }

    /// A step's timer came due: a `step_wait`'s (`{firing}/{step}`)
    /// completes it; a retry's (`{firing}/{step}/retry{n}`) lets its next
    /// attempt be admitted; a call's deadline (`{firing}/{step}/call{n}`)
    /// takes an unanswered call as indeterminate. Then the program
    /// advances.
    pub(crate) async fn wake_step(&self, timer_id: &str) -> Result<()> {
        let Some((firing, rest)) = timer_id.split_once('/') else { return Ok(()) };
        let firing = FiringId::parse("timer", firing)?;
        if let Some((step, attempt)) = rest.split_once("/call") {
            let (step, attempt) = (step.to_string(), attempt.parse::<i64>().unwrap_or(0));
            let change: Change = Box::new(move |_: &mut Firing, p: &mut Program, now: i64| {
                p.call_deadline(&step, attempt, now);
            });
            return self.advance_program(&firing, Some(change)).await;
        }
        let change: Change = match rest.split_once("/retry") {
            Some((step, _)) => {
                let step = step.to_string();
                Box::new(move |_: &mut Firing, p: &mut Program, _: i64| {
                    p.retry_due(&step);
                })
            }
            None => {
                let step = rest.to_string();
                Box::new(move |_: &mut Firing, p: &mut Program, now: i64| {
                    if p.step(&step).and_then(|s| s.outcome.as_ref()).is_some_and(|o| o.kind == "waiting") {
                        p.set(&step, Outcome::completed(), now);
                    }
                })
            }
        };
        self.advance_program(&firing, Some(change)).await
    }

    /// Advances the running programs of an Automation (after a resume or a
    /// deletion), or of all Automations.
    pub(crate) async fn advance_programs(&self, automation_id: Option<&checkfu_core::id::AutomationId>) {
        let ids = match self.store.running_programs(automation_id).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(error = %e.message, "could not list running step programs");
                return;
            }
        };
        for id in ids {
            if let Err(e) = self.advance_program(&id, None).await {
                tracing::warn!(firing_id = %id, error = %e.message, "a step program did not advance");
            }
        }
    }

    /// At start: every running program is recovered — its attempt counts
    /// one more — and advanced; children, approvals and timers it waits on
    /// are rejoined, never replaced.
    pub async fn recover_programs(&self) {
        let ids = self.store.running_programs(None).await.unwrap_or_default();
        for id in ids {
            let bump: crate::steps::Change = Box::new(|_: &mut Firing, p: &mut Program, _| p.attempt += 1);
            if let Err(e) = self.advance_program(&id, Some(bump)).await {
                tracing::warn!(firing_id = %id, error = %e.message, "a step program could not be recovered");
            }
        }
    }
}
