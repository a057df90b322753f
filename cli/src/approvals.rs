//! `checkfu approvals list|approve|deny|standing|revoke-standing`: answer
//! ActionApprovals from a terminal, and see or revoke StandingApprovals. Responding reads the approval (the caller must hold `approve`
//! to see its one-time token) and posts the response with that token.

use crate::client::{Client, ClientArgs, usage};
use crate::resolve::{self, SESSION};
use anyhow::bail;
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;

#[derive(Debug, Clone, Subcommand)]
pub enum ApprovalsAction {
    /// List ActionApprovals, newest first.
    List {
        /// pending (default), approved, denied, expired or all.
        #[arg(long, default_value = "pending")]
        status: String,
        /// Only this Session's.
        #[arg(long)]
        session: Option<String>,
    },
    /// Approve a pending call; it runs with its frozen arguments.
    Approve {
        id: String,
        /// Also mint a StandingApproval for the exact tuple, lasting this many
        /// seconds (capped at 30 days).
        #[arg(long)]
        standing_ttl: Option<i64>,
    },
    /// Deny a pending call; the agent is told it was declined.
    Deny { id: String },
    /// StandingApprovals (allowed without asking until they expire).
    Standing {
        #[arg(long)]
        environment: Option<String>,
    },
    /// Revoke a StandingApproval: the next such call asks again.
    RevokeStanding { id: String },
}

fn standing_line(v: &Value) -> String {
    let t = &v["tuple"];
    let state = v["revoked_at"]
        .as_str()
        .map(|r| format!("revoked {r}"))
        .unwrap_or_else(|| format!("until {}", v["expires_at"].as_str().unwrap_or_default()));
    format!(
        "{}  {} for {} (agent {})  {}",
        v["id"].as_str().unwrap_or_default(),
        t["tool"].as_str().unwrap_or_default(),
        t["principal_id"].as_str().unwrap_or_default(),
        t["agent_id"].as_str().unwrap_or_default(),
        state,
    )
}

fn line(a: &Value) -> String {
    let f = &a["frozen"];
    format!(
        "{}  {:<8} {} {}  session {}  by {}  expires {}",
        a["id"].as_str().unwrap_or_default(),
        a["status"].as_str().unwrap_or_default(),
        f["tool"].as_str().unwrap_or_default(),
        f["arguments"],
        a["session_id"].as_str().unwrap_or_default(),
        f["principal_id"].as_str().unwrap_or_default(),
        a["expires_at"].as_str().unwrap_or_default(),
    )
}

pub async fn approvals(args: ClientArgs, action: ApprovalsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let printer = crate::output::Printer::of(&args);
    let print = |out: &mut dyn Write, v: &Value| printer.line(out, v, line);
    match action {
        ApprovalsAction::List { status, session } => {
            let status = (status != "all").then_some(status);
            let session = match session {
                Some(s) => Some(resolve::id(&c, SESSION, &s, None).await?),
                None => None,
            };
            for a in c.every("/v1/action-approvals", &[("status", status), ("session_id", session)]).await? {
                print(out, &a)?;
            }
            Ok(())
        }
        ApprovalsAction::Approve { id, standing_ttl } => {
            let mut body = json!({"decision": "approve"});
            if let Some(ttl) = standing_ttl {
                body["standing"] = json!({"ttl_seconds": ttl});
            }
            print(out, &respond(&c, &id, body).await?)
        }
        ApprovalsAction::Deny { id } => print(out, &respond(&c, &id, json!({"decision": "deny"})).await?),
        ApprovalsAction::Standing { environment } => {
            let p = crate::output::Printer::of(&args);
            let env = resolve::environment_filter(&c, environment.as_deref()).await?;
            p.lines(out, &c.every("/v1/standing-approvals", &[("environment_id", env)]).await?, standing_line)
        }
        ApprovalsAction::RevokeStanding { id } => {
            if !id.starts_with("sapr_") {
                return Err(usage(format!("name a StandingApproval by its id (sapr_...), not {id:?}")));
            }
            let p = crate::output::Printer::of(&args);
            p.line(out, &c.delete(&format!("/v1/standing-approvals/{id}")).await?, standing_line)
        }
    }
}

async fn respond(c: &Client, id: &str, mut body: Value) -> anyhow::Result<Value> {
    let a = c.call(c.http.get(format!("{}/v1/action-approvals/{id}", c.base))).await?;
    if a["status"] != "pending" {
        bail!("{id} is {}, not pending", a["status"].as_str().unwrap_or("unknown"));
    }
    let Some(token) = a["response_token"].as_str() else {
        bail!("you cannot respond to {id}: responding needs the approve permission on its environment");
    };
    body["response_token"] = json!(token);
    c.call(c.http.post(format!("{}/v1/action-approvals/{id}/responses", c.base)).json(&body)).await
}
