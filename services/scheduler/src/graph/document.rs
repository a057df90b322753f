//! An AutomationGraph document (api.md §12.7): `{name, environment_id,
//! service_principal_id, nodes, edges}`, node fields in camelCase. Saving
//! checks only this outline ([`Document::outline`]); planning reads the
//! rest ([`Node::parse`]) and reports every problem with its code.

use super::checks::{Check, Rule, unknown_field};
use super::node_parts::fields;
pub use super::node_parts::{Binding, NodeError};
use crate::predicates::{self, Predicate};
use crate::triggers::Trigger;
use checkfu_core::{Error, Result};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A plan rejects a document past these.
pub const MAX_NODES: usize = 100;
pub const MAX_EDGES: usize = 400;
/// Node and edge ids, titles: bounded so a document stays small.
const MAX_ID: usize = 128;

/// The outline every saved document has.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub name: String,
    pub environment_id: String,
    pub service_principal_id: String,
    /// Each `{kind, id, ...}` as written.
    pub nodes: Vec<Map<String, Value>>,
    pub edges: Vec<Edge>,
    /// The document as written.
    pub raw: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    pub kind: String,
    pub from: String,
    /// `None`: the edge finishes the program (a Decision arm).
    pub to: Option<String>,
}

impl Edge {
    pub fn to_json(&self, index: usize) -> Value {
        serde_json::json!({"index": index, "kind": self.kind, "from": self.from, "to": self.to})
    }

    /// Starts, then and the Decision arms decide what runs; `output` only
    /// carries data.
    pub fn is_control(&self) -> bool {
        matches!(self.kind.as_str(), "starts" | "then" | "continue" | "otherwise" | "uncertain" | "error")
    }
}

fn outline_error(why: impl Into<String>) -> Error {
    Error::invalid_field("document", why).with_reason("document_invalid")
}

fn text(o: &Map<String, Value>, field: &str, what: &str) -> Result<String> {
    o.get(field).and_then(Value::as_str).map(String::from).ok_or_else(|| outline_error(format!("{what}.{field} is a string")))
}

impl Document {
    /// Checks the outline only: the five fields, nodes as objects with a
    /// string `kind` and `id`, edges as `{kind, from, to}`.
    pub fn outline(v: &Value) -> Result<Document> {
        let Some(o) = v.as_object() else { return Err(outline_error("a document is an object")) };
        if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "name" | "environment_id" | "service_principal_id" | "nodes" | "edges")) {
            return Err(outline_error(format!("a document has no field {k:?}")));
        }
        let name = text(o, "name", "document")?;
        crate::model::check_name(&name).map_err(|e| outline_error(e.message))?;
        let environment_id = text(o, "environment_id", "document")?;
        let service_principal_id = text(o, "service_principal_id", "document")?;
        let Some(nodes) = o.get("nodes").and_then(Value::as_array) else { return Err(outline_error("document.nodes is a list")) };
        let Some(edges) = o.get("edges").and_then(Value::as_array) else { return Err(outline_error("document.edges is a list")) };
        let mut out_nodes = Vec::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            let Some(n) = n.as_object() else { return Err(outline_error(format!("nodes[{i}] is an object"))) };
            let id = text(n, "id", &format!("nodes[{i}]"))?;
            text(n, "kind", &format!("nodes[{i}]"))?;
            if id.is_empty() || id.len() > MAX_ID {
                return Err(outline_error(format!("nodes[{i}].id is 1 to {MAX_ID} characters")));
            }
            out_nodes.push(n.clone());
        }
        let mut out_edges = Vec::with_capacity(edges.len());
        for (i, e) in edges.iter().enumerate() {
            let Some(e) = e.as_object() else { return Err(outline_error(format!("edges[{i}] is an object"))) };
            if let Some(k) = e.keys().find(|k| !matches!(k.as_str(), "kind" | "from" | "to")) {
                return Err(outline_error(format!("edges[{i}] has no field {k:?}")));
            }
            let to = match e.get("to") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                _ => return Err(outline_error(format!("edges[{i}].to is a node id or null"))),
            };
            out_edges.push(Edge { kind: text(e, "kind", &format!("edges[{i}]"))?, from: text(e, "from", &format!("edges[{i}]"))?, to });
        }
        Ok(Document { name, environment_id, service_principal_id, nodes: out_nodes, edges: out_edges, raw: v.clone() })
    }

    /// The canonical digest: compact JSON with sorted keys, so the same
    /// document written in another key order is the same revision.
    pub fn sha256(&self) -> String {
        checkfu_core::sha256_hex(self.raw.to_string())
    }
}

/// A `forEach`'s most items, and children unsettled at once (§18.5).
pub const MAX_ITEMS: i64 = 100;
pub const MAX_CONCURRENCY: i64 = 16;

/// Checks a document's `forEach` (`invalid_for_each`).
fn check_for_each(v: &Value) -> std::result::Result<(), String> {
    let o = v.as_object().ok_or("forEach is {items, maxItems, concurrency}")?;
    if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "items" | "maxItems" | "concurrency")) {
        return Err(format!("forEach has no field {k:?}"));
    }
    let items = o.get("items").and_then(Value::as_object).ok_or("forEach.items is a binding {sourceNodeId, pointer}")?;
    if !items.get("sourceNodeId").is_some_and(Value::is_string) || !items.get("pointer").is_some_and(Value::is_string) {
        return Err("forEach.items is a binding {sourceNodeId, pointer}".into());
    }
    let in_range = |k: &str, max: i64| o.get(k).and_then(Value::as_i64).is_some_and(|n| (1..=max).contains(&n));
    if !in_range("maxItems", MAX_ITEMS) {
        return Err(format!("forEach.maxItems is an integer from 1 to {MAX_ITEMS}"));
    }
    if !in_range("concurrency", MAX_CONCURRENCY) {
        return Err(format!("forEach.concurrency is an integer from 1 to {MAX_CONCURRENCY}"));
    }
    Ok(())
}

/// A `step_agent`'s fields.
#[derive(Debug, Clone, PartialEq)]
pub struct StepAgent {
    /// A `dep_…`, or an `agt_…` with exactly one deployment in the
    /// Environment.
    pub agent: String,
    pub prompt: String,
    pub include_event: bool,
    pub budget: Option<Value>,
    pub session_target: Option<Value>,
    /// `forEach`'s items binding: one child per item (§18.5).
    pub for_each: Option<Binding>,
    /// `deliveryScreen`: frozen into each child (§18.8).
    pub delivery_screen: Option<crate::model::DeliveryScreen>,
}

/// A `step_connection` as written: a ToolSource (`ts…` or its name), one
/// of its tools, fixed arguments and bindings that replace top-level keys.
#[derive(Debug, Clone, PartialEq)]
pub struct StepConnection {
    pub tool_source: String,
    pub tool: String,
    pub arguments: Map<String, Value>,
    pub bindings: BTreeMap<String, Binding>,
}

/// The most a `step_connection`'s written arguments may be, as JSON.
pub const MAX_ARGUMENTS_BYTES: usize = 64 * 1024;

/// Checks an `outcome` node as §14.1 defines an Outcome (camelCase here):
/// `rubric` ≤ 64 KiB, `maxIterations` 1–20, `criteria` 1–32 of `{name,
/// question, failure:"fail_closed"}` with unique names (`fail_open` is
/// refused, never rewritten), `report` `{extraction:"json", outputs}`.
fn check_outcome(o: &Map<String, Value>) -> std::result::Result<(), String> {
    let rubric = o.get("rubric").and_then(Value::as_str).ok_or("an outcome has a rubric (text)")?;
    if rubric.len() > 64 * 1024 {
        return Err("a rubric is at most 64 KiB".into());
    }
    if !o.get("maxIterations").and_then(Value::as_i64).is_some_and(|n| (1..=20).contains(&n)) {
        return Err("maxIterations is an integer from 1 to 20".into());
    }
    if let Some(c) = o.get("criteria").filter(|c| !c.is_null()) {
        let c = c.as_array().filter(|c| (1..=32).contains(&c.len())).ok_or("criteria are 1 to 32 of {name, question, failure}")?;
        let mut names = std::collections::BTreeSet::new();
        for x in c {
            let name = x["name"]
                .as_str()
                .filter(|n| super::checks::is_question_name(n))
                .ok_or("a criterion's name is lowercase: a letter, then letters, digits or _")?;
            if !names.insert(name) {
                return Err(format!("two criteria are named {name:?}"));
            }
            if !x["question"].is_string() {
                return Err(format!("criterion {name:?} asks a question (text)"));
            }
            if x["failure"] != "fail_closed" {
                return Err(format!("criterion {name:?}: failure is fail_closed (a failed judgment is never taken as a pass)"));
            }
        }
    }
    if let Some(r) = o.get("report").filter(|r| !r.is_null()) {
        let outputs = r["outputs"].as_array().map_or(0, Vec::len);
        if r["extraction"] != "json" || !(1..=32).contains(&outputs) {
            return Err("a report is {extraction:\"json\", outputs:[1 to 32 of {name, type}]}".into());
        }
    }
    Ok(())
}

/// A node, read for planning.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Trigger(Trigger),
    StepAgent(StepAgent),
    ParseJson {
        content: Binding,
        output_schema: Value,
    },
    Decision {
        bindings: BTreeMap<String, Binding>,
        predicates: Vec<Predicate>,
    },
    Approval {
        title: String,
        ttl_seconds: i64,
    },
    Wait {
        duration_seconds: i64,
    },
    /// A Decision on a Check's verdict (§18.1): saved, planned and tested
    /// offline; not executable yet.
    CheckDecision {
        bindings: BTreeMap<String, Binding>,
        check: Check,
    },
    /// A Decision that rules anew on an ancestor Check's saved answers.
    CheckResult {
        source: String,
        rule: Rule,
    },
    /// A step that asks a Check and completes whatever the verdict.
    StepCheck {
        bindings: BTreeMap<String, Binding>,
        check: Check,
    },
    /// Waits for every collected node and gathers their outputs by name.
    Join {
        collect: BTreeMap<String, String>,
    },
    /// Calls one ToolSource tool through its Connection (§18.3).
    Connection(StepConnection),
    /// Reads or writes one document of a MemoryStore (§18.7).
    Memory(super::memory_nodes::MemoryStep),
    /// Selects the Sessions after a frontier (§18.7).
    SelectHistory(super::history_nodes::SelectHistory),
    /// Moves a selection's frontier once its required steps completed.
    RecordHistory(super::history_nodes::RecordHistory),
    /// Proposes a `SKILL.md` learnt from a selection (§18.7).
    SkillProposal(super::skill_nodes::SkillProposalNode),
    /// Reads whether a proposal's skill was adopted.
    ObserveSkill(super::skill_nodes::ObserveNode),
    /// The Outcome the `step_agent` it reviews starts its child with
    /// (§18.2); not a step.
    Outcome,
    /// Saved and planned but not executable yet (§12.9).
    Later(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub id: String,
    pub kind: Kind,
    /// The node as written (what a steps target carries).
    pub raw: Map<String, Value>,
}

fn int_in(o: &Map<String, Value>, field: &str, default: i64, range: std::ops::RangeInclusive<i64>) -> std::result::Result<i64, NodeError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_i64()
            .filter(|n| range.contains(n))
            .ok_or(("document_invalid", format!("{field} is an integer from {} to {}", range.start(), range.end()))),
    }
}

/// A node's `inputBindings`: name to binding.
fn input_bindings(o: &Map<String, Value>) -> std::result::Result<BTreeMap<String, Binding>, NodeError> {
    let mut bindings = BTreeMap::new();
    if let Some(b) = o.get("inputBindings").filter(|b| !b.is_null()) {
        let b = b.as_object().ok_or(("document_invalid", "inputBindings is an object of bindings".to_string()))?;
        for (name, v) in b {
            bindings.insert(name.clone(), Binding::parse(v).map_err(|why| ("document_invalid", why))?);
        }
    }
    Ok(bindings)
}

impl Node {
    /// The Check a node asks, or whose answers it reads anew: its
    /// questions and the rule it decides with.
    pub fn check(&self) -> Option<&Check> {
        match &self.kind {
            Kind::CheckDecision { check, .. } | Kind::StepCheck { check, .. } => Some(check),
            _ => None,
        }
    }

    pub fn parse(o: &Map<String, Value>) -> std::result::Result<Node, NodeError> {
        let id = o.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or_default();
        let bad = |why: String| ("document_invalid", why);
        if let Some(r) = o.get("retry").filter(|r| !r.is_null()) {
            let condition_kind = o.get("condition").and_then(|c| c.get("kind")).and_then(Value::as_str);
            if !super::retry::retryable(kind, condition_kind) {
                return Err((
                    "retry_unsupported",
                    format!(
                        "a {kind} node is not retried: retry is for step_agent, step_connection, step_check, check decisions and Memory steps"
                    ),
                ));
            }
            super::retry::Retry::parse(r).map_err(|why| ("invalid_retry", why))?;
        }
        let kind = match kind {
            "trigger" => {
                fields(o, &["trigger"])?;
                let t = o.get("trigger").ok_or(bad("a trigger node has a trigger".into()))?;
                match Trigger::parse(0, t) {
                    Ok(t) => Kind::Trigger(t),
                    Err(e) => return Err(("invalid_trigger", e.message)),
                }
            }
            "step_agent" => {
                fields(o, &["agent", "prompt", "includeEvent", "budget", "sessionTarget", "forEach", "deliveryScreen"])?;
                let agent = o.get("agent").and_then(Value::as_str).ok_or(bad("a step_agent names its agent (dep_… or agt_…)".into()))?;
                if !(agent.starts_with("dep_") || agent.starts_with("agt_")) {
                    return Err(bad("a step_agent's agent is a dep_… or an agt_…".into()));
                }
                let prompt = o.get("prompt").and_then(Value::as_str).unwrap_or_default();
                if prompt.len() > crate::model::MAX_PROMPT_BYTES {
                    return Err(bad("a prompt is at most 64 KiB".into()));
                }
                let include_event = match o.get("includeEvent") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    _ => return Err(bad("includeEvent is a boolean".into())),
                };
                let budget = o.get("budget").filter(|b| !b.is_null()).cloned();
                if let Some(b) = &budget {
                    let t = serde_json::json!({"kind": "agent", "agent_deployment_id": "dep_00000000000000000000000000", "prompt": "", "budget": b});
                    crate::model::AgentTarget::parse(&t).map_err(|e| bad(e.message))?;
                }
                let session_target = o.get("sessionTarget").filter(|b| !b.is_null()).cloned();
                match session_target.as_ref().map(|t| (t["mode"].as_str(), t["session"].as_str())) {
                    None | Some((Some("start_new"), _)) => {}
                    Some((Some("continue_selected"), Some(s))) if checkfu_core::id::SessionId::check("session", s).is_ok() => {}
                    Some((Some("continue_selected"), _)) => {
                        return Err(bad("a continue_selected sessionTarget names its session (sess_…)".into()));
                    }
                    Some(_) => return Err(bad("sessionTarget.mode is start_new or continue_selected".into())),
                }
                let for_each = match o.get("forEach").filter(|f| !f.is_null()) {
                    None => None,
                    Some(f) => {
                        check_for_each(f).map_err(|why| ("invalid_for_each", why))?;
                        Some(Binding::parse(&f["items"]).map_err(|why| ("invalid_for_each", why))?)
                    }
                };
                let delivery_screen = match o.get("deliveryScreen").filter(|d| !d.is_null()) {
                    None => None,
                    Some(d) => Some(crate::model::graph_screen(d).map_err(bad)?),
                };
                // A continued Session keeps its Budget and how it delivers,
                // and takes one input.
                if session_target.as_ref().is_some_and(|t| t["mode"] == "continue_selected")
                    && (budget.is_some() || for_each.is_some() || delivery_screen.is_some())
                {
                    return Err((
                        "session_target_conflict",
                        "a continue_selected step takes no budget, no forEach and no deliveryScreen".into(),
                    ));
                }
                Kind::StepAgent(StepAgent {
                    agent: agent.to_string(),
                    prompt: prompt.to_string(),
                    include_event,
                    budget,
                    session_target,
                    for_each,
                    delivery_screen,
                })
            }
            "step_parse_json" => {
                fields(o, &["inputBindings", "outputSchema"])?;
                let content = o
                    .get("inputBindings")
                    .and_then(|b| b.get("content"))
                    .ok_or(bad("a step_parse_json binds inputBindings.content".into()))
                    .and_then(|b| Binding::parse(b).map_err(bad))?;
                let schema = o.get("outputSchema").cloned().ok_or(bad("a step_parse_json has an outputSchema".into()))?;
                if !jsonschema::draft202012::meta::is_valid(&schema) || jsonschema::draft202012::new(&schema).is_err() {
                    return Err(("invalid_output_schema", "outputSchema is not a JSON Schema (2020-12)".into()));
                }
                Kind::ParseJson { content, output_schema: schema }
            }
            "decision" => {
                fields(o, &["inputBindings", "condition"])?;
                let bindings = input_bindings(o)?;
                let condition = o.get("condition").ok_or(bad("a decision has a condition".into()))?;
                let condition_kind = condition.get("kind").and_then(Value::as_str);
                if condition_kind == Some("check") {
                    if let Some(k) = condition.as_object().and_then(|c| unknown_field(c, &["kind", "check"])) {
                        return Err(bad(format!("a check condition has no field {k:?}")));
                    }
                    let check = Check::parse(condition.get("check").unwrap_or(&Value::Null)).map_err(|why| ("check_invalid", why))?;
                    Kind::CheckDecision { bindings, check }
                } else if condition_kind == Some("check_result") {
                    if let Some(k) = condition.as_object().and_then(|c| unknown_field(c, &["kind", "sourceNodeId", "rule"])) {
                        return Err(bad(format!("a check_result condition has no field {k:?}")));
                    }
                    if !bindings.is_empty() {
                        return Err(bad("a check_result decision reads saved answers: it has no inputBindings".into()));
                    }
                    let source = condition
                        .get("sourceNodeId")
                        .and_then(Value::as_str)
                        .ok_or(("check_invalid", "a check_result names its sourceNodeId".to_string()))?;
                    let rule = Rule::parse(condition.get("rule").unwrap_or(&Value::Null)).map_err(|why| ("check_invalid", why))?;
                    Kind::CheckResult { source: source.to_string(), rule }
                } else {
                    let predicates = predicates::parse_condition(condition).map_err(|(i, code, why)| {
                        let code = if code == "invalid_predicate_value" { "invalid_predicate_value" } else { "document_invalid" };
                        (code, format!("condition.predicates[{i}]: {why}"))
                    })?;
                    Kind::Decision { bindings, predicates }
                }
            }
            "step_approval" => {
                fields(o, &["title", "ttlSeconds"])?;
                let title = o.get("title").and_then(Value::as_str).ok_or(bad("a step_approval has a title".into()))?;
                if title.is_empty() || title.len() > 500 {
                    return Err(bad("a title is 1 to 500 bytes".into()));
                }
                Kind::Approval { title: title.to_string(), ttl_seconds: int_in(o, "ttlSeconds", 3_600, 60..=86_400)? }
            }
            "step_wait" => {
                fields(o, &["durationSeconds"])?;
                if o.get("durationSeconds").is_none_or(Value::is_null) {
                    return Err(bad("a step_wait has durationSeconds".into()));
                }
                Kind::Wait { duration_seconds: int_in(o, "durationSeconds", 1, 1..=2_592_000)? }
            }
            "step_check" => {
                fields(o, &["inputBindings", "check"])?;
                let bindings = input_bindings(o)?;
                let check = Check::parse(o.get("check").unwrap_or(&Value::Null)).map_err(|why| ("check_invalid", why))?;
                Kind::StepCheck { bindings, check }
            }
            "step_join" => {
                fields(o, &["mode", "collect"])?;
                let invalid = |why: &str| ("join_invalid", why.to_string());
                if o.get("mode").and_then(Value::as_str).unwrap_or("all_completed") != "all_completed" {
                    return Err(invalid("a step_join's mode is all_completed"));
                }
                let collect = o.get("collect").and_then(Value::as_object).ok_or(invalid("a step_join collects {<name>: nodeId}"))?;
                if !(2..=16).contains(&collect.len()) {
                    return Err(invalid("a step_join collects 2 to 16 nodes"));
                }
                let mut names = BTreeMap::new();
                for (name, from) in collect {
                    let from = from.as_str().ok_or(invalid("collect maps a name to a node id"))?;
                    if !super::checks::is_question_name(name) {
                        return Err(invalid("a collected name is lowercase: a letter, then letters, digits or _ (at most 64)"));
                    }
                    names.insert(name.clone(), from.to_string());
                }
                Kind::Join { collect: names }
            }
            "step_connection" => {
                fields(o, &["toolSource", "tool", "arguments", "argumentBindings"])?;
                let text = |field: &str| {
                    o.get(field)
                        .and_then(Value::as_str)
                        .filter(|t| !t.is_empty() && t.len() <= 200)
                        .map(String::from)
                        .ok_or(bad(format!("a step_connection names its {field} (1 to 200 bytes)")))
                };
                let (tool_source, tool) = (text("toolSource")?, text("tool")?);
                let invalid = |why: &str| ("arguments_invalid", why.to_string());
                let arguments = match o.get("arguments") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(a)) if Value::Object(a.clone()).to_string().len() <= MAX_ARGUMENTS_BYTES => a.clone(),
                    Some(Value::Object(_)) => return Err(invalid("a step_connection's arguments are at most 64 KiB of JSON")),
                    Some(_) => return Err(invalid("a step_connection's arguments are an object")),
                };
                let mut bindings = BTreeMap::new();
                if let Some(b) = o.get("argumentBindings").filter(|b| !b.is_null()) {
                    let b = b.as_object().ok_or(bad("argumentBindings is an object of bindings by argument name".into()))?;
                    for (name, v) in b {
                        bindings.insert(name.clone(), Binding::parse(v).map_err(bad)?);
                    }
                }
                Kind::Connection(StepConnection { tool_source, tool, arguments, bindings })
            }
            "outcome" => {
                fields(o, &["rubric", "maxIterations", "criteria", "report"])?;
                check_outcome(o).map_err(|why| ("invalid_outcome", why))?;
                Kind::Outcome
            }
            "step_memory_read" | "step_memory_write" => {
                Kind::Memory(super::memory_nodes::MemoryStep::parse(o, kind == "step_memory_write")?)
            }
            "step_select_history" => Kind::SelectHistory(super::history_nodes::SelectHistory::parse(o)?),
            "step_record_history" => Kind::RecordHistory(super::history_nodes::RecordHistory::parse(o)?),
            "step_skill_proposal" => Kind::SkillProposal(super::skill_nodes::SkillProposalNode::parse(o)?),
            "step_observe_skill_proposal" => Kind::ObserveSkill(super::skill_nodes::ObserveNode::parse(o)?),
            "step_managed_tool" => Kind::Later(kind.to_string()),
            other => return Err(bad(format!("{other:?} is not a node kind"))),
        };
        Ok(Node { id, kind, raw: o.clone() })
    }

    pub fn kind_name(o: &Map<String, Value>) -> &str {
        o.get("kind").and_then(Value::as_str).unwrap_or_default()
    }
}

/// Whether a node kind is a step (`then` may leave it).
pub fn is_step(kind: &str) -> bool {
    kind.starts_with("step_")
}
