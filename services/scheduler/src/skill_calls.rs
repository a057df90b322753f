//! Running Skill steps and deciding SkillProposals (api.md §18.7).
//!
//! A proposal's `SKILL.md` must open with valid front matter
//! (`skill_md_invalid`); naming a skill, that skill must be an active one of
//! the Automation's Environment with the same name
//! (`skill_proposal_owner_refused`, terminal); else it targets the active
//! skill its front matter names, or a new one. If the sessions service
//! cannot say, the step stays `running` and is asked again on the
//! program's next advance or recovery. Adopting — a human with `manage` on
//! the Environment — creates that skill's next version (or the skill) from
//! the `SKILL.md`, as the adopter; the Automation's later observations of
//! proposals for that skill see it as `evidence`.

use crate::firing::Firing;
use crate::model::{Automation, Readiness};
use crate::service::SchedulerService;
use crate::skill_proposal::{MAX_SKILL_MD_BYTES, SkillProposal};
use crate::skill_record::{SkillAnswer, SkillWork};
use checkfu_bus::resource_record;
use checkfu_core::id::SkillProposalId;
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::sessions::v1 as ss;
use futures_util::future::BoxFuture;
use serde_json::json;

/// How a skill named by a proposal stands.
enum Target {
    /// It may take the proposal: its id, if the skill exists yet.
    Skill(Option<String>),
    Refused(&'static str),
    /// The sessions service could not say.
    Unknown,
}

impl SchedulerService {
    /// Runs the Skill steps `f`'s program waits for that this replica is
    /// not already running (`in_flight.rs`), each saving its answer.
    pub(crate) fn run_skill_steps<'a>(&'a self, f: &'a Firing, a: &'a Automation) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(p) = f.program.as_ref() else { return };
            let work = p.skill_work(&f.event);
            let work = self.take_in_flight(f, a, work, |w: &SkillWork| (w.step_id(), 1), Readiness::admits).await;
            for w in work {
                let (svc, firing, a) = (self.clone(), f.id.to_string(), a.clone());
                let (step, saved) = ((w.step_id().to_string(), 1), w.clone());
                // A sessions outage answers nothing: the step stays running.
                let ask = async move {
                    match &w {
                        SkillWork::Propose { step_id, skill, content } => {
                            svc.propose(&a, &firing, step_id, skill.as_deref(), content).await
                        }
                        SkillWork::Observe { proposal_id, .. } => Some(svc.observe(&a, proposal_id).await),
                    }
                };
                self.answer_later(f.id.clone(), step, "a Skill step's answer", ask, move |_, p, answer: &SkillAnswer, now| {
                    p.skill_answered(&saved, answer.clone(), now);
                });
            }
        })
    }

    async fn propose(&self, a: &Automation, firing: &str, step: &str, skill: Option<&str>, content: &str) -> Option<SkillAnswer> {
        let refused = |r: &str| Some(SkillAnswer::Failed(r.into()));
        if content.len() > MAX_SKILL_MD_BYTES {
            return refused("skill_md_invalid");
        }
        let Ok((name, _)) = checkfu_core::skill_md::front_matter(content.as_bytes()) else { return refused("skill_md_invalid") };
        let skill_id = match self.skill_target(a.environment_id.as_str(), &name, skill).await {
            Target::Skill(id) => id,
            Target::Refused(reason) => return refused(reason),
            Target::Unknown => return None,
        };
        let p = SkillProposal {
            id: SkillProposalId::mint().to_string(),
            environment_id: a.environment_id.clone(),
            automation_id: a.id.to_string(),
            firing_id: firing.into(),
            step_id: step.into(),
            skill_id,
            name,
            status: "open".into(),
            content: content.into(),
            content_sha256: checkfu_core::sha256_hex(content.as_bytes()),
            adopted: None,
            decided_by: String::new(),
            decided_ms: 0,
            decision_note: String::new(),
            created_ms: now_ms(),
            version: 1,
        };
        let events = [resource_record("skill_proposal.created", &a.environment_id, &p.id)];
        match self.store.propose_skill(&p, &events).await {
            Ok((kept, made)) => {
                if made {
                    self.audit_proposal(&a.service_principal_id, "skill_proposal.created", &kept).await;
                }
                Some(SkillAnswer::Proposed { skill_proposal_id: kept.id })
            }
            Err(e) => {
                tracing::warn!(automation_id = %a.id, error = %e.message, "a SkillProposal could not be saved; asked again later");
                None
            }
        }
    }

    /// The skill a proposal named `name` targets: the one it names (which
    /// must be an active skill of the Environment of that name), else the
    /// active skill of that name, else none yet.
    async fn skill_target(&self, environment_id: &str, name: &str, named: Option<&str>) -> Target {
        let skills = self.skills.clone();
        if let Some(id) = named {
            return match skills.clone().get_skill(ss::GetByIdRequest { id: id.into() }).await {
                Ok(s) => {
                    let s = s.into_inner();
                    if s.environment_id != environment_id || s.status != "active" || s.name != name {
                        Target::Refused("skill_proposal_owner_refused")
                    } else {
                        Target::Skill(Some(s.id))
                    }
                }
                Err(s) if s.code() == tonic::Code::NotFound => Target::Refused("skill_proposal_owner_refused"),
                Err(_) => Target::Unknown,
            };
        }
        match self.skill_named(environment_id, name).await {
            Ok(id) => Target::Skill(id),
            Err(_) => Target::Unknown,
        }
    }

    /// The active skill of the Environment called `name`.
    async fn skill_named(&self, environment_id: &str, name: &str) -> Result<Option<String>> {
        let mut page = String::new();
        loop {
            let req = ss::ListSkillsRequest { environment_ids: vec![environment_id.into()], include_archived: false, limit: 100, page };
            let r = self.skills.clone().list_skills(req).await?.into_inner();
            if let Some(s) = r.data.iter().find(|s| s.name == name) {
                return Ok(Some(s.id.clone()));
            }
            if r.next_page.is_empty() {
                return Ok(None);
            }
            page = r.next_page;
        }
    }

    /// `evidence` once the proposal, or a proposal of this Automation for
    /// the same skill, was adopted; else `pending`.
    async fn observe(&self, a: &Automation, proposal_id: &str) -> SkillAnswer {
        let unavailable = || SkillAnswer::Failed("observation_unavailable".into());
        let Ok(Some(p)) = self.store.get_skill_proposal(proposal_id).await else { return unavailable() };
        let adopted = match (&p.adopted, &p.skill_id) {
            (Some(done), _) => Some(done.clone()),
            (None, Some(skill)) => match self.store.adopted_skill_version(a.id.as_str(), skill).await {
                Ok(v) => v.map(|v| (skill.clone(), v)),
                Err(_) => return unavailable(),
            },
            (None, None) => None,
        };
        match adopted {
            Some(skill) => SkillAnswer::Observed { disposition: "evidence".into(), skill: Some(skill) },
            None => SkillAnswer::Observed { disposition: "pending".into(), skill: None },
        }
    }

    // --- the API --------------------------------------------------------

    pub async fn skill_proposal(&self, id: &str) -> Result<SkillProposal> {
        SkillProposalId::check("id", id)?;
        self.store.get_skill_proposal(id).await?.ok_or_else(|| Error::not_found("skill_proposal", id))
    }

    pub async fn skill_proposals(&self, environment_ids: &[String], status: &str, page: &PageRequest) -> Result<Vec<SkillProposal>> {
        if !matches!(status, "" | "open" | "adopted" | "rejected") {
            return Err(Error::invalid_field("status", "status is open, adopted or rejected"));
        }
        self.store.list_skill_proposals(environment_ids, status, page).await
    }

    /// Adopts (the skill's next version, or a new skill, as `actor`) or
    /// rejects; a human with `manage` on the Environment decides, once.
    pub async fn decide_skill_proposal(&self, id: &str, adopt: bool, note: &str, actor: &str) -> Result<SkillProposal> {
        if note.len() > 4_096 {
            return Err(Error::invalid_field("note", "a note is at most 4 KiB"));
        }
        let p = self.skill_proposal(id).await?;
        let env = p.environment_id.to_string();
        if !self.allowed(actor, "manage", "environment", &env, &env).await? {
            return Err(Error::denied(format!("{actor} lacks manage on environment {env}")));
        }
        let who = self.governance.clone().get_principal(gov::GetByIdRequest { id: actor.into() }).await?.into_inner();
        if who.kind != "human" {
            return Err(Error::denied("only a human Principal decides a skill proposal").with_reason("human_required"));
        }
        if p.status != "open" {
            return Err(decided(&p));
        }
        let mut next = p.clone();
        next.status = if adopt { "adopted" } else { "rejected" }.into();
        if adopt {
            next.adopted = Some(self.adopt(&p, actor).await?);
        }
        next.decided_by = actor.into();
        next.decided_ms = now_ms();
        next.decision_note = note.into();
        next.version += 1;
        let kind = if adopt { "skill_proposal.adopted" } else { "skill_proposal.rejected" };
        if !self.store.decide_skill_proposal(&next, p.version, &[resource_record(kind, &p.environment_id, &p.id)]).await? {
            return Err(decided(&p));
        }
        self.audit_proposal(actor, kind, &next).await;
        Ok(next)
    }

    /// The skill version adopting `p` makes.
    async fn adopt(&self, p: &SkillProposal, actor: &str) -> Result<(String, i64)> {
        let files = vec![ss::BundleFile { path: "SKILL.md".into(), content: p.content.clone().into_bytes() }];
        let target = match &p.skill_id {
            Some(id) => Some(id.clone()),
            None => self.skill_named(p.environment_id.as_str(), &p.name).await?,
        };
        let mut skills = self.skills.clone();
        match target {
            Some(skill_id) => {
                let v = skills.create_skill_version(ss::CreateSkillVersionRequest { skill_id, files, actor_id: actor.into() }).await?;
                let v = v.into_inner();
                Ok((v.skill_id, v.version))
            }
            None => {
                let req = ss::CreateSkillRequest { environment_id: p.environment_id.to_string(), files, actor_id: actor.into() };
                let s = skills.create_skill(req).await?.into_inner();
                Ok((s.id, s.latest_version))
            }
        }
    }

    async fn audit_proposal(&self, actor: &str, action: &str, p: &SkillProposal) {
        let details = json!({"automation_id": p.automation_id, "automation_firing_id": p.firing_id, "step_id": p.step_id,
            "skill_id": p.adopted.as_ref().map(|a| a.0.clone()).or(p.skill_id.clone()), "content_sha256": p.content_sha256});
        self.audit_resource(actor, action, "skill_proposal", &p.id, details).await
    }
}

fn decided(p: &SkillProposal) -> Error {
    Error::conflict(format!("skill proposal {} is {} already", p.id, p.status)).with_reason("proposal_decided")
}
