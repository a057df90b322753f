//! `checkfu deployments ...`: an AgentDeployment pins an agent version, a
//! model route and a sandbox revision under a key; a revision re-pins it
//! (running Sessions keep theirs).

use crate::client::{Client, ClientArgs, usage};
use crate::output::{Printer, s};
use crate::resolve::{self, AGENT, DEPLOYMENT, ROUTING_PROFILE, SANDBOX_PROFILE};
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;

#[derive(Debug, Clone, Subcommand)]
pub enum DeploymentsAction {
    /// List deployments.
    List {
        #[arg(long)]
        environment: Option<String>,
    },
    /// Show one deployment and its pins.
    Get { deployment: String },
    /// Create a deployment under KEY (unique in its Environment: Sessions
    /// name the deployment by it).
    Create {
        #[arg(value_name = "KEY")]
        deployment_key: String,
        #[arg(long)]
        agent: String,
        /// A version number, or `latest`.
        #[arg(long, default_value = "latest")]
        agent_version: String,
        /// The model routing profile.
        #[arg(long)]
        route: String,
        /// The SandboxProfile.
        #[arg(long)]
        sandbox: String,
        /// Default: the profile's latest revision.
        #[arg(long)]
        sandbox_revision: Option<i64>,
        /// Run on the self-hosted Runners of this pool (default: managed).
        #[arg(long)]
        runner_pool: Option<String>,
        #[arg(long)]
        environment: Option<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Re-pin a deployment (revision n+1): what is not given is kept.
    Revise {
        deployment: String,
        /// A version number, or `latest`.
        #[arg(long)]
        agent_version: Option<String>,
        #[arg(long)]
        route: Option<String>,
        #[arg(long)]
        sandbox: Option<String>,
        #[arg(long)]
        sandbox_revision: Option<i64>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
}

pub fn line(d: &Value) -> String {
    let pins = &d["pins"];
    let plane = match d["execution"]["kind"].as_str() {
        Some("runner") => format!("  runner pool {}", d["execution"]["pool"].as_str().unwrap_or_default()),
        Some("managed") | None => String::new(),
        Some(other) => format!("  {other}"),
    };
    format!(
        "{}  {}  r{}  agent {} v{}  route {}  sandbox r{}{plane}",
        s(d, "id"),
        s(d, "key"),
        d["revision"],
        s(d, "agent_id"),
        pins["agent_version"],
        pins["model_routing_profile_id"].as_str().unwrap_or_default(),
        pins["sandbox_profile_revision"],
    )
}

/// A version number, or the agent's latest.
async fn version(c: &Client, agent_id: &str, given: &str) -> anyhow::Result<i64> {
    if given == "latest" {
        let a = c.get(&format!("/v1/agents/{agent_id}")).await?;
        return a["latest_version"].as_i64().ok_or_else(|| usage(format!("agent {agent_id} has no published version: publish one first")));
    }
    given.trim_start_matches('v').parse().map_err(|_| usage(format!("--agent-version is a number or `latest`, not {given:?}")))
}

pub async fn deployments(args: ClientArgs, action: DeploymentsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    match action {
        DeploymentsAction::List { environment } => {
            let env = resolve::environment_filter(&c, environment.as_deref()).await?;
            p.lines(out, &c.every("/v1/agent-deployments", &[("environment_id", env)]).await?, line)
        }
        DeploymentsAction::Get { deployment } => {
            p.detail(out, &c.get(&format!("/v1/agent-deployments/{}", resolve::id(&c, DEPLOYMENT, &deployment, None).await?)).await?)
        }
        DeploymentsAction::Create {
            deployment_key: key,
            agent,
            agent_version,
            route,
            sandbox,
            sandbox_revision,
            runner_pool,
            environment,
            idempotency_key,
        } => {
            let env = resolve::environment(&c, environment.as_deref()).await?;
            let agent_id = resolve::id(&c, AGENT, &agent, Some(&env)).await?;
            let mut body = json!({
                "environment_id": env,
                "key": key,
                "agent_id": agent_id,
                "agent_version": version(&c, &agent_id, &agent_version).await?,
                "model_routing_profile_id": resolve::id(&c, ROUTING_PROFILE, &route, Some(&env)).await?,
                "sandbox_profile_id": resolve::id(&c, SANDBOX_PROFILE, &sandbox, Some(&env)).await?,
            });
            if let Some(r) = sandbox_revision {
                body["sandbox_profile_revision"] = json!(r);
            }
            if let Some(pool) = runner_pool {
                body["execution"] = json!({"kind": "runner", "pool": pool});
            }
            p.line(out, &c.create("/v1/agent-deployments", &body, idempotency_key.as_deref()).await?, line)
        }
        DeploymentsAction::Revise { deployment, agent_version, route, sandbox, sandbox_revision, idempotency_key } => {
            let id = resolve::id(&c, DEPLOYMENT, &deployment, None).await?;
            let d = c.get(&format!("/v1/agent-deployments/{id}")).await?;
            let env = s(&d, "environment_id").to_string();
            let pins = &d["pins"];
            let agent_version = match agent_version {
                Some(v) => version(&c, s(&d, "agent_id"), &v).await?,
                None => pins["agent_version"].as_i64().unwrap_or_default(),
            };
            let route = match route {
                Some(r) => resolve::id(&c, ROUTING_PROFILE, &r, Some(&env)).await?,
                None => pins["model_routing_profile_id"].as_str().unwrap_or_default().to_string(),
            };
            let (sandbox_id, sandbox_revision) = match sandbox {
                Some(sb) => (resolve::id(&c, SANDBOX_PROFILE, &sb, Some(&env)).await?, sandbox_revision),
                None => (
                    pins["sandbox_profile_id"].as_str().unwrap_or_default().to_string(),
                    sandbox_revision.or(pins["sandbox_profile_revision"].as_i64()),
                ),
            };
            let mut body = json!({
                "agent_version": agent_version,
                "model_routing_profile_id": route,
                "sandbox_profile_id": sandbox_id,
                "execution": d["execution"],
            });
            if let Some(r) = sandbox_revision {
                body["sandbox_profile_revision"] = json!(r);
            }
            if let Some(h) = pins["harness"].as_str() {
                body["harness"] = json!(h);
            }
            p.line(out, &c.create(&format!("/v1/agent-deployments/{id}/revisions"), &body, idempotency_key.as_deref()).await?, line)
        }
    }
}
