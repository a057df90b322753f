//! `checkfu budgets ...`: caps on a Session's model spend (integer
//! micro-USD) or tokens. At the cap a Session idles `budget_reached`;
//! raising the limit above what is consumed restarts its queued work.

use crate::client::{Client, ClientArgs};
use crate::output::{Printer, s};
use crate::resolve::{self, BUDGET, SESSION};
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;

#[derive(Debug, Clone, Subcommand)]
pub enum BudgetsAction {
    /// Budgets, by Environment.
    List {
        #[arg(long)]
        environment: Option<String>,
    },
    /// Show one Budget: limit, consumed, status.
    Get { budget: String },
    /// Attach a Budget to a Session.
    Create {
        #[arg(long)]
        session: String,
        #[arg(long)]
        limit: i64,
        /// model_spend (micro-USD) or model_tokens.
        #[arg(long, default_value = "model_spend")]
        metric: String,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Change the limit (above what is consumed re-opens admission).
    Raise {
        budget: String,
        #[arg(long)]
        limit: i64,
        #[arg(long)]
        expected_version: Option<i64>,
    },
    /// Stop admission now, whatever is consumed.
    Pause { budget: String },
    /// Resume admission after a pause.
    Resume { budget: String },
    /// Detach the Budget from its Session.
    Detach { budget: String },
}

fn line(v: &Value) -> String {
    format!(
        "{}  {:<6}  {} {} of {}  {} {}",
        s(v, "id"),
        s(v, "status"),
        s(v, "metric"),
        v["consumed"],
        v["limit"],
        s(&v["scope"], "kind"),
        s(&v["scope"], "id"),
    )
}

pub async fn budgets(args: ClientArgs, action: BudgetsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    let bid = |b: String| {
        let c = c.clone();
        async move { resolve::id(&c, BUDGET, &b, None).await }
    };
    match action {
        BudgetsAction::List { environment } => {
            let env = resolve::environment_filter(&c, environment.as_deref()).await?;
            p.lines(out, &c.every("/v1/budgets", &[("environment_id", env)]).await?, line)
        }
        BudgetsAction::Get { budget } => p.detail(out, &c.get(&format!("/v1/budgets/{}", bid(budget).await?)).await?),
        BudgetsAction::Create { session, limit, metric, idempotency_key } => {
            let sid = resolve::id(&c, SESSION, &session, None).await?;
            let body = json!({"scope": {"kind": "session", "id": sid}, "limit": limit, "metric": metric});
            p.line(out, &c.create("/v1/budgets", &body, idempotency_key.as_deref()).await?, line)
        }
        BudgetsAction::Raise { budget, limit, expected_version } => {
            let mut body = json!({"limit": limit});
            if let Some(v) = expected_version {
                body["expected_version"] = json!(v);
            }
            p.line(out, &c.post(&format!("/v1/budgets/{}", bid(budget).await?), &body).await?, line)
        }
        BudgetsAction::Pause { budget } => {
            p.line(out, &c.post(&format!("/v1/budgets/{}/pause", bid(budget).await?), &json!({})).await?, line)
        }
        BudgetsAction::Resume { budget } => {
            p.line(out, &c.post(&format!("/v1/budgets/{}/resume", bid(budget).await?), &json!({})).await?, line)
        }
        BudgetsAction::Detach { budget } => p.line(out, &c.delete(&format!("/v1/budgets/{}", bid(budget).await?)).await?, line),
    }
}
