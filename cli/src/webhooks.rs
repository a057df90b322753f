//! `checkfu webhooks ...`: outbound endpoints. Their signing secret is
//! printed once, when created or rotated.

use crate::client::{Client, ClientArgs};
use crate::output::{Printer, s};
use crate::resolve::{self, WEBHOOK};
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;

#[derive(Debug, Clone, Subcommand)]
pub enum WebhooksAction {
    /// Webhook endpoints.
    List,
    /// Show one endpoint (never its secret).
    Get { endpoint: String },
    /// Create an endpoint for these event types.
    Create {
        #[arg(long)]
        url: String,
        /// An event type to deliver (repeat): `session.status_idle`, ...
        #[arg(long = "event-type", required = true)]
        event_types: Vec<String>,
        /// Only this Environment's events.
        #[arg(long)]
        environment: Option<String>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Change the URL, event types, or disable it.
    Update {
        endpoint: String,
        #[arg(long)]
        url: Option<String>,
        #[arg(long = "event-type")]
        event_types: Vec<String>,
        #[arg(long)]
        disabled: Option<bool>,
        #[arg(long)]
        expected_version: Option<i64>,
    },
    /// Delete an endpoint: no more deliveries.
    Delete { endpoint: String },
    /// A new signing secret (printed once); the old one stops signing.
    RotateSecret { endpoint: String },
    /// Each delivery attempt: status, response code, next attempt.
    Deliveries { endpoint: String },
}

fn line(v: &Value) -> String {
    let disabled = if v["disabled"] == true { "  disabled" } else { "" };
    let types: Vec<&str> = v["event_types"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    format!("{}  {}  {}{disabled}", s(v, "id"), s(v, "url"), types.join(","))
}

fn with_secret(v: &Value) -> String {
    match v["secret"].as_str() {
        Some(secret) => format!("{}\nsigning secret (shown once; keep it): {secret}", line(v)),
        None => line(v),
    }
}

fn delivery_line(d: &Value) -> String {
    let code = d["response_status"].as_i64().map(|c| format!(" {c}")).unwrap_or_default();
    let next = d["next_attempt_at"].as_str().map(|n| format!("  next {n}")).unwrap_or_default();
    format!("{}  {}  {}  attempt {}{code}{next}", s(d, "id"), s(d, "event_type"), s(d, "status"), d["attempt"])
}

pub async fn webhooks(args: ClientArgs, action: WebhooksAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    let wid = |w: String| {
        let c = c.clone();
        async move { resolve::id(&c, WEBHOOK, &w, None).await }
    };
    match action {
        WebhooksAction::List => p.lines(out, &c.every("/v1/webhook-endpoints", &[]).await?, line),
        WebhooksAction::Get { endpoint } => p.detail(out, &c.get(&format!("/v1/webhook-endpoints/{}", wid(endpoint).await?)).await?),
        WebhooksAction::Create { url, event_types, environment, idempotency_key } => {
            let mut body = json!({"url": url, "event_types": event_types});
            if let Some(e) = resolve::environment_filter(&c, environment.as_deref()).await? {
                body["environment_id"] = json!(e);
            }
            p.line(out, &c.create("/v1/webhook-endpoints", &body, idempotency_key.as_deref()).await?, with_secret)
        }
        WebhooksAction::Update { endpoint, url, event_types, disabled, expected_version } => {
            let mut body = json!({});
            if let Some(u) = url {
                body["url"] = json!(u);
            }
            if !event_types.is_empty() {
                body["event_types"] = json!(event_types);
            }
            if let Some(d) = disabled {
                body["disabled"] = json!(d);
            }
            if let Some(v) = expected_version {
                body["expected_version"] = json!(v);
            }
            p.line(out, &c.post(&format!("/v1/webhook-endpoints/{}", wid(endpoint).await?), &body).await?, line)
        }
        WebhooksAction::Delete { endpoint } => {
            p.line(out, &c.delete(&format!("/v1/webhook-endpoints/{}", wid(endpoint).await?)).await?, |v| format!("deleted {}", line(v)))
        }
        WebhooksAction::RotateSecret { endpoint } => {
            p.line(out, &c.post(&format!("/v1/webhook-endpoints/{}/secret", wid(endpoint).await?), &json!({})).await?, with_secret)
        }
        WebhooksAction::Deliveries { endpoint } => {
            p.lines(out, &c.every(&format!("/v1/webhook-endpoints/{}/deliveries", wid(endpoint).await?), &[]).await?, delivery_line)
        }
    }
}
