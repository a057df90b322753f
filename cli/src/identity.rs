//! `checkfu environments|principals|groups|keys ...`: who acts, and where.

use crate::client::{Client, ClientArgs};
use crate::output::{Printer, s};
use crate::resolve::{self, ENVIRONMENT, GROUP, PRINCIPAL};
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;

#[derive(Debug, Clone, Subcommand)]
pub enum EnvironmentsAction {
    /// The Environments you may see.
    List,
    /// Show one Environment.
    Get { environment: String },
    /// Create an Environment (installation admins).
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Disable an Environment: nothing in it runs until enabled.
    Disable {
        environment: String,
        #[arg(long)]
        expected_version: Option<i64>,
    },
    /// Enable a disabled Environment.
    Enable {
        environment: String,
        #[arg(long)]
        expected_version: Option<i64>,
    },
}

#[derive(Debug, Clone, Subcommand)]
pub enum PrincipalsAction {
    /// Every Principal (installation admins).
    List,
    /// Show one Principal.
    Get { principal: String },
    /// Create a human or service Principal.
    Create {
        #[arg(long)]
        name: String,
        /// human or service.
        #[arg(long, default_value = "service")]
        kind: String,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Disable a Principal: its keys stop working, its Sessions stop.
    Disable { principal: String },
    /// Enable a disabled Principal.
    Enable { principal: String },
}

#[derive(Debug, Clone, Subcommand)]
pub enum GroupsAction {
    /// Every Group.
    List,
    /// Show a Group and its members.
    Get { group: String },
    /// Create a Group.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Add a Principal to a Group.
    Add { group: String, principal: String },
    /// Remove a Principal from a Group.
    Remove { group: String, principal: String },
}

#[derive(Debug, Clone, Subcommand)]
pub enum KeysAction {
    /// A Principal's API keys (never their secrets).
    List { principal: String },
    /// Create an API key for a Principal: its secret is printed this once.
    Create {
        principal: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Revoke an API key at once.
    Revoke {
        #[arg(value_name = "KEY")]
        api_key: String,
    },
}

fn environment_line(v: &Value) -> String {
    let disabled = if v["disabled"] == true { "  disabled" } else { "" };
    format!("{}  {}  v{}{disabled}", s(v, "id"), s(v, "name"), v["version"])
}

pub fn principal_line(v: &Value) -> String {
    let disabled = if v["disabled"] == true { "  disabled" } else { "" };
    format!("{}  {:<7}  {}{disabled}", s(v, "id"), s(v, "kind"), s(v, "name"))
}

fn group_line(v: &Value) -> String {
    format!("{}  {}  {} member(s)", s(v, "id"), s(v, "name"), v["member_ids"].as_array().map_or(0, Vec::len))
}

fn key_line(v: &Value) -> String {
    let revoked = v["revoked_at"].as_str().map(|r| format!("  revoked {r}")).unwrap_or_default();
    format!("{}  {}  of {}  {}{revoked}", s(v, "id"), s(v, "name"), s(v, "principal_id"), s(v, "created_at"))
}

pub async fn environments(args: ClientArgs, action: EnvironmentsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    let set = |environment: String, disabled: bool, expected_version: Option<i64>| {
        let c = c.clone();
        async move {
            let id = resolve::id(&c, ENVIRONMENT, &environment, None).await?;
            let mut body = json!({"disabled": disabled});
            if let Some(v) = expected_version {
                body["expected_version"] = json!(v);
            }
            c.post(&format!("/v1/environments/{id}"), &body).await
        }
    };
    match action {
        EnvironmentsAction::List => p.lines(out, &c.every("/v1/environments", &[]).await?, environment_line),
        EnvironmentsAction::Get { environment } => {
            p.detail(out, &c.get(&format!("/v1/environments/{}", resolve::id(&c, ENVIRONMENT, &environment, None).await?)).await?)
        }
        EnvironmentsAction::Create { name, idempotency_key } => {
            p.line(out, &c.create("/v1/environments", &json!({"name": name}), idempotency_key.as_deref()).await?, environment_line)
        }
        EnvironmentsAction::Disable { environment, expected_version } => {
            p.line(out, &set(environment, true, expected_version).await?, environment_line)
        }
        EnvironmentsAction::Enable { environment, expected_version } => {
            p.line(out, &set(environment, false, expected_version).await?, environment_line)
        }
    }
}

pub async fn principals(args: ClientArgs, action: PrincipalsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    let set = |principal: String, disabled: bool| {
        let c = c.clone();
        async move {
            let id = resolve::id(&c, PRINCIPAL, &principal, None).await?;
            c.post(&format!("/v1/principals/{id}"), &json!({"disabled": disabled})).await
        }
    };
    match action {
        PrincipalsAction::List => p.lines(out, &c.every("/v1/principals", &[]).await?, principal_line),
        PrincipalsAction::Get { principal } => {
            p.detail(out, &c.get(&format!("/v1/principals/{}", resolve::id(&c, PRINCIPAL, &principal, None).await?)).await?)
        }
        PrincipalsAction::Create { name, kind, idempotency_key } => p.line(
            out,
            &c.create("/v1/principals", &json!({"kind": kind, "name": name}), idempotency_key.as_deref()).await?,
            principal_line,
        ),
        PrincipalsAction::Disable { principal } => p.line(out, &set(principal, true).await?, principal_line),
        PrincipalsAction::Enable { principal } => p.line(out, &set(principal, false).await?, principal_line),
    }
}

pub async fn groups(args: ClientArgs, action: GroupsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    match action {
        GroupsAction::List => p.lines(out, &c.every("/v1/groups", &[]).await?, group_line),
        GroupsAction::Get { group } => p.detail(out, &c.get(&format!("/v1/groups/{}", resolve::id(&c, GROUP, &group, None).await?)).await?),
        GroupsAction::Create { name, idempotency_key } => {
            p.line(out, &c.create("/v1/groups", &json!({"name": name}), idempotency_key.as_deref()).await?, group_line)
        }
        GroupsAction::Add { group, principal } => {
            let g = resolve::id(&c, GROUP, &group, None).await?;
            let pr = resolve::id(&c, PRINCIPAL, &principal, None).await?;
            p.line(out, &c.post(&format!("/v1/groups/{g}/members"), &json!({"principal_id": pr})).await?, group_line)
        }
        GroupsAction::Remove { group, principal } => {
            let g = resolve::id(&c, GROUP, &group, None).await?;
            let pr = resolve::id(&c, PRINCIPAL, &principal, None).await?;
            p.line(out, &c.delete(&format!("/v1/groups/{g}/members/{pr}")).await?, group_line)
        }
    }
}

pub async fn keys(args: ClientArgs, action: KeysAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    match action {
        KeysAction::List { principal } => {
            let id = resolve::id(&c, PRINCIPAL, &principal, None).await?;
            p.lines(out, &c.every(&format!("/v1/principals/{id}/api-keys"), &[]).await?, key_line)
        }
        KeysAction::Create { principal, name, idempotency_key } => {
            let id = resolve::id(&c, PRINCIPAL, &principal, None).await?;
            let body = match name {
                Some(n) => json!({"name": n}),
                None => json!({}),
            };
            let k = c.create(&format!("/v1/principals/{id}/api-keys"), &body, idempotency_key.as_deref()).await?;
            p.line(out, &k, |k| match k["secret"].as_str() {
                Some(secret) => format!("{}\nsecret (shown once; keep it): {secret}", key_line(k)),
                None => format!("{}\nthe secret was shown when the key was first created (a replay never shows it)", key_line(k)),
            })
        }
        KeysAction::Revoke { api_key: id } => {
            if !resolve::is_id(&resolve::API_KEY, &id) {
                return Err(crate::client::usage(format!(
                    "name the key by its id (key_...), not {id:?}: `checkfu keys list PRINCIPAL` shows them"
                )));
            }
            p.line(out, &c.delete(&format!("/v1/api-keys/{id}")).await?, key_line)
        }
    }
}
