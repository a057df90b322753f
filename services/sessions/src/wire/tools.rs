//! Tool declarations on the mesh: the typed `ToolDeclaration` an Agent's
//! definition and a claimed Run's work item carry (their JSON text written
//! beside them for a 0.1.0 peer until the release after 0.1.0).

use crate::model::ToolDecl;
use checkfu_core::{Error, Result};
use checkfu_proto::sessions::v1 as pb;
use pb::tool_declaration::Kind;
use serde_json::{Value, json};

pub fn declaration(t: &ToolDecl) -> pb::ToolDeclaration {
    let kind = match t {
        ToolDecl::Builtin { name } => Kind::Builtin(pb::BuiltinTool { name: name.clone() }),
        ToolDecl::Custom { name, description, input_schema, read_only, destructive } => Kind::Custom(pb::CustomTool {
            name: name.clone(),
            description: description.clone(),
            input_schema_json: input_schema.to_string(),
            read_only: *read_only,
            destructive: *destructive,
        }),
        ToolDecl::ToolSource { tool_source_id, tools, connection_id } => Kind::ToolSource(pb::ToolSourceTools {
            tool_source_id: tool_source_id.clone(),
            tools: tools.clone(),
            connection_id: connection_id.clone(),
        }),
        ToolDecl::Platform { name, description, input_schema } => Kind::Platform(pb::PlatformTool {
            name: name.clone(),
            description: description.clone(),
            input_schema_json: input_schema.to_string(),
        }),
    };
    pb::ToolDeclaration { kind: Some(kind) }
}

/// A declaration from the mesh; `field` names it in a refusal.
pub fn decl(t: pb::ToolDeclaration, field: &str) -> Result<ToolDecl> {
    Ok(match t.kind {
        Some(Kind::Builtin(b)) => ToolDecl::Builtin { name: b.name },
        Some(Kind::Custom(c)) => ToolDecl::Custom {
            input_schema: schema(field, &c.input_schema_json)?,
            name: c.name,
            description: c.description,
            read_only: c.read_only,
            destructive: c.destructive,
        },
        Some(Kind::ToolSource(t)) => {
            ToolDecl::ToolSource { tool_source_id: t.tool_source_id, tools: t.tools, connection_id: t.connection_id }
        }
        Some(Kind::Platform(p)) => {
            ToolDecl::Platform { input_schema: schema(field, &p.input_schema_json)?, name: p.name, description: p.description }
        }
        None => return Err(Error::invalid_field(field, "a tool declaration names its type")),
    })
}

/// A declared JSON Schema; none is `{"type": "object"}`, as when a draft
/// leaves it out.
fn schema(field: &str, text: &str) -> Result<Value> {
    if text.is_empty() {
        return Ok(json!({"type": "object"}));
    }
    serde_json::from_str(text).map_err(|e| Error::invalid_field(&format!("{field}.input_schema"), format!("input_schema is not JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed declaration shows exactly as the domain's JSON does, so a
    /// runner reads the same declaration from either.
    #[test]
    fn every_kind_renders_as_its_json() {
        let all = [
            ToolDecl::Builtin { name: "bash".into() },
            ToolDecl::Custom {
                name: "lookup".into(),
                description: "finds".into(),
                input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
                read_only: true,
                destructive: false,
            },
            ToolDecl::ToolSource {
                tool_source_id: "tsrc_1".into(),
                tools: vec!["a".into(), "b".into()],
                connection_id: Some("conn_1".into()),
            },
            ToolDecl::ToolSource { tool_source_id: "tsrc_2".into(), tools: vec!["c".into()], connection_id: None },
            ToolDecl::Platform { name: "spawn_agent".into(), description: "starts".into(), input_schema: json!({"type": "object"}) },
        ];
        for t in &all {
            assert_eq!(declaration(t).to_json(), serde_json::to_value(t).expect("json"), "{t:?}");
            assert_eq!(&decl(declaration(t), "tools[0]").expect("reads back"), t);
        }
        assert!(decl(pb::ToolDeclaration { kind: None }, "tools[0]").is_err());
    }
}
