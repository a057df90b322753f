//! `checkfu memory ...`: MemoryStores from the command line — list stores
//! and documents, read and write documents (compare-and-set), their
//! history, and the review of proposals — each command with `--json`.

use crate::client::{Client, ClientArgs};
use crate::resolve::{self, MEMORY_STORE, ROUTING_PROFILE, SESSION};
use anyhow::Context;
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Subcommand)]
pub enum MemoryAction {
    /// Without a store: the stores you may read. With one: its documents
    /// (by path, without content).
    Ls {
        store: Option<String>,
        /// Only paths starting with this (`/guides/`).
        #[arg(long)]
        prefix: Option<String>,
        /// As of this version (default: the head).
        #[arg(long)]
        at: Option<i64>,
        /// Only stores of this Environment.
        #[arg(long)]
        environment: Option<String>,
    },
    /// Print a document's content.
    Cat {
        store: String,
        path: String,
        #[arg(long)]
        at: Option<i64>,
    },
    /// Write a document from a file (`-` or nothing: stdin). It is a
    /// compare-and-set: `--create` only if absent, `--expect SHA` only over
    /// that content; with neither, over the content the head holds now (read
    /// first, so a change by someone else in between is refused, not lost).
    Put {
        store: String,
        path: String,
        file: Option<PathBuf>,
        #[arg(long, conflicts_with = "expect")]
        create: bool,
        #[arg(long)]
        expect: Option<String>,
    },
    /// The store's versions, newest first: who changed which paths, how.
    History { store: String },
    /// The store's proposals (`--status open|approved|rejected`).
    Proposals {
        store: String,
        #[arg(long)]
        status: Option<String>,
    },
    /// Approve a proposal: every change applied as one version.
    Approve {
        proposal: String,
        #[arg(long)]
        note: Option<String>,
    },
    /// Reject a proposal.
    Reject {
        proposal: String,
        #[arg(long)]
        note: Option<String>,
    },
    /// Start a Dream over a store (a new store is its output; the input
    /// never changes) and follow it until it finishes. With `--profile` the
    /// model reads the Sessions first; without, the deterministic pass only.
    Dream {
        store: String,
        /// A Session whose user messages the model reads (repeatable).
        #[arg(long = "session")]
        sessions: Vec<String>,
        /// The model routing profile: a `model` Dream.
        #[arg(long)]
        profile: Option<String>,
        #[arg(long)]
        instructions: Option<String>,
        /// Leave the changes as one proposal on the output store.
        #[arg(long)]
        review: bool,
        /// Print the Dream as started, without following it.
        #[arg(long)]
        no_wait: bool,
    },
}

fn store_line(s: &Value) -> String {
    let t = |k: &str| s[k].as_str().unwrap_or("-").to_string();
    format!(
        "{}  {}  {} {}  {}  head {}  {}",
        t("id"),
        t("name"),
        s["owner"]["kind"].as_str().unwrap_or("-"),
        s["owner"]["id"].as_str().unwrap_or("-"),
        t("review"),
        s["head_version"],
        t("status")
    )
}

fn version_line(v: &Value) -> String {
    let changes: Vec<String> = v["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| format!("{} {}", c["operation"].as_str().unwrap_or_default(), c["path"].as_str().unwrap_or_default()))
        .collect();
    format!(
        "v{}  {}  {} {}  via {}  {}",
        v["store_version"],
        v["created_at"].as_str().unwrap_or_default(),
        v["actor"]["kind"].as_str().unwrap_or_default(),
        v["actor"]["id"].as_str().unwrap_or_default(),
        v["via"].as_str().unwrap_or_default(),
        changes.join(", ")
    )
}

fn proposal_line(p: &Value) -> String {
    let paths: Vec<&str> = p["changes"].as_array().into_iter().flatten().filter_map(|c| c["path"].as_str()).collect();
    format!(
        "{}  {}  {}  base v{}  from {} {}  {}",
        p["id"].as_str().unwrap_or_default(),
        p["status"].as_str().unwrap_or_default(),
        p["reason"].as_str().unwrap_or_default(),
        p["base_version"],
        p["source"]["kind"].as_str().unwrap_or_default(),
        p["source"]["id"].as_str().unwrap_or_default(),
        paths.join(", ")
    )
}

pub async fn memory(args: ClientArgs, action: MemoryAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let stores = |rest: &str| format!("{}/v1/memory-stores{rest}", c.base);
    let printer = crate::output::Printer::of(&args);
    let show = |out: &mut dyn Write, v: &Value, text: String| printer.text(out, v, text);
    let mid = |name: String| {
        let c = c.clone();
        async move { resolve::id(&c, MEMORY_STORE, &name, None).await }
    };
    match action {
        MemoryAction::Ls { store: None, environment, .. } => {
            let environment = resolve::environment_filter(&c, environment.as_deref()).await?;
            for s in c.every(&stores(""), &[("environment_id", environment)]).await? {
                show(out, &s, format!("{}\n", store_line(&s)))?;
            }
            Ok(())
        }
        MemoryAction::Ls { store: Some(id), prefix, at, .. } => {
            let id = mid(id).await?;
            let filters = [("path_prefix", prefix), ("at_version", at.map(|n| n.to_string()))];
            for d in c.every(&stores(&format!("/{id}/documents")), &filters).await? {
                let text = format!(
                    "{}  {} bytes  v{}  {}\n",
                    d["path"].as_str().unwrap_or_default(),
                    d["size_bytes"],
                    d["updated_in_version"],
                    d["content_sha256"].as_str().unwrap_or_default()
                );
                show(out, &d, text)?;
            }
            Ok(())
        }
        MemoryAction::Cat { store, path, at } => {
            let store = mid(store).await?;
            let mut url = reqwest::Url::parse(&stores(&format!("/{store}/document")))?;
            url.query_pairs_mut().append_pair("path", &path);
            if let Some(n) = at {
                url.query_pairs_mut().append_pair("at_version", &n.to_string());
            }
            let d = c.call(c.http.get(url)).await?;
            show(out, &d, d["document"]["content"].as_str().unwrap_or_default().to_string())
        }
        MemoryAction::Put { store, path, file, create, expect } => {
            let store = mid(store).await?;
            let content = match file.as_deref().filter(|f| f.as_os_str() != "-") {
                Some(f) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
                None => std::io::read_to_string(std::io::stdin()).context("reading stdin")?,
            };
            let expected = if create {
                Value::Null
            } else if let Some(sha) = expect {
                Value::String(sha)
            } else {
                let mut url = reqwest::Url::parse(&stores(&format!("/{store}/document")))?;
                url.query_pairs_mut().append_pair("path", &path);
                match c.find(c.http.get(url)).await? {
                    None => Value::Null,
                    Some(d) => d["document"]["content_sha256"].clone(),
                }
            };
            let body = json!({"path": path, "content": content, "expected_sha256": expected});
            let w = c.call(c.http.post(stores(&format!("/{store}/document"))).json(&body)).await?;
            let text = format!(
                "{} at v{}  sha256 {}\n",
                w["document"]["path"].as_str().unwrap_or_default(),
                w["store_version"],
                w["document"]["content_sha256"].as_str().unwrap_or_default()
            );
            show(out, &w, text)
        }
        MemoryAction::History { store } => {
            for v in c.every(&stores(&format!("/{}/versions", mid(store).await?)), &[]).await? {
                show(out, &v, format!("{}\n", version_line(&v)))?;
            }
            Ok(())
        }
        MemoryAction::Proposals { store, status } => {
            let at = format!("{}/v1/memory-proposals", c.base);
            for p in c.every(&at, &[("memory_store_id", Some(mid(store).await?)), ("status", status)]).await? {
                show(out, &p, format!("{}\n", proposal_line(&p)))?;
            }
            Ok(())
        }
        MemoryAction::Dream { store, sessions, profile, instructions, review, no_wait } => {
            let mut session_ids = vec![];
            for s in sessions {
                session_ids.push(resolve::id(&c, SESSION, &s, None).await?);
            }
            let mut body = json!({"memory_store_id": mid(store).await?, "session_ids": session_ids, "review": review});
            if let Some(p) = profile {
                body["model_routing_profile_id"] = json!(resolve::id(&c, ROUTING_PROFILE, &p, None).await?);
            }
            if let Some(i) = instructions {
                body["instructions"] = json!(i);
            }
            let mut d = c.call(c.http.post(format!("{}/v1/dreams", c.base)).json(&body)).await?;
            let id = d["id"].as_str().unwrap_or_default().to_string();
            let mut last = String::new();
            while !no_wait && matches!(d["status"].as_str(), Some("pending" | "running")) {
                let status = d["status"].as_str().unwrap_or_default().to_string();
                if status != last && !args.json {
                    eprintln!("dream {id}: {status}");
                    last = status;
                }
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                d = c.call(c.http.get(format!("{}/v1/dreams/{id}", c.base))).await?;
            }
            let text = match d["status"].as_str() {
                Some("completed") => format!(
                    "dream {id} completed: output store {}{}  ({} written, {} removed, {} tokens in, {} out)\n",
                    d["outputs"]["memory_store_id"].as_str().unwrap_or("-"),
                    d["outputs"]["memory_proposal_id"].as_str().map(|p| format!(", proposal {p} to review")).unwrap_or_default(),
                    d["stats"]["documents_written"],
                    d["stats"]["documents_removed"],
                    d["usage"]["input_tokens"],
                    d["usage"]["output_tokens"],
                ),
                Some("failed") => format!("dream {id} failed: {}\n", d["error"]["message"].as_str().unwrap_or_default()),
                other => format!("dream {id}: {}\n", other.unwrap_or("-")),
            };
            show(out, &d, text)?;
            if d["status"] == "failed" {
                anyhow::bail!("the dream failed");
            }
            Ok(())
        }
        MemoryAction::Approve { proposal, note } => decide(&c, &proposal, "approve", note, printer, out).await,
        MemoryAction::Reject { proposal, note } => decide(&c, &proposal, "reject", note, printer, out).await,
    }
}

async fn decide(
    c: &Client,
    proposal: &str,
    verb: &str,
    note: Option<String>,
    printer: crate::output::Printer,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let body = match note {
        Some(n) => json!({"note": n}),
        None => json!({}),
    };
    let p = c.call(c.http.post(format!("{}/v1/memory-proposals/{proposal}/{verb}", c.base)).json(&body)).await?;
    let applied = p["applied_version"].as_i64().map(|v| format!("  applied as v{v}")).unwrap_or_default();
    printer.text(out, &p, format!("{}{applied}\n", proposal_line(&p)))
}
