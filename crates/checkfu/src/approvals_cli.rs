//! `checkfu approvals list|approve|deny`: answer ActionApprovals from a
//! terminal. Responding reads the approval (the caller must hold `approve`
//! to see its one-time token) and posts the response with that token.

use crate::client::{Client, ClientArgs};
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
    let print = |out: &mut dyn Write, v: &Value| -> anyhow::Result<()> {
        if args.json {
            writeln!(out, "{v}")?
        } else {
            writeln!(out, "{}", line(v))?
        }
        Ok(())
    };
    match action {
        ApprovalsAction::List { status, session } => {
            let mut query = vec![("limit", "100".to_string())];
            if status != "all" {
                query.push(("status", status));
            }
            if let Some(s) = session {
                query.push(("session_id", s));
            }
            let mut url = reqwest::Url::parse(&format!("{}/v1/action-approvals", c.base))?;
            url.query_pairs_mut().extend_pairs(&query);
            let page = c.call(c.http.get(url)).await?;
            for a in page["data"].as_array().into_iter().flatten() {
                print(out, a)?;
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
