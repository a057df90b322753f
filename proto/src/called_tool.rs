//! A tool declaration, as JSON in an agent definition or a dry run's body,
//! read into the `CalledTool` a policy decision needs. The runner, the
//! sessions service (multiagent tools) and the gateway each ask governance
//! about one.

use crate::governance::v1::CalledTool;
use serde_json::Value;

impl CalledTool {
    /// `type`, `name`, `read_only` and `destructive` of a declaration; a
    /// field that is absent or of another type reads as empty or false, so
    /// governance names what is missing.
    pub fn from_declaration(decl: &Value) -> CalledTool {
        let text = |k: &str| decl.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let flag = |k: &str| decl.get(k).and_then(Value::as_bool).unwrap_or(false);
        CalledTool { r#type: text("type"), name: text("name"), read_only: flag("read_only"), destructive: flag("destructive") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_declaration_gives_what_a_decision_reads() {
        let t = CalledTool::from_declaration(&json!({"type": "custom", "name": "deploy", "read_only": true, "input_schema": {}}));
        assert_eq!((t.r#type.as_str(), t.name.as_str(), t.read_only, t.destructive), ("custom", "deploy", true, false));
        assert_eq!(CalledTool::from_declaration(&Value::Null), CalledTool::default(), "none: governance says the type is missing");
        assert!(!CalledTool::from_declaration(&json!({"type": "custom", "read_only": "yes"})).read_only);
    }
}
