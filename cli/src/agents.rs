//! `checkfu agents ...`: an agent's draft is edited as a JSON file and
//! published as an immutable version; versions are compared as JSON.

use crate::client::{Client, ClientArgs, read_json, usage};
use crate::output::{Printer, s};
use crate::resolve::{self, AGENT};
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Subcommand)]
pub enum AgentsAction {
    /// List agents, newest first.
    List {
        #[arg(long)]
        environment: Option<String>,
    },
    /// Show one agent and its draft.
    Get { agent: String },
    /// Create an agent with a draft (`--instructions`, or a whole draft from
    /// `--draft-file`).
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        environment: Option<String>,
        #[arg(long, conflicts_with = "draft_file")]
        instructions: Option<String>,
        /// The draft as JSON (`{"instructions", "tools", "skills", ...}`);
        /// `-` reads standard input.
        #[arg(long)]
        draft_file: Option<PathBuf>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Print the draft as JSON: edit it, then give it back with `edit`.
    Draft { agent: String },
    /// Replace the draft with a file's (`-`: standard input).
    Edit {
        agent: String,
        #[arg(long)]
        draft_file: PathBuf,
        /// Refuse the change unless the agent is at this version.
        #[arg(long)]
        expected_version: Option<i64>,
    },
    /// Publish the draft as the next immutable version.
    Publish {
        agent: String,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// The published versions, newest first.
    Versions { agent: String },
    /// Show one version's definition.
    Version { agent: String, version: i64 },
    /// Compare two versions' definitions (`draft` for the draft; the second
    /// defaults to the draft), as JSON Pointer paths changed.
    Diff { agent: String, from: String, to: Option<String> },
    /// Archive an agent (no new deployments or Sessions; versions stay).
    Archive { agent: String },
}

pub fn line(a: &Value) -> String {
    let latest = a["latest_version"].as_i64().map(|v| format!("v{v}")).unwrap_or_else(|| "unpublished".into());
    let archived = if a["archived"] == true { "  archived" } else { "" };
    format!("{}  {}  {latest}  {}{archived}", s(a, "id"), s(a, "name"), s(a, "environment_id"))
}

fn version_line(v: &Value) -> String {
    format!("v{}  {}  by {}  {}", v["version"], s(v, "release_sha256"), s(v, "published_by"), s(v, "published_at"))
}

/// A version's definition, or the draft.
async fn side(c: &Client, id: &str, which: &str) -> anyhow::Result<(String, Value)> {
    if which == "draft" {
        return Ok(("draft".into(), c.get(&format!("/v1/agents/{id}")).await?["draft"].clone()));
    }
    let n: i64 = which.trim_start_matches('v').parse().map_err(|_| usage(format!("{which:?} is not a version number or `draft`")))?;
    Ok((format!("v{n}"), c.get(&format!("/v1/agents/{id}/versions/{n}")).await?["definition"].clone()))
}

/// The changes from `a` to `b`, a line per JSON Pointer path:
/// `~ /path: old → new`, `+ /path: new`, `- /path: old`.
pub fn diff_lines(a: &Value, b: &Value) -> Vec<String> {
    let patch = json_patch::diff(a, b);
    patch
        .0
        .iter()
        .map(|op| match op {
            json_patch::PatchOperation::Add(o) => format!("+ {}: {}", o.path, o.value),
            json_patch::PatchOperation::Remove(o) => {
                format!("- {}: {}", o.path, a.pointer(o.path.as_str()).cloned().unwrap_or(Value::Null))
            }
            json_patch::PatchOperation::Replace(o) => {
                format!("~ {}: {} → {}", o.path, a.pointer(o.path.as_str()).cloned().unwrap_or(Value::Null), o.value)
            }
            other => format!("{other}"),
        })
        .collect()
}

pub async fn agents(args: ClientArgs, action: AgentsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    match action {
        AgentsAction::List { environment } => {
            let env = resolve::environment_filter(&c, environment.as_deref()).await?;
            p.lines(out, &c.every("/v1/agents", &[("environment_id", env)]).await?, line)
        }
        AgentsAction::Get { agent } => p.detail(out, &c.get(&format!("/v1/agents/{}", resolve::id(&c, AGENT, &agent, None).await?)).await?),
        AgentsAction::Create { name, environment, instructions, draft_file, idempotency_key } => {
            let env = resolve::environment(&c, environment.as_deref()).await?;
            let draft = match (draft_file, instructions) {
                (Some(f), _) => read_json(&f, "the draft")?,
                (None, Some(i)) => json!({"instructions": i}),
                (None, None) => json!({}),
            };
            let body = json!({"environment_id": env, "name": name, "draft": draft});
            p.line(out, &c.create("/v1/agents", &body, idempotency_key.as_deref()).await?, line)
        }
        AgentsAction::Draft { agent } => {
            let a = c.get(&format!("/v1/agents/{}", resolve::id(&c, AGENT, &agent, None).await?)).await?;
            // The draft alone, indented, whatever --json says: it is a file
            // to edit and give back.
            writeln!(out, "{}", serde_json::to_string_pretty(&a["draft"])?)?;
            Ok(())
        }
        AgentsAction::Edit { agent, draft_file, expected_version } => {
            let id = resolve::id(&c, AGENT, &agent, None).await?;
            let mut body = json!({"draft": read_json(&draft_file, "the draft")?});
            if let Some(v) = expected_version {
                body["expected_version"] = json!(v);
            }
            p.line(out, &c.post(&format!("/v1/agents/{id}"), &body).await?, line)
        }
        AgentsAction::Publish { agent, idempotency_key } => {
            let id = resolve::id(&c, AGENT, &agent, None).await?;
            p.line(out, &c.create(&format!("/v1/agents/{id}/versions"), &json!({}), idempotency_key.as_deref()).await?, version_line)
        }
        AgentsAction::Versions { agent } => {
            let id = resolve::id(&c, AGENT, &agent, None).await?;
            p.lines(out, &c.every(&format!("/v1/agents/{id}/versions"), &[]).await?, version_line)
        }
        AgentsAction::Version { agent, version } => {
            let id = resolve::id(&c, AGENT, &agent, None).await?;
            p.detail(out, &c.get(&format!("/v1/agents/{id}/versions/{version}")).await?)
        }
        AgentsAction::Diff { agent, from, to } => {
            let id = resolve::id(&c, AGENT, &agent, None).await?;
            let (a_name, a) = side(&c, &id, &from).await?;
            let (b_name, b) = side(&c, &id, to.as_deref().unwrap_or("draft")).await?;
            if args.json {
                writeln!(out, "{}", serde_json::to_value(json_patch::diff(&a, &b))?)?;
                return Ok(());
            }
            writeln!(out, "--- {agent} {a_name}\n+++ {agent} {b_name}")?;
            let lines = diff_lines(&a, &b);
            if lines.is_empty() {
                writeln!(out, "(no difference)")?;
            }
            for l in lines {
                writeln!(out, "{l}")?;
            }
            Ok(())
        }
        AgentsAction::Archive { agent } => {
            let id = resolve::id(&c, AGENT, &agent, None).await?;
            p.line(out, &c.post(&format!("/v1/agents/{id}/archive"), &json!({})).await?, line)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::diff_lines;
    use serde_json::json;

    #[test]
    fn a_diff_names_each_changed_path_with_both_sides() {
        let a = json!({"instructions": "Be brief.", "tools": [{"type": "builtin", "name": "bash"}], "skills": ["x"]});
        let b = json!({"instructions": "Be terse.", "tools": [{"type": "builtin", "name": "bash"}, {"type": "builtin", "name": "read"}], "skills": []});
        let lines = diff_lines(&a, &b);
        assert!(lines.contains(&r#"~ /instructions: "Be brief." → "Be terse.""#.to_string()), "{lines:?}");
        assert!(lines.contains(&r#"+ /tools/1: {"name":"read","type":"builtin"}"#.to_string()), "{lines:?}");
        assert!(lines.contains(&r#"- /skills/0: "x""#.to_string()), "{lines:?}");
        assert!(diff_lines(&a, &a).is_empty());
    }
}
