//! `checkfu audit list`: the append-only audit log, newest first.

use crate::client::{Client, ClientArgs, usage};
use crate::output::{Printer, s};
use crate::resolve::{self, PRINCIPAL};
use clap::Subcommand;
use serde_json::Value;
use std::io::Write;

#[derive(Debug, Clone, Subcommand)]
pub enum AuditAction {
    /// Audit records, newest first.
    List {
        /// Only records about this resource: an id, or `kind:name`
        /// (`agent:helper`).
        #[arg(long)]
        resource: Option<String>,
        /// Only records of this actor (a principal's name or id).
        #[arg(long)]
        actor: Option<String>,
        /// At most this many (default 50; 0 for all).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
}

fn line(v: &Value) -> String {
    format!(
        "{}  {}  {}  {} {}  by {}",
        s(v, "created_at"),
        s(v, "id"),
        s(v, "action"),
        s(&v["resource"], "kind"),
        s(&v["resource"], "id"),
        s(v, "actor_id")
    )
}

pub async fn audit(args: ClientArgs, action: AuditAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    let AuditAction::List { resource, actor, limit } = action;
    let resource = match resource {
        Some(r) => match r.split_once(':') {
            Some((kind, name)) => {
                let k = resolve::by_ref_kind(kind).ok_or_else(|| usage(format!("{kind:?} is not a kind of resource this names")))?;
                Some(resolve::id(&c, k, name, None).await?)
            }
            None => Some(r),
        },
        None => None,
    };
    let actor = match actor {
        Some(a) => Some(resolve::id(&c, PRINCIPAL, &a, None).await?),
        None => None,
    };
    let max = if limit == 0 { usize::MAX } else { limit };
    let items = c.first("/v1/audit-events", &[("resource_id", resource), ("actor_id", actor)], max).await?;
    p.lines(out, &items, line)
}
