//! Explanations printed under events a person cannot act on from the
//! event alone. Today: a tool call refused because the agent's published
//! version does not declare the tool (`policy.denied` with `reason:
//! tool_not_declared`) — what the version does declare, and the commands
//! that would change it.

use crate::client::Client;
use checkfu_core::tools::BUILTIN as BUILTINS;
use serde_json::Value;
use std::collections::HashMap;

/// What the explanations need, gathered from the events as they print.
#[derive(Default)]
pub struct Explainer {
    /// Tool names by tool use id.
    uses: HashMap<String, String>,
    /// The agent and version of the newest Run (`run.created`'s pins).
    pins: Option<(String, i64)>,
    /// Agent names and declared tools, by `(agent id, version)`.
    versions: HashMap<(String, i64), (String, Vec<String>)>,
}

impl Explainer {
    /// Lines to print under `e` (none for most events). Never fails: an
    /// explanation that cannot be read is left out.
    pub async fn explain(&mut self, c: &Client, session_id: &str, e: &Value) -> Vec<String> {
        let p = &e["payload"];
        match e["type"].as_str().unwrap_or_default() {
            "agent.tool_use" => {
                if let (Some(id), Some(name)) = (p["tool_use_id"].as_str(), p["name"].as_str()) {
                    self.uses.insert(id.to_string(), name.to_string());
                }
                vec![]
            }
            "run.created" => {
                let pins = &p["execution_pins"];
                if let (Some(agent), Some(version)) = (pins["agent_id"].as_str(), pins["agent_version"].as_i64()) {
                    self.pins = Some((agent.to_string(), version));
                }
                vec![]
            }
            "policy.denied" if p["reason"] == "tool_not_declared" => {
                let tool = p["tool_use_id"].as_str().and_then(|id| self.uses.get(id)).cloned().unwrap_or_else(|| "that tool".into());
                self.undeclared(c, session_id, &tool).await
            }
            _ => vec![],
        }
    }

    async fn undeclared(&mut self, c: &Client, session_id: &str, tool: &str) -> Vec<String> {
        let Some((agent_id, version)) = self.pins.clone() else { return vec![] };
        let key = (agent_id.clone(), version);
        if let std::collections::hash_map::Entry::Vacant(slot) = self.versions.entry(key.clone()) {
            let Ok(v) = c.get(&format!("/v1/agents/{agent_id}/versions/{version}")).await else { return vec![] };
            let name = match c.get(&format!("/v1/agents/{agent_id}")).await {
                Ok(a) => a["name"].as_str().unwrap_or(&agent_id).to_string(),
                Err(_) => agent_id.clone(),
            };
            slot.insert((name, declared(&v["definition"])));
        }
        let Some((name, tools)) = self.versions.get(&key) else { return vec![] };
        let has = if tools.is_empty() { "declares no tools".to_string() } else { format!("declares {}", tools.join(", ")) };
        let deployment = match c.get(&format!("/v1/sessions/{session_id}")).await {
            Ok(s) => s["agent_deployment_id"].as_str().unwrap_or("<deployment>").to_string(),
            Err(_) => "<deployment>".into(),
        };
        let declaration = if BUILTINS.contains(&tool) {
            format!(r#"{{"type":"builtin","name":"{tool}"}}"#)
        } else {
            format!("a declaration of {tool:?} (a custom tool, or a ToolSource's)")
        };
        vec![
            format!(
                "why: agent {name:?} version {version} {has}; a tool its published version does not declare never runs, whatever the policies say."
            ),
            format!("fix: add {declaration} to the draft's tools, publish, and pin the new version:"),
            format!("       checkfu agents draft {name} > draft.json   # edit \"tools\""),
            format!("       checkfu agents edit {name} --draft-file draft.json && checkfu agents publish {name}"),
            format!("       checkfu deployments revise {deployment} --agent-version latest"),
        ]
    }
}

/// The tool names a version's definition declares (a ToolSource's tools
/// by their names).
pub fn declared(definition: &Value) -> Vec<String> {
    let mut out = vec![];
    for d in definition["tools"].as_array().into_iter().flatten() {
        match d["type"].as_str() {
            Some("tool_source") => out.extend(d["tools"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string)),
            _ => out.extend(d["name"].as_str().map(str::to_string)),
        }
    }
    out
}
