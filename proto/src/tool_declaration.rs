//! A tool declaration's public JSON — `{"type": "builtin", name}`,
//! `{"type": "custom", name, description, input_schema, read_only,
//! destructive}`, `{"type": "tool_source", tool_source_id, tools,
//! connection_id?}` or `{"type": "platform", name, description,
//! input_schema}` — rendered from the typed `ToolDeclaration`: for the
//! runner, which reads declarations in that shape, and for a 0.1.0 peer's
//! text.

use crate::sessions::v1::{BuiltinTool, CustomTool, PlatformTool, ToolDeclaration, tool_declaration::Kind};
use serde_json::{Value, json};

fn schema(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|_| json!({"type": "object"}))
}

impl CustomTool {
    /// Its JSON Schema as written (`{"type": "object"}` if none reads).
    pub fn input_schema(&self) -> Value {
        schema(&self.input_schema_json)
    }
}

impl ToolDeclaration {
    /// The names this declaration makes callable: a builtin's, custom or
    /// platform tool's name, a ToolSource declaration's tools.
    pub fn names(&self) -> Vec<String> {
        match &self.kind {
            Some(Kind::Builtin(BuiltinTool { name }))
            | Some(Kind::Custom(CustomTool { name, .. }))
            | Some(Kind::Platform(PlatformTool { name, .. })) => {
                vec![name.clone()]
            }
            Some(Kind::ToolSource(t)) => t.tools.clone(),
            None => vec![],
        }
    }

    pub fn to_json(&self) -> Value {
        match &self.kind {
            Some(Kind::Builtin(b)) => json!({"type": "builtin", "name": b.name}),
            Some(Kind::Custom(c)) => json!({"type": "custom", "name": c.name, "description": c.description,
                "input_schema": schema(&c.input_schema_json), "read_only": c.read_only, "destructive": c.destructive}),
            Some(Kind::ToolSource(t)) => {
                let mut v = json!({"type": "tool_source", "tool_source_id": t.tool_source_id, "tools": t.tools});
                if let Some(c) = &t.connection_id {
                    v["connection_id"] = json!(c);
                }
                v
            }
            Some(Kind::Platform(p)) => {
                json!({"type": "platform", "name": p.name, "description": p.description, "input_schema": schema(&p.input_schema_json)})
            }
            None => Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::v1::ToolSourceTools;

    #[test]
    fn each_kind_shows_as_declared() {
        let b = ToolDeclaration { kind: Some(Kind::Builtin(BuiltinTool { name: "bash".into() })) };
        assert_eq!(b.to_json(), json!({"type": "builtin", "name": "bash"}));
        let c = ToolDeclaration {
            kind: Some(Kind::Custom(CustomTool {
                name: "lookup".into(),
                description: "finds".into(),
                input_schema_json: r#"{"type":"object","properties":{"q":{"type":"string"}}}"#.into(),
                read_only: true,
                destructive: false,
            })),
        };
        assert_eq!(
            c.to_json(),
            json!({"type": "custom", "name": "lookup", "description": "finds",
                "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}, "read_only": true, "destructive": false})
        );
        let t = ToolDeclaration {
            kind: Some(Kind::ToolSource(ToolSourceTools { tool_source_id: "tsrc_1".into(), tools: vec!["a".into()], connection_id: None })),
        };
        assert_eq!(t.to_json(), json!({"type": "tool_source", "tool_source_id": "tsrc_1", "tools": ["a"]}), "no connection until pinned");
        assert_eq!((b.names(), c.names(), t.names()), (vec!["bash".to_string()], vec!["lookup".to_string()], vec!["a".to_string()]));
    }
}
