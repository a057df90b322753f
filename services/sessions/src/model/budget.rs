//! A session-scoped Budget: a cap on what one Session's model calls may
//! consume, stored on the Session's row (see `crate::budget` for how it is
//! charged and changed).

use super::Usage;
use checkfu_core::id::BudgetId;
use checkfu_core::{Error, Result, string_enum};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

string_enum!(
    /// What a Budget counts: integer micro-USD from the price catalog, or
    /// provider tokens (input + output).
    BudgetMetric { ModelSpend = "model_spend", ModelTokens = "model_tokens" }
);
string_enum!(
    /// Whether a Budget admits work (a paused one admits nothing).
    BudgetStatus { Active = "active", Paused = "paused" }
);

/// The largest limit accepted: a trillion micro-USD (one million USD) or
/// tokens, far above any real cap and far below overflow.
pub(crate) const MAX_LIMIT: i64 = 1_000_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub id: BudgetId,
    pub metric: BudgetMetric,
    pub limit: i64,
    pub consumed: i64,
    pub status: BudgetStatus,
    pub version: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

impl Budget {
    /// `prefix` names where the request carried it (`budget.` inside a
    /// session create), for the error's `details.field`.
    pub fn new(limit: i64, metric: &str, now_ms: i64, prefix: &str) -> Result<Budget> {
        let metric = BudgetMetric::parse(&format!("{prefix}metric"), metric)?;
        check_limit(limit, prefix)?;
        Ok(Budget {
            id: BudgetId::mint(),
            metric,
            limit,
            consumed: 0,
            status: BudgetStatus::Active,
            version: 1,
            created_ms: now_ms,
            updated_ms: now_ms,
        })
    }

    /// A new limit is a whole number from 1 to [`MAX_LIMIT`].
    pub fn check_limit(limit: i64) -> Result<()> {
        check_limit(limit, "")
    }

    /// Whether new model work may be admitted.
    pub fn open(&self) -> bool {
        self.status == BudgetStatus::Active && self.consumed < self.limit
    }

    /// Bills one model call.
    pub fn charge(&mut self, u: Usage) {
        let amount = if self.metric == BudgetMetric::ModelTokens { u.input_tokens + u.output_tokens } else { u.model_spend_micro_usd };
        self.consumed = self.consumed.saturating_add(amount.max(0));
    }

    /// How the Budget appears in `session.usage` events.
    pub fn summary(&self) -> Value {
        json!({"id": self.id, "metric": self.metric.as_str(), "limit": self.limit, "consumed": self.consumed, "status": self.status.as_str()})
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
    Limit {
        limit: i64,
        expected_version: Option<i64>,
    },
    Pause,
    Resume,
    /// Takes the Budget off its Session: nothing caps it any more, and
    /// work stopped at the cap restarts.
    Detach,
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
        spend.status = BudgetStatus::Paused;
        assert!(!spend.open(), "a paused budget admits nothing");
    }

    #[test]
    fn limits_and_metrics_are_checked() {
        assert!(Budget::new(0, "model_spend", 0, "").is_err());
        assert!(Budget::new(MAX_LIMIT + 1, "model_spend", 0, "").is_err());
        assert!(Budget::new(5, "dollars", 0, "budget.").is_err());
    }
}
