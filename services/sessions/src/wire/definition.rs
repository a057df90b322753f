//! An Agent's definition on the mesh: the typed `AgentDefinition` a draft
//! and a published version cross as (their JSON text written beside them
//! for a 0.1.0 gateway until the release after 0.1.0). The shape of a
//! written definition is read by `checkfu_proto::agent_definition`; the
//! catalog checks the rules.

use crate::model::roster::Roster;
use crate::model::{AgentDefinition, Allowed, ModelRef, SessionVariable, SkillRef};
use checkfu_core::Result;
use checkfu_proto::agent_definition;
use checkfu_proto::sessions::v1 as pb;
use serde_json::Value;

pub fn message(d: &AgentDefinition) -> pb::AgentDefinition {
    pb::AgentDefinition {
        instructions: d.instructions.clone(),
        description: d.description.clone(),
        metadata: d.metadata.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        model: Some(pb::ModelRef { routing_profile_id: d.model.routing_profile_id.clone(), label: d.model.label.clone() }),
        tools: d.tools.iter().map(super::tools::declaration).collect(),
        skills: d.skills.iter().map(|s| pb::SkillRef { skill_id: s.skill_id.clone(), version: s.version }).collect(),
        session_variable: Some(pb::SessionVariable {
            allowed_tools: d.session_variable.tools.allowed.clone(),
            allowed_skills: d.session_variable.skills.allowed.clone(),
        }),
        multiagent: d.multiagent.as_ref().map(Roster::to_message),
    }
}

/// A definition from the mesh, its shape as read (the rules unchecked).
pub fn definition(m: pb::AgentDefinition) -> Result<AgentDefinition> {
    let model = m.model.unwrap_or_default();
    let sv = m.session_variable.unwrap_or_default();
    Ok(AgentDefinition {
        instructions: m.instructions,
        description: m.description,
        metadata: m.metadata.into_iter().collect(),
        model: ModelRef { routing_profile_id: model.routing_profile_id, label: model.label },
        tools: m.tools.into_iter().enumerate().map(|(i, t)| super::tools::decl(t, &format!("draft.tools[{i}]"))).collect::<Result<_>>()?,
        skills: m.skills.into_iter().map(|s| SkillRef { skill_id: s.skill_id, version: s.version }).collect(),
        session_variable: SessionVariable { tools: Allowed { allowed: sv.allowed_tools }, skills: Allowed { allowed: sv.allowed_skills } },
        multiagent: m.multiagent.map(Roster::from_message).transpose()?,
    })
}

/// A definition as written (a 0.1.0 gateway's text, read as JSON).
pub fn from_json(v: Value) -> Result<AgentDefinition> {
    definition(agent_definition::read(v)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolDecl;
    use serde_json::json;

    fn published() -> AgentDefinition {
        let mut d = from_json(json!({
            "instructions": "Be brief.", "description": "helps", "metadata": {"team": "a"},
            "model": {"routing_profile_id": "mrp_01jx0000000000000000000000", "label": "m"},
            "tools": [{"type": "builtin", "name": "bash"},
                      {"type": "custom", "name": "lookup", "input_schema": {"type": "object", "properties": {}}, "destructive": true},
                      {"type": "tool_source", "tool_source_id": "tsrc_01jx0000000000000000000000", "tools": ["add"]}],
            "skills": [{"skill_id": "skl_01jx0000000000000000000000", "version": 2}],
            "session_variable": {"tools": {"allowed": ["bash"]}},
            "multiagent": {"type": "coordinator", "agents": ["agt_01jx0000000000000000000001",
                {"type": "agent", "id": "agt_01jx0000000000000000000002", "version": 3}, {"type": "self"}]},
        }))
        .expect("reads");
        d.validate().expect("valid");
        if let ToolDecl::ToolSource { connection_id, .. } = &mut d.tools[2] {
            *connection_id = Some("conn_01jx0000000000000000000000".into());
        }
        let resolved = json!([
            {"agent_id": "agt_01jx0000000000000000000001", "version": 4, "release_sha256": "ab", "name": "helper", "self": false},
            {"agent_id": "agt_01jx0000000000000000000002", "version": 3, "release_sha256": "cd", "name": "other", "self": false},
            {"agent_id": "agt_01jx0000000000000000000009", "version": 1, "release_sha256": null, "name": "me", "self": true}]);
        let mut roster = serde_json::to_value(d.multiagent.take()).expect("json");
        roster["resolved_agents"] = resolved;
        d.multiagent = serde_json::from_value(roster).expect("roster");
        d
    }

    /// A published version's digest is the one it had when definitions
    /// crossed the mesh as JSON text: a changed byte would orphan every
    /// release a deployment pins.
    #[test]
    fn the_release_digest_is_unchanged() {
        assert_eq!(
            checkfu_core::sha256_hex(published().canonical_json()),
            "b8333ef172e06f2e68e8887f0a2dbf7e409f0739ceaba232a4cc7cb765d0c3c7"
        );
    }

    /// The typed definition renders exactly as the catalog stores it, and
    /// reads back whole.
    #[test]
    fn the_message_renders_as_stored_and_reads_back() {
        let d = published();
        assert_eq!(message(&d).to_json(), serde_json::to_value(&d).expect("json"));
        assert_eq!(definition(message(&d)).expect("reads back"), d);
        let empty = AgentDefinition::default();
        assert_eq!(message(&empty).to_json(), serde_json::to_value(&empty).expect("json"));
    }

    #[test]
    fn the_platforms_tool_names_and_kind_are_not_declared() {
        let checked = |v: Value| from_json(v).and_then(|d| d.validate());
        for name in ["spawn_agent", "send_message"] {
            let e = checked(json!({"tools": [{"type": "custom", "name": name}]})).expect_err(name);
            assert!(e.message.contains("reserved"), "{}", e.message);
        }
        let platform = json!({"tools": [{"type": "platform", "name": "x", "description": "", "input_schema": {}}]});
        assert!(checked(platform).is_err(), "platform tools are given, not declared");
        assert!(checked(json!({"tools": [{"type": "custom", "name": "spawn"}]})).is_ok());
        assert!(checked(json!({"skills": ["nope"]})).is_err(), "a skill id is checked");
    }

    #[test]
    fn descriptions_metadata_and_labels_are_bounded() {
        let checked = |v: Value| from_json(v).and_then(|d| d.validate().map(|_| d));
        let d = checked(json!({"description": "d", "metadata": {"team": "blue"}, "model": {"label": "claude-sonnet-4-6"}})).expect("valid");
        assert_eq!((d.description.as_deref(), d.model.label.as_deref()), (Some("d"), Some("claude-sonnet-4-6")));
        let many: serde_json::Map<String, Value> = (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
        let e = checked(json!({"metadata": many})).expect_err("17 pairs");
        assert_eq!(e.details["reason"], "invalid_metadata");
        assert!(checked(json!({"metadata": {"k": "v".repeat(513)}})).is_err());
        assert!(checked(json!({"description": "d".repeat(2049)})).is_err());
        // Definitions without them serialize as before (release digests stay).
        let plain = serde_json::to_value(checked(json!({"instructions": "x"})).expect("valid")).expect("json");
        assert!(plain.get("description").is_none() && plain.get("metadata").is_none() && plain["model"].get("label").is_none());
    }
}
