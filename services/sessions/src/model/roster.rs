//! A coordinator's roster (api.md §15.1): the Agents its Session may spawn
//! as child threads. The draft names members loosely (`"agt_…"` — the
//! member's latest version — `{type:"agent", id, version}` or
//! `{type:"self"}`); publication freezes them into
//! `multiagent.resolved_agents`, so a published version's roster never
//! moves. Only republishing advances a bare id.

use checkfu_core::id::AgentId;
use checkfu_core::{Error, Result};
use serde_json::Value;

/// The most roster entries, and the most distinct Agents.
pub const MAX_ROSTER: usize = 20;
/// The most Skills a roster's members mount in all.
pub const MAX_ROSTER_SKILLS: usize = 500;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// The member's latest version at publication.
    Bare(String),
    Exact(String, i64),
    /// The coordinator itself, at the version being published.
    Itself,
}

fn shape(message: impl Into<String>) -> Error {
    Error::invalid_field("draft.multiagent", message)
}

pub(crate) fn refused(reason: &str, message: impl Into<String>) -> Error {
    Error::invalid_field("draft.multiagent.agents", message).with_reason(reason)
}

/// The draft's roster, shape-checked (publication checks the members).
pub fn parse(v: &Value) -> Result<Vec<Entry>> {
    let o = v.as_object().ok_or_else(|| shape("multiagent must be an object {type: \"coordinator\", agents: [...]}"))?;
    if o.get("type").and_then(Value::as_str) != Some("coordinator") {
        return Err(shape("multiagent.type must be \"coordinator\""));
    }
    if let Some(k) = o.keys().find(|k| !["type", "agents", "resolved_agents"].contains(&k.as_str())) {
        return Err(shape(format!("multiagent has no field {k:?}")));
    }
    let agents = o.get("agents").and_then(Value::as_array).ok_or_else(|| shape("multiagent.agents must be an array"))?;
    if agents.len() > 4 * MAX_ROSTER {
        return Err(refused("roster_too_large", format!("a roster holds at most {MAX_ROSTER} entries")));
    }
    agents
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let field = format!("draft.multiagent.agents[{i}]");
            match a {
                Value::String(id) => {
                    AgentId::check(&field, id)?;
                    Ok(Entry::Bare(id.clone()))
                }
                Value::Object(m) => match m.get("type").and_then(Value::as_str) {
                    Some("self") if m.len() == 1 => Ok(Entry::Itself),
                    Some("agent") => {
                        let id =
                            m.get("id").and_then(Value::as_str).ok_or_else(|| Error::invalid_field(&field, "an exact entry names id"))?;
                        AgentId::check(&format!("{field}.id"), id)?;
                        let version = m.get("version").and_then(Value::as_i64).filter(|v| *v >= 1).ok_or_else(|| {
                            Error::invalid_field(&format!("{field}.version"), "an exact entry names a version of at least 1")
                        })?;
                        if m.len() != 3 {
                            return Err(Error::invalid_field(&field, "an exact entry is {type: \"agent\", id, version}"));
                        }
                        Ok(Entry::Exact(id.into(), version))
                    }
                    _ => Err(Error::invalid_field(&field, "an entry is \"agt_…\", {type: \"agent\", id, version} or {type: \"self\"}")),
                },
                _ => Err(Error::invalid_field(&field, "an entry is \"agt_…\", {type: \"agent\", id, version} or {type: \"self\"}")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_are_bare_exact_or_self() {
        let ok = json!({"type": "coordinator", "agents": ["agt_01jx0000000000000000000000", {"type": "agent", "id": "agt_01jx0000000000000000000001", "version": 2}, {"type": "self"}]});
        assert_eq!(parse(&ok).unwrap().len(), 3);
        for bad in [
            json!({"type": "team", "agents": []}),
            json!({"type": "coordinator"}),
            json!({"type": "coordinator", "agents": ["nope"]}),
            json!({"type": "coordinator", "agents": [{"type": "agent", "id": "agt_01jx0000000000000000000000"}]}),
            json!({"type": "coordinator", "agents": [{"type": "agent", "id": "agt_01jx0000000000000000000000", "version": 0}]}),
            json!({"type": "coordinator", "agents": [{"type": "self", "extra": 1}]}),
            json!({"type": "coordinator", "agents": [], "extra": 1}),
        ] {
            assert!(parse(&bad).is_err(), "{bad}");
        }
    }
}
