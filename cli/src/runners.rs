//! `checkfu runners ...`: self-hosted Runners seen from the API — a
//! pairing code to start one (`checkfu runner --pairing-code`), the list,
//! and revocation (fences at once).

use crate::client::{Client, ClientArgs};
use crate::output::{Printer, s};
use crate::resolve::{self, PRINCIPAL, RUNNER};
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;

#[derive(Debug, Clone, Subcommand)]
pub enum RunnersAction {
    /// A short-lived, single-use pairing code for a Runner of this pool,
    /// acting as `--principal` (needs manage on the Environment).
    Pair {
        #[arg(long)]
        principal: String,
        #[arg(long, default_value = "default")]
        pool: String,
        /// At most 900.
        #[arg(long)]
        ttl_seconds: Option<i64>,
        #[arg(long)]
        environment: Option<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Runners, by Environment.
    List {
        #[arg(long)]
        environment: Option<String>,
    },
    /// Show one Runner: pool, principal, last seen.
    Get { runner: String },
    /// Revoke a Runner: no new claims, its Runs re-queued for another.
    Revoke { runner: String },
}

fn line(v: &Value) -> String {
    let seen = v["last_seen_at"].as_str().map(|t| format!("  seen {t}")).unwrap_or_default();
    format!("{}  {:<7}  {}  pool {}  as {}{seen}", s(v, "id"), s(v, "status"), s(v, "name"), s(v, "pool"), s(v, "principal_id"))
}

pub async fn runners(args: ClientArgs, action: RunnersAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    match action {
        RunnersAction::Pair { principal, pool, ttl_seconds, environment, idempotency_key } => {
            let env = resolve::environment(&c, environment.as_deref()).await?;
            let mut body =
                json!({"environment_id": env, "principal_id": resolve::id(&c, PRINCIPAL, &principal, None).await?, "pool": pool});
            if let Some(t) = ttl_seconds {
                body["ttl_seconds"] = json!(t);
            }
            let server = c.base.clone();
            p.line(out, &c.create("/v1/runner-pairings", &body, idempotency_key.as_deref()).await?, |v| {
                format!(
                    "pairing code (single use, until {}): {}\nstart the Runner with: checkfu runner --server {server} --pairing-code {} --pool {pool}",
                    s(v, "expires_at"),
                    s(v, "code"),
                    s(v, "code"),
                )
            })
        }
        RunnersAction::List { environment } => {
            let env = resolve::environment_filter(&c, environment.as_deref()).await?;
            p.lines(out, &c.every("/v1/runners", &[("environment_id", env)]).await?, line)
        }
        RunnersAction::Get { runner } => {
            p.detail(out, &c.get(&format!("/v1/runners/{}", resolve::id(&c, RUNNER, &runner, None).await?)).await?)
        }
        RunnersAction::Revoke { runner } => {
            let id = resolve::id(&c, RUNNER, &runner, None).await?;
            p.line(out, &c.post(&format!("/v1/runners/{id}/revoke"), &json!({})).await?, line)
        }
    }
}
