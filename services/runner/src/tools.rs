//! Governed tool calls. Every call the model makes is decided by
//! governance's ActionPolicies before anything runs: `allow` runs it in the
//! Session's workspace, `deny` answers with `policy.denied` and the matched
//! rule, and `require_approval` — until ActionApprovals exist — is answered
//! with `policy.denied` saying approval is required. A tool the agent did not
//! declare is refused without asking.

use crate::Runner;
use crate::sandbox::{Limits, Workspace};
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::runner::v1 as pb;
use serde_json::{Value, json};

/// Tool results longer than this many characters become a
/// `result_truncated` envelope with a bounded preview.
pub const MAX_RESULT_CHARS: usize = 100_000;
const PREVIEW_CHARS: usize = 2_000;
const SANDBOX_TOOLS: &[&str] = &["bash", "read", "write", "edit", "glob", "grep"];

/// A tool call and how governance decided it.
pub struct Decided {
    pub call: mg::ToolUse,
    pub input: Value,
    pub declaration: Option<Value>,
    /// `allow`, `require_approval` or `deny`.
    pub disposition: String,
    pub matched_rule_id: Option<String>,
    pub reason: String,
}

/// The `content` of an `agent.tool_result`: the text, or an envelope when
/// it is too long.
pub fn result_content(text: String) -> Value {
    let chars = text.chars().count();
    if chars <= MAX_RESULT_CHARS {
        return Value::String(text);
    }
    let preview: String = text.chars().take(PREVIEW_CHARS).collect();
    json!({"type": "result_truncated", "original_chars": chars, "preview": preview})
}

fn declaration<'a>(tools: &'a [Value], name: &str) -> Option<&'a Value> {
    tools.iter().find(|d| match d.get("type").and_then(Value::as_str) {
        Some("tool_source") => d.get("tools").and_then(Value::as_array).is_some_and(|t| t.iter().any(|n| n == name)),
        _ => d.get("name").and_then(Value::as_str) == Some(name),
    })
}

impl Runner {
    /// Asks governance about each call.
    pub(crate) async fn decide(&self, work: &pb::WorkItem, calls: Vec<mg::ToolUse>) -> Result<Vec<Decided>, tonic::Status> {
        let tools: Vec<Value> = serde_json::from_str(&work.tools_json).unwrap_or_default();
        let pins: Value = serde_json::from_str(&work.execution_pins_json).unwrap_or(Value::Null);
        let agent_id = pins.get("agent_id").and_then(Value::as_str).unwrap_or_default().to_string();
        let mut out = Vec::with_capacity(calls.len());
        for call in calls {
            let input: Value = serde_json::from_str(&call.input_json).unwrap_or(json!({}));
            let Some(decl) = declaration(&tools, &call.name).cloned() else {
                out.push(Decided {
                    reason: format!("{:?} is not a tool this agent declares", call.name),
                    call,
                    input,
                    declaration: None,
                    disposition: "deny".into(),
                    matched_rule_id: None,
                });
                continue;
            };
            let req = gov::EvaluateActionRequest {
                environment_id: work.environment_id.clone(),
                subject: Some(gov::ResourceRef { kind: "principal".into(), id: work.principal_id.clone() }),
                resource: Some(gov::ResourceRef { kind: "tool".into(), id: call.name.clone() }),
                permission: "invoke".into(),
                tool_json: decl.to_string(),
                also: vec![
                    gov::ResourceRef { kind: "agent_definition".into(), id: agent_id.clone() },
                    gov::ResourceRef { kind: "session".into(), id: work.session_id.clone() },
                ],
            };
            let d = self.governance.clone().evaluate_action(req).await?.into_inner();
            out.push(Decided {
                call,
                input,
                declaration: Some(decl),
                disposition: d.disposition,
                matched_rule_id: d.matched_rule_ids.into_iter().next(),
                reason: d.reason,
            });
        }
        Ok(out)
    }

    /// Runs an allowed call; the text and whether it failed.
    pub(crate) async fn execute_tool(&self, session_id: &str, d: &Decided) -> (String, bool) {
        let kind = d.declaration.as_ref().and_then(|x| x.get("type")).and_then(Value::as_str).unwrap_or_default();
        if kind == "builtin" && SANDBOX_TOOLS.contains(&d.call.name.as_str()) {
            let ws = match Workspace::open(&self.cfg.workspaces.join(session_id), self.isolation, Limits::default()) {
                Ok(ws) => ws,
                Err(e) => return (format!("the session workspace is unavailable: {e}"), true),
            };
            let out = ws.run(&d.call.name, &d.input).await;
            return (out.content, out.is_error);
        }
        let what = match kind {
            "custom" => "custom (host-side) tools",
            "tool_source" => "MCP tool sources",
            _ => "web_fetch",
        };
        (format!("{what} are not available on this execution plane yet"), true)
    }

    /// Whether the call is an allowed custom (host-side) tool: the host runs
    /// it, so the Session waits for its result.
    pub(crate) fn is_host_side(d: &Decided) -> bool {
        d.disposition == "allow" && d.declaration.as_ref().and_then(|x| x.get("type")).and_then(Value::as_str) == Some("custom")
    }

    /// The events a decided call produces before it runs.
    pub(crate) fn call_events(d: &Decided) -> Vec<(&'static str, String)> {
        if Self::is_host_side(d) {
            let payload =
                json!({"custom_tool_use_id": d.call.id, "name": d.call.name, "input": d.input, "evaluated_permission": d.disposition});
            return vec![("agent.custom_tool_use", payload.to_string())];
        }
        let mut ev = vec![(
            "agent.tool_use",
            json!({"tool_use_id": d.call.id, "name": d.call.name, "input": d.input, "evaluated_permission": d.disposition}).to_string(),
        )];
        if d.disposition == "allow" {
            ev.push(("run.action_authorized", json!({"tool_use_id": d.call.id}).to_string()));
        }
        ev
    }

    /// The event that answers a call: its result, or the refusal.
    pub(crate) async fn answer(&self, session_id: &str, d: &Decided) -> (&'static str, String) {
        match d.disposition.as_str() {
            "allow" => {
                let (text, is_error) = self.execute_tool(session_id, d).await;
                ("agent.tool_result", json!({"tool_use_id": d.call.id, "content": result_content(text), "is_error": is_error}).to_string())
            }
            "require_approval" => (
                "policy.denied",
                json!({"tool_use_id": d.call.id, "matched_rule_id": d.matched_rule_id,
                    "guidance": format!("this call requires approval ({}); approvals are not available on this installation yet, so it was not run", d.reason)})
                .to_string(),
            ),
            _ => ("policy.denied", json!({"tool_use_id": d.call.id, "matched_rule_id": d.matched_rule_id, "guidance": format!("denied: {}", d.reason)}).to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_become_a_bounded_envelope() {
        assert_eq!(result_content("short".into()), json!("short"));
        let v = result_content("é".repeat(MAX_RESULT_CHARS + 1));
        assert_eq!(v["type"], "result_truncated");
        assert_eq!(v["original_chars"], MAX_RESULT_CHARS + 1);
        assert_eq!(v["preview"].as_str().map(|p| p.chars().count()), Some(PREVIEW_CHARS));
    }

    #[test]
    fn declarations_are_found_by_name() {
        let tools = vec![
            json!({"type": "builtin", "name": "read"}),
            json!({"type": "tool_source", "tool_source_id": "tsrc_1", "tools": ["search"]}),
        ];
        assert!(declaration(&tools, "read").is_some());
        assert!(declaration(&tools, "search").is_some());
        assert!(declaration(&tools, "bash").is_none());
    }
}
