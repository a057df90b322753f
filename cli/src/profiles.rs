//! `checkfu profiles sandbox|routing|evaluators ...`: SandboxProfiles
//! (immutable revisions: image, packages, network, resources), model
//! routing profiles (ordered model candidates) and the evaluator
//! qualifications that let a model judge Checks.

use crate::client::{Client, ClientArgs, read_json, usage};
use crate::output::{Printer, s};
use crate::resolve::{self, ROUTING_PROFILE, SANDBOX_PROFILE};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Subcommand)]
pub enum ProfilesAction {
    /// SandboxProfiles.
    #[command(subcommand)]
    Sandbox(SandboxAction),
    /// Model routing profiles.
    #[command(subcommand)]
    Routing(RoutingAction),
    /// Evaluator qualifications: which models may judge a Check
    /// (`decision`) or screen a delivery (`delivery_screen`).
    #[command(subcommand)]
    Evaluators(EvaluatorAction),
}

#[derive(Debug, Clone, Subcommand)]
pub enum EvaluatorAction {
    /// Every qualification, newest first.
    List,
    /// Record a review (installation admins): `provider:model` may judge
    /// for `--purpose` from now for `--days`.
    Qualify {
        /// `provider:model`, as routing candidates name it.
        model: String,
        /// `decision` or `delivery_screen`.
        #[arg(long, default_value = "decision")]
        purpose: String,
        /// What the review found, or where its record is.
        #[arg(long)]
        evidence: String,
        /// How long the review holds (1 to 366 days).
        #[arg(long, default_value_t = 90)]
        days: i64,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Revoke a qualification: its model is not asked to judge again.
    Revoke { id: String },
}

/// A revision's content: flags for the usual fields, or the whole body
/// from a file.
#[derive(Debug, Clone, Args)]
pub struct RevisionArgs {
    /// The image the sandbox runs (`debian:12`).
    #[arg(long)]
    image: Option<String>,
    /// A package to install (repeat).
    #[arg(long = "package")]
    packages: Vec<String>,
    /// A host the sandbox may reach through the egress proxy (repeat).
    #[arg(long = "allow-host")]
    allowed_hosts: Vec<String>,
    /// Let package managers reach their registries.
    #[arg(long)]
    allow_package_managers: bool,
    #[arg(long)]
    retention_days: Option<i64>,
    /// The whole revision as JSON (`{image, packages, network, resources,
    /// retention_days, ...}`); flags given override its fields.
    #[arg(long)]
    file: Option<PathBuf>,
}

impl RevisionArgs {
    fn body(&self) -> anyhow::Result<Value> {
        let mut body = match &self.file {
            Some(f) => read_json(f, "the revision")?,
            None => json!({}),
        };
        if let Some(i) = &self.image {
            body["image"] = json!(i);
        }
        if !self.packages.is_empty() {
            body["packages"] = json!(self.packages);
        }
        if !self.allowed_hosts.is_empty() || self.allow_package_managers {
            let network = body.get("network").cloned().unwrap_or_else(|| json!({}));
            body["network"] = network;
            if !self.allowed_hosts.is_empty() {
                body["network"]["allowed_hosts"] = json!(self.allowed_hosts);
            }
            if self.allow_package_managers {
                body["network"]["allow_package_managers"] = json!(true);
            }
        }
        if let Some(d) = self.retention_days {
            body["retention_days"] = json!(d);
        }
        if body.get("image").is_none() {
            return Err(usage("a revision needs an image: --image, or \"image\" in --file"));
        }
        Ok(body)
    }
}

#[derive(Debug, Clone, Subcommand)]
pub enum SandboxAction {
    /// SandboxProfiles, by Environment.
    List {
        #[arg(long)]
        environment: Option<String>,
    },
    /// Show a profile and its latest revision.
    Get { profile: String },
    /// Show one revision.
    Revision { profile: String, revision: i64 },
    /// Create a profile and publish its revision 1.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        environment: Option<String>,
        #[command(flatten)]
        revision: RevisionArgs,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Publish the next revision (deployments re-pin to take it).
    Revise {
        profile: String,
        #[command(flatten)]
        revision: RevisionArgs,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Archive a profile (nothing new pins it).
    Archive { profile: String },
}

#[derive(Debug, Clone, Subcommand)]
pub enum RoutingAction {
    /// Model routing profiles, by Environment.
    List {
        #[arg(long)]
        environment: Option<String>,
    },
    /// Show one profile and its candidates.
    Get { profile: String },
    /// Create a profile: its candidates in order, tried as fallbacks.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        environment: Option<String>,
        /// `provider:model[:effort[:endpoint]]`, e.g. `scripted:scripted-1:low`
        /// (repeat, in order).
        #[arg(long = "candidate", required = true)]
        candidates: Vec<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// The provider endpoints this installation configures.
    Endpoints,
}

fn sandbox_line(v: &Value) -> String {
    let latest = &v["latest"];
    let archived = if v["archived_at"].is_string() { "  archived" } else { "" };
    format!("{}  {}  r{}  {}{archived}", s(v, "id"), s(v, "name"), v["latest_revision"], latest["image"].as_str().unwrap_or_default())
        .trim_end()
        .to_string()
}

fn revision_line(v: &Value) -> String {
    let hosts = v["network"]["allowed_hosts"].as_array().map_or(0, Vec::len);
    format!("{} r{}  {}  {} allowed host(s)  {}", s(v, "profile_id"), v["revision"], s(v, "image"), hosts, s(v, "execution"))
}

fn routing_line(v: &Value) -> String {
    let candidates: Vec<String> = v["candidates"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| format!("{}:{}:{}", s(c, "provider"), s(c, "model"), c["effort"].as_str().unwrap_or("-")))
        .collect();
    format!("{}  {}  {}", s(v, "id"), s(v, "name"), candidates.join(" → "))
}

/// `provider:model[:effort[:endpoint]]`.
pub fn candidate(spec: &str) -> anyhow::Result<Value> {
    let parts: Vec<&str> = spec.split(':').collect();
    let (provider, model) = match parts.as_slice() {
        [p, m, ..] if !p.is_empty() && !m.is_empty() => (*p, *m),
        _ => return Err(usage(format!("--candidate is provider:model[:effort[:endpoint]], not {spec:?}"))),
    };
    let mut c = json!({"provider": provider, "model": model, "effort": parts.get(2).copied().unwrap_or("medium")});
    if let Some(e) = parts.get(3) {
        c["endpoint"] = json!(e);
    }
    Ok(c)
}

pub async fn profiles(args: ClientArgs, action: ProfilesAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    match action {
        ProfilesAction::Sandbox(a) => sandbox(&c, p, a, out).await,
        ProfilesAction::Routing(a) => routing(&c, p, a, out).await,
        ProfilesAction::Evaluators(a) => evaluators(&c, p, a, out).await,
    }
}

fn qualification_line(v: &Value) -> String {
    format!("{}  {}:{}  {}  {} until {}", s(v, "id"), s(v, "provider"), s(v, "model"), s(v, "purpose"), s(v, "status"), s(v, "expires_at"))
}

async fn evaluators(c: &Client, p: Printer, action: EvaluatorAction, out: &mut impl Write) -> anyhow::Result<()> {
    match action {
        EvaluatorAction::List => p.lines(out, &c.every("/v1/evaluator-qualifications", &[]).await?, qualification_line),
        EvaluatorAction::Qualify { model, purpose, evidence, days, idempotency_key } => {
            let Some((provider, model)) = model.split_once(':').filter(|(p, m)| !p.is_empty() && !m.is_empty()) else {
                return Err(usage(format!("the model is provider:model, not {model:?}")));
            };
            if !(1..=366).contains(&days) {
                return Err(usage("--days is 1 to 366"));
            }
            let now = checkfu_core::time::now_ms();
            let body = json!({"provider": provider, "model": model, "purpose": purpose, "evidence": evidence,
                "reviewed_at": checkfu_core::time::rfc3339(now), "expires_at": checkfu_core::time::rfc3339(now + days * 86_400_000)});
            p.line(out, &c.create("/v1/evaluator-qualifications", &body, idempotency_key.as_deref()).await?, qualification_line)
        }
        EvaluatorAction::Revoke { id } => {
            p.line(out, &c.post(&format!("/v1/evaluator-qualifications/{id}/revoke"), &json!({})).await?, qualification_line)
        }
    }
}

async fn sandbox(c: &Client, p: Printer, action: SandboxAction, out: &mut impl Write) -> anyhow::Result<()> {
    match action {
        SandboxAction::List { environment } => {
            let env = resolve::environment_filter(c, environment.as_deref()).await?;
            p.lines(out, &c.every("/v1/sandbox-profiles", &[("environment_id", env)]).await?, sandbox_line)
        }
        SandboxAction::Get { profile } => {
            p.detail(out, &c.get(&format!("/v1/sandbox-profiles/{}", resolve::id(c, SANDBOX_PROFILE, &profile, None).await?)).await?)
        }
        SandboxAction::Revision { profile, revision } => {
            let id = resolve::id(c, SANDBOX_PROFILE, &profile, None).await?;
            p.detail(out, &c.get(&format!("/v1/sandbox-profiles/{id}/revisions/{revision}")).await?)
        }
        SandboxAction::Create { name, environment, revision, idempotency_key } => {
            let mut body = revision.body()?;
            body["environment_id"] = json!(resolve::environment(c, environment.as_deref()).await?);
            body["name"] = json!(name);
            p.line(out, &c.create("/v1/sandbox-profiles", &body, idempotency_key.as_deref()).await?, sandbox_line)
        }
        SandboxAction::Revise { profile, revision, idempotency_key } => {
            let id = resolve::id(c, SANDBOX_PROFILE, &profile, None).await?;
            let body = revision.body()?;
            p.line(out, &c.create(&format!("/v1/sandbox-profiles/{id}/revisions"), &body, idempotency_key.as_deref()).await?, revision_line)
        }
        SandboxAction::Archive { profile } => {
            let id = resolve::id(c, SANDBOX_PROFILE, &profile, None).await?;
            p.line(out, &c.post(&format!("/v1/sandbox-profiles/{id}/archive"), &json!({})).await?, sandbox_line)
        }
    }
}

async fn routing(c: &Client, p: Printer, action: RoutingAction, out: &mut impl Write) -> anyhow::Result<()> {
    match action {
        RoutingAction::List { environment } => {
            let env = resolve::environment_filter(c, environment.as_deref()).await?;
            p.lines(out, &c.every("/v1/model-routing-profiles", &[("environment_id", env)]).await?, routing_line)
        }
        RoutingAction::Get { profile } => {
            p.detail(out, &c.get(&format!("/v1/model-routing-profiles/{}", resolve::id(c, ROUTING_PROFILE, &profile, None).await?)).await?)
        }
        RoutingAction::Create { name, environment, candidates, idempotency_key } => {
            let candidates = candidates.iter().map(|s| candidate(s)).collect::<anyhow::Result<Vec<_>>>()?;
            let body =
                json!({"environment_id": resolve::environment(c, environment.as_deref()).await?, "name": name, "candidates": candidates});
            p.line(out, &c.create("/v1/model-routing-profiles", &body, idempotency_key.as_deref()).await?, routing_line)
        }
        RoutingAction::Endpoints => {
            let v = c.get("/v1/model-endpoints").await?;
            let items: Vec<Value> = v["data"].as_array().cloned().unwrap_or_default();
            p.lines(out, &items, |e| format!("{}  {}", s(e, "name"), s(e, "provider")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::candidate;
    use serde_json::json;

    #[test]
    fn candidates_read_provider_model_effort_endpoint() {
        assert_eq!(candidate("scripted:scripted-1:low").unwrap(), json!({"provider": "scripted", "model": "scripted-1", "effort": "low"}));
        assert_eq!(candidate("openai:gpt:high:local").unwrap()["endpoint"], "local");
        assert_eq!(candidate("anthropic:claude").unwrap()["effort"], "medium");
        assert!(candidate("scripted").is_err());
    }
}
