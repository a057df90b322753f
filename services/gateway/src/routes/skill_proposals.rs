//! SkillProposals (api.md §18.7): the `SKILL.md`s graphs proposed, read
//! with `read` on their Environment, adopted or rejected by a human with
//! `manage` there (the scheduler checks the decider).

use super::Paging;
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query};
use crate::views::{ErrorEnvelope, Page, page};
use axum::Json;
use axum::extract::{Path, State};
use checkfu_core::Error;
use checkfu_proto::scheduler::v1 as pb;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

type J<T> = ApiResult<Json<T>>;

/// Where a proposal came from: the firing and step that made it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProposalSource {
    /// `automation_firing`.
    pub kind: String,
    pub id: String,
    pub automation_id: String,
    pub step_id: String,
}

/// The skill and version an adoption made.
#[derive(Debug, Serialize, ToSchema)]
pub struct AdoptedSkill {
    pub skill_id: String,
    pub version: i64,
}

/// A `SKILL.md` a graph proposed; nothing changes until a person adopts it.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillProposal {
    pub id: String,
    pub environment_id: String,
    /// The skill it proposes a version of; null: a new skill named `name`.
    pub skill_id: Option<String>,
    /// The `SKILL.md`'s front-matter name.
    pub name: String,
    /// `open`, `adopted` or `rejected`.
    pub status: String,
    pub adopted: Option<AdoptedSkill>,
    pub source: ProposalSource,
    /// The `SKILL.md` as proposed.
    pub content: String,
    pub content_sha256: String,
    pub decided_by: Option<String>,
    pub decided_at: Option<String>,
    pub decision_note: Option<String>,
    pub created_at: String,
}

fn view(p: pb::SkillProposal) -> SkillProposal {
    let some = |s: String| (!s.is_empty()).then_some(s);
    SkillProposal {
        adopted: some(p.adopted_skill_id).map(|skill_id| AdoptedSkill { skill_id, version: p.adopted_version }),
        source: ProposalSource { kind: "automation_firing".into(), id: p.firing_id, automation_id: p.automation_id, step_id: p.step_id },
        id: p.id,
        environment_id: p.environment_id,
        skill_id: some(p.skill_id),
        name: p.name,
        status: p.status,
        content: p.content,
        content_sha256: p.content_sha256,
        decided_by: some(p.decided_by),
        decided_at: some(p.decided_at),
        decision_note: some(p.decision_note),
        created_at: p.created_at,
    }
}

/// `?environment_id=&status=&limit=&page=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SkillProposalQuery {
    /// Only this Environment.
    #[serde(default)]
    pub environment_id: Option<String>,
    /// `open`, `adopted` or `rejected`.
    #[serde(default)]
    pub status: Option<String>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideSkillProposal {
    /// At most 4 KiB.
    #[serde(default)]
    pub note: Option<String>,
}

#[utoipa::path(get, path = "/v1/skill-proposals", tag = "skillProposals", operation_id = "skillProposals.listSkillProposals", params(SkillProposalQuery, Paging),
    responses((status = 200, description = "Newest first", body = Page<SkillProposal>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<SkillProposalQuery>,
    paging: Paging,
) -> J<Page<SkillProposal>> {
    let environment_ids = st.readable_envs(&caller, q.environment_id.as_deref()).await?;
    let req =
        pb::ListSkillProposalsRequest { environment_ids, status: q.status.unwrap_or_default(), limit: paging.limit(), page: paging.page() };
    let r = st.scheduler.clone().list_skill_proposals(req).await?.into_inner();
    Ok(Json(page(&r.data, &r.next_page, |p| view(p.clone()))))
}

#[utoipa::path(get, path = "/v1/skill-proposals/{id}", tag = "skillProposals", operation_id = "skillProposals.getSkillProposal", params(("id" = String, Path)),
    responses((status = 200, body = SkillProposal), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<SkillProposal> {
    Ok(Json(view(readable(&st, &caller, &id).await?)))
}

/// The proposal, if the caller may read its Environment: else not found,
/// whoever asks.
async fn readable(st: &AppState, caller: &Caller, id: &str) -> ApiResult<pb::SkillProposal> {
    let p = st.scheduler.clone().get_skill_proposal(pb::GetSkillProposalRequest { id: id.into() }).await?.into_inner();
    if !st.allowed(&caller.principal_id, "read", "environment", &p.environment_id, &p.environment_id).await? {
        return Err(Error::not_found("skill_proposal", id).into());
    }
    Ok(p)
}

#[utoipa::path(post, path = "/v1/skill-proposals/{id}/adopt", tag = "skillProposals", operation_id = "skillProposals.adoptSkillProposal", params(("id" = String, Path)), request_body = DecideSkillProposal,
    responses((status = 200, description = "Adopted: the skill's next version (or a new skill) made from it", body = SkillProposal), (status = "4XX", body = ErrorEnvelope)))]
pub async fn adopt(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, JsonBody(raw): JsonBody) -> J<SkillProposal> {
    decide(st, caller, id, raw, true).await
}

#[utoipa::path(post, path = "/v1/skill-proposals/{id}/reject", tag = "skillProposals", operation_id = "skillProposals.rejectSkillProposal", params(("id" = String, Path)), request_body = DecideSkillProposal,
    responses((status = 200, body = SkillProposal), (status = "4XX", body = ErrorEnvelope)))]
pub async fn reject(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, JsonBody(raw): JsonBody) -> J<SkillProposal> {
    decide(st, caller, id, raw, false).await
}

async fn decide(st: AppState, caller: Caller, id: String, raw: Value, adopt: bool) -> J<SkillProposal> {
    let b: DecideSkillProposal = if raw.is_null() { DecideSkillProposal::default() } else { crate::bodies::parse(&raw)? };
    readable(&st, &caller, &id).await?;
    let req = pb::DecideSkillProposalRequest { id, adopt, note: b.note.unwrap_or_default(), actor_id: caller.principal_id };
    Ok(Json(view(st.scheduler.clone().decide_skill_proposal(req).await?.into_inner())))
}
