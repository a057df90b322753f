//! What a Skill step (api.md §18.7) asks and what came of it: the work,
//! its answer, and the receipt a program keeps (ids, never the SKILL.md).
//! The rules that move a program on with them are in `skill_steps.rs`.

use serde::{Deserialize, Serialize};

/// One Skill step as it ended: the trace's receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillReceipt {
    pub step_id: String,
    /// `propose` or `observe`.
    pub operation: String,
    pub skill_proposal_id: Option<String>,
    /// An observation's `empty`, `pending` or `evidence`.
    pub disposition: Option<String>,
    /// The skill and version adopted, on `evidence`.
    pub skill_id: Option<String>,
    pub version: Option<i64>,
    /// `proposed`, `empty`, `observed` or `failed`.
    pub result: String,
    pub error: Option<String>,
    pub at_ms: i64,
}

/// A Skill step to run.
#[derive(Debug, Clone, PartialEq)]
pub enum SkillWork {
    Propose { step_id: String, skill: Option<String>, content: String },
    Observe { step_id: String, proposal_id: String },
}

impl SkillWork {
    pub fn step_id(&self) -> &str {
        match self {
            SkillWork::Propose { step_id, .. } | SkillWork::Observe { step_id, .. } => step_id,
        }
    }
}

/// What running it came to; `None` from the service (an outage) leaves
/// the step `running`.
#[derive(Debug, Clone, PartialEq)]
pub enum SkillAnswer {
    Proposed {
        skill_proposal_id: String,
    },
    Observed {
        disposition: String,
        skill: Option<(String, i64)>,
    },
    /// `skill_md_invalid`, `skill_proposal_owner_refused`,
    /// `observation_unavailable`.
    Failed(String),
}
