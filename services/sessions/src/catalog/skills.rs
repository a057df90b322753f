//! Publication pins the skills an Agent version mounts.

use super::Catalog;
use crate::model::*;
use checkfu_core::id::{EnvironmentId, SkillId};
use checkfu_core::{Error, Result};

impl Catalog {
    /// Publication pins each skill's version (the latest when omitted) and
    /// refuses another Environment's, an archived one, a version that does
    /// not exist, and two versions of one name.
    pub(crate) async fn pin_skills(&self, environment_id: &EnvironmentId, mut definition: AgentDefinition) -> Result<AgentDefinition> {
        if definition.skills.is_empty() {
            return Ok(definition);
        }
        self.features.require("skills")?;
        let mut names: Vec<(String, String, i64)> = vec![];
        for (i, r) in definition.skills.iter_mut().enumerate() {
            let field = format!("draft.skills[{i}]");
            let s = self
                .store
                .get_skill(&SkillId::parse(&field, &r.skill_id)?)
                .await?
                .ok_or_else(|| Error::invalid_field(&format!("{field}.skill_id"), format!("skill {} was not found", r.skill_id)))?;
            if &s.environment_id != environment_id {
                return Err(Error::invalid_field(&format!("{field}.skill_id"), format!("skill {} is in another environment", s.id))
                    .with_reason("other_environment"));
            }
            if s.status == SkillStatus::Archived {
                return Err(skill_archived(&s));
            }
            let version = r.version.unwrap_or(s.latest_version);
            if version > s.latest_version {
                return Err(Error::invalid_field(&format!("{field}.version"), format!("skill {} has no version {version}", s.id)));
            }
            match names.iter().find(|(n, _, _)| *n == s.name) {
                Some((_, id, v)) if *id == s.id.as_str() && *v == version => {}
                Some(_) => {
                    return Err(Error::invalid_field(&field, format!("two versions of a skill named {:?}", s.name))
                        .with_reason("skill_version_conflict"));
                }
                None => names.push((s.name.clone(), s.id.to_string(), version)),
            }
            r.version = Some(version);
        }
        definition.skills.dedup();
        Ok(definition)
    }
}
