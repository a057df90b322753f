//! A coordinator's roster (api.md §15.1): the Agents its Session may spawn
//! as child threads. The draft names members loosely (`"agt_…"` — the
//! member's latest version — `{type:"agent", id, version}` or
//! `{type:"self"}`); publication freezes them into `resolved`
//! (`multiagent.resolved_agents`), so a published version's roster never
//! moves. Only republishing advances a bare id.
//!
//! Its JSON is read and rendered by `checkfu_proto::agent_definition`, for
//! a body and for a stored definition alike.

use checkfu_core::id::AgentId;
use checkfu_core::{Error, Result};
use checkfu_proto::agent_definition;
use checkfu_proto::sessions::v1 as pb;
use pb::roster_entry::Entry as Written;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use agent_definition::MAX_ROSTER;
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

/// A member as publication froze it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub agent_id: String,
    pub version: i64,
    /// `None` for the coordinator itself: the version's own digest is
    /// computed over the list.
    pub release_sha256: Option<String>,
    pub name: String,
    pub itself: bool,
}

/// A roster as written, and (once published) resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Value", into = "Value")]
pub struct Roster {
    pub agents: Vec<Entry>,
    pub resolved: Option<Vec<Member>>,
}

pub(crate) fn refused(reason: &str, message: impl Into<String>) -> Error {
    agent_definition::roster_refused(reason, message)
}

impl Roster {
    /// The typed roster from the mesh; its ids are checked again, since
    /// only an id the catalog can parse may be published.
    pub fn from_message(m: pb::Roster) -> Result<Roster> {
        let agents = m
            .agents
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                let field = format!("draft.multiagent.agents[{i}]");
                match e.entry {
                    Some(Written::Latest(id)) => AgentId::check(&field, &id).map(|_| Entry::Bare(id)),
                    Some(Written::Exact(x)) if x.version >= 1 => {
                        AgentId::check(&format!("{field}.id"), &x.agent_id).map(|_| Entry::Exact(x.agent_id, x.version))
                    }
                    Some(Written::Itself(_)) => Ok(Entry::Itself),
                    _ => Err(Error::invalid_field(&field, "an entry names an Agent, an exact version of one, or self")),
                }
            })
            .collect::<Result<_>>()?;
        let resolved = m.resolved.then(|| {
            m.resolved_agents
                .into_iter()
                .map(|r| Member {
                    agent_id: r.agent_id,
                    version: r.version,
                    release_sha256: r.release_sha256,
                    name: r.name,
                    itself: r.itself,
                })
                .collect()
        });
        Ok(Roster { agents, resolved })
    }

    pub fn to_message(&self) -> pb::Roster {
        let agents = self
            .agents
            .iter()
            .map(|e| pb::RosterEntry {
                entry: Some(match e {
                    Entry::Bare(id) => Written::Latest(id.clone()),
                    Entry::Exact(id, v) => Written::Exact(pb::ExactRosterEntry { agent_id: id.clone(), version: *v }),
                    Entry::Itself => Written::Itself(true),
                }),
            })
            .collect();
        let resolved_agents = self
            .resolved
            .iter()
            .flatten()
            .map(|m| pb::RosterMember {
                agent_id: m.agent_id.clone(),
                version: m.version,
                release_sha256: m.release_sha256.clone(),
                name: m.name.clone(),
                itself: m.itself,
            })
            .collect();
        pb::Roster { agents, resolved_agents, resolved: self.resolved.is_some() }
    }
}

/// A stored roster. A draft written before rosters were typed kept any
/// `resolved_agents` its author sent; publication recomputes that list, so
/// one that does not read is dropped rather than failing the Agent.
impl TryFrom<Value> for Roster {
    type Error = Error;
    fn try_from(mut v: Value) -> Result<Roster> {
        let read = agent_definition::roster(&v).or_else(|e| match v.as_object_mut().and_then(|o| o.remove("resolved_agents")) {
            Some(_) => agent_definition::roster(&v),
            None => Err(e),
        })?;
        Roster::from_message(read)
    }
}

impl From<Roster> for Value {
    fn from(r: Roster) -> Value {
        r.to_message().to_json()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stored_roster_reads_and_writes_as_it_was() {
        let a = "agt_01jx0000000000000000000000";
        let v = json!({"type": "coordinator", "agents": [a, {"type": "agent", "id": a, "version": 2}, {"type": "self"}],
            "resolved_agents": [{"agent_id": a, "version": 2, "release_sha256": "ab", "name": "n", "self": false}]});
        let r: Roster = serde_json::from_value(v.clone()).expect("reads");
        assert_eq!(r.agents, [Entry::Bare(a.into()), Entry::Exact(a.into(), 2), Entry::Itself]);
        assert_eq!(serde_json::to_value(&r).expect("json"), v);
        let old = json!({"type": "coordinator", "agents": [a], "resolved_agents": "anything"});
        let r: Roster = serde_json::from_value(old).expect("an old draft's free resolved_agents is dropped");
        assert_eq!(r.resolved, None);
        assert!(serde_json::from_value::<Roster>(json!({"type": "team"})).is_err());
    }
}
