//! `checkfu grants ...`: PermissionAssignments, read as "who can do what
//! on what". A subject or resource is `kind:name-or-id` (`principal:bot`,
//! `agent:helper`, `installation:*`).

use crate::client::{Client, ClientArgs, usage};
use crate::output::{Printer, s};
use crate::resolve::{self, GRANT, Names};
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;

#[derive(Debug, Clone, Subcommand)]
pub enum GrantsAction {
    /// Grants, filtered by subject, resource or permission.
    List {
        /// `principal:NAME`, `group:NAME` or `agent:NAME` (or an id).
        #[arg(long)]
        subject: Option<String>,
        /// `agent:NAME`, `environment:NAME`, `connection:NAME`, ...
        #[arg(long)]
        resource: Option<String>,
        #[arg(long)]
        permission: Option<String>,
    },
    /// Show one grant.
    Get { grant: String },
    /// Grant a permission: `--subject principal:bot --permission invoke --resource agent:helper`.
    Create {
        #[arg(long)]
        subject: String,
        /// admin, manage, invoke, act_as, use_connection, use_agent, approve, read or write.
        #[arg(long)]
        permission: String,
        #[arg(long)]
        resource: String,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Revoke a grant: it stops at the next check.
    Revoke { grant: String },
}

/// `kind:name-or-id` as `{kind, id}` (`agent` as a subject is the
/// `agent_definition` kind).
async fn reference(c: &Client, spec: &str, subject: bool) -> anyhow::Result<Value> {
    let (kind, name) =
        spec.split_once(':').ok_or_else(|| usage(format!("{spec:?} is not kind:name (principal:bot, agent:helper, ...)")))?;
    let kind = if subject && kind == "agent" { "agent_definition" } else { kind };
    if kind == "installation" {
        return Ok(json!({"kind": "installation", "id": "*"}));
    }
    let id = match resolve::by_ref_kind(kind) {
        Some(k) => resolve::id(c, k, name, None).await?,
        None => return Err(usage(format!("{kind:?} is not a kind a grant names"))),
    };
    Ok(json!({"kind": kind, "id": id}))
}

fn check_grant_id(grant: &str) -> anyhow::Result<()> {
    if resolve::is_id(&GRANT, grant) {
        Ok(())
    } else {
        Err(usage(format!("name a grant by its id (pa_...), not {grant:?}: `checkfu grants list` shows them")))
    }
}

/// `pa_...  principal bot  may invoke  agent helper`.
async fn sentence(c: &Client, names: &mut Names, g: &Value) -> String {
    let (sk, si) = (s(&g["subject"], "kind"), s(&g["subject"], "id"));
    let (rk, ri) = (s(&g["resource"], "kind"), s(&g["resource"], "id"));
    let subject = names.of(c, sk, si).await;
    let resource = if rk == "installation" { "the installation".to_string() } else { format!("{rk} {}", names.of(c, rk, ri).await) };
    format!("{}  {sk} {subject}  may {}  on {resource}", s(g, "id"), s(g, "permission"))
}

pub async fn grants(args: ClientArgs, action: GrantsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    let mut names = Names::default();
    match action {
        GrantsAction::List { subject, resource, permission } => {
            let subject = match subject {
                Some(sp) => Some(reference(&c, &sp, true).await?["id"].as_str().unwrap_or_default().to_string()),
                None => None,
            };
            let resource = match resource {
                Some(r) => Some(reference(&c, &r, false).await?["id"].as_str().unwrap_or_default().to_string()),
                None => None,
            };
            let items = c
                .every("/v1/permission-assignments", &[("subject_id", subject), ("resource_id", resource), ("permission", permission)])
                .await?;
            if args.json || args.quiet {
                return p.lines(out, &items, |_| String::new());
            }
            for g in &items {
                writeln!(out, "{}", sentence(&c, &mut names, g).await)?;
            }
            Ok(())
        }
        GrantsAction::Get { grant } => {
            check_grant_id(&grant)?;
            p.detail(out, &c.get(&format!("/v1/permission-assignments/{grant}")).await?)
        }
        GrantsAction::Create { subject, permission, resource, idempotency_key } => {
            let body = json!({
                "subject": reference(&c, &subject, true).await?,
                "permission": permission,
                "resource": reference(&c, &resource, false).await?,
            });
            let g = c.create("/v1/permission-assignments", &body, idempotency_key.as_deref()).await?;
            if args.json || args.quiet {
                return p.line(out, &g, |_| String::new());
            }
            writeln!(out, "{}", sentence(&c, &mut names, &g).await)?;
            Ok(())
        }
        GrantsAction::Revoke { grant } => {
            check_grant_id(&grant)?;
            let g = c.delete(&format!("/v1/permission-assignments/{grant}")).await?;
            if args.json || args.quiet {
                return p.line(out, &g, |_| String::new());
            }
            writeln!(out, "revoked: {}", sentence(&c, &mut names, &g).await)?;
            Ok(())
        }
    }
}
