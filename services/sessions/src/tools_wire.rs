//! Tool declarations on the mesh: the typed `ToolDeclaration` a claimed
//! Run's work item carries (its JSON text written beside it for a 0.1.0
//! runner until the release after 0.1.0).

use crate::model::ToolDecl;
use checkfu_proto::sessions::v1 as pb;
use pb::tool_declaration::Kind;

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        }
    }
}
