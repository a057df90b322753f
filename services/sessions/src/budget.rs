//! Session Budgets. A session-scoped Budget lives on its Session's row, so
//! what it has consumed moves in the same commit as the model usage the log
//! records, and the pause at the cap is decided in that commit too: no
//! charge is lost or double-counted across a crash, and no second store has
//! to agree. Admission stops when `consumed >= limit` (or the Budget is
//! paused): the in-flight model call completes and is billed, then the
//! Session idles with `budget_reached`; raising the limit strictly above
//! `consumed`, or resuming, restarts the queued work without a new message.

use crate::draft::{Draft, system};
use crate::log::Log;
use crate::model::*;
use crate::store::SessionsStore;
use checkfu_core::events::EventType;
use checkfu_core::id::{BudgetId, SessionId};
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};
use serde_json::{Value, json};
use std::sync::Arc;

impl Draft {
    fn budget_reached(&self) -> bool {
        self.session.status == SessionStatus::Idle && matches!(self.session.stop_reason, Some(StopReason::BudgetReached))
    }

    /// Records usage and idles the Session with `budget_reached`.
    /// Settles the active Run, if any, the same way.
    pub(crate) fn pause_for_budget(&mut self, caused_by: Value) {
        let budget = self.session.budget.as_ref().map(Budget::summary);
        let run_id = self.run.as_ref().map(|r| r.id.clone());
        self.push(
            EventType::SessionUsage,
            run_id.as_ref(),
            system(),
            caused_by.clone(),
            json!({"usage": self.session.usage, "budget": budget}),
        );
        let stop = StopReason::BudgetReached;
        if self.run.is_some() {
            self.complete_run(stop, caused_by);
        } else {
            self.set_status(SessionStatus::Idle, Some(stop), caused_by);
        }
    }

    /// Whether admission is closed by the Session's Budget.
    pub(crate) fn admission_closed(&self) -> bool {
        self.session.budget.as_ref().is_some_and(|b| !b.open())
    }

    /// Applies a Budget change; a Session paused at its cap whose Budget
    /// re-opens restarts its queued work at once.
    fn change_budget(&mut self, change: &BudgetChange, actor: &str) -> Result<Budget> {
        let Some(mut b) = self.session.budget.clone() else {
            return Err(Error::not_found("budget", "(none on this session)"));
        };
        match change {
            BudgetChange::Limit { limit, expected_version } => {
                Budget::check_limit(*limit)?;
                if expected_version.is_some_and(|v| v != b.version) {
                    return Err(Error::conflict("the budget changed since it was read (version mismatch)")
                        .with_details(json!({"version": b.version})));
                }
                b.limit = *limit;
            }
            BudgetChange::Pause => b.status = BudgetStatus::Paused,
            BudgetChange::Resume => b.status = BudgetStatus::Active,
            BudgetChange::Detach => {}
        }
        b.version += 1;
        b.updated_ms = self.now_ms;
        let detached = matches!(change, BudgetChange::Detach);
        self.session.budget = (!detached).then(|| b.clone());
        let cause = json!({"kind": "principal", "id": actor});
        let summary = if detached { Value::Null } else { b.summary() };
        self.push(EventType::SessionUpdated, None, Value::String(actor.to_string()), cause.clone(), json!({"budget": summary}));
        let open = detached || b.open();
        if self.budget_reached() && open {
            let trigger = self.session.last_seq + self.events.len() as i64;
            self.admit_run(trigger, json!({"kind": "budget", "id": b.id}));
        }
        // Child threads paused at the cap restart with the primary.
        if open {
            let paused: Vec<String> = self
                .session
                .threads
                .iter()
                .filter(|t| !t.archived() && t.status == SessionStatus::Idle)
                .filter(|t| matches!(t.stop_reason, Some(StopReason::BudgetReached)))
                .map(|t| t.id.clone())
                .collect();
            for id in paused {
                if self.focus(Some(&id)).is_ok() {
                    let trigger = self.next_seq() - 1;
                    self.admit_run(trigger, json!({"kind": "budget", "id": b.id}));
                }
            }
            self.unfocus();
        }
        Ok(b)
    }
}

/// Session-scoped Budgets, over the log (a change is a commit).
#[derive(Clone)]
pub struct Budgets {
    pub(crate) store: Arc<dyn SessionsStore>,
    pub(crate) log: Log,
}

impl Budgets {
    /// Attaches a Budget to a Session that has none.
    pub async fn attach_budget(&self, session_id: &str, limit: i64, metric: &str, actor: &str) -> Result<(Budget, Session)> {
        let session_id = SessionId::parse("id", session_id)?;
        let (b, s, _) = self
            .log
            .transact(&session_id, |d| {
                if d.session.budget.is_some() {
                    return Err(Error::conflict("the session already has a budget; change its limit instead"));
                }
                if d.session.status == SessionStatus::Terminated {
                    return Err(Error::conflict("the session is terminated"));
                }
                let b = Budget::new(limit, metric, d.now_ms, "")?;
                d.session.budget = Some(b.clone());
                let cause = json!({"kind": "principal", "id": actor});
                d.push(EventType::SessionUpdated, None, Value::String(actor.to_string()), cause, json!({"budget": b.summary()}));
                Ok(b)
            })
            .await?;
        Ok((b, s))
    }

    /// The Session holding a Budget.
    pub async fn budget_session(&self, budget_id: &str) -> Result<Session> {
        let budget_id = BudgetId::parse("id", budget_id)?;
        self.store.session_by_budget(&budget_id).await?.ok_or_else(|| Error::not_found("budget", &budget_id))
    }

    pub async fn change_budget(&self, budget_id: &str, change: BudgetChange, actor: &str) -> Result<(Budget, Session)> {
        let s = self.budget_session(budget_id).await?;
        let (b, s, _) = self.log.transact(&s.id, |d| d.change_budget(&change, actor)).await?;
        Ok((b, s))
    }

    /// Sessions with a Budget in any of `environment_ids`, newest Budget first.
    pub async fn list_budgets(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Session>> {
        self.store.list_budget_sessions(environment_ids, page).await
    }
}
