//! Skills (api.md §16.6): bundles kept as immutable versions, pinned by
//! publication and mounted read-only into the Sessions that use them.
//!
//! A version's files live in the blob store by content (`skills/<sha256>`),
//! so a file unchanged between versions (or shared by two skills) is kept
//! once. A runner reads one only for a Session whose pinned version holds
//! it ([`Uploads::mounts_skill_blob`]).

use super::Uploads;
use crate::model::*;
use bytes::Bytes;
use checkfu_core::id::{EnvironmentId, PrincipalId, SkillId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use serde_json::json;

pub(crate) fn skill_key(sha256: &str) -> String {
    format!("skills/{sha256}")
}

impl Uploads {
    /// Checks a bundle and stores the bytes the installation lacks.
    async fn store_bundle(&self, files: Vec<(String, Vec<u8>)>) -> Result<Bundle> {
        let bundle = Bundle::parse(files)?;
        for (f, bytes) in &bundle.files {
            let key = skill_key(&f.sha256);
            if self.blobs()?.size(&key).await?.is_none() {
                let mut chunks = checkfu_blobs::chunks_of(Bytes::from(bytes.clone()), 1 << 20);
                self.blobs()?.put_stream(&key, &f.sha256, MAX_SKILL_BYTES as u64, &mut chunks).await?;
            }
        }
        Ok(bundle)
    }

    /// A new skill at version 1.
    pub async fn create_skill(&self, environment_id: &str, files: Vec<(String, Vec<u8>)>, actor: &str) -> Result<Skill> {
        self.require_feature("skills")?;
        let environment_id = EnvironmentId::parse("environment_id", environment_id)?;
        let actor = PrincipalId::parse("actor_id", actor)?;
        let bundle = self.store_bundle(files).await?;
        let now = now_ms();
        let s = Skill {
            id: SkillId::mint(),
            environment_id,
            name: bundle.name.clone(),
            description: bundle.description.clone(),
            latest_version: 1,
            status: SkillStatus::Active,
            created_by: actor.clone(),
            created_ms: now,
            updated_ms: now,
        };
        let v = SkillVersion {
            skill_id: s.id.clone(),
            version: 1,
            name: bundle.name.clone(),
            description: bundle.description.clone(),
            files: bundle.entries(),
            created_by: actor,
            created_ms: now,
        };
        self.store.insert_skill(&s, &v).await?;
        Ok(s)
    }

    /// The next version of an active skill; its name may not change.
    pub async fn create_skill_version(&self, skill_id: &str, files: Vec<(String, Vec<u8>)>, actor: &str) -> Result<SkillVersion> {
        let s = self.skill(skill_id).await?;
        let actor = PrincipalId::parse("actor_id", actor)?;
        if s.status == SkillStatus::Archived {
            return Err(skill_archived(&s));
        }
        let bundle = self.store_bundle(files).await?;
        if bundle.name != s.name {
            return Err(Error::invalid_field("SKILL.md", format!("the skill is named {:?}; a new version may not rename it", s.name))
                .with_reason("name_changed"));
        }
        let v = SkillVersion {
            skill_id: s.id.clone(),
            version: s.latest_version + 1,
            name: bundle.name.clone(),
            description: bundle.description.clone(),
            files: bundle.entries(),
            created_by: actor,
            created_ms: now_ms(),
        };
        if !self.store.insert_skill_version(&v).await? {
            let now = self.skill(skill_id).await?;
            if now.status == SkillStatus::Archived {
                return Err(skill_archived(&now));
            }
            return Err(Error::conflict("another version was created at the same time; read the skill again")
                .with_details(json!({"latest_version": now.latest_version})));
        }
        Ok(v)
    }

    pub async fn skill(&self, id: &str) -> Result<Skill> {
        self.require_feature("skills")?;
        let id = SkillId::parse("id", id)?;
        self.store.get_skill(&id).await?.ok_or_else(|| Error::not_found("skill", &id))
    }

    pub async fn list_skills(&self, environment_ids: &[String], include_archived: bool, page: &PageRequest) -> Result<Vec<Skill>> {
        self.require_feature("skills")?;
        self.store.list_skills(environment_ids, include_archived, page).await
    }

    pub async fn skill_version(&self, skill_id: &str, version: i64) -> Result<SkillVersion> {
        let s = self.skill(skill_id).await?;
        self.store.get_skill_version(&s.id, version).await?.ok_or_else(|| Error::not_found("skill_version", &format!("{}/{version}", s.id)))
    }

    pub async fn list_skill_versions(&self, skill_id: &str, page: &PageRequest) -> Result<Vec<SkillVersion>> {
        let s = self.skill(skill_id).await?;
        self.store.list_skill_versions(&s.id, page.before_number()?, page.fetch_limit()).await
    }

    /// One file of a version, whole (a bundle is at most 8 MiB).
    pub async fn read_skill_file(&self, skill_id: &str, version: i64, path: &str) -> Result<(SkillFile, Bytes)> {
        let v = self.skill_version(skill_id, version).await?;
        let f = v.files.iter().find(|f| f.path == path).ok_or_else(|| Error::not_found("skill_file", path))?;
        let bytes = self.blobs()?.read(&skill_key(&f.sha256), 0, MAX_SKILL_BYTES as u64).await?;
        Ok((f.clone(), bytes))
    }

    /// No new version or publication may name it; published releases keep
    /// theirs. Archiving twice is a no-op.
    pub async fn archive_skill(&self, id: &str) -> Result<Skill> {
        let s = self.skill(id).await?;
        self.store.archive_skill(&s.id, now_ms()).await?;
        self.skill(id).await
    }

    /// The skill versions a Session mounts: its pinned `version`'s, less
    /// those the Session narrowed away.
    pub(crate) async fn session_skills(&self, session: &Session, version: Option<&AgentVersion>) -> Result<Vec<SkillVersion>> {
        let Some(version) = version else { return Ok(vec![]) };
        let def = &version.definition;
        let mut out = vec![];
        for r in &def.skills {
            let variable = def.session_variable.skills.allowed.contains(&r.skill_id);
            if variable && !session.selection.skills.contains(&r.skill_id) {
                continue;
            }
            let (Ok(id), Some(v)) = (SkillId::parse("skill_id", &r.skill_id), r.version) else { continue };
            if let Some(sv) = self.store.get_skill_version(&id, v).await? {
                out.push(sv);
            }
        }
        Ok(out)
    }

    /// Whether the skill file with these bytes is in a skill version the
    /// agent `version` a Session pins names: only then may a runner working
    /// for that Session read it.
    pub(crate) async fn mounts_skill_blob(&self, version: Option<&AgentVersion>, sha256: &str) -> Result<bool> {
        let Some(version) = version else { return Ok(false) };
        let holding = self.store.skill_versions_holding(sha256).await?;
        Ok(version.definition.skills.iter().any(|r| holding.iter().any(|(id, v)| id.as_str() == r.skill_id && Some(*v) == r.version)))
    }
}
