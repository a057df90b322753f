//! The event mapping table of api.md §17.8: native events as a CMA client
//! reads them, and CMA input events as native inputs.
//!
//! CMA names a tool call by the id of the event that made it, where the
//! native log names it by the model's `tool_use_id`; a [`Mapper`] reads
//! the log in order and remembers which event made each call, so results,
//! confirmations and approvals answered elsewhere point at it.

use super::wire::{CmaResult, refuse};
use checkfu_core::Error;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};

/// CMA event types a client may send (others → 400).
const SENDABLE: &[&str] = &["user.message", "user.interrupt", "user.tool_confirmation", "user.custom_tool_result", "user.define_outcome"];

/// Native types never shown to a CMA client (§17.8).
pub fn hidden(t: &str) -> bool {
    t == "session.created"
        || t.starts_with("run.")
        || t == "action_approval.pending"
        || t.starts_with("memory.")
        || t == "egress.denied"
        // CMA has no delivery screen: a withheld message is simply absent.
        || t == "message.screened"
}

/// A CMA input event → a native input authored by (and caused by) the
/// caller. Tool use ids are CMA's (event ids); `uses` maps them to the
/// native call and its thread (see [`uses_of`]).
pub fn native_input(principal_id: &str, e: &Value, uses: &HashMap<String, (String, Option<String>)>) -> CmaResult<Value> {
    let t = e["type"].as_str().unwrap_or_default();
    if t == "system.message" {
        return Err(refuse("model_does_not_support_mid_conversation_system", "system messages cannot be sent mid-conversation"));
    }
    if !SENDABLE.contains(&t) {
        return Err(Error::invalid_field("type", format!("unknown event type {t:?}; accepted: {}", SENDABLE.join(", "))).into());
    }
    let mut payload = e.as_object().cloned().unwrap_or_default();
    payload.remove("type");
    match t {
        "user.message" => {
            for b in payload.get("content").and_then(Value::as_array).into_iter().flatten() {
                if matches!(b["type"].as_str(), Some("image" | "document")) && b["source"]["type"] != "file" {
                    return Err(refuse("source_unsupported", "image and document blocks take source {type:\"file\", file_id}"));
                }
            }
        }
        "user.tool_confirmation" | "user.custom_tool_result" => {
            let key = if t == "user.tool_confirmation" { "tool_use_id" } else { "custom_tool_use_id" };
            let id = payload.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
            let (native_id, thread) = uses.get(&id).cloned().ok_or_else(|| {
                Error::invalid_field(key, format!("{id:?} is not a tool use of this session")).with_reason("no_such_wait")
            })?;
            payload.insert(key.into(), json!(native_id));
            if let Some(th) = thread
                && !payload.contains_key("session_thread_id")
            {
                payload.insert("session_thread_id".into(), json!(th));
            }
            if t == "user.custom_tool_result" {
                payload.remove("is_error");
            }
        }
        "user.define_outcome" => {
            // A text rubric is the native one; a File's text was read in
            // by the caller (`events::read_rubric`).
            let rubric = match payload.get("rubric") {
                Some(Value::Object(r)) if r.get("type").and_then(Value::as_str) == Some("text") => {
                    r.get("content").cloned().unwrap_or_default()
                }
                Some(Value::String(s)) => json!(s),
                _ => return Err(Error::invalid_field("rubric", "rubric is {type:\"text\", content} or {type:\"file\", file_id}").into()),
            };
            payload.insert("rubric".into(), rubric);
            if payload.get("max_iterations").is_none_or(Value::is_null) {
                payload.insert("max_iterations".into(), json!(3));
            }
        }
        _ => {}
    }
    Ok(json!({"type": t, "payload": Value::Object(payload), "authored_by": principal_id,
        "caused_by": {"kind": "principal", "id": principal_id}}))
}

/// Every tool use in a log: its event id → (native `tool_use_id`, thread).
pub fn uses_of(events: &[Value]) -> HashMap<String, (String, Option<String>)> {
    let mut out = HashMap::new();
    for e in events {
        let p = &e["payload"];
        let native = match e["type"].as_str() {
            Some("agent.tool_use") => p["tool_use_id"].as_str(),
            Some("agent.custom_tool_use") => p["custom_tool_use_id"].as_str(),
            _ => None,
        };
        let Some(n) = native else { continue };
        let thread = e["session_thread_id"].as_str().map(String::from);
        // A cross-post answers for the child's own event too.
        for id in [e["id"].as_str(), e["origin_event_id"].as_str()].into_iter().flatten() {
            out.insert(id.to_string(), (n.to_string(), thread.clone()));
        }
    }
    out
}

/// Reads a log in order and shows each event as CMA does.
#[derive(Default, Clone)]
pub struct Mapper {
    /// Each thread's open model request: its start event's id.
    starts: HashMap<String, Value>,
    /// (thread, native tool use id) → the event that made the call, and
    /// whether it was an MCP call.
    uses: HashMap<(String, String), (Value, bool)>,
    /// (thread, native id) → the `agent.custom_tool_use` event.
    custom_uses: HashMap<(String, String), Value>,
    /// Calls whose confirmation was shown — the client's echo, or their
    /// approval's resolution — so each call shows one.
    confirmed: HashSet<(String, String)>,
    /// The ids of the rules the projection compiled for the Session's
    /// agent (`cma:<agt>`): their decisions are `always_allow`/`always_ask`.
    agent_rules: Vec<String>,
    /// ToolSource id → name, for `mcp_server_name`.
    tool_sources: HashMap<String, String>,
    /// (outcome, iteration) → its evaluation's start event.
    evaluations: HashMap<(String, i64), Value>,
}

impl Mapper {
    pub fn new(agent_rules: Vec<String>, tool_sources: HashMap<String, String>) -> Self {
        Mapper { agent_rules, tool_sources, ..Default::default() }
    }

    /// Takes `fresh`'s facts (the agent's rules now, the ToolSources'
    /// names) for the events still to map, keeping what was read so far.
    pub fn refresh(&mut self, fresh: Mapper) {
        self.agent_rules = fresh.agent_rules;
        self.tool_sources = fresh.tool_sources;
    }

    /// A native event as CMA shows it; `None` for what CMA leaves out.
    pub fn map(&mut self, e: &Value) -> Option<Value> {
        let t = e["type"].as_str().unwrap_or_default();
        let thread = e["session_thread_id"].as_str().unwrap_or_default().to_string();
        let p = e["payload"].as_object().cloned().unwrap_or_default();
        let native_use = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let (kind, body) = match t {
            _ if t == "action_approval.resolved" => {
                let key = (thread.clone(), native_use("tool_use_id"));
                // One confirmation per call, whichever the log holds first:
                // the client's echo usually, but when governance's outcome
                // reached the Session before the echo (a sweeper raced the
                // confirming call), this resolution, and the echo is hidden.
                if !self.confirmed.insert(key.clone()) {
                    return None;
                }
                // Answered outside the Session (the native inbox, or expiry).
                let result = if p.get("status").and_then(Value::as_str) == Some("approved") { "allow" } else { "deny" };
                ("user.tool_confirmation".to_string(), json!({"tool_use_id": self.use_id(&key), "result": result}))
            }
            _ if hidden(t) => return None,
            "span.model_request_start" => {
                self.starts.insert(thread.clone(), e["id"].clone());
                (t.to_string(), Value::Object(p))
            }
            "span.model_request_end" => {
                let mut b = p;
                b.insert("model_request_start_id".into(), self.starts.remove(&thread).unwrap_or(Value::Null));
                (t.to_string(), Value::Object(b))
            }
            "agent.tool_use" => {
                let key = (thread.clone(), native_use("tool_use_id"));
                let source = p.get("tool_source_id").and_then(Value::as_str).map(String::from);
                self.uses.entry(key).or_insert((e["id"].clone(), source.is_some()));
                let (perm, evaluation) = self.evaluation(&p);
                let mut b = json!({"name": p.get("name"), "input": p.get("input"), "evaluated_permission": perm, "evaluation": evaluation});
                match source {
                    Some(s) => {
                        b["mcp_server_name"] = json!(self.tool_sources.get(&s).cloned().unwrap_or(s));
                        ("agent.mcp_tool_use".to_string(), b)
                    }
                    None => (t.to_string(), b),
                }
            }
            "agent.custom_tool_use" => {
                let key = (thread.clone(), native_use("custom_tool_use_id"));
                self.custom_uses.entry(key).or_insert(e["id"].clone());
                (t.to_string(), json!({"name": p.get("name"), "input": p.get("input")}))
            }
            "agent.tool_result" | "policy.denied" => {
                let key = (thread.clone(), native_use("tool_use_id"));
                let (content, is_error) = if t == "policy.denied" {
                    (blocks(p.get("guidance").unwrap_or(&Value::Null)), true)
                } else {
                    (blocks(p.get("content").unwrap_or(&Value::Null)), p.get("is_error").and_then(Value::as_bool).unwrap_or(false))
                };
                let mcp = self.uses.get(&key).is_some_and(|(_, m)| *m);
                let id = self.use_id(&key);
                if mcp {
                    ("agent.mcp_tool_result".to_string(), json!({"mcp_tool_use_id": id, "content": content, "is_error": is_error}))
                } else {
                    (t.replace("policy.denied", "agent.tool_result"), json!({"tool_use_id": id, "content": content, "is_error": is_error}))
                }
            }
            "user.tool_result" => {
                let key = (thread.clone(), native_use("tool_use_id"));
                let id = self.use_id(&key);
                let is_error = p.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                (
                    t.to_string(),
                    json!({"tool_use_id": id, "content": blocks(p.get("content").unwrap_or(&Value::Null)), "is_error": is_error}),
                )
            }
            "user.tool_confirmation" => {
                let key = (thread.clone(), native_use("tool_use_id"));
                let id = self.use_id(&key);
                if !self.confirmed.insert(key) {
                    return None;
                }
                let mut b = p;
                b.insert("tool_use_id".into(), id);
                (t.to_string(), Value::Object(b))
            }
            "user.custom_tool_result" => {
                let key = (thread.clone(), native_use("custom_tool_use_id"));
                let mut b = p;
                b.insert("custom_tool_use_id".into(), self.custom_uses.get(&key).cloned().unwrap_or(json!(key.1)));
                (t.to_string(), Value::Object(b))
            }
            "session.status_idle" => {
                let mut b = p;
                if let Some(r) = b.get_mut("stop_reason").and_then(Value::as_object_mut) {
                    // Native tool use ids mean nothing to a CMA client.
                    r.remove("waiting_on");
                    r.remove("approvals");
                }
                (t.to_string(), Value::Object(b))
            }
            "session.error" => {
                let mut b = p;
                if let Some(err) = b.get_mut("error").and_then(Value::as_object_mut) {
                    let kind = err.get("type").and_then(Value::as_str).unwrap_or_default();
                    let mapped = if matches!(kind, "model_overloaded" | "model_rate_limited" | "model_request_failed") {
                        kind.to_string()
                    } else {
                        "unknown_error".into()
                    };
                    let retry = match err.get("retry_status") {
                        Some(Value::String(s)) => json!({"type": s}),
                        Some(v @ Value::Object(_)) => v.clone(),
                        _ => json!({"type": "exhausted"}),
                    };
                    err.insert("type".into(), json!(mapped));
                    err.insert("retry_status".into(), retry);
                }
                (t.to_string(), Value::Object(b))
            }
            "outcome.evaluation_started" => {
                let key = (native_use("outcome_id"), p.get("iteration").and_then(Value::as_i64).unwrap_or(0));
                self.evaluations.insert(key, e["id"].clone());
                ("span.outcome_evaluation_start".to_string(), json!({"outcome_id": p.get("outcome_id"), "iteration": p.get("iteration")}))
            }
            "outcome.evaluation_completed" => {
                let key = (native_use("outcome_id"), p.get("iteration").and_then(Value::as_i64).unwrap_or(0));
                let start = self.evaluations.remove(&key).unwrap_or(Value::Null);
                let b = json!({"outcome_evaluation_start_id": start, "outcome_id": p.get("outcome_id"), "iteration": p.get("iteration"),
                    "result": p.get("result"), "explanation": p.get("explanation").cloned().unwrap_or(json!("")), "usage": p.get("usage")});
                ("span.outcome_evaluation_end".to_string(), b)
            }
            "user.define_outcome" => {
                let mut b = p;
                if let Some(Value::String(r)) = b.get("rubric").cloned() {
                    b.insert("rubric".into(), json!({"type": "text", "content": r}));
                }
                (t.to_string(), Value::Object(b))
            }
            _ => (t.to_string(), Value::Object(p)),
        };
        let mut out = Map::new();
        out.insert("id".into(), e["id"].clone());
        out.insert("type".into(), json!(kind));
        out.insert("processed_at".into(), e["created_at"].clone());
        if let Value::Object(b) = body {
            out.extend(b);
        }
        out.insert("session_thread_id".into(), e["session_thread_id"].clone());
        Some(Value::Object(out))
    }

    /// The CMA id of a call: the event that made it (its native id when the
    /// log read so far holds no such event).
    fn use_id(&self, key: &(String, String)) -> Value {
        self.uses.get(key).map(|(id, _)| id.clone()).unwrap_or(json!(key.1))
    }

    /// `evaluated_permission` and `evaluation` of a call: the agent's own
    /// rule (compiled from its permission policy), or `auto` — Checkfu's
    /// defaults or an Environment rule.
    fn evaluation(&self, p: &Map<String, Value>) -> (&'static str, Value) {
        let perm = match p.get("evaluated_permission").and_then(Value::as_str) {
            Some("allow") => "allow",
            Some("deny") => "deny",
            _ => "ask",
        };
        let rule = p.get("matched_rule_id").and_then(Value::as_str);
        match rule {
            Some(r) if self.agent_rules.iter().any(|a| a == r) && perm != "deny" => {
                (perm, json!({"type": if perm == "allow" { "always_allow" } else { "always_ask" }}))
            }
            _ => {
                let reason = if rule.is_some() { "environment_policy" } else { "default_policy" };
                (perm, json!({"type": "auto", "evaluated_permission": {"type": perm, "reason_code": reason}}))
            }
        }
    }
}

/// A tool result's content as CMA blocks: text stays text, anything else
/// is shown as its JSON.
fn blocks(v: &Value) -> Value {
    match v {
        Value::String(s) => json!([{"type": "text", "text": s}]),
        Value::Array(a) if a.iter().all(|b| b.get("type").is_some()) => v.clone(),
        Value::Null => json!([]),
        other => json!([{"type": "text", "text": other.to_string()}]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native(seq: i64, t: &str, payload: Value) -> Value {
        json!({"id": format!("evt_{seq}"), "seq": seq, "type": t, "created_at": "2026-12-02T00:00:00.000Z", "session_thread_id": null,
            "run_id": "run_1", "authored_by": null, "caused_by": {"kind": "run", "id": "run_1"}, "payload": payload})
    }

    #[test]
    fn the_log_reads_through_the_mapping_table() {
        let mut m = Mapper::default();
        assert!(m.map(&native(1, "session.created", json!({}))).is_none());
        assert!(m.map(&native(2, "run.created", json!({}))).is_none());
        let start = m.map(&native(3, "span.model_request_start", json!({"model": "m"}))).expect("shown");
        let msg = m.map(&native(4, "agent.message", json!({"content": [{"type": "text", "text": "hi"}]}))).expect("shown");
        let end = m.map(&native(5, "span.model_request_end", json!({"model_usage": {}}))).expect("shown");
        assert_eq!(end["model_request_start_id"], start["id"]);
        assert_eq!(msg["content"][0]["text"], "hi");
        assert_eq!(msg["processed_at"], "2026-12-02T00:00:00.000Z");
        for k in ["seq", "run_id", "authored_by", "caused_by", "payload"] {
            assert!(msg.get(k).is_none(), "{k} is left out");
        }
    }

    #[test]
    fn outcome_evaluations_are_spans() {
        let mut m = Mapper::default();
        let start = m.map(&native(1, "outcome.evaluation_started", json!({"outcome_id": "outc_1", "iteration": 1}))).expect("shown");
        assert_eq!(start["type"], "span.outcome_evaluation_start");
        let done = json!({"outcome_id": "outc_1", "iteration": 1, "result": "satisfied", "explanation": "ok", "usage": {}});
        let end = m.map(&native(2, "outcome.evaluation_completed", done)).expect("shown");
        assert_eq!((end["type"].as_str(), end["result"].as_str()), (Some("span.outcome_evaluation_end"), Some("satisfied")));
        assert_eq!(end["outcome_evaluation_start_id"], start["id"]);
        let input = json!({"type": "user.define_outcome", "description": "d", "rubric": {"type": "text", "content": "require: hello"}});
        let n = native_input("prin_1", &input, &HashMap::new()).expect("ok");
        assert_eq!((n["payload"]["rubric"].as_str(), n["payload"]["max_iterations"].as_i64()), (Some("require: hello"), Some(3)));
    }

    #[test]
    fn calls_are_named_by_the_event_that_made_them() {
        let mut m = Mapper::new(vec!["rule_agent".into()], HashMap::new());
        let ask = json!({"tool_use_id": "toolu_1", "name": "bash", "input": {}, "evaluated_permission": "require_approval", "matched_rule_id": null});
        let u = m.map(&native(1, "agent.tool_use", ask)).expect("shown");
        assert_eq!((u["evaluated_permission"].as_str(), u["evaluation"]["type"].as_str()), (Some("ask"), Some("auto")));
        assert!(m.map(&native(2, "action_approval.pending", json!({}))).is_none());
        let c = m.map(&native(3, "user.tool_confirmation", json!({"tool_use_id": "toolu_1", "result": "allow"}))).expect("echo");
        assert_eq!(c["tool_use_id"], "evt_1");
        assert!(
            m.map(&native(4, "action_approval.resolved", json!({"tool_use_id": "toolu_1", "status": "approved"}))).is_none(),
            "answered in the Session: shown once"
        );
        let r = m.map(&native(5, "agent.tool_result", json!({"tool_use_id": "toolu_1", "content": "hi\n", "is_error": false}))).expect("r");
        // Governance's outcome recorded before the client's echo: still one.
        let ask3 = json!({"tool_use_id": "toolu_3", "name": "bash", "input": {}, "evaluated_permission": "require_approval", "matched_rule_id": null});
        m.map(&native(7, "agent.tool_use", ask3)).expect("shown");
        let first = m.map(&native(8, "action_approval.resolved", json!({"tool_use_id": "toolu_3", "status": "approved"}))).expect("shown");
        assert_eq!((first["type"].as_str(), first["result"].as_str()), (Some("user.tool_confirmation"), Some("allow")));
        assert!(
            m.map(&native(9, "user.tool_confirmation", json!({"tool_use_id": "toolu_3", "result": "allow"}))).is_none(),
            "the echo after its resolution: shown once"
        );
        assert_eq!((r["tool_use_id"].as_str(), r["content"][0]["text"].as_str()), (Some("evt_1"), Some("hi\n")));
        let allowed = json!({"tool_use_id": "toolu_2", "name": "bash", "input": {}, "evaluated_permission": "allow", "matched_rule_id": "rule_agent"});
        assert_eq!(m.map(&native(6, "agent.tool_use", allowed)).expect("shown")["evaluation"], json!({"type": "always_allow"}));
    }

    #[test]
    fn approvals_answered_elsewhere_are_confirmations_and_denials_error_results() {
        let mut m = Mapper::default();
        m.map(&native(
            1,
            "agent.tool_use",
            json!({"tool_use_id": "t", "name": "bash", "input": {}, "evaluated_permission": "require_approval"}),
        ));
        let c = m.map(&native(2, "action_approval.resolved", json!({"tool_use_id": "t", "status": "denied"}))).expect("shown");
        assert_eq!(
            (c["type"].as_str(), c["tool_use_id"].as_str(), c["result"].as_str()),
            (Some("user.tool_confirmation"), Some("evt_1"), Some("deny"))
        );
        assert!(m.map(&native(3, "action_approval.resolved", json!({"tool_use_id": "t", "status": "denied"}))).is_none(), "once");
        m.map(&native(
            4,
            "agent.tool_use",
            json!({"tool_use_id": "t2", "name": "bash", "input": {}, "evaluated_permission": "require_approval"}),
        ));
        let expired = m.map(&native(5, "action_approval.resolved", json!({"tool_use_id": "t2", "status": "expired"}))).expect("shown");
        assert_eq!(expired["result"], "deny", "expiry is a deny");
        let d = m.map(&native(6, "policy.denied", json!({"tool_use_id": "t", "guidance": "denied: no"}))).expect("shown");
        assert_eq!(
            (d["type"].as_str(), d["is_error"].as_bool(), d["content"][0]["text"].as_str()),
            (Some("agent.tool_result"), Some(true), Some("denied: no"))
        );
    }

    #[test]
    fn inputs_are_authored_by_the_caller_and_name_native_calls() {
        let uses = uses_of(&[native(7, "agent.custom_tool_use", json!({"custom_tool_use_id": "toolu_9"}))]);
        let e = native_input("prin_1", &json!({"type": "user.custom_tool_result", "custom_tool_use_id": "evt_7", "content": []}), &uses)
            .expect("ok");
        assert_eq!((e["authored_by"].as_str(), e["payload"]["custom_tool_use_id"].as_str()), (Some("prin_1"), Some("toolu_9")));
        let refused = native_input("prin_1", &json!({"type": "system.message"}), &uses).expect_err("refused");
        assert_eq!(refused.0.details["reason"], "model_does_not_support_mid_conversation_system");
        assert!(native_input("prin_1", &json!({"type": "session.created"}), &uses).is_err());
        assert!(
            native_input("prin_1", &json!({"type": "user.tool_confirmation", "tool_use_id": "evt_x", "result": "allow"}), &uses).is_err()
        );
    }
}
