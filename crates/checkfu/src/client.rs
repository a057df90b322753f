//! The command-line client: `checkfu session send|follow` (and, in
//! `approvals_cli.rs`, `checkfu approvals`). It speaks only the public HTTP
//! API, like any other client.

use anyhow::Context;
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
        /// Stop once the Session is idle or terminated (with child threads:
        /// once every thread is).
        #[arg(long)]
        exit_on_idle: bool,
    },
}

#[derive(Clone)]
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

/// Prints a Session's events as they happen: the primary view, and each
/// child thread's own view (api.md §15) as soon as the thread exists. With
/// child threads, each line starts with its thread's prefix (the Agent's
/// name, numbered when a name repeats); cross-posts are left out, their
/// originals print from the child's stream. Each view resumes after a
/// dropped connection from its last event seen.
async fn follow(c: &Client, id: &str, after: i64, exit_on_idle: bool, json_out: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<anyhow::Result<Value>>(256);
    // History first, in seq order across the views, so "every thread idle"
    // is judged in the order things happened. It ends where the primary
    // view's did: every event up to there was committed before it was read,
    // so each view is read up to there, then streamed on.
    let mut past = history(c, &format!("/v1/sessions/{id}/events"), after, i64::MAX).await?;
    let end = past.last().and_then(|e| e["seq"].as_i64()).unwrap_or(after).max(after);
    let mut f = Follower { c: c.clone(), id: id.to_string(), views: Views::default(), tasks: vec![], tx, end, json_out };
    let listed = c.call(c.http.get(format!("{}/v1/sessions/{id}/threads", c.base))).await?;
    for t in listed["data"].as_array().into_iter().flatten() {
        let thread = t["id"].as_str().unwrap_or_default();
        f.views.add(thread, t["agent"]["name"].as_str().unwrap_or_default());
        f.views.initially(thread, t["status"].as_str().unwrap_or_default());
    }
    for child in f.views.children() {
        past.extend(history(c, &format!("/v1/sessions/{id}/threads/{child}/events"), after, end).await?);
    }
    past.sort_by_key(|e| e["seq"].as_i64().unwrap_or(0));
    f.stream(format!("/v1/sessions/{id}/events/stream"), end);
    for child in f.views.children() {
        f.stream(format!("/v1/sessions/{id}/threads/{child}/events/stream"), end);
    }
    let result = async {
        for e in past {
            if f.show(&e, out)? && exit_on_idle {
                return Ok(());
            }
        }
        while let Some(e) = rx.recv().await {
            if f.show(&e?, out)? && exit_on_idle {
                return Ok(());
            }
        }
        Ok(())
    }
    .await;
    for t in &f.tasks {
        t.abort();
    }
    result
}

/// `checkfu session follow`'s state: the views it follows and their
/// streams, all feeding one channel.
struct Follower {
    c: Client,
    id: String,
    views: Views,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    tx: tokio::sync::mpsc::Sender<anyhow::Result<Value>>,
    /// Where history ended and the streams began.
    end: i64,
    json_out: bool,
}

impl Follower {
    fn stream(&mut self, path: String, after: i64) {
        self.tasks.push(tokio::spawn(follow_view(self.c.clone(), path, after, self.tx.clone())));
    }

    /// Prints one event (a cross-post is skipped: its original prints from
    /// the child's view) and follows a thread it announces. Answers whether
    /// every thread has now settled.
    fn show(&mut self, e: &Value, out: &mut impl Write) -> anyhow::Result<bool> {
        if e["origin_event_id"].is_string() {
            return Ok(false);
        }
        let t = e["type"].as_str().unwrap_or_default();
        if t == EventType::SessionThreadCreated.as_str() {
            let child = e["payload"]["session_thread_id"].as_str().unwrap_or_default().to_string();
            if self.views.add(&child, e["payload"]["agent_name"].as_str().unwrap_or_default()) {
                // Announced in history or live: its view from there on.
                let from = e["seq"].as_i64().unwrap_or(self.end).min(self.end);
                self.stream(format!("/v1/sessions/{}/threads/{child}/events/stream", self.id), from);
            }
        }
        if self.json_out {
            writeln!(out, "{e}")?
        } else {
            writeln!(out, "{}{}", self.views.prefix(e["session_thread_id"].as_str()), summary(e))?
        }
        out.flush()?;
        Ok(self.views.settle(e["session_thread_id"].as_str(), t))
    }
}

/// A view's events after `after`, up to `end`.
async fn history(c: &Client, path: &str, mut after: i64, end: i64) -> anyhow::Result<Vec<Value>> {
    let mut out = vec![];
    while after < end {
        let page = c.call(c.http.get(format!("{}{path}?after_seq={after}&limit=1000", c.base))).await?;
        let batch: Vec<Value> = page["data"].as_array().cloned().unwrap_or_default();
        let Some(last) = batch.last().and_then(|e| e["seq"].as_i64()) else { break };
        out.extend(batch.into_iter().filter(|e| e["seq"].as_i64().unwrap_or(0) <= end));
        after = last;
    }
    Ok(out)
}

/// The threads followed, their prefixes, and which have settled.
#[derive(Default)]
struct Views {
    /// `(thread id, prefix)`; the primary first.
    threads: Vec<(String, String)>,
    /// Threads whose last status event seen is idle or terminated.
    settled: std::collections::BTreeSet<String>,
}

impl Views {
    /// Records a thread; false when it is already known.
    fn add(&mut self, id: &str, name: &str) -> bool {
        if id.is_empty() || self.threads.iter().any(|(t, _)| t == id) {
            return false;
        }
        let same = self.threads.iter().filter(|(_, p)| p == name || p.starts_with(&format!("{name}#"))).count();
        let prefix = if same == 0 { name.to_string() } else { format!("{name}#{}", same + 1) };
        self.threads.push((id.to_string(), prefix));
        true
    }

    /// A thread's state when following began (from its listing).
    fn initially(&mut self, id: &str, status: &str) {
        if status == "idle" || status == "terminated" {
            self.settled.insert(id.to_string());
        }
    }

    /// Notes a status event of `thread` (`None`: the primary); answers
    /// whether every thread followed is now idle or terminated.
    fn settle(&mut self, thread: Option<&str>, event_type: &str) -> bool {
        let id = match thread {
            None => self.threads.first().map(|(t, _)| t.clone()).unwrap_or_default(),
            Some(t) => t.to_string(),
        };
        let (idle, terminated, running, rescheduled) = match thread {
            None => (
                EventType::SessionStatusIdle,
                EventType::SessionStatusTerminated,
                EventType::SessionStatusRunning,
                EventType::SessionStatusRescheduled,
            ),
            Some(_) => (
                EventType::SessionThreadStatusIdle,
                EventType::SessionThreadStatusTerminated,
                EventType::SessionThreadStatusRunning,
                EventType::SessionThreadStatusRescheduled,
            ),
        };
        if [idle, terminated].iter().any(|x| x.as_str() == event_type) {
            self.settled.insert(id);
        } else if [running, rescheduled].iter().any(|x| x.as_str() == event_type) {
            self.settled.remove(&id);
        } else {
            return false;
        }
        self.threads.iter().all(|(t, _)| self.settled.contains(t))
    }

    fn children(&self) -> Vec<String> {
        self.threads.iter().skip(1).map(|(t, _)| t.clone()).collect()
    }

    /// The line prefix of an event of `thread` (`None`: the primary); none
    /// while the Session has a single thread.
    fn prefix(&self, thread: Option<&str>) -> String {
        if self.threads.len() < 2 {
            return String::new();
        }
        let name = match thread {
            None => self.threads.first().map_or("", |(_, p)| p.as_str()),
            Some(t) => self.threads.iter().find(|(id, _)| id == t).map_or(t, |(_, p)| p.as_str()),
        };
        format!("[{name}] ")
    }
}

/// Streams one view's events into `tx`, reconnecting with `Last-Event-ID`
/// after a drop so no event is missed or sent twice.
async fn follow_view(c: Client, path: String, mut last: i64, tx: tokio::sync::mpsc::Sender<anyhow::Result<Value>>) {
    let mut backoff = Duration::from_millis(200);
    loop {
        let rb = c.http.get(format!("{}{path}", c.base)).bearer_auth(&c.key).header("Last-Event-ID", last.to_string());
        let resp = match rb.send().await {
            Ok(r) if r.status().is_success() => r,
            Ok(r) if r.status().is_client_error() => {
                let body: Value = r.json().await.unwrap_or(Value::Null);
                let why = body["error"]["message"].as_str().unwrap_or("the stream was refused").to_string();
                let _ = tx.send(Err(anyhow::anyhow!(why))).await;
                return;
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
                if tx.send(Ok(e)).await.is_err() {
                    return;
                }
            }
        }
        // The connection dropped: resume after the last event sent.
        tokio::time::sleep(backoff).await;
    }
}
