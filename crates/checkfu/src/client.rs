//! The command-line client: `checkfu session send|follow` (and, in
//! `approvals_cli.rs`, `checkfu approvals`). It speaks only the public HTTP
//! API, like any other client.

use anyhow::{Context, bail};
use checkfu_core::events::EventType;
use clap::{Args, Subcommand};
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// The API server.
    #[arg(long, env = "CHECKFU_SERVER", default_value = "http://127.0.0.1:7420", global = true)]
    pub server: String,
    /// An API key (or set CHECKFU_API_KEY, or use --key-file).
    #[arg(long, env = "CHECKFU_API_KEY", hide_env_values = true, global = true)]
    pub key: Option<String>,
    /// A file holding the API key.
    #[arg(long, default_value = ".checkfu/admin.key", global = true)]
    pub key_file: PathBuf,
    /// Print JSON (one object per line) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Clone, Subcommand)]
pub enum SessionAction {
    /// Send a user.message to a Session (as the Session's principal).
    Send { id: String, text: String },
    /// Print a Session's events as they happen, resuming after a dropped
    /// connection from the last event seen.
    Follow {
        id: String,
        /// Start after this seq (default: from the beginning).
        #[arg(long, default_value_t = 0)]
        after_seq: i64,
        /// Stop once the Session is idle or terminated.
        #[arg(long)]
        exit_on_idle: bool,
    },
}

pub(crate) struct Client {
    pub(crate) base: String,
    key: String,
    pub(crate) http: reqwest::Client,
}

impl Client {
    pub(crate) fn new(a: &ClientArgs) -> anyhow::Result<Client> {
        let key = match &a.key {
            Some(k) => k.clone(),
            None => std::fs::read_to_string(&a.key_file)
                .with_context(|| format!("no --key given and {} is unreadable", a.key_file.display()))?
                .trim()
                .to_string(),
        };
        Ok(Client { base: a.server.trim_end_matches('/').to_string(), key, http: reqwest::Client::new() })
    }

    pub(crate) async fn call(&self, rb: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let (status, body) = self.send(rb).await?;
        if !status.is_success() {
            return Err(refusal(status, &body));
        }
        Ok(body)
    }

    /// Like [`Client::call`], but a 404 is `None`.
    pub(crate) async fn find(&self, rb: reqwest::RequestBuilder) -> anyhow::Result<Option<Value>> {
        let (status, body) = self.send(rb).await?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(refusal(status, &body));
        }
        Ok(Some(body))
    }

    async fn send(&self, rb: reqwest::RequestBuilder) -> anyhow::Result<(reqwest::StatusCode, Value)> {
        let r = rb.bearer_auth(&self.key).send().await.context("the server did not answer")?;
        let status = r.status();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }
}

/// Prints a result: its JSON on one line with `--json`, else `text`.
pub(crate) fn show(json: bool, out: &mut dyn std::io::Write, v: &Value, text: String) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{v}")?
    } else {
        write!(out, "{text}")?
    }
    Ok(())
}

/// The error envelope of a refused request, as one line.
fn refusal(status: reqwest::StatusCode, body: &Value) -> anyhow::Error {
    let e = &body["error"];
    anyhow::anyhow!("{} {}: {}", status.as_u16(), e["type"].as_str().unwrap_or("error"), e["message"].as_str().unwrap_or("(no message)"))
}

/// One line for a persisted event.
fn summary(e: &Value) -> String {
    let p = &e["payload"];
    use checkfu_core::events::EventType as E;
    let ty = E::parse("type", e["type"].as_str().unwrap_or_default()).ok();
    let detail = match ty {
        Some(E::UserMessage | E::AgentMessage) => {
            p["content"].as_array().map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join(" ")).unwrap_or_default()
        }
        Some(E::AgentToolUse) => format!(
            "{} {} [{}]",
            p["name"].as_str().unwrap_or_default(),
            p["input"],
            p["evaluated_permission"].as_str().unwrap_or_default()
        ),
        Some(E::AgentToolResult) => p["content"].as_str().map(str::to_string).unwrap_or_else(|| p["content"].to_string()),
        Some(E::SessionStatusIdle) => p["stop_reason"]["type"].as_str().unwrap_or_default().to_string(),
        Some(E::PolicyDenied) => p["guidance"].as_str().unwrap_or_default().to_string(),
        _ => String::new(),
    };
    format!("{:>5} {:<26} {}", e["seq"], e["type"].as_str().unwrap_or_default(), detail.replace('\n', " ")).trim_end().to_string()
}

pub async fn session(args: ClientArgs, action: SessionAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    match action {
        SessionAction::Send { id, text } => {
            let s = c.call(c.http.get(format!("{}/v1/sessions/{id}", c.base))).await?;
            let who = s["principal_id"].as_str().unwrap_or_default();
            let body = json!({"type": EventType::UserMessage.as_str(), "payload": {"content": [{"type": "text", "text": text}]}, "authored_by": who, "caused_by": {"kind": "surface", "id": "cli"}});
            let e = c.call(c.http.post(format!("{}/v1/sessions/{id}/events", c.base)).json(&body)).await?;
            if args.json {
                writeln!(out, "{e}")?
            } else {
                writeln!(out, "{}", summary(&e))?
            }
            Ok(())
        }
        SessionAction::Follow { id, after_seq, exit_on_idle } => follow(&c, &id, after_seq, exit_on_idle, args.json, out).await,
    }
}

/// The largest event frame the CLI reads (an event is at most a few MiB).
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Streams events, reconnecting with `Last-Event-ID` after a drop so no
/// event is missed or printed twice.
async fn follow(c: &Client, id: &str, mut last: i64, exit_on_idle: bool, json_out: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let mut backoff = Duration::from_millis(200);
    loop {
        let rb =
            c.http.get(format!("{}/v1/sessions/{id}/events/stream", c.base)).bearer_auth(&c.key).header("Last-Event-ID", last.to_string());
        let resp = match rb.send().await {
            Ok(r) if r.status().is_success() => r,
            Ok(r) if r.status().is_client_error() => {
                let body: Value = r.json().await.unwrap_or(Value::Null);
                bail!("{}", body["error"]["message"].as_str().unwrap_or("the stream was refused"));
            }
            _ => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        backoff = Duration::from_millis(200);
        let mut body = resp.bytes_stream();
        // The shared decoder keeps a character split across chunks whole.
        let mut decoder = checkfu_core::sse::Decoder::new(MAX_FRAME);
        'read: while let Some(chunk) = body.next().await {
            let Ok(chunk) = chunk else { break };
            decoder.push(&chunk);
            loop {
                let frame = match decoder.next_frame() {
                    Ok(Some(f)) => f,
                    Ok(None) => break,
                    // A garbled stream: reconnect and resume after `last`.
                    Err(_) => break 'read,
                };
                if frame.id.is_none() || !frame.has_data() {
                    continue;
                }
                let e: Value = serde_json::from_str(&frame.data).unwrap_or(Value::Null);
                let seq = e["seq"].as_i64().unwrap_or(0);
                if seq <= last {
                    continue;
                }
                last = seq;
                if json_out {
                    writeln!(out, "{e}")?
                } else {
                    writeln!(out, "{}", summary(&e))?
                }
                out.flush()?;
                let t = e["type"].as_str().unwrap_or_default();
                let settled = [EventType::SessionStatusIdle, EventType::SessionStatusTerminated];
                if exit_on_idle && settled.iter().any(|s| s.as_str() == t) {
                    return Ok(());
                }
            }
        }
        // The connection dropped: resume after the last event printed.
        tokio::time::sleep(backoff).await;
    }
}
