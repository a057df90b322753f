//! `checkfu skills proposals|proposal|adopt|reject`: the SKILL.md files
//! graphs proposed (api.md §18.7), read and decided from the command line.
//! Only a human with `manage` on the Environment decides; the server says
//! so to anyone else.

use crate::client::Client;
use crate::output::Printer;
use crate::resolve;
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;

#[derive(Debug, Clone, Subcommand)]
pub enum ProposalAction {
    /// The proposals of the Environments you may read, newest first
    /// (`--status open|adopted|rejected`).
    Proposals {
        #[arg(long)]
        environment: Option<String>,
        #[arg(long)]
        status: Option<String>,
    },
    /// One proposal, then its SKILL.md.
    Proposal { id: String },
    /// Adopt a proposal: the skill's next version (or a new skill) from it.
    Adopt {
        id: String,
        #[arg(long)]
        note: Option<String>,
    },
    /// Reject a proposal.
    Reject {
        id: String,
        #[arg(long)]
        note: Option<String>,
    },
}

fn line(p: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let target = match (p["adopted"]["skill_id"].as_str(), p["skill_id"].as_str()) {
        (Some(s), _) => format!("adopted as {s} v{}", p["adopted"]["version"]),
        (None, Some(s)) => format!("for {s}"),
        (None, None) => "a new skill".into(),
    };
    format!("{}  {:<8} {}  {target}  from {}", text(&p["id"]), text(&p["status"]), text(&p["name"]), text(&p["source"]["id"]))
}

pub async fn proposals(c: &Client, printer: &Printer, action: ProposalAction, out: &mut impl Write) -> anyhow::Result<()> {
    let at = |rest: &str| format!("{}/v1/skill-proposals{rest}", c.base);
    match action {
        ProposalAction::Proposals { environment, status } => {
            let environment = resolve::environment_filter(c, environment.as_deref()).await?;
            for p in c.every(&at(""), &[("environment_id", environment), ("status", status)]).await? {
                printer.line(out, &p, line)?;
            }
            Ok(())
        }
        ProposalAction::Proposal { id } => {
            let p = c.call(c.http.get(at(&format!("/{id}")))).await?;
            printer.line(out, &p, |p| format!("{}\n\n{}", line(p), p["content"].as_str().unwrap_or_default().trim_end()))
        }
        ProposalAction::Adopt { id, note } | ProposalAction::Reject { id, note } if note.as_ref().is_some_and(|n| n.len() > 4_096) => {
            anyhow::bail!("a note on {id} is at most 4 KiB")
        }
        ProposalAction::Adopt { id, note } => {
            let p = c.call(c.http.post(at(&format!("/{id}/adopt"))).json(&json!({"note": note}))).await?;
            printer.line(out, &p, line)
        }
        ProposalAction::Reject { id, note } => {
            let p = c.call(c.http.post(at(&format!("/{id}/reject"))).json(&json!({"note": note}))).await?;
            printer.line(out, &p, line)
        }
    }
}
