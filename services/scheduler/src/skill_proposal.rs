//! SkillProposals (api.md §18.7): a `SKILL.md` an Automation's
//! `step_skill_proposal` learnt from the Sessions it selected. Nothing
//! changes until a person adopts it — a new skill, or a new version of the
//! one it names — or rejects it; the Automation's later firings observe the
//! adoption as evidence.

use checkfu_core::id::EnvironmentId;

/// A `SKILL.md`'s most bytes as proposed.
pub const MAX_SKILL_MD_BYTES: usize = 65_536;

#[derive(Debug, Clone, PartialEq)]
pub struct SkillProposal {
    /// `skprop_…`.
    pub id: String,
    pub environment_id: EnvironmentId,
    pub automation_id: String,
    pub firing_id: String,
    pub step_id: String,
    /// The skill it proposes a version of; `None`: a new skill named
    /// `name`.
    pub skill_id: Option<String>,
    /// The `SKILL.md`'s front-matter name.
    pub name: String,
    /// `open`, `adopted` or `rejected`.
    pub status: String,
    pub content: String,
    pub content_sha256: String,
    /// `(skill_id, version)` once adopted.
    pub adopted: Option<(String, i64)>,
    pub decided_by: String,
    pub decided_ms: i64,
    pub decision_note: String,
    pub created_ms: i64,
    pub version: i64,
}
