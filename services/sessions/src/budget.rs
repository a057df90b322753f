//! Session Budgets. A session-scoped Budget lives on its Session's row, so
//! what it has consumed moves in the same commit as the model usage the log
//! records, and the pause at the cap is decided in that commit too: no
//! charge is lost or double-counted across a crash, and no second store has
//! to agree. Admission stops when `consumed >= limit` (or the Budget is
//! paused): the in-flight model call completes and is billed, then the
//! Session idles with `budget_reached`; raising the limit strictly above
//! `consumed`, or resuming, restarts the queued work without a new message.

use crate::input::{Draft, system};
use crate::model::*;
use crate::service::SessionsService;
use checkfu_core::id::{check as check_id, new_id};
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result, string_enum};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

string_enum!(
    /// What a Budget counts: integer micro-USD from the price catalog, or
    /// provider tokens (input + output).
    BudgetMetric { ModelSpend = "model_spend", ModelTokens = "model_tokens" }
);
string_enum!(BudgetStatus { Active = "active", Paused = "paused" });

/// The largest limit accepted: a trillion micro-USD (one million USD) or
/// tokens, far above any real cap and far below overflow.
const MAX_LIMIT: i64 = 1_000_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub id: String,
    pub metric: String,
    pub limit: i64,
    pub consumed: i64,
    pub status: String,
    pub version: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

impl Budget {
    /// `prefix` names where the request carried it (`budget.` inside a
    /// session create), for the error's `details.field`.
    pub fn new(limit: i64, metric: &str, now_ms: i64, prefix: &str) -> Result<Budget> {
        BudgetMetric::parse(&format!("{prefix}metric"), metric)?;
        check_limit(limit, prefix)?;
        Ok(Budget {
            id: new_id("bud"),
            metric: metric.to_string(),
            limit,
            consumed: 0,
            status: BudgetStatus::Active.as_str().into(),
            version: 1,
            created_ms: now_ms,
            updated_ms: now_ms,
        })
    }

    /// Whether new model work may be admitted.
    pub fn open(&self) -> bool {
        self.status == BudgetStatus::Active.as_str() && self.consumed < self.limit
    }

    /// Bills one model call.
    pub fn charge(&mut self, u: Usage) {
        let amount =
            if self.metric == BudgetMetric::ModelTokens.as_str() { u.input_tokens + u.output_tokens } else { u.model_spend_micro_usd };
        self.consumed = self.consumed.saturating_add(amount.max(0));
    }

    /// How the Budget appears in `session.usage` events.
    pub fn summary(&self) -> Value {
        json!({"id": self.id, "metric": self.metric, "limit": self.limit, "consumed": self.consumed, "status": self.status})
    }
}

fn check_limit(limit: i64, prefix: &str) -> Result<()> {
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::invalid_field(&format!("{prefix}limit"), format!("limit must be an integer from 1 to {MAX_LIMIT}")));
    }
    Ok(())
}

/// A change to a Budget.
#[derive(Debug, Clone)]
pub enum BudgetChange {
    Limit { limit: i64, expected_version: Option<i64> },
    Pause,
    Resume,
}

impl Draft {
    fn budget_reached(&self) -> bool {
        self.session.status == SessionStatus::Idle
            && self.session.stop_reason.as_ref().and_then(|r| r.get("type")).and_then(Value::as_str) == Some("budget_reached")
    }

    /// Records usage and idles the Session with `budget_reached`.
    /// Settles the active Run, if any, the same way.
    pub(crate) fn pause_for_budget(&mut self, caused_by: Value) {
        let budget = self.session.budget.as_ref().map(Budget::summary);
        let run_id = self.run.as_ref().map(|r| r.id.clone());
        self.push("session.usage", run_id.as_deref(), system(), caused_by.clone(), json!({"usage": self.session.usage, "budget": budget}));
        let stop = json!({"type": "budget_reached"});
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
                check_limit(*limit, "")?;
                if expected_version.is_some_and(|v| v != b.version) {
                    return Err(Error::conflict("the budget changed since it was read (version mismatch)")
                        .with_details(json!({"version": b.version})));
                }
                b.limit = *limit;
            }
            BudgetChange::Pause => b.status = BudgetStatus::Paused.as_str().into(),
            BudgetChange::Resume => b.status = BudgetStatus::Active.as_str().into(),
        }
        b.version += 1;
        b.updated_ms = self.now_ms;
        self.session.budget = Some(b.clone());
        let cause = json!({"kind": "principal", "id": actor});
        self.push("session.updated", None, Value::String(actor.to_string()), cause.clone(), json!({"budget": b.summary()}));
        if self.budget_reached() && b.open() {
            let trigger = self.session.last_seq + self.events.len() as i64;
            self.admit_run(trigger, json!({"kind": "budget", "id": b.id}));
        }
        Ok(b)
    }
}

impl SessionsService {
    /// Attaches a Budget to a Session that has none.
    pub async fn attach_budget(&self, session_id: &str, limit: i64, metric: &str, actor: &str) -> Result<(Budget, Session)> {
        let (b, s, _) = self
            .transact(session_id, |d| {
                if d.session.budget.is_some() {
                    return Err(Error::conflict("the session already has a budget; change its limit instead"));
                }
                if d.session.status == SessionStatus::Terminated {
                    return Err(Error::conflict("the session is terminated"));
                }
                let b = Budget::new(limit, metric, d.now_ms, "")?;
                d.session.budget = Some(b.clone());
                let cause = json!({"kind": "principal", "id": actor});
                d.push("session.updated", None, Value::String(actor.to_string()), cause, json!({"budget": b.summary()}));
                Ok(b)
            })
            .await?;
        Ok((b, s))
    }

    /// The Session holding a Budget.
    pub async fn budget_session(&self, budget_id: &str) -> Result<Session> {
        check_id("id", "bud", budget_id)?;
        self.store.session_by_budget(budget_id).await?.ok_or_else(|| Error::not_found("budget", budget_id))
    }

    pub async fn change_budget(&self, budget_id: &str, change: BudgetChange, actor: &str) -> Result<(Budget, Session)> {
        let s = self.budget_session(budget_id).await?;
        let (b, s, _) = self.transact(&s.id, |d| d.change_budget(&change, actor)).await?;
        Ok((b, s))
    }

    /// Sessions with a Budget in any of `environment_ids`, newest Budget first.
    pub async fn list_budgets(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Session>> {
        self.store.list_budget_sessions(environment_ids, page).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_closes_at_its_limit_and_counts_its_metric() {
        let mut b = Budget::new(10, "model_tokens", 0, "").expect("budget");
        assert!(b.open());
        b.charge(Usage { input_tokens: 4, output_tokens: 5, model_spend_micro_usd: 1_000 });
        assert!(b.open(), "9 of 10");
        b.charge(Usage { input_tokens: 1, output_tokens: 0, model_spend_micro_usd: 1_000 });
        assert!(!b.open(), "consumed >= limit closes admission");
        let mut spend = Budget::new(1_500, "model_spend", 0, "").expect("budget");
        spend.charge(Usage { input_tokens: 4, output_tokens: 5, model_spend_micro_usd: 1_000 });
        assert_eq!(spend.consumed, 1_000);
        spend.status = BudgetStatus::Paused.as_str().into();
        assert!(!spend.open(), "a paused budget admits nothing");
    }

    #[test]
    fn limits_and_metrics_are_checked() {
        assert!(Budget::new(0, "model_spend", 0, "").is_err());
        assert!(Budget::new(MAX_LIMIT + 1, "model_spend", 0, "").is_err());
        assert!(Budget::new(5, "dollars", 0, "budget.").is_err());
    }
}
