//! History nodes as a document writes them (api.md §18.7): a
//! `step_select_history {frontier, agents?, limit}` picks the Sessions
//! created after a named frontier; a `step_record_history {selection,
//! requires}` moves that frontier past them once the steps it requires
//! completed. Between the two the graph does its work (learns from the
//! Sessions, writes memory, proposes a Skill); a selection whose work did
//! not complete is selected again by the next firing.

use super::node_parts::{NodeError, fields};
use serde_json::{Map, Value};

/// A selection's most Sessions, and a record's most required steps.
pub const MAX_SELECTED: i64 = 100;
pub const MAX_REQUIRES: usize = 16;
/// The most Agents a selection filters by.
pub const MAX_AGENTS: usize = 20;

#[derive(Debug, Clone, PartialEq)]
pub struct SelectHistory {
    pub frontier: String,
    pub agents: Vec<String>,
    pub limit: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RecordHistory {
    /// The `step_select_history` whose selection it records.
    pub selection: String,
    /// Steps that must have completed.
    pub requires: Vec<String>,
}

/// A frontier's name: lowercase letters, digits, `_` and `-`, 1 to 64.
fn is_frontier_name(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

impl SelectHistory {
    pub fn parse(o: &Map<String, Value>) -> Result<SelectHistory, NodeError> {
        fields(o, &["frontier", "agents", "limit"])?;
        let bad = |why: &str| ("document_invalid", why.to_string());
        let frontier = o.get("frontier").and_then(Value::as_str).unwrap_or_default();
        if !is_frontier_name(frontier) {
            return Err(bad("a step_select_history names its frontier: 1 to 64 of a-z, 0-9, _ and -"));
        }
        let agents = match o.get("agents") {
            None | Some(Value::Null) => vec![],
            Some(Value::Array(a)) if a.len() <= MAX_AGENTS => a
                .iter()
                .map(|v| v.as_str().filter(|s| checkfu_core::id::AgentId::check("agents", s).is_ok()).map(String::from))
                .collect::<Option<Vec<_>>>()
                .ok_or(bad("agents lists Agent ids (agt_…)"))?,
            Some(_) => return Err(bad("agents lists at most 20 Agent ids (agt_…)")),
        };
        let limit = o
            .get("limit")
            .and_then(Value::as_i64)
            .filter(|n| (1..=MAX_SELECTED).contains(n))
            .ok_or(bad("a step_select_history has a limit from 1 to 100"))?;
        Ok(SelectHistory { frontier: frontier.to_string(), agents, limit })
    }
}

impl RecordHistory {
    pub fn parse(o: &Map<String, Value>) -> Result<RecordHistory, NodeError> {
        fields(o, &["selection", "requires"])?;
        let selection = o
            .get("selection")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or(("document_invalid", "a step_record_history names its selection (a step_select_history)".to_string()))?;
        let invalid = |why: &str| ("record_requires_invalid", why.to_string());
        let requires = match o.get("requires") {
            None | Some(Value::Null) => vec![],
            Some(Value::Array(a)) if a.len() <= MAX_REQUIRES => {
                let ids =
                    a.iter().map(|v| v.as_str().map(String::from)).collect::<Option<Vec<_>>>().ok_or(invalid("requires lists node ids"))?;
                let mut seen = ids.clone();
                seen.sort();
                seen.dedup();
                if seen.len() != ids.len() {
                    return Err(invalid("requires names each step once"));
                }
                ids
            }
            Some(_) => return Err(invalid("requires lists 0 to 16 step ids")),
        };
        Ok(RecordHistory { selection: selection.to_string(), requires })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_selection_names_its_frontier_and_limit() {
        let o = json!({"frontier": "learn", "agents": ["agt_01jx0000000000000000000001"], "limit": 10});
        let s = SelectHistory::parse(o.as_object().unwrap()).unwrap();
        assert_eq!((s.frontier.as_str(), s.agents.len(), s.limit), ("learn", 1, 10));
        for bad in [
            json!({"frontier": "Learn", "limit": 1}),
            json!({"frontier": "learn", "limit": 0}),
            json!({"frontier": "learn"}),
            json!({"frontier": "learn", "limit": 101}),
            json!({"frontier": "learn", "limit": 1, "agents": ["dep_1"]}),
        ] {
            assert_eq!(SelectHistory::parse(bad.as_object().unwrap()).unwrap_err().0, "document_invalid", "{bad}");
        }
    }

    #[test]
    fn a_record_requires_distinct_steps() {
        let r = RecordHistory::parse(json!({"selection": "s", "requires": ["a", "b"]}).as_object().unwrap()).unwrap();
        assert_eq!(r.requires, ["a", "b"]);
        let twice = json!({"selection": "s", "requires": ["a", "a"]});
        assert_eq!(RecordHistory::parse(twice.as_object().unwrap()).unwrap_err().0, "record_requires_invalid");
        let many: Vec<String> = (0..17).map(|i| format!("n{i}")).collect();
        let over = json!({"selection": "s", "requires": many});
        assert_eq!(RecordHistory::parse(over.as_object().unwrap()).unwrap_err().0, "record_requires_invalid");
        assert_eq!(RecordHistory::parse(json!({"requires": []}).as_object().unwrap()).unwrap_err().0, "document_invalid");
    }
}
