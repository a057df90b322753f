//! `checkfu session ...`: start Sessions, talk to them, follow them.

use crate::client::{Client, ClientArgs};
use crate::follow::{Follow, follow, summary};
use crate::output::{Printer, s};
use crate::resolve::{self, DEPLOYMENT, PRINCIPAL, SESSION};
use checkfu_core::events::EventType;
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;

#[derive(Debug, Clone, Subcommand)]
pub enum SessionAction {
    /// Start a Session of a deployment (by key or id), acting as you or as
    /// `--principal` (you need act_as on it; it needs invoke on the agent).
    Create {
        deployment: String,
        #[arg(long)]
        environment: Option<String>,
        #[arg(long)]
        principal: Option<String>,
        /// The first user.message.
        #[arg(long)]
        message: Option<String>,
        #[arg(long)]
        title: Option<String>,
        /// A retry with the same key answers the first Session.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// List Sessions, newest first.
    List {
        #[arg(long)]
        environment: Option<String>,
        /// idle, running, rescheduling or terminated.
        #[arg(long)]
        status: Option<String>,
        /// Only this deployment's (key or id).
        #[arg(long)]
        deployment: Option<String>,
    },
    /// Show one Session.
    Get { session: String },
    /// Send a user.message to a Session (as the Session's principal).
    Send { session: String, text: String },
    /// Print a Session's events as they happen, resuming after a dropped
    /// connection from the last event seen.
    Follow {
        session: String,
        /// Start after this seq (default: from the beginning).
        #[arg(long, default_value_t = 0)]
        after_seq: i64,
        /// Print every event so far, then stop once the Session is idle or
        /// terminated (with child threads: once every thread is) — now, if
        /// it already is.
        #[arg(long)]
        exit_on_idle: bool,
        /// Only this thread's view (a thread id from `session threads`).
        #[arg(long)]
        thread: Option<String>,
    },
    /// A Session's threads: the primary, then children in spawn order.
    Threads { session: String },
    /// Stop the running turn at its next boundary (one thread with
    /// `--thread`).
    Interrupt {
        session: String,
        #[arg(long)]
        thread: Option<String>,
    },
    /// Archive a Session (terminated; its log stays readable), or one child
    /// thread with `--thread`.
    Archive {
        session: String,
        #[arg(long)]
        thread: Option<String>,
    },
}

pub fn line(v: &Value) -> String {
    let stop = v["stop_reason"]["type"].as_str().map(|r| format!(" ({r})")).unwrap_or_default();
    let title = if s(v, "title").is_empty() { String::new() } else { format!("  {:?}", s(v, "title")) };
    format!(
        "{}  {}{stop}  deployment {} r{}  as {}  {}{title}",
        s(v, "id"),
        s(v, "status"),
        s(v, "agent_deployment_id"),
        v["deployment_revision"],
        s(v, "principal_id"),
        s(v, "created_at"),
    )
}

fn thread_line(t: &Value) -> String {
    let parent = t["parent_thread_id"].as_str().map(|p| format!("  from {p}")).unwrap_or_default();
    format!("{}  {:<11} {}{parent}", s(t, "id"), s(t, "status"), t["agent"]["name"].as_str().unwrap_or_default())
}

/// An input event in the Session's principal's name, caused by the CLI.
fn input(kind: EventType, principal: &str, payload: Value) -> Value {
    json!({"type": kind.as_str(), "payload": payload, "authored_by": principal, "caused_by": {"kind": "surface", "id": "cli"}})
}

fn text(t: &str) -> Value {
    json!({"content": [{"type": "text", "text": t}]})
}

pub async fn session(args: ClientArgs, action: SessionAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    let sid = |name: String| {
        let c = c.clone();
        async move { resolve::id(&c, SESSION, &name, None).await }
    };
    match action {
        SessionAction::Create { deployment, environment, principal, message, title, idempotency_key } => {
            let env = resolve::environment_filter(&c, environment.as_deref()).await?;
            let dep = resolve::id(&c, DEPLOYMENT, &deployment, env.as_deref()).await?;
            let mut body = json!({"agent_deployment_id": dep});
            if let Some(pr) = principal {
                body["principal_id"] = json!(resolve::id(&c, PRINCIPAL, &pr, None).await?);
            }
            if let Some(t) = title {
                body["title"] = json!(t);
            }
            let created = c.create("/v1/sessions", &body, idempotency_key.as_deref()).await?;
            p.line(out, &created, line)?;
            if let Some(m) = message {
                let id = s(&created, "id");
                // The message's key derives from the Session's: a retry of
                // the whole command sends it once.
                let key = idempotency_key.map(|k| format!("{k}/message"));
                let e = c
                    .create(
                        &format!("/v1/sessions/{id}/events"),
                        &input(EventType::UserMessage, s(&created, "principal_id"), text(&m)),
                        key.as_deref(),
                    )
                    .await?;
                // With --quiet, the Session's id alone (for `SESSION=$(...)`).
                if !p.quiet {
                    p.line(out, &e, summary)?;
                }
            }
            Ok(())
        }
        SessionAction::List { environment, status, deployment } => {
            let env = resolve::environment_filter(&c, environment.as_deref()).await?;
            let dep = match deployment {
                Some(d) => Some(resolve::id(&c, DEPLOYMENT, &d, env.as_deref()).await?),
                None => None,
            };
            let items = c.every("/v1/sessions", &[("environment_id", env), ("status", status), ("agent_deployment_id", dep)]).await?;
            p.lines(out, &items, line)
        }
        SessionAction::Get { session } => p.detail(out, &c.get(&format!("/v1/sessions/{}", sid(session).await?)).await?),
        SessionAction::Send { session, text: t } => {
            let id = sid(session).await?;
            let sess = c.get(&format!("/v1/sessions/{id}")).await?;
            let e =
                c.post(&format!("/v1/sessions/{id}/events"), &input(EventType::UserMessage, s(&sess, "principal_id"), text(&t))).await?;
            p.line(out, &e, summary)
        }
        SessionAction::Follow { session, after_seq, exit_on_idle, thread } => {
            let id = sid(session).await?;
            let how = Follow { session_id: &id, after: after_seq, thread: thread.as_deref(), exit_on_idle, json: args.json };
            follow(&c, how, out).await
        }
        SessionAction::Threads { session } => {
            let id = sid(session).await?;
            let items = c.every(&format!("/v1/sessions/{id}/threads"), &[]).await?;
            p.lines(out, &items, thread_line)
        }
        SessionAction::Interrupt { session, thread } => {
            let id = sid(session).await?;
            let sess = c.get(&format!("/v1/sessions/{id}")).await?;
            let payload = match thread {
                Some(t) => json!({"session_thread_id": t}),
                None => json!({}),
            };
            let e =
                c.post(&format!("/v1/sessions/{id}/events"), &input(EventType::UserInterrupt, s(&sess, "principal_id"), payload)).await?;
            p.line(out, &e, summary)
        }
        SessionAction::Archive { session, thread: Some(t) } => {
            let id = sid(session).await?;
            p.line(out, &c.post(&format!("/v1/sessions/{id}/threads/{t}/archive"), &json!({})).await?, thread_line)
        }
        SessionAction::Archive { session, thread: None } => {
            let id = sid(session).await?;
            p.line(out, &c.post(&format!("/v1/sessions/{id}/archive"), &json!({})).await?, line)
        }
    }
}
