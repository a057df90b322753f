//! `checkfu graph ...`: AutomationGraphs from the command line — create and
//! revise documents from JSON files, plan, apply, preview a node's prompt
//! and try a Check's rule offline — each command with `--json`.

use crate::client::{Client, ClientArgs};
use crate::resolve::{self, GRAPH, PRINCIPAL};
use anyhow::Context;
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Subcommand)]
pub enum GraphAction {
    /// The graphs of the Environments you may read.
    List,
    /// Create a graph from a document file (`-`: stdin); its revision 1.
    Create {
        document: PathBuf,
        /// Who the graph is attributed to: you, or a Principal you may act as.
        #[arg(long)]
        created_by: String,
        /// A layout file (node positions and the like).
        #[arg(long)]
        layout: Option<PathBuf>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Save a document as the graph's next revision (nothing new when it is
    /// the latest's).
    Revise {
        id: String,
        document: PathBuf,
        #[arg(long)]
        layout: Option<PathBuf>,
    },
    /// Plan a revision: pins, blockers and readiness, or why it is rejected.
    Plan {
        id: String,
        #[arg(long)]
        revision: i64,
    },
    /// Apply a revision. Without `--plan`, plans it now and applies that plan.
    Apply {
        id: String,
        #[arg(long)]
        revision: i64,
        /// The plan_sha256 you reviewed (refused if planning now differs).
        #[arg(long)]
        plan: Option<String>,
        /// A file holding the ingest secret for a webhook trigger.
        #[arg(long)]
        ingest_secret_file: Option<PathBuf>,
    },
    /// Preview a step_agent node's prompt (no Session, no model call).
    Test {
        id: String,
        #[arg(long)]
        revision: i64,
        #[arg(long)]
        node: String,
        /// A sample event (JSON file, `-`: stdin).
        #[arg(long)]
        event_file: Option<PathBuf>,
        /// A sample of the producer's output (JSON file).
        #[arg(long)]
        previous_output_file: Option<PathBuf>,
    },
    /// Try a Check node's rule on answers you give (offline: no model call,
    /// qualification or record): the verdict and the branch it takes.
    TestRule {
        id: String,
        #[arg(long)]
        revision: i64,
        /// A check or check_result decision, or a step_check.
        #[arg(long)]
        node: String,
        /// `QUESTION=yes|no|uncertain`, one for each of the Check's
        /// questions.
        #[arg(long = "answer", value_name = "QUESTION=ANSWER", required = true)]
        answers: Vec<String>,
    },
}

/// `QUESTION=ANSWER` pairs as the API's `answers` object.
fn answers(pairs: &[String]) -> anyhow::Result<Value> {
    let mut out = serde_json::Map::new();
    for pair in pairs {
        let (name, answer) = pair.split_once('=').with_context(|| format!("--answer {pair:?} is QUESTION=yes|no|uncertain"))?;
        if out.insert(name.to_string(), json!(answer)).is_some() {
            anyhow::bail!("--answer names {name:?} twice");
        }
    }
    Ok(Value::Object(out))
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    crate::client::read_json(path, "the document")
}

fn graph_line(g: &Value) -> String {
    let s = |k: &str| g[k].as_str().unwrap_or("-").to_string();
    format!(
        "{}  {}  revision {} (applied {})  drift {}  automation {}",
        s("id"),
        s("name"),
        g["latest_revision"],
        g["applied_revision"].as_i64().map(|r| r.to_string()).unwrap_or_else(|| "none".into()),
        g["drift"]["state"].as_str().unwrap_or("-"),
        s("automation_id"),
    )
}

/// A plan, readably: each pin, blocker or error on its own line.
fn plan_text(p: &Value) -> String {
    let mut out = String::new();
    if p["kind"] == "rejected" {
        out.push_str(&format!("rejected  revision {}\n", p["revision"]));
        for e in p["errors"].as_array().into_iter().flatten() {
            let at = e["node"].as_str().map(|n| format!(" (node {n})")).unwrap_or_default();
            out.push_str(&format!("  ✗ {}  {}{at}\n", e["code"].as_str().unwrap_or_default(), e["detail"].as_str().unwrap_or_default()));
        }
        return out;
    }
    out.push_str(&format!(
        "planned  revision {}  {} Automation {}  target {}  readiness {}\n  plan_sha256 {}\n",
        p["revision"],
        p["automation"]["action"].as_str().unwrap_or_default(),
        p["automation"]["id"].as_str().unwrap_or("(new)"),
        p["target_kind"].as_str().unwrap_or_default(),
        p["readiness"]["state"].as_str().unwrap_or_default(),
        p["plan_sha256"].as_str().unwrap_or_default(),
    ));
    for pin in p["pins"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  pin {} → {} revision {} (agent {} version {})\n",
            pin["node"].as_str().unwrap_or_default(),
            pin["agent_deployment_id"].as_str().unwrap_or_default(),
            pin["deployment_revision"],
            pin["agent_id"].as_str().unwrap_or_default(),
            pin["agent_version"],
        ));
    }
    for r in p["resources"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  pin {} → tool source {} via {}\n",
            r["node"].as_str().unwrap_or_default(),
            r["tool_source_id"].as_str().unwrap_or_default(),
            r["connection_id"].as_str().unwrap_or_default(),
        ));
    }
    for b in p["blockers"].as_array().into_iter().flatten() {
        out.push_str(&format!("  blocker {}  {}\n", b["code"].as_str().unwrap_or_default(), b["detail"].as_str().unwrap_or_default()));
    }
    out
}

pub async fn graph(args: ClientArgs, action: GraphAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let at = |rest: &str| format!("{}/v1/automation-graphs{rest}", c.base);
    let printer = crate::output::Printer::of(&args);
    let show = |out: &mut dyn Write, v: &Value, text: String| printer.text(out, v, text);
    let gid = |name: String| {
        let c = c.clone();
        async move { resolve::id(&c, GRAPH, &name, None).await }
    };
    match action {
        GraphAction::List => {
            for g in c.every(&at(""), &[]).await? {
                show(out, &g, format!("{}\n", graph_line(&g)))?;
            }
            Ok(())
        }
        GraphAction::Create { document, created_by, layout, idempotency_key } => {
            let created_by = resolve::id(&c, PRINCIPAL, &created_by, None).await?;
            let mut body = json!({"created_by_principal_id": created_by, "document": read_json(&document)?});
            if let Some(l) = layout {
                body["layout"] = read_json(&l)?;
            }
            let g = c.create("/v1/automation-graphs", &body, idempotency_key.as_deref()).await?;
            show(out, &g, format!("{}\n", graph_line(&g)))
        }
        GraphAction::Revise { id, document, layout } => {
            let id = gid(id).await?;
            let mut body = json!({"document": read_json(&document)?});
            if let Some(l) = layout {
                body["layout"] = read_json(&l)?;
            }
            let g = c.call(c.http.post(at(&format!("/{id}/revisions"))).json(&body)).await?;
            show(out, &g, format!("{}\n", graph_line(&g)))
        }
        GraphAction::Plan { id, revision } => {
            let id = gid(id).await?;
            let p = c.call(c.http.post(at(&format!("/{id}/plan"))).json(&json!({"revision": revision}))).await?;
            show(out, &p, plan_text(&p))
        }
        GraphAction::Apply { id, revision, plan, ingest_secret_file } => {
            let id = gid(id).await?;
            let sha = match plan {
                Some(s) => s,
                None => {
                    let p = c.call(c.http.post(at(&format!("/{id}/plan"))).json(&json!({"revision": revision}))).await?;
                    if !args.json {
                        write!(out, "{}", plan_text(&p))?;
                    }
                    p["plan_sha256"]
                        .as_str()
                        .map(String::from)
                        .ok_or_else(|| anyhow::anyhow!("revision {revision} does not plan: see above"))?
                }
            };
            let mut body = json!({"revision": revision, "plan_sha256": sha});
            if let Some(path) = ingest_secret_file {
                let secret = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
                body["inputs"] = json!({"ingest_secret": secret.trim()});
            }
            let a = c.call(c.http.post(at(&format!("/{id}/apply"))).json(&body)).await?;
            let mut text = format!(
                "applied revision {}: {} {}\n",
                a["revision"],
                a["action"].as_str().unwrap_or_default(),
                a["automation_id"].as_str().unwrap_or_default()
            );
            if let Some(s) = a["ingest_secret"].as_str() {
                text.push_str(&format!("ingest secret (shown once; keep it): {s}\n"));
            }
            show(out, &a, text)
        }
        GraphAction::Test { id, revision, node, event_file, previous_output_file } => {
            let id = gid(id).await?;
            let mut body = json!({"mode": "prompt_preview", "revision": revision, "node": node});
            if let Some(f) = event_file {
                body["event"] = read_json(&f)?;
            }
            if let Some(f) = previous_output_file {
                body["previous_output"] = read_json(&f)?;
            }
            let t = c.call(c.http.post(at(&format!("/{id}/node-tests"))).json(&body)).await?;
            let missing: Vec<&str> = t["missing_event_references"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let mut text = format!(
                "{} → {} (agent {} version {})\n---\n{}\n---\n",
                t["prompt_source"].as_str().unwrap_or_default(),
                t["agent_deployment_id"].as_str().unwrap_or_default(),
                t["agent_id"].as_str().unwrap_or("?"),
                t["agent_version"],
                t["rendered_prompt"].as_str().unwrap_or_default(),
            );
            if !missing.is_empty() {
                text.push_str(&format!("missing from the event: {}\n", missing.join(", ")));
            }
            show(out, &t, text)
        }
        GraphAction::TestRule { id, revision, node, answers: given } => {
            let id = gid(id).await?;
            let body = json!({"node": node, "answers": answers(&given)?});
            let t = c.call(c.http.post(at(&format!("/{id}/revisions/{revision}/test-rule"))).json(&body)).await?;
            let text = format!("verdict {} → {}\n", t["verdict"].as_str().unwrap_or_default(), t["branch"].as_str().unwrap_or_default());
            show(out, &t, text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::plan_text;
    use serde_json::json;

    #[test]
    fn a_plan_lists_what_it_pins_agents_and_connections_alike() {
        let p = json!({"kind": "planned", "revision": 1, "automation": {"id": null, "action": "create"}, "target_kind": "steps",
            "readiness": {"state": "ready"}, "plan_sha256": "ab",
            "pins": [{"node": "reply", "agent_deployment_id": "dep_1", "deployment_revision": 2, "agent_id": "agt_1", "agent_version": 3}],
            "resources": [{"node": "ticket", "tool_source_id": "tsrc_1", "connection_id": "conn_1"}], "blockers": []});
        assert_eq!(
            plan_text(&p),
            "planned  revision 1  create Automation (new)  target steps  readiness ready\n  plan_sha256 ab\n  \
             pin reply → dep_1 revision 2 (agent agt_1 version 3)\n  pin ticket → tool source tsrc_1 via conn_1\n"
        );
    }
}
