//! The parts every node kind's reading shares: a binding, a refusal, and
//! the check that a node holds only its kind's fields. Below `document.rs`
//! and the per-kind readers (`memory_nodes.rs`, `history_nodes.rs`), which
//! all use them.

use crate::predicates::is_pointer;
use serde_json::{Map, Value};

/// Where a step reads a value: the trigger's event or a control ancestor's
/// output, at an RFC 6901 pointer (`""` = the whole output).
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub source: String,
    pub pointer: String,
}

impl Binding {
    pub(super) fn parse(v: &Value) -> std::result::Result<Binding, String> {
        let o = v.as_object().ok_or("a binding is {sourceNodeId, pointer}")?;
        let source = o.get("sourceNodeId").and_then(Value::as_str).ok_or("a binding names its sourceNodeId")?;
        let pointer = o.get("pointer").and_then(Value::as_str).unwrap_or("");
        if !is_pointer(pointer) {
            return Err(format!("{pointer:?} is not a JSON Pointer"));
        }
        Ok(Binding { source: source.to_string(), pointer: pointer.to_string() })
    }
}

/// A node refused: `(code, detail)`.
pub type NodeError = (&'static str, String);

pub(super) fn fields(o: &Map<String, Value>, allowed: &[&str]) -> std::result::Result<(), NodeError> {
    // `retry` is read for every kind first (`Node::parse`).
    match o.keys().find(|k| !matches!(k.as_str(), "kind" | "id" | "retry") && !allowed.contains(&k.as_str())) {
        Some(k) => {
            Err(("document_invalid", format!("a {} node has no field {k:?}", o.get("kind").and_then(Value::as_str).unwrap_or_default())))
        }
        None => Ok(()),
    }
}
