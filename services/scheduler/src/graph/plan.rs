//! Planning (api.md §12.7): every check a document must pass, as a list of
//! errors with their codes (a `rejected` plan), and the compilation of one
//! that passes into an Automation's triggers and target, given the pins
//! the service resolved.
//!
//! The checks run on the control graph (`starts`, `then`, Decision arms):
//! edge endpoint kinds, cycles (over data edges too), reachability from a
//! trigger, Decision arms, and bindings — a binding or an `output` edge
//! reads a trigger or a node that precedes it on every path (a dominator).

use super::document::{Binding, Document, Edge, Kind, MAX_EDGES, MAX_NODES, Node, is_step};
use crate::triggers::Trigger;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// A reason the plan is rejected.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanError {
    pub code: &'static str,
    pub detail: String,
    pub node: Option<String>,
    pub edge: Option<Value>,
}

impl PlanError {
    pub(crate) fn new(code: &'static str, detail: impl Into<String>) -> PlanError {
        PlanError { code, detail: detail.into(), node: None, edge: None }
    }
    fn at_node(mut self, node: &str) -> PlanError {
        self.node = Some(node.to_string());
        self
    }
    fn at_edge(mut self, i: usize, e: &Edge) -> PlanError {
        self.edge = Some(e.to_json(i));
        self
    }

    pub fn to_json(&self) -> Value {
        let mut v = json!({"code": self.code, "detail": self.detail});
        if let Some(n) = &self.node {
            v["node"] = json!(n);
        }
        if let Some(e) = &self.edge {
            v["edge"] = e.clone();
        }
        v
    }
}

/// A document that passed every check.
#[derive(Debug, Clone)]
pub struct Checked {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    /// The trigger nodes' triggers, in node order.
    pub triggers: Vec<Trigger>,
}

impl Checked {
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// `step_agent` nodes, with their fields.
    pub fn agents(&self) -> impl Iterator<Item = (&str, &super::document::StepAgent)> {
        self.nodes.iter().filter_map(|n| match &n.kind {
            Kind::StepAgent(s) => Some((n.id.as_str(), s)),
            _ => None,
        })
    }

    /// Whether the graph is one trigger-started `step_agent` and nothing
    /// else, which compiles to an Agent target — unless it fans out or is
    /// retried, which only a steps program does.
    pub fn is_agent_target(&self) -> bool {
        let steps: Vec<&Node> = self.nodes.iter().filter(|n| !matches!(n.kind, Kind::Trigger(_))).collect();
        let plain =
            |n: &Node| matches!(&n.kind, Kind::StepAgent(s) if s.for_each.is_none()) && n.raw.get("retry").is_none_or(Value::is_null);
        matches!(steps.as_slice(), [only] if plain(only))
            && self.edges.iter().all(|e| e.kind == "starts" && e.to.as_deref() == Some(steps[0].id.as_str()))
    }

    /// Incoming control edges of `id`.
    pub fn incoming_control(&self, id: &str) -> impl Iterator<Item = &Edge> {
        self.edges.iter().filter(move |e| e.is_control() && e.to.as_deref() == Some(id))
    }

    /// The node whose output feeds `id` (its one incoming `output` edge).
    pub fn output_source(&self, id: &str) -> Option<&str> {
        self.edges.iter().find(|e| e.kind == "output" && e.to.as_deref() == Some(id)).map(|e| e.from.as_str())
    }

    pub fn has_webhook_trigger(&self) -> bool {
        self.triggers.iter().any(|t| matches!(t, Trigger::Webhook(_)))
    }

    /// Whether anything in it is saved and planned but not executable yet.
    pub fn later(&self) -> Option<String> {
        let kinds: BTreeSet<String> = self
            .nodes
            .iter()
            .filter_map(|n| match &n.kind {
                Kind::Later(k) => Some(k.clone()),
                _ => None,
            })
            .collect();
        (!kinds.is_empty()).then(|| kinds.into_iter().collect::<Vec<_>>().join(", "))
    }
}

/// Whether a node kind has an output `output` edges and joins read.
fn produces_output(kind: &str) -> bool {
    matches!(
        kind,
        "step_agent"
            | "step_parse_json"
            | "step_check"
            | "step_join"
            | "step_connection"
            | "step_memory_read"
            | "step_memory_write"
            | "step_select_history"
            | "step_skill_proposal"
            | "step_observe_skill_proposal"
    )
}

fn endpoint_ok(edge: &str, from: &str, to: Option<&str>) -> bool {
    let target_ok = |t: Option<&str>| t.is_some_and(|t| t != "trigger" && t != "outcome");
    match edge {
        "starts" => from == "trigger" && target_ok(to),
        "then" => is_step(from) && target_ok(to),
        "output" => produces_output(from) && matches!(to, Some("step_agent" | "step_parse_json" | "step_check" | "decision")),
        "continue" | "otherwise" | "uncertain" | "error" => from == "decision" && (to.is_none() || target_ok(to)),
        "reviews" => from == "step_agent" && to == Some("outcome"),
        _ => false,
    }
}

/// Every check of §12.7; the errors, or the checked document.
pub fn check(doc: &Document) -> Result<Checked, Vec<PlanError>> {
    let mut errors = vec![];
    if doc.nodes.len() > MAX_NODES || doc.edges.len() > MAX_EDGES {
        return Err(vec![PlanError::new("document_invalid", format!("a graph has at most {MAX_NODES} nodes and {MAX_EDGES} edges"))]);
    }
    // Nodes: each read, ids unique.
    let mut kinds: BTreeMap<String, String> = BTreeMap::new();
    let mut nodes = vec![];
    for raw in &doc.nodes {
        let id = raw.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        if kinds.insert(id.clone(), Node::kind_name(raw).to_string()).is_some() {
            errors.push(PlanError::new("duplicate_node_id", format!("two nodes are named {id:?}")).at_node(&id));
            continue;
        }
        match Node::parse(raw) {
            Ok(n) => nodes.push(n),
            Err((code, detail)) => errors.push(PlanError::new(code, detail).at_node(&id)),
        }
    }
    // Edges: known kinds between nodes that exist, of the right kinds.
    for (i, e) in doc.edges.iter().enumerate() {
        let from = kinds.get(&e.from);
        let to = e.to.as_ref().map(|t| kinds.get(t));
        if from.is_none() || matches!(to, Some(None)) {
            let missing = if from.is_none() { &e.from } else { e.to.as_ref().unwrap_or(&e.from) };
            errors.push(PlanError::new("unknown_node", format!("no node is named {missing:?}")).at_edge(i, e));
            continue;
        }
        let known = matches!(e.kind.as_str(), "starts" | "then" | "output" | "continue" | "otherwise" | "uncertain" | "error" | "reviews");
        if !known {
            errors.push(PlanError::new("document_invalid", format!("{:?} is not an edge kind", e.kind)).at_edge(i, e));
            continue;
        }
        let (from, to) = (from.map(String::as_str).unwrap_or_default(), to.flatten().map(String::as_str));
        if !endpoint_ok(&e.kind, from, to) {
            errors.push(
                PlanError::new("edge_endpoint_kind", format!("a {} edge cannot go from a {from} to {}", e.kind, to.unwrap_or("null")))
                    .at_edge(i, e),
            );
        }
    }
    // Triggers: at least one; at most one schedule-kind and one webhook.
    let triggers: Vec<Trigger> = nodes
        .iter()
        .filter_map(|n| match &n.kind {
            Kind::Trigger(t) => Some(t.clone()),
            _ => None,
        })
        .collect();
    if !kinds.values().any(|k| k == "trigger") {
        errors.push(PlanError::new("trigger_missing", "a graph starts at a trigger node"));
    }
    if triggers.iter().filter(|t| t.is_timed()).count() > 1 {
        errors.push(PlanError::new("multiple_schedule_triggers", "at most one schedule or schedule_once trigger"));
    }
    if triggers.iter().filter(|t| matches!(t, Trigger::Webhook(_))).count() > 1 {
        errors.push(PlanError::new("multiple_webhook_triggers", "at most one webhook trigger"));
    }
    if triggers.iter().filter(|t| matches!(t, Trigger::Subscription(_))).count() > 1 {
        errors.push(PlanError::new("invalid_trigger", "at most one subscription trigger"));
    }
    // Decision arms: one `continue` and one `otherwise` each; a Check's
    // Decisions also one `uncertain` and one `error` (each may finish the
    // program with `to: null`).
    for n in &nodes {
        let arms: &[&str] = match n.kind {
            Kind::Decision { .. } => &["continue", "otherwise"],
            Kind::CheckDecision { .. } | Kind::CheckResult { .. } => &["continue", "otherwise", "uncertain", "error"],
            _ => continue,
        };
        for &arm in arms {
            match doc.edges.iter().filter(|e| e.from == n.id && e.kind == arm).count() {
                0 => errors.push(PlanError::new("decision_arm_missing", format!("the decision has no {arm} edge")).at_node(&n.id)),
                1 => {}
                _ => errors.push(PlanError::new("decision_arm_duplicate", format!("the decision has two {arm} edges")).at_node(&n.id)),
            }
        }
    }
    errors.extend(outcome_attachments(&nodes, &doc.edges));
    if !errors.is_empty() {
        return Err(errors);
    }
    let checked = Checked { nodes, edges: doc.edges.clone(), triggers };
    let flow = Flow::new(&checked);
    if let Some(n) = flow.cycle() {
        return Err(vec![PlanError::new("cycle", "the graph has a cycle").at_node(&n)]);
    }
    let reached = flow.reached();
    // An outcome is reached through the step it reviews (checked above).
    for n in checked.nodes.iter().filter(|n| !matches!(n.kind, Kind::Trigger(_) | Kind::Outcome) && !reached.contains(&n.id)) {
        errors.push(PlanError::new("unreachable_node", "no trigger reaches it").at_node(&n.id));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let dominators = flow.dominators();
    let is_trigger = |id: &str| checked.node(id).is_some_and(|n| matches!(n.kind, Kind::Trigger(_)));
    let readable = |from: &str, to: &str| is_trigger(from) || (from != to && dominators.get(to).is_some_and(|d| d.contains(from)));
    for n in &checked.nodes {
        if let Kind::Join { collect } = &n.kind
            && let Err(e) = join_sources(&checked, &n.id, collect)
        {
            errors.push(e.at_node(&n.id));
        }
        let bindings: Vec<&Binding> = match &n.kind {
            Kind::ParseJson { content, .. } => vec![content],
            Kind::StepAgent(s) => s.for_each.iter().collect(),
            Kind::Connection(c) => c.bindings.values().collect(),
            Kind::Memory(m) => m.bindings(),
            Kind::SkillProposal(p) => vec![&p.content],
            Kind::Decision { bindings, .. } | Kind::CheckDecision { bindings, .. } | Kind::StepCheck { bindings, .. } => {
                bindings.values().collect()
            }
            _ => vec![],
        };
        if let Kind::CheckResult { source, rule } = &n.kind
            && let Err(e) = check_result_source(&checked, &flow, &dominators, &n.id, source, rule)
        {
            errors.push(e.at_node(&n.id));
        }
        if let Kind::RecordHistory(r) = &n.kind
            && let Err(e) = record_requires(&checked, &dominators, &n.id, r)
        {
            errors.push(e.at_node(&n.id));
        }
        let ancestor = match &n.kind {
            Kind::SkillProposal(p) => Some((p.selection.as_str(), "step_select_history")),
            Kind::ObserveSkill(o) => Some((o.proposal.as_str(), "step_skill_proposal")),
            _ => None,
        };
        if let Some((source, kind)) = ancestor
            && !(checked.node(source).is_some_and(|s| Node::kind_name(&s.raw) == kind) && readable(source, &n.id))
        {
            errors.push(
                PlanError::new("selection_not_ancestor", format!("{source:?} is not a {kind} on every path to this node")).at_node(&n.id),
            );
        }
        for b in bindings {
            if !readable(&b.source, &n.id) {
                errors.push(
                    PlanError::new("binding_source_not_ancestor", format!("{:?} does not precede this node on every path", b.source))
                        .at_node(&n.id),
                );
            }
        }
        let outputs: Vec<(usize, &Edge)> =
            checked.edges.iter().enumerate().filter(|(_, e)| e.kind == "output" && e.to.as_deref() == Some(&n.id)).collect();
        if outputs.len() > 1 {
            errors.push(PlanError::new("ambiguous_output_merge", "more than one output edge feeds this node").at_node(&n.id));
        }
        for (i, e) in outputs {
            if !readable(&e.from, &n.id) {
                errors.push(
                    PlanError::new("binding_source_not_ancestor", format!("{:?} does not precede this node on every path", e.from))
                        .at_edge(i, e),
                );
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(checked)
}

/// An `outcome` hangs on exactly one `step_agent` by one `reviews` edge and
/// touches no other edge; a `step_agent` has at most one, and not with a
/// `forEach` (an Outcome reviews one child).
fn outcome_attachments(nodes: &[Node], edges: &[Edge]) -> Vec<PlanError> {
    let mut errors = vec![];
    let bad = |why: String| PlanError::new("outcome_attachment", why);
    for n in nodes {
        let touching: Vec<&Edge> = edges.iter().filter(|e| e.from == n.id || e.to.as_deref() == Some(n.id.as_str())).collect();
        let reviews_out = touching.iter().filter(|e| e.kind == "reviews" && e.from == n.id).count();
        match &n.kind {
            Kind::Outcome if touching.len() != 1 || touching[0].kind != "reviews" => {
                errors.push(bad("an outcome hangs on one step_agent by one reviews edge, and no other edge".into()).at_node(&n.id));
            }
            Kind::StepAgent(_) if reviews_out > 1 => {
                errors.push(bad("a step_agent is reviewed by at most one outcome".into()).at_node(&n.id));
            }
            Kind::StepAgent(s) if reviews_out == 1 && s.session_target.as_ref().is_some_and(|t| t["mode"] == "continue_selected") => {
                errors.push(
                    PlanError::new("session_target_conflict", "an outcome reviews a child it starts: not a continue_selected step")
                        .at_node(&n.id),
                );
            }
            Kind::StepAgent(s) if reviews_out == 1 && s.for_each.is_some() => {
                errors.push(bad("an outcome reviews one child: not a forEach step".into()).at_node(&n.id));
            }
            _ => {}
        }
    }
    errors
}

/// A `step_join` collects output-producing nodes, and is reached only by
/// their `then` edges — one from each — so it runs exactly when all of
/// them completed.
fn join_sources(c: &Checked, id: &str, collect: &BTreeMap<String, String>) -> Result<(), PlanError> {
    let invalid = |why: String| PlanError::new("join_invalid", why);
    for from in collect.values() {
        let kind = c.node(from).map(|n| super::document::Node::kind_name(&n.raw).to_string());
        if !kind.as_deref().is_some_and(produces_output) {
            return Err(invalid(format!("{from:?} is not a node with an output")));
        }
    }
    let mut incoming: Vec<(&str, &str)> = c.incoming_control(id).map(|e| (e.kind.as_str(), e.from.as_str())).collect();
    incoming.sort_unstable();
    let mut wanted: Vec<(&str, &str)> = collect.values().map(|f| ("then", f.as_str())).collect();
    wanted.sort_unstable();
    wanted.dedup();
    if incoming != wanted {
        return Err(invalid("a step_join's incoming control edges are exactly one then edge from each node it collects".into()));
    }
    Ok(())
}

/// A `check_result` Decision reads the saved answers of `source`: an
/// ancestor Check (a `check` Decision or a `step_check`) whose questions
/// its rule names, and which every control path to it leaves by
/// `continue`, `otherwise`, `uncertain` or `then` — never by `error`, where
/// there are no answers to read, and never around the source.
fn check_result_source(
    checked: &Checked,
    flow: &Flow,
    dominators: &BTreeMap<String, BTreeSet<String>>,
    id: &str,
    source: &str,
    rule: &super::checks::Rule,
) -> Result<(), PlanError> {
    let Some(check) = checked.node(source).and_then(Node::check) else {
        return Err(PlanError::new("check_invalid", format!("{source:?} is not a check decision or a step_check")));
    };
    if let Some(name) = rule.unknown_name(&check.questions) {
        return Err(PlanError::new("check_invalid", format!("the rule reads {name:?}, which is not one of {source:?}'s questions")));
    }
    let dominated = source != id && dominators.get(id).is_some_and(|d| d.contains(source));
    let via_error = checked
        .edges
        .iter()
        .filter(|e| e.from == source && e.kind == "error")
        .filter_map(|e| e.to.as_deref())
        .any(|start| flow.reaches(start, id));
    if !dominated || via_error {
        return Err(PlanError::new(
            "check_result_not_guaranteed",
            format!("a control path reaches it {} {source:?}", if dominated { "by the error arm of" } else { "around" }),
        ));
    }
    Ok(())
}

/// A `step_record_history`'s `selection` is a `step_select_history` on
/// every path to it, and each step it `requires` lies between the two on
/// every path (so it has settled when the record runs).
fn record_requires(
    checked: &Checked,
    dominators: &BTreeMap<String, BTreeSet<String>>,
    id: &str,
    r: &super::history_nodes::RecordHistory,
) -> Result<(), PlanError> {
    let invalid = |why: String| Err(PlanError::new("record_requires_invalid", why));
    let dominates = |a: &str, b: &str| a != b && dominators.get(b).is_some_and(|d| d.contains(a));
    if !checked.node(&r.selection).is_some_and(|n| matches!(n.kind, Kind::SelectHistory(_))) {
        return invalid(format!("{:?} is not a step_select_history", r.selection));
    }
    if !dominates(&r.selection, id) {
        return invalid(format!("a control path reaches it around its selection {:?}", r.selection));
    }
    for step in &r.requires {
        let Some(n) = checked.node(step) else { return invalid(format!("{step:?} is not a node")) };
        let kind = n.raw.get("kind").and_then(Value::as_str).unwrap_or_default();
        if !is_step(kind) || kind == "step_observe_skill_proposal" || step == &r.selection {
            return invalid(format!("{step:?} is not a step it can require"));
        }
        if !dominates(&r.selection, step) || !dominates(step, id) {
            return invalid(format!("{step:?} does not lie between {:?} and this node on every path", r.selection));
        }
    }
    Ok(())
}

/// The graph's control flow, for cycles, reachability and dominators.
struct Flow<'a> {
    ids: Vec<&'a str>,
    /// Control successors (with data edges when looking for cycles).
    control: BTreeMap<&'a str, Vec<&'a str>>,
    all: BTreeMap<&'a str, Vec<&'a str>>,
    triggers: Vec<&'a str>,
}

impl<'a> Flow<'a> {
    fn new(c: &'a Checked) -> Flow<'a> {
        let ids: Vec<&str> = c.nodes.iter().map(|n| n.id.as_str()).collect();
        let mut control: BTreeMap<&str, Vec<&str>> = ids.iter().map(|i| (*i, vec![])).collect();
        let mut all = control.clone();
        for e in &c.edges {
            let Some(to) = e.to.as_deref() else { continue };
            all.entry(e.from.as_str()).or_default().push(to);
            if e.is_control() {
                control.entry(e.from.as_str()).or_default().push(to);
            }
        }
        let triggers = c.nodes.iter().filter(|n| matches!(n.kind, Kind::Trigger(_))).map(|n| n.id.as_str()).collect();
        Flow { ids, control, all, triggers }
    }

    /// A node on a cycle, if there is one (depth-first, colouring).
    fn cycle(&self) -> Option<String> {
        let mut state: BTreeMap<&str, u8> = BTreeMap::new();
        for start in &self.ids {
            if state.contains_key(start) {
                continue;
            }
            let mut stack = vec![(*start, 0usize)];
            state.insert(start, 1);
            while let Some((n, i)) = stack.pop() {
                let next = self.all.get(n).and_then(|v| v.get(i)).copied();
                match next {
                    Some(m) => {
                        stack.push((n, i + 1));
                        match state.get(m) {
                            Some(1) => return Some(m.to_string()),
                            Some(_) => {}
                            None => {
                                state.insert(m, 1);
                                stack.push((m, 0));
                            }
                        }
                    }
                    None => {
                        state.insert(n, 2);
                    }
                }
            }
        }
        None
    }

    /// Every node a control path leads to from `starts` (themselves
    /// included).
    fn reachable_from<'s>(&'s self, starts: &[&'s str]) -> BTreeSet<&'s str> {
        let mut seen: BTreeSet<&str> = starts.iter().copied().collect();
        let mut todo: Vec<&str> = starts.to_vec();
        while let Some(n) = todo.pop() {
            for m in self.control.get(n).into_iter().flatten() {
                if seen.insert(m) {
                    todo.push(m);
                }
            }
        }
        seen
    }

    /// Whether a control path leads from `from` to `to` (itself included).
    fn reaches(&self, from: &str, to: &str) -> bool {
        self.reachable_from(&[from]).contains(to)
    }

    fn reached(&self) -> BTreeSet<String> {
        self.reachable_from(&self.triggers).into_iter().map(String::from).collect()
    }

    /// For each node, the nodes on every control path to it from any
    /// trigger (itself included). The graph is acyclic here, so one pass
    /// in topological order settles it.
    fn dominators(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut preds: BTreeMap<&str, Vec<&str>> = self.ids.iter().map(|i| (*i, vec![])).collect();
        for (from, tos) in &self.control {
            for to in tos {
                preds.entry(to).or_default().push(from);
            }
        }
        let mut indegree: BTreeMap<&str, usize> = preds.iter().map(|(k, v)| (*k, v.len())).collect();
        let mut order = vec![];
        let mut ready: Vec<&str> = indegree.iter().filter(|(_, d)| **d == 0).map(|(k, _)| *k).collect();
        while let Some(n) = ready.pop() {
            order.push(n);
            for m in self.control.get(n).into_iter().flatten() {
                if let Some(d) = indegree.get_mut(m) {
                    *d -= 1;
                    if *d == 0 {
                        ready.push(m);
                    }
                }
            }
        }
        let mut dom: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for n in order {
            let mut set: Option<BTreeSet<String>> = None;
            for p in preds.get(n).into_iter().flatten() {
                let pd = dom.get(*p).cloned().unwrap_or_default();
                set = Some(match set {
                    None => pd,
                    Some(s) => s.intersection(&pd).cloned().collect(),
                });
            }
            let mut set = set.unwrap_or_default();
            set.insert(n.to_string());
            dom.insert(n.to_string(), set);
        }
        dom
    }
}

/// One `step_agent`'s resolved deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct Pin {
    pub node: String,
    pub agent_id: String,
    pub agent_version: i64,
    pub release_sha256: String,
    pub agent_deployment_id: String,
    pub deployment_revision: i64,
}

impl Pin {
    pub fn to_json(&self) -> Value {
        json!({"node": self.node, "agent_id": self.agent_id, "agent_version": self.agent_version, "release_sha256": self.release_sha256,
            "agent_deployment_id": self.agent_deployment_id, "deployment_revision": self.deployment_revision})
    }
}

/// One `step_connection`'s resolved ToolSource and Connection, and its
/// tool's cached input schema (the program checks bound arguments against
/// it).
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub node: String,
    pub tool_source_id: String,
    pub connection_id: String,
    pub input_schema: Value,
}

impl Resource {
    pub fn to_json(&self) -> Value {
        json!({"node": self.node, "tool_source_id": self.tool_source_id, "connection_id": self.connection_id})
    }
}

/// The target a checked graph compiles to with its pins: an Agent target
/// for one trigger-started `step_agent`, else a steps program.
pub fn compile(c: &Checked, pins: &[Pin], resources: &[Resource]) -> Value {
    let pin = |node: &str| pins.iter().find(|p| p.node == node);
    if c.is_agent_target()
        && let Some((node, s)) = c.agents().next()
    {
        let p = pin(node);
        let mut t = json!({"kind": "agent", "agent_deployment_id": p.map(|p| p.agent_deployment_id.clone()),
            "deployment_revision": p.map(|p| p.deployment_revision), "prompt": s.prompt});
        if let Some(b) = &s.budget {
            t["budget"] = b.clone();
        }
        if let Some(st) = &s.session_target {
            t["session_target"] = st.clone();
        }
        if let Some(d) = &s.delivery_screen {
            t["input"] = json!({"delivery_screen": d});
        }
        return t;
    }
    let mut steps = vec![];
    for n in &c.nodes {
        let mut raw = Value::Object(n.raw.clone());
        if let (Kind::StepAgent(_), Some(p)) = (&n.kind, pin(&n.id)) {
            raw["agentId"] = json!(p.agent_id);
            raw["agentVersion"] = json!(p.agent_version);
            raw["agentDeploymentId"] = json!(p.agent_deployment_id);
            raw["deploymentRevision"] = json!(p.deployment_revision);
        }
        if let Some(r) = resources.iter().find(|r| r.node == n.id) {
            raw["toolSourceId"] = json!(r.tool_source_id);
            raw["connectionId"] = json!(r.connection_id);
            raw["inputSchema"] = r.input_schema.clone();
        }
        steps.push(raw);
    }
    let edges: Vec<Value> = c.edges.iter().map(|e| json!({"kind": e.kind, "from": e.from, "to": e.to})).collect();
    let program = json!({"steps": steps, "edges": edges});
    json!({"kind": "steps", "program_sha256": checkfu_core::sha256_hex(program.to_string()), "steps": steps, "edges": edges})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(nodes: Value, edges: Value) -> Document {
        Document::outline(
            &json!({"name": "g", "environment_id": "env_1", "service_principal_id": "prin_1", "nodes": nodes, "edges": edges}),
        )
        .expect("outline")
    }

    fn codes(d: &Document) -> Vec<&'static str> {
        check(d).err().map(|e| e.into_iter().map(|e| e.code).collect()).unwrap_or_default()
    }

    const HOOK: &str = r#"{"kind": "trigger", "id": "hook", "trigger": {"kind": "webhook", "dedupe_key": "/id"}}"#;

    fn hook() -> Value {
        serde_json::from_str(HOOK).expect("json")
    }

    fn agent(id: &str) -> Value {
        json!({"kind": "step_agent", "id": id, "agent": "dep_01jx0000000000000000000001", "prompt": "P"})
    }

    #[test]
    fn one_started_agent_compiles_to_an_agent_target() {
        let d = doc(json!([hook(), agent("a")]), json!([{"kind": "starts", "from": "hook", "to": "a"}]));
        let c = check(&d).expect("planned");
        assert!(c.is_agent_target());
        let pin = Pin {
            node: "a".into(),
            agent_id: "agt_1".into(),
            agent_version: 1,
            release_sha256: "r".into(),
            agent_deployment_id: "dep_1".into(),
            deployment_revision: 2,
        };
        assert_eq!(compile(&c, &[pin], &[])["deployment_revision"], 2);
        let two = doc(
            json!([hook(), agent("a"), agent("b")]),
            json!([{"kind": "starts", "from": "hook", "to": "a"}, {"kind": "then", "from": "a", "to": "b"}]),
        );
        let c = check(&two).expect("planned");
        assert!(!c.is_agent_target());
        let steps = compile(&c, &[], &[]);
        assert_eq!(steps["kind"], "steps");
        assert_eq!(
            steps["steps"][1],
            json!({"kind": "step_agent", "id": "a", "agent": "dep_01jx0000000000000000000001", "prompt": "P"}),
            "nodes as written"
        );
    }

    /// `K` of the acceptance checks: two questions, the rule on `billing`.
    fn check_k() -> Value {
        json!({"modelRoutingProfileId": "mrp_e", "questions": [{"name": "billing", "question": "require: invoice"},
            {"name": "tech", "question": "uncertain: maybe"}], "rule": "billing"})
    }

    fn check_decision(id: &str) -> Value {
        json!({"kind": "decision", "id": id, "condition": {"kind": "check", "check": check_k()}})
    }

    fn arms(from: &str, to: &[(&str, Option<&str>)]) -> Vec<Value> {
        to.iter().map(|(kind, to)| json!({"kind": kind, "from": from, "to": to})).collect()
    }

    #[test]
    fn a_checks_decision_has_all_four_arms_and_stays_saved_only() {
        let edges = |a: Vec<Value>| {
            let mut e = vec![json!({"kind": "starts", "from": "hook", "to": "d"})];
            e.extend(a);
            Value::Array(e)
        };
        let two = doc(json!([hook(), check_decision("d"), agent("a")]), edges(arms("d", &[("continue", Some("a")), ("otherwise", None)])));
        assert_eq!(codes(&two), ["decision_arm_missing", "decision_arm_missing"], "uncertain and error are missing");
        let four = doc(
            json!([hook(), check_decision("d"), agent("a")]),
            edges(arms("d", &[("continue", Some("a")), ("otherwise", None), ("uncertain", None), ("error", None)])),
        );
        let c = check(&four).expect("planned");
        assert_eq!(c.later(), None, "check decisions run");
        let mut bad = check_decision("d");
        bad["condition"]["check"]["rule"] = json!({"all": ["billing", "nope"]});
        assert_eq!(codes(&doc(json!([hook(), bad]), edges(vec![]))), ["check_invalid"]);
    }

    #[test]
    fn a_check_result_reads_answers_only_where_they_are_guaranteed() {
        let result = json!({"kind": "decision", "id": "r", "condition": {"kind": "check_result", "sourceNodeId": "d", "rule": "tech"}});
        let four = |from: &str, continue_to: Option<&str>, error_to: Option<&str>| {
            arms(from, &[("continue", continue_to), ("otherwise", None), ("uncertain", None), ("error", error_to)])
        };
        let graph = |d_arms: Vec<Value>, extra: Vec<Value>| {
            let mut e = vec![json!({"kind": "starts", "from": "hook", "to": "d"})];
            e.extend(d_arms);
            e.extend(four("r", Some("a"), None));
            e.extend(extra);
            doc(json!([hook(), check_decision("d"), result.clone(), agent("a")]), Value::Array(e))
        };
        let c = check(&graph(four("d", Some("r"), None), vec![])).expect("after continue: planned");
        assert_eq!(c.later(), None, "check_result decisions run");
        assert_eq!(codes(&graph(four("d", None, Some("r")), vec![])), ["check_result_not_guaranteed"], "via the error arm");
        let around = vec![json!({"kind": "starts", "from": "hook", "to": "r"})];
        assert_eq!(codes(&graph(four("d", Some("r"), None), around)), ["check_result_not_guaranteed"], "around the source");
        let mut unknown = result.clone();
        unknown["condition"]["rule"] = json!("nope");
        let d = doc(
            json!([hook(), check_decision("d"), unknown, agent("a")]),
            Value::Array(
                [vec![json!({"kind": "starts", "from": "hook", "to": "d"})], four("d", Some("r"), None), four("r", Some("a"), None)]
                    .concat(),
            ),
        );
        assert_eq!(codes(&d), ["check_invalid"], "a rule over questions the source does not ask");
    }

    #[test]
    fn a_step_check_feeds_its_answers_on() {
        let step = json!({"kind": "step_check", "id": "c", "check": check_k()});
        let decide = json!({"kind": "decision", "id": "v", "condition": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/verdict", "value": "no"}]}});
        let d = doc(
            json!([hook(), step, decide, agent("b")]),
            json!([{"kind": "starts", "from": "hook", "to": "c"}, {"kind": "then", "from": "c", "to": "v"}, {"kind": "output", "from": "c", "to": "v"},
                   {"kind": "continue", "from": "v", "to": "b"}, {"kind": "otherwise", "from": "v", "to": null}]),
        );
        let c = check(&d).expect("planned");
        assert_eq!(c.later(), None, "step_check runs");
    }

    #[test]
    fn plans_reject_with_their_codes() {
        let e = check(&doc(
            json!([hook(), agent("a"), agent("b")]),
            json!([{"kind": "starts", "from": "hook", "to": "a"}, {"kind": "starts", "from": "a", "to": "b"}]),
        ))
        .expect_err("rejected");
        assert_eq!(e[0].code, "edge_endpoint_kind");
        assert_eq!(e[0].edge, Some(json!({"index": 1, "kind": "starts", "from": "a", "to": "b"})));
        let cyc = doc(
            json!([hook(), agent("a"), agent("b")]),
            json!([{"kind": "starts", "from": "hook", "to": "a"}, {"kind": "then", "from": "a", "to": "b"}, {"kind": "then", "from": "b", "to": "a"}]),
        );
        assert_eq!(codes(&cyc), ["cycle"]);
        let both = doc(
            json!([{"kind": "trigger", "id": "s", "trigger": {"kind": "schedule", "cron": "* * * * *", "timezone": "UTC"}},
                   {"kind": "trigger", "id": "o", "trigger": {"kind": "schedule_once", "at": "2030-01-01T00:00:00Z"}}, agent("a")]),
            json!([{"kind": "starts", "from": "s", "to": "a"}, {"kind": "starts", "from": "o", "to": "a"}]),
        );
        assert_eq!(codes(&both), ["multiple_schedule_triggers"]);
        assert_eq!(codes(&doc(json!([agent("a")]), json!([]))), ["trigger_missing"]);
        assert_eq!(
            codes(&doc(json!([hook(), agent("a"), agent("a")]), json!([{"kind": "starts", "from": "hook", "to": "a"}]))),
            ["duplicate_node_id"]
        );
        assert_eq!(codes(&doc(json!([hook(), agent("a")]), json!([{"kind": "starts", "from": "hook", "to": "zz"}]))), ["unknown_node"]);
        assert_eq!(
            codes(&doc(json!([hook(), agent("a"), agent("b")]), json!([{"kind": "starts", "from": "hook", "to": "a"}]))),
            ["unreachable_node"]
        );
        let decision = |arms: Value| {
            let mut edges = vec![json!({"kind": "starts", "from": "hook", "to": "d"})];
            edges.extend(arms.as_array().cloned().unwrap_or_default());
            doc(
                json!([hook(), agent("b"), {"kind": "decision", "id": "d", "inputBindings": {"flag": {"sourceNodeId": "hook", "pointer": "/flag"}},
                    "condition": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/flag", "value": false}]}}]),
                Value::Array(edges),
            )
        };
        assert!(
            check(&decision(json!([{"kind": "continue", "from": "d", "to": "b"}, {"kind": "otherwise", "from": "d", "to": null}]))).is_ok()
        );
        assert_eq!(codes(&decision(json!([{"kind": "continue", "from": "d", "to": "b"}]))), ["decision_arm_missing"]);
        assert_eq!(
            codes(&decision(
                json!([{"kind": "continue", "from": "d", "to": "b"}, {"kind": "continue", "from": "d", "to": null}, {"kind": "otherwise", "from": "d", "to": null}])
            )),
            ["decision_arm_duplicate"]
        );
        let null_value = doc(
            json!([hook(), {"kind": "decision", "id": "d", "condition": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/x", "value": null}]}}]),
            json!([{"kind": "starts", "from": "hook", "to": "d"}, {"kind": "continue", "from": "d", "to": null}, {"kind": "otherwise", "from": "d", "to": null}]),
        );
        assert_eq!(codes(&null_value), ["invalid_predicate_value"]);
        let schema = doc(
            json!([hook(), {"kind": "step_parse_json", "id": "p", "inputBindings": {"content": {"sourceNodeId": "hook", "pointer": "/payload"}}, "outputSchema": {"type": 7}}]),
            json!([{"kind": "starts", "from": "hook", "to": "p"}]),
        );
        assert_eq!(codes(&schema), ["invalid_output_schema"]);
    }

    #[test]
    fn bindings_read_only_what_precedes_on_every_path() {
        // hook → a → c, hook → b → c: `a` does not precede c on every path.
        let nodes = json!([hook(), agent("a"), agent("b"),
            {"kind": "step_parse_json", "id": "c", "inputBindings": {"content": {"sourceNodeId": "a", "pointer": ""}}, "outputSchema": {}}]);
        let edges = json!([{"kind": "starts", "from": "hook", "to": "a"}, {"kind": "starts", "from": "hook", "to": "b"},
            {"kind": "then", "from": "a", "to": "c"}, {"kind": "then", "from": "b", "to": "c"}]);
        assert_eq!(codes(&doc(nodes, edges)), ["binding_source_not_ancestor"]);
        let merge = doc(
            json!([hook(), agent("a"), agent("b"), agent("c")]),
            json!([{"kind": "starts", "from": "hook", "to": "a"}, {"kind": "then", "from": "a", "to": "b"}, {"kind": "then", "from": "b", "to": "c"},
                {"kind": "output", "from": "a", "to": "c"}, {"kind": "output", "from": "b", "to": "c"}]),
        );
        assert_eq!(codes(&merge), ["ambiguous_output_merge"]);
        let chain = doc(
            json!([hook(), agent("a"), agent("b")]),
            json!([{"kind": "starts", "from": "hook", "to": "a"}, {"kind": "then", "from": "a", "to": "b"}, {"kind": "output", "from": "a", "to": "b"}]),
        );
        assert!(check(&chain).is_ok());
    }

    #[test]
    fn fan_outs_and_joins_are_checked_where_they_are_written() {
        let mut each = agent("a");
        each["forEach"] = json!({"items": {"sourceNodeId": "hook", "pointer": "/items"}, "maxItems": 3, "concurrency": 2});
        let starts = json!([{"kind": "starts", "from": "hook", "to": "a"}]);
        let fans = check(&doc(json!([hook(), each.clone()]), starts.clone())).expect("planned");
        assert!(!fans.is_agent_target(), "a lone step_agent that fans out is a steps program");
        let mut retried = agent("a");
        retried["retry"] = json!({"maxAttempts": 2, "backoffSeconds": 1});
        assert!(!check(&doc(json!([hook(), retried]), starts.clone())).expect("planned").is_agent_target(), "so is a retried one");
        assert!(check(&doc(json!([hook(), agent("a")]), starts.clone())).expect("planned").is_agent_target());
        for bad in [json!({"maxItems": 101}), json!({"concurrency": 0}), json!({"items": "x"}), json!({"parallel": true})] {
            let mut e = each.clone();
            for (k, v) in bad.as_object().into_iter().flatten() {
                e["forEach"][k] = v.clone();
            }
            assert_eq!(codes(&doc(json!([hook(), e]), starts.clone())), ["invalid_for_each"], "{bad}");
        }
        let mut later = each.clone();
        later["forEach"]["items"]["sourceNodeId"] = json!("b");
        let d = doc(
            json!([hook(), later, agent("b")]),
            json!([{"kind": "starts", "from": "hook", "to": "a"}, {"kind": "then", "from": "a", "to": "b"}]),
        );
        assert_eq!(codes(&d), ["binding_source_not_ancestor"], "items are read from what precedes the step");

        let join = |collect: Value| json!({"kind": "step_join", "id": "j", "mode": "all_completed", "collect": collect});
        let edges = |extra: Vec<Value>| {
            let mut e = vec![
                json!({"kind": "starts", "from": "hook", "to": "a"}),
                json!({"kind": "starts", "from": "hook", "to": "b"}),
                json!({"kind": "then", "from": "a", "to": "j"}),
                json!({"kind": "then", "from": "b", "to": "j"}),
                json!({"kind": "then", "from": "j", "to": "c"}),
                json!({"kind": "output", "from": "j", "to": "c"}),
            ];
            e.extend(extra);
            Value::Array(e)
        };
        let nodes = |j: Value| json!([hook(), agent("a"), agent("b"), j, agent("c")]);
        assert!(check(&doc(nodes(join(json!({"x": "a", "y": "b"}))), edges(vec![]))).is_ok(), "a join's output feeds on");
        assert_eq!(codes(&doc(nodes(join(json!({"x": "a"}))), edges(vec![]))), ["join_invalid"], "one name");
        assert_eq!(codes(&doc(nodes(join(json!({"x": "a", "y": "hook"}))), edges(vec![]))), ["join_invalid"], "a trigger has no output");
        let around = vec![json!({"kind": "starts", "from": "hook", "to": "j"})];
        assert_eq!(codes(&doc(nodes(join(json!({"x": "a", "y": "b"}))), edges(around))), ["join_invalid"], "only its nodes' then edges");
    }

    #[test]
    fn an_outcome_hangs_on_one_agent_step_by_one_reviews_edge() {
        let outcome = |id: &str| json!({"kind": "outcome", "id": id, "rubric": "require: goodbye", "maxIterations": 3});
        let starts = json!({"kind": "starts", "from": "hook", "to": "a"});
        let reviews = |from: &str, to: &str| json!({"kind": "reviews", "from": from, "to": to});
        let ok = doc(json!([hook(), agent("a"), outcome("o")]), json!([starts, reviews("a", "o")]));
        let c = check(&ok).expect("an outcome on an agent step plans");
        assert!(!c.is_agent_target(), "a reviewed step compiles to a steps target");
        assert_eq!(c.later(), None, "outcomes run");
        let lone = doc(json!([hook(), agent("a"), outcome("o")]), json!([starts]));
        assert_eq!(codes(&lone), ["outcome_attachment"]);
        let twice = doc(json!([hook(), agent("a"), outcome("o"), outcome("p")]), json!([starts, reviews("a", "o"), reviews("a", "p")]));
        assert_eq!(codes(&twice), ["outcome_attachment"]);
        let then = doc(
            json!([hook(), agent("a"), outcome("o"), agent("b")]),
            json!([starts, reviews("a", "o"), {"kind": "then", "from": "o", "to": "b"}]),
        );
        assert!(codes(&then).contains(&"outcome_attachment") || codes(&then).contains(&"edge_endpoint_kind"), "{:?}", codes(&then));
        let mut fan = agent("a");
        fan["forEach"] = json!({"items": {"sourceNodeId": "hook", "pointer": "/x"}, "maxItems": 3, "concurrency": 1});
        assert_eq!(codes(&doc(json!([hook(), fan, outcome("o")]), json!([starts.clone(), reviews("a", "o")]))), ["outcome_attachment"]);
        // A continued Session takes no Outcome, Budget or forEach.
        let mut continued = agent("a");
        continued["sessionTarget"] = json!({"mode": "continue_selected", "session": "sess_01jx0000000000000000000001"});
        let reviewed = doc(json!([hook(), continued.clone(), outcome("o")]), json!([starts.clone(), reviews("a", "o")]));
        assert_eq!(codes(&reviewed), ["session_target_conflict"]);
        let mut budgeted = continued.clone();
        budgeted["budget"] = json!({"limit": 100});
        assert_eq!(codes(&doc(json!([hook(), budgeted]), json!([starts.clone()]))), ["session_target_conflict"]);
        let mut fanned = continued;
        fanned["forEach"] = json!({"items": {"sourceNodeId": "hook", "pointer": "/x"}, "maxItems": 3, "concurrency": 1});
        assert_eq!(codes(&doc(json!([hook(), fanned]), json!([starts]))), ["session_target_conflict"]);
        for bad in [
            json!({"kind": "outcome", "id": "o", "rubric": "r", "maxIterations": 21}),
            json!({"kind": "outcome", "id": "o", "maxIterations": 2}),
            json!({"kind": "outcome", "id": "o", "rubric": "r", "maxIterations": 2,
                "criteria": [{"name": "done", "question": "is it?", "failure": "fail_open"}]}),
            json!({"kind": "outcome", "id": "o", "rubric": "r", "maxIterations": 2, "report": {"extraction": "text", "outputs": []}}),
        ] {
            assert_eq!(
                codes(&doc(json!([hook(), agent("a"), bad.clone()]), json!([starts, reviews("a", "o")]))),
                ["invalid_outcome"],
                "{bad}"
            );
        }
    }
}
