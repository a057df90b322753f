//! An Agent's definition as the public JSON gives it (api.md §5), read
//! into the typed `AgentDefinition` and rendered back: by the gateway for a
//! body and an answer, by the sessions service for a 0.1.0 gateway's text
//! and its stored roster — one reading and one rendering for all of them.
//!
//! Only the shape is read here: fields, types, tool kinds, and a roster's
//! entries (ids and versions). The sessions service checks the rules —
//! sizes, builtin names, tool names, metadata, what a draft may declare —
//! and publication resolves the roster.

use crate::sessions::v1::{
    AgentDefinition, BuiltinTool, CustomTool, ExactRosterEntry, ModelRef, PlatformTool, Roster, RosterEntry, RosterMember, SessionVariable,
    SkillRef, ToolDeclaration, ToolSourceTools, roster_entry::Entry, tool_declaration::Kind,
};
use checkfu_core::id::AgentId;
use checkfu_core::{Error, Result};
use serde_json::{Map, Value, json};

/// The most entries a roster names (and the most distinct Agents).
pub const MAX_ROSTER: usize = 20;

/// Reads a written definition (`{}` is the empty one).
pub fn read(v: Value) -> Result<AgentDefinition> {
    let w: written::AgentDefinition =
        serde_json::from_value(v).map_err(|e| Error::invalid_field("draft", format!("invalid agent definition: {e}")))?;
    let multiagent = w.multiagent.as_ref().map(roster).transpose()?;
    Ok(AgentDefinition {
        instructions: w.instructions,
        description: w.description,
        metadata: w.metadata.into_iter().collect(),
        model: Some(ModelRef { routing_profile_id: w.model.routing_profile_id, label: w.model.label }),
        tools: w.tools.into_iter().map(written::ToolDecl::into_message).collect(),
        skills: w.skills.into_iter().map(written::SkillRefWire::into_message).collect(),
        session_variable: Some(SessionVariable {
            allowed_tools: w.session_variable.tools.allowed,
            allowed_skills: w.session_variable.skills.allowed,
        }),
        multiagent,
    })
}

fn shape(message: impl Into<String>) -> Error {
    Error::invalid_field("draft.multiagent", message)
}

/// A roster refusal: `draft.multiagent.agents` with its reason.
pub fn roster_refused(reason: &str, message: impl Into<String>) -> Error {
    Error::invalid_field("draft.multiagent.agents", message).with_reason(reason)
}

const ENTRY_SHAPE: &str = "an entry is \"agt_…\", {type: \"agent\", id, version} or {type: \"self\"}";

/// Reads `{type: "coordinator", agents: [...], resolved_agents?}`: each
/// entry `"agt_…"`, `{type: "agent", id, version}` or `{type: "self"}`;
/// `resolved_agents`, when given, as publication writes it.
pub fn roster(v: &Value) -> Result<Roster> {
    let o = v.as_object().ok_or_else(|| shape("multiagent must be an object {type: \"coordinator\", agents: [...]}"))?;
    if o.get("type").and_then(Value::as_str) != Some("coordinator") {
        return Err(shape("multiagent.type must be \"coordinator\""));
    }
    if let Some(k) = o.keys().find(|k| !["type", "agents", "resolved_agents"].contains(&k.as_str())) {
        return Err(shape(format!("multiagent has no field {k:?}")));
    }
    let agents = o.get("agents").and_then(Value::as_array).ok_or_else(|| shape("multiagent.agents must be an array"))?;
    if agents.len() > 4 * MAX_ROSTER {
        return Err(roster_refused("roster_too_large", format!("a roster holds at most {MAX_ROSTER} entries")));
    }
    let agents = agents.iter().enumerate().map(|(i, a)| entry(&format!("draft.multiagent.agents[{i}]"), a)).collect::<Result<_>>()?;
    let resolved = o.get("resolved_agents").filter(|r| !r.is_null());
    let resolved_agents = match resolved {
        None => vec![],
        Some(Value::Array(members)) => {
            members.iter().enumerate().map(|(i, m)| member(&format!("draft.multiagent.resolved_agents[{i}]"), m)).collect::<Result<_>>()?
        }
        Some(_) => return Err(shape("multiagent.resolved_agents must be an array")),
    };
    Ok(Roster { agents, resolved_agents, resolved: resolved.is_some() })
}

fn entry(field: &str, a: &Value) -> Result<RosterEntry> {
    let entry = match a {
        Value::String(id) => {
            AgentId::check(field, id)?;
            Entry::Latest(id.clone())
        }
        Value::Object(m) => match m.get("type").and_then(Value::as_str) {
            Some("self") if m.len() == 1 => Entry::Itself(true),
            Some("agent") => {
                let id = m.get("id").and_then(Value::as_str).ok_or_else(|| Error::invalid_field(field, "an exact entry names id"))?;
                AgentId::check(&format!("{field}.id"), id)?;
                let version = m
                    .get("version")
                    .and_then(Value::as_i64)
                    .filter(|v| *v >= 1)
                    .ok_or_else(|| Error::invalid_field(&format!("{field}.version"), "an exact entry names a version of at least 1"))?;
                if m.len() != 3 {
                    return Err(Error::invalid_field(field, "an exact entry is {type: \"agent\", id, version}"));
                }
                Entry::Exact(ExactRosterEntry { agent_id: id.into(), version })
            }
            _ => return Err(Error::invalid_field(field, ENTRY_SHAPE)),
        },
        _ => return Err(Error::invalid_field(field, ENTRY_SHAPE)),
    };
    Ok(RosterEntry { entry: Some(entry) })
}

/// `{agent_id, version, release_sha256, name, self}`, as publication
/// writes it (a definition read back and written again keeps it).
fn member(field: &str, m: &Value) -> Result<RosterMember> {
    let refuse = || Error::invalid_field(field, "a resolved member is {agent_id, version, release_sha256, name, self}");
    let o = m.as_object().filter(|o| o.len() == 5).ok_or_else(refuse)?;
    let agent_id = o.get("agent_id").and_then(Value::as_str).ok_or_else(refuse)?;
    AgentId::check(&format!("{field}.agent_id"), agent_id)?;
    let release_sha256 = match o.get("release_sha256") {
        Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        _ => return Err(refuse()),
    };
    Ok(RosterMember {
        agent_id: agent_id.into(),
        version: o.get("version").and_then(Value::as_i64).filter(|v| *v >= 1).ok_or_else(refuse)?,
        release_sha256,
        name: o.get("name").and_then(Value::as_str).ok_or_else(refuse)?.into(),
        itself: o.get("self").and_then(Value::as_bool).ok_or_else(refuse)?,
    })
}

impl AgentDefinition {
    /// The public JSON: what the sessions service stores and hashes, key
    /// for key (an absent optional is left out, as it is there).
    pub fn to_json(&self) -> Value {
        let model = self.model.clone().unwrap_or_default();
        let mut m = Map::new();
        if let Some(r) = model.routing_profile_id {
            m.insert("routing_profile_id".into(), json!(r));
        }
        if let Some(l) = model.label {
            m.insert("label".into(), json!(l));
        }
        let sv = self.session_variable.clone().unwrap_or_default();
        let skills: Vec<Value> = self
            .skills
            .iter()
            .map(|s| match s.version {
                Some(v) => json!({"skill_id": s.skill_id, "version": v}),
                None => json!({"skill_id": s.skill_id}),
            })
            .collect();
        let mut v = json!({
            "instructions": self.instructions,
            "model": m,
            "tools": self.tools.iter().map(ToolDeclaration::to_json).collect::<Vec<_>>(),
            "skills": skills,
            "session_variable": {"tools": {"allowed": sv.allowed_tools}, "skills": {"allowed": sv.allowed_skills}},
        });
        if let Some(d) = &self.description {
            v["description"] = json!(d);
        }
        if !self.metadata.is_empty() {
            v["metadata"] = json!(self.metadata);
        }
        if let Some(r) = &self.multiagent {
            v["multiagent"] = r.to_json();
        }
        v
    }
}

impl Roster {
    /// Its entries as their author wrote them: `"agt_…"`, `{type: "agent",
    /// id, version}` or `{type: "self"}`.
    pub fn agents_json(&self) -> Vec<Value> {
        self.agents
            .iter()
            .map(|e| match &e.entry {
                Some(Entry::Latest(id)) => json!(id),
                Some(Entry::Exact(x)) => json!({"type": "agent", "id": x.agent_id, "version": x.version}),
                Some(Entry::Itself(_)) => json!({"type": "self"}),
                None => Value::Null,
            })
            .collect()
    }

    /// `{type: "coordinator", agents, resolved_agents?}`.
    pub fn to_json(&self) -> Value {
        let agents = self.agents_json();
        let mut v = json!({"type": "coordinator", "agents": agents});
        if self.resolved {
            let members: Vec<Value> = self
                .resolved_agents
                .iter()
                .map(|m| json!({"agent_id": m.agent_id, "version": m.version, "release_sha256": m.release_sha256, "name": m.name, "self": m.itself}))
                .collect();
            v["resolved_agents"] = json!(members);
        }
        v
    }
}

/// The written shape, as serde reads it. A refusal's message names these
/// types ("expected struct AgentDefinition", "internally tagged enum
/// ToolDecl"), so they keep the names drafts have always been refused with.
mod written {
    use super::*;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct AgentDefinition {
        #[serde(default)]
        pub instructions: String,
        #[serde(default)]
        pub description: Option<String>,
        #[serde(default)]
        pub metadata: BTreeMap<String, String>,
        #[serde(default)]
        pub model: ModelRef,
        #[serde(default)]
        pub tools: Vec<ToolDecl>,
        #[serde(default)]
        pub skills: Vec<SkillRefWire>,
        #[serde(default)]
        pub session_variable: SessionVariable,
        #[serde(default)]
        pub multiagent: Option<Value>,
    }

    #[derive(Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum ToolDecl {
        Builtin {
            name: String,
        },
        Custom {
            name: String,
            #[serde(default)]
            description: String,
            #[serde(default = "empty_object")]
            input_schema: Value,
            #[serde(default)]
            read_only: bool,
            #[serde(default)]
            destructive: bool,
        },
        ToolSource {
            tool_source_id: String,
            tools: Vec<String>,
            #[serde(default)]
            connection_id: Option<String>,
        },
        Platform {
            name: String,
            description: String,
            input_schema: Value,
        },
    }

    fn empty_object() -> Value {
        json!({"type": "object"})
    }

    impl ToolDecl {
        pub fn into_message(self) -> ToolDeclaration {
            let kind = match self {
                ToolDecl::Builtin { name } => Kind::Builtin(BuiltinTool { name }),
                ToolDecl::Custom { name, description, input_schema, read_only, destructive } => {
                    Kind::Custom(CustomTool { name, description, input_schema_json: input_schema.to_string(), read_only, destructive })
                }
                ToolDecl::ToolSource { tool_source_id, tools, connection_id } => {
                    Kind::ToolSource(ToolSourceTools { tool_source_id, tools, connection_id })
                }
                ToolDecl::Platform { name, description, input_schema } => {
                    Kind::Platform(PlatformTool { name, description, input_schema_json: input_schema.to_string() })
                }
            };
            ToolDeclaration { kind: Some(kind) }
        }
    }

    #[derive(Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ModelRef {
        #[serde(default)]
        pub routing_profile_id: Option<String>,
        #[serde(default)]
        pub label: Option<String>,
    }

    #[derive(Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Allowed {
        #[serde(default)]
        pub allowed: Vec<String>,
    }

    #[derive(Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SessionVariable {
        #[serde(default)]
        pub tools: Allowed,
        #[serde(default)]
        pub skills: Allowed,
    }

    /// A skill: `{skill_id, version?}`, or the bare id.
    #[derive(Deserialize)]
    #[serde(untagged)]
    pub enum SkillRefWire {
        Bare(String),
        Full {
            skill_id: String,
            #[serde(default)]
            version: Option<i64>,
        },
    }

    impl SkillRefWire {
        pub fn into_message(self) -> SkillRef {
            match self {
                SkillRefWire::Bare(skill_id) => SkillRef { skill_id, version: None },
                SkillRefWire::Full { skill_id, version } => SkillRef { skill_id, version },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "agt_01jx0000000000000000000000";
    const B: &str = "agt_01jx0000000000000000000001";

    #[test]
    fn a_written_definition_reads_and_renders_back() {
        let full = json!({
            "instructions": "Be brief.", "description": "helps", "metadata": {"team": "a"},
            "model": {"routing_profile_id": "mrp_01jx0000000000000000000000", "label": "m"},
            "tools": [{"type": "builtin", "name": "bash"},
                      {"type": "custom", "name": "lookup", "description": "", "input_schema": {"type": "object"}, "read_only": false, "destructive": true},
                      {"type": "tool_source", "tool_source_id": "tsrc_1", "tools": ["a"], "connection_id": "conn_1"}],
            "skills": [{"skill_id": "skl_1", "version": 2}, {"skill_id": "skl_2"}],
            "session_variable": {"tools": {"allowed": ["bash"]}, "skills": {"allowed": []}},
            "multiagent": {"type": "coordinator", "agents": [A, {"type": "agent", "id": B, "version": 2}, {"type": "self"}],
                "resolved_agents": [{"agent_id": A, "version": 1, "release_sha256": null, "name": "me", "self": true}]},
        });
        assert_eq!(read(full.clone()).expect("reads").to_json(), full);
        let empty = json!({"instructions": "", "model": {}, "tools": [], "skills": [],
            "session_variable": {"tools": {"allowed": []}, "skills": {"allowed": []}}});
        assert_eq!(read(json!({})).expect("empty").to_json(), empty);
        let bare = read(json!({"skills": ["skl_1"], "tools": [{"type": "custom", "name": "x"}]})).expect("bare");
        assert_eq!(bare.to_json()["skills"], json!([{"skill_id": "skl_1"}]));
        assert_eq!(bare.to_json()["tools"][0]["input_schema"], json!({"type": "object"}));
    }

    #[test]
    fn a_refusal_names_what_serde_found() {
        let e = read(json!({"instructions": "x", "nope": 1})).expect_err("unknown field");
        assert_eq!(e.details["field"], "draft");
        assert!(e.message.starts_with("invalid agent definition: unknown field `nope`, expected one of `instructions`"), "{}", e.message);
        let e = read(json!(5)).expect_err("not an object");
        assert_eq!(e.message, "invalid agent definition: invalid type: integer `5`, expected struct AgentDefinition");
        let e = read(json!({"tools": [{"type": "shell"}]})).expect_err("unknown kind");
        assert!(e.message.contains("unknown variant `shell`"), "{}", e.message);
    }

    #[test]
    fn entries_are_bare_exact_or_self() {
        let ok = json!({"type": "coordinator", "agents": [A, {"type": "agent", "id": B, "version": 2}, {"type": "self"}]});
        let r = roster(&ok).expect("roster");
        assert_eq!((r.agents.len(), r.resolved), (3, false));
        for bad in [
            json!({"type": "team", "agents": []}),
            json!({"type": "coordinator"}),
            json!({"type": "coordinator", "agents": ["nope"]}),
            json!({"type": "coordinator", "agents": [{"type": "agent", "id": A}]}),
            json!({"type": "coordinator", "agents": [{"type": "agent", "id": A, "version": 0}]}),
            json!({"type": "coordinator", "agents": [{"type": "self", "extra": 1}]}),
            json!({"type": "coordinator", "agents": [], "extra": 1}),
            json!({"type": "coordinator", "agents": [], "resolved_agents": [{"agent_id": A}]}),
            json!({"type": "coordinator", "agents": [], "resolved_agents": 3}),
        ] {
            assert!(roster(&bad).is_err(), "{bad}");
        }
        let e = roster(&json!({"type": "coordinator", "agents": vec![A; 81]})).expect_err("too many");
        assert_eq!(e.details["reason"], "roster_too_large");
    }
}
