//! Publication freezes a coordinator's roster (`model::roster`) into
//! `multiagent.resolved_agents`, each member checked and pinned.

use super::Catalog;
use crate::model::AgentDefinition;
use crate::model::roster::{Entry, MAX_ROSTER, MAX_ROSTER_SKILLS, Member, refused};
use checkfu_core::Result;

impl Catalog {
    /// Freezes the roster of `definition` (the coordinator `me`, about to
    /// publish `version`) into `multiagent.resolved_agents`.
    pub(crate) async fn resolve_roster(
        &self,
        me: &crate::model::Agent,
        version: i64,
        mut definition: AgentDefinition,
    ) -> Result<AgentDefinition> {
        let Some(mut roster) = definition.multiagent.take() else { return Ok(definition) };
        let entries = &roster.agents;
        if entries.is_empty() {
            return Err(refused("roster_empty", "a coordinator's roster names at least one Agent"));
        }
        if entries.len() > MAX_ROSTER {
            return Err(refused("roster_too_large", format!("a roster holds at most {MAX_ROSTER} entries")));
        }
        let mut ids: Vec<String> = vec![];
        for e in entries {
            let id = match e {
                Entry::Bare(id) | Entry::Exact(id, _) => id.clone(),
                Entry::Itself => me.id.to_string(),
            };
            if ids.contains(&id) {
                return Err(refused("roster_duplicate", format!("{id} appears twice in the roster (self counts as the coordinator)")));
            }
            ids.push(id);
        }
        let mut resolved = vec![];
        let mut skills = definition.skills.len();
        for e in entries {
            let (id, pinned) = match e {
                Entry::Itself => {
                    resolved.push(Member {
                        agent_id: me.id.to_string(),
                        version,
                        release_sha256: None,
                        name: me.name.clone(),
                        itself: true,
                    });
                    continue;
                }
                Entry::Bare(id) => (id, None),
                Entry::Exact(id, v) => (id, Some(*v)),
            };
            let unavailable = |why: &str| refused("roster_member_unavailable", format!("roster member {id}: {why}"));
            let member = match self.agent(id).await {
                Ok(a) => a,
                Err(e) if e.code == checkfu_core::Code::NotFound => return Err(unavailable("no such Agent")),
                Err(e) => return Err(e),
            };
            if member.environment_id != me.environment_id {
                return Err(unavailable("it belongs to another environment"));
            }
            if member.archived {
                return Err(unavailable("it is archived"));
            }
            let at = pinned.unwrap_or(member.latest_version);
            if at < 1 {
                return Err(unavailable("it has no published version"));
            }
            let v = match self.agent_version(id, at).await {
                Ok(v) => v,
                Err(e) if e.code == checkfu_core::Code::NotFound => return Err(unavailable(&format!("it has no version {at}"))),
                Err(e) => return Err(e),
            };
            if v.definition.multiagent.is_some() {
                return Err(refused("nested_coordinator", format!("roster member {id} is itself a coordinator")));
            }
            skills += v.definition.skills.len();
            resolved.push(Member {
                agent_id: id.clone(),
                version: at,
                release_sha256: Some(v.release_sha256),
                name: member.name,
                itself: false,
            });
        }
        if skills > MAX_ROSTER_SKILLS {
            return Err(refused(
                "roster_skills_exceeded",
                format!("the roster mounts {skills} Skills in all; at most {MAX_ROSTER_SKILLS}"),
            ));
        }
        roster.resolved = Some(resolved);
        definition.multiagent = Some(roster);
        Ok(definition)
    }
}
