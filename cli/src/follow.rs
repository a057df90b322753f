//! `checkfu session follow`: a Session's events as they happen — every
//! thread's view, or one thread's with `--thread` — resuming after a
//! dropped connection from the last event seen, and with `--exit-on-idle`
//! stopping at the Session's *current* idle: every event up to now is
//! printed first, then it waits only if the Session is still running.

use crate::client::Client;
use crate::explain::Explainer;
use checkfu_core::events::EventType;
use futures_util::StreamExt;
use serde_json::Value;
use std::io::Write;
use std::time::Duration;

/// One line for a persisted event.
pub fn summary(e: &Value) -> String {
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
    let seq = e["seq"].as_i64().unwrap_or_default();
    format!("{seq:>5} {:<26} {}", e["type"].as_str().unwrap_or_default(), detail.replace('\n', " ")).trim_end().to_string()
}

/// The largest event frame the CLI reads (an event is at most a few MiB).
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// What to follow and how to print it.
pub struct Follow<'a> {
    pub session_id: &'a str,
    /// Start after this seq.
    pub after: i64,
    /// Only this thread's view (a thread id); else every thread's.
    pub thread: Option<&'a str>,
    pub exit_on_idle: bool,
    pub json: bool,
}

/// Prints a Session's events as they happen: the primary view, and each
/// child thread's own view (api.md §15) as soon as the thread exists — or,
/// with `thread`, that thread's view alone. With child threads, each line
/// starts with its thread's prefix (the Agent's name, numbered when a name
/// repeats); cross-posts are left out, their originals print from the
/// child's stream. Each view resumes after a dropped connection from its
/// last event seen. With `exit_on_idle`, every event so far is printed and
/// then, unless every thread followed is already idle (or terminated), it
/// follows on until they are.
pub async fn follow(c: &Client, how: Follow<'_>, out: &mut impl Write) -> anyhow::Result<()> {
    let id = how.session_id;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<anyhow::Result<Value>>(256);
    let listed = c.get(&format!("/v1/sessions/{id}/threads")).await?;
    let threads: Vec<&Value> = listed["data"].as_array().into_iter().flatten().collect();
    let primary = threads.first().and_then(|t| t["id"].as_str()).unwrap_or_default().to_string();
    let only = match how.thread {
        Some(t) if !threads.iter().any(|x| x["id"] == t) => {
            return Err(crate::client::usage(format!("{id} has no thread {t}; its threads: {}", names(&threads))));
        }
        other => other.map(str::to_string),
    };
    let view_path = |thread: &str| {
        if thread == primary { format!("/v1/sessions/{id}/events") } else { format!("/v1/sessions/{id}/threads/{thread}/events") }
    };
    // History first, in seq order across the views, so "every thread idle"
    // is judged in the order things happened. It ends where the first
    // view's did: every event up to there was committed before it was
    // read, so each other view is read up to there, then streamed on.
    let first = only.clone().unwrap_or_else(|| primary.clone());
    let mut past = history(c, &view_path(&first), how.after, i64::MAX).await?;
    let end = past.last().and_then(|e| e["seq"].as_i64()).unwrap_or(how.after).max(how.after);
    let mut f = Follower {
        c: c.clone(),
        id: id.to_string(),
        views: Views::default(),
        tasks: vec![],
        tx,
        end,
        json_out: how.json,
        every_thread: only.is_none(),
        explainer: Explainer::default(),
    };
    for t in &threads {
        let thread = t["id"].as_str().unwrap_or_default();
        if only.as_deref().is_none_or(|o| o == thread) {
            f.views.add(thread, t["agent"]["name"].as_str().unwrap_or_default());
            f.views.initially(thread, t["status"].as_str().unwrap_or_default());
        }
    }
    for child in f.views.children() {
        past.extend(history(c, &view_path(&child), how.after, end).await?);
    }
    past.sort_by_key(|e| e["seq"].as_i64().unwrap_or(0));
    f.stream(format!("{}/stream", view_path(&first)), end);
    for child in f.views.children() {
        f.stream(format!("{}/stream", view_path(&child)), end);
    }
    let result = async {
        for e in past {
            f.show(&e, out).await?;
        }
        // Where history ended is the Session's state now.
        if how.exit_on_idle && f.views.all_settled() {
            return Ok(());
        }
        while let Some(e) = rx.recv().await {
            if f.show(&e?, out).await? && how.exit_on_idle {
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

fn names(threads: &[&Value]) -> String {
    threads
        .iter()
        .map(|t| format!("{} ({})", t["id"].as_str().unwrap_or_default(), t["agent"]["name"].as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(", ")
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
    /// Following every thread (not `--thread`): cross-posts are left out
    /// and new threads followed as they appear.
    every_thread: bool,
    explainer: Explainer,
}

impl Follower {
    fn stream(&mut self, path: String, after: i64) {
        self.tasks.push(tokio::spawn(follow_view(self.c.clone(), path, after, self.tx.clone())));
    }

    /// Prints one event (a cross-post is skipped: its original prints from
    /// the child's view) and follows a thread it announces; a refusal the
    /// agent cannot explain to the person is explained under it. Answers
    /// whether every thread followed has now settled.
    async fn show(&mut self, e: &Value, out: &mut impl Write) -> anyhow::Result<bool> {
        if self.every_thread && e["origin_event_id"].is_string() {
            return Ok(false);
        }
        let t = e["type"].as_str().unwrap_or_default();
        if self.every_thread && t == EventType::SessionThreadCreated.as_str() {
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
            writeln!(out, "{}{}", self.views.prefix(e["session_thread_id"].as_str()), summary(e))?;
            for line in self.explainer.explain(&self.c, &self.id, e).await {
                writeln!(out, "{:>5} {line}", "")?;
            }
        }
        out.flush()?;
        Ok(self.views.settle(e["session_thread_id"].as_str(), t))
    }
}

/// A view's events after `after`, up to `end`.
async fn history(c: &Client, path: &str, mut after: i64, end: i64) -> anyhow::Result<Vec<Value>> {
    let mut out = vec![];
    while after < end {
        let page = c.get(&format!("{path}?after_seq={after}&limit=1000")).await?;
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
        self.all_settled()
    }

    /// Whether every thread followed is idle or terminated now.
    fn all_settled(&self) -> bool {
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
        let rb = c.authed(c.http.get(c.url(&path))).header("Last-Event-ID", last.to_string());
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
