//! `checkfu webhook-sources …` and `checkfu provider-triggers`: provider
//! events (api.md §18.9) from the command line — which providers this
//! installation offers, a source per Automation, and its registration at
//! the provider: checked, repaired or revoked.

use crate::client::{Client, ClientArgs};
use crate::output::Printer;
use crate::resolve;
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;

#[derive(Debug, Clone, Subcommand)]
pub enum WebhookSourcesAction {
    /// The sources of the Environments you may read, newest first.
    List {
        #[arg(long)]
        environment: Option<String>,
        #[arg(long)]
        automation: Option<String>,
    },
    /// One source with its registration.
    Get { id: String },
    /// A source for an Automation with a webhook trigger: `--repository
    /// OWNER/NAME` for github, the events it selects, the `http`
    /// Connection to the provider's API. A manual registration prints its
    /// signing secret, once.
    Create {
        #[arg(long)]
        automation: String,
        #[arg(long, default_value = "github")]
        provider: String,
        #[arg(long)]
        connection: String,
        /// github: OWNER/NAME.
        #[arg(long, conflicts_with = "resource")]
        repository: Option<String>,
        /// The resource as JSON, for another provider.
        #[arg(long)]
        resource: Option<String>,
        /// Repeat, or separate with commas.
        #[arg(long = "event", value_delimiter = ',', required = true)]
        events: Vec<String>,
        /// automatic (default), manual or polling.
        #[arg(long)]
        mode: Option<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Delete it: its registration is revoked, the hook removed.
    Delete { id: String },
    /// Registrations of the Environments you may read (revoked ones too).
    Registrations {
        #[arg(long)]
        environment: Option<String>,
        #[arg(long)]
        status: Option<String>,
    },
    /// Ask the provider whether the hook is still there.
    Check { registration: String },
    /// A new secret and (automatic) a new hook.
    Repair { registration: String },
    /// Remove the hook and refuse its deliveries from now on.
    Revoke { registration: String },
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// `pwreg_…  active  github  hook 12` (and why, when degraded).
fn registration_line(r: &Value) -> String {
    let hook = r["provider_hook_id"].as_str().map(|h| format!("  hook {h}")).unwrap_or_default();
    let why = r["health"]["code"].as_str().map(|c| format!(" ({c})")).unwrap_or_default();
    let secret = r["signing_secret"].as_str().map(|s| format!("\nsigning secret (shown once): {s}")).unwrap_or_default();
    format!("{}  {}{why}  {} {}{hook}{secret}", text(&r["id"]), text(&r["status"]), text(&r["provider"]), text(&r["mode"]))
}

fn source_line(s: &Value) -> String {
    let events: Vec<&str> = s["events"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    format!(
        "{}  {}  {} {}  [{}]  via {}\n  {}\n  callback {}",
        text(&s["id"]),
        text(&s["automation_id"]),
        text(&s["provider"]),
        s["resource"],
        events.join(","),
        text(&s["connection_id"]),
        registration_line(&s["registration"]),
        text(&s["registration"]["callback_url"])
    )
}

fn trigger_line(t: &Value) -> String {
    let list = |k: &str| t[k].as_array().into_iter().flatten().filter_map(Value::as_str).collect::<Vec<_>>().join(",");
    format!("{}  modes {}  resources {}  events {}", text(&t["provider"]), list("modes"), list("resource_kinds"), list("events"))
}

/// The resource a create names: `--repository OWNER/NAME` or `--resource JSON`.
fn resource(repository: Option<String>, resource: Option<String>) -> anyhow::Result<Value> {
    match (repository, resource) {
        (Some(r), _) => {
            let (owner, name) = r.split_once('/').ok_or_else(|| anyhow::anyhow!("--repository is OWNER/NAME"))?;
            Ok(json!({"kind": "repository", "owner": owner, "name": name}))
        }
        (None, Some(json)) => Ok(serde_json::from_str(&json).map_err(|e| anyhow::anyhow!("--resource is not JSON: {e}"))?),
        (None, None) => anyhow::bail!("name the resource: --repository OWNER/NAME (github) or --resource JSON"),
    }
}

pub async fn webhook_sources(args: ClientArgs, action: WebhookSourcesAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let printer = Printer::of(&args);
    let at = |rest: &str| format!("{}/v1/webhook-sources{rest}", c.base);
    let reg = |rest: &str| format!("{}/v1/provider-webhook-registrations{rest}", c.base);
    match action {
        WebhookSourcesAction::List { environment, automation } => {
            let environment = resolve::environment_filter(&c, environment.as_deref()).await?;
            for s in c.every(&at(""), &[("environment_id", environment), ("automation_id", automation)]).await? {
                printer.line(out, &s, source_line)?;
            }
            Ok(())
        }
        WebhookSourcesAction::Get { id } => printer.line(out, &c.call(c.http.get(at(&format!("/{id}")))).await?, source_line),
        WebhookSourcesAction::Create { automation, provider, connection, repository, resource: r, events, mode, idempotency_key } => {
            let body = json!({"automation_id": automation, "provider": provider, "connection_id": connection,
                "resource": resource(repository, r)?, "events": events, "mode": mode});
            printer.line(out, &c.create("/v1/webhook-sources", &body, idempotency_key.as_deref()).await?, source_line)
        }
        WebhookSourcesAction::Delete { id } => printer.line(out, &c.call(c.http.delete(at(&format!("/{id}")))).await?, source_line),
        WebhookSourcesAction::Registrations { environment, status } => {
            let environment = resolve::environment_filter(&c, environment.as_deref()).await?;
            for r in c.every(&reg(""), &[("environment_id", environment), ("status", status)]).await? {
                printer.line(out, &r, registration_line)?;
            }
            Ok(())
        }
        WebhookSourcesAction::Check { registration } => {
            printer.line(out, &c.call(c.http.post(reg(&format!("/{registration}/check")))).await?, registration_line)
        }
        WebhookSourcesAction::Repair { registration } => {
            printer.line(out, &c.call(c.http.post(reg(&format!("/{registration}/repair")))).await?, registration_line)
        }
        WebhookSourcesAction::Revoke { registration } => {
            printer.line(out, &c.call(c.http.post(reg(&format!("/{registration}/revoke")))).await?, registration_line)
        }
    }
}

/// `checkfu provider-triggers`: one provider a line.
pub async fn provider_triggers(args: ClientArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let printer = Printer::of(&args);
    let list = c.call(c.http.get(format!("{}/v1/provider-triggers", c.base))).await?;
    for t in list["data"].as_array().into_iter().flatten() {
        printer.line(out, t, trigger_line)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_line_says_how_it_fares_and_shows_a_secret_once() {
        let r = json!({"id": "pwreg_1", "status": "degraded", "provider": "github", "mode": "automatic", "provider_hook_id": "12",
            "health": {"code": "hook_missing"}});
        assert_eq!(registration_line(&r), "pwreg_1  degraded (hook_missing)  github automatic  hook 12");
        let m = json!({"id": "pwreg_2", "status": "pending", "provider": "github", "mode": "manual", "health": {}, "signing_secret": "whsec_x"});
        assert_eq!(registration_line(&m), "pwreg_2  pending  github manual\nsigning secret (shown once): whsec_x");
        assert_eq!(resource(Some("o/r".into()), None).unwrap(), json!({"kind": "repository", "owner": "o", "name": "r"}));
        assert!(resource(Some("o".into()), None).is_err());
    }
}
