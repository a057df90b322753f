//! Skill nodes as a document writes them (api.md §18.7): a
//! `step_skill_proposal {selection, skill?, inputBindings:{content}}`
//! proposes a `SKILL.md` learnt from a selection's Sessions — a person adopts
//! it or not — and a `step_observe_skill_proposal {proposal}` reads, once,
//! whether that skill has been adopted.

use super::node_parts::{Binding, NodeError, fields};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct SkillProposalNode {
    /// The `step_select_history` whose Sessions it learnt from: an empty
    /// selection proposes nothing.
    pub selection: String,
    /// The skill (`skl_…`) it proposes a new version of; else the skill its
    /// `SKILL.md` names.
    pub skill: Option<String>,
    pub content: Binding,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ObserveNode {
    /// The `step_skill_proposal` it observes.
    pub proposal: String,
}

impl SkillProposalNode {
    pub fn parse(o: &Map<String, Value>) -> Result<SkillProposalNode, NodeError> {
        fields(o, &["selection", "skill", "inputBindings"])?;
        let bad = |why: &str| ("document_invalid", why.to_string());
        let selection = o.get("selection").and_then(Value::as_str).filter(|s| !s.is_empty());
        let selection = selection.ok_or(bad("a step_skill_proposal names its selection (a step_select_history)"))?;
        let skill = match o.get("skill") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_str()
                    .filter(|s| checkfu_core::id::SkillId::check("skill", s).is_ok())
                    .ok_or(bad("skill is a skill id (skl_…)"))?
                    .to_string(),
            ),
        };
        let b = o.get("inputBindings").and_then(Value::as_object).ok_or(bad("a step_skill_proposal binds inputBindings.content"))?;
        if let Some(k) = b.keys().find(|k| k.as_str() != "content") {
            return Err(("document_invalid", format!("a step_skill_proposal binds only content, not {k:?}")));
        }
        let content = Binding::parse(b.get("content").ok_or(bad("a step_skill_proposal binds inputBindings.content"))?)
            .map_err(|why| ("document_invalid", why))?;
        Ok(SkillProposalNode { selection: selection.to_string(), skill, content })
    }
}

impl ObserveNode {
    pub fn parse(o: &Map<String, Value>) -> Result<ObserveNode, NodeError> {
        fields(o, &["proposal"])?;
        let proposal = o.get("proposal").and_then(Value::as_str).filter(|s| !s.is_empty());
        let proposal = proposal.ok_or(("document_invalid", "a step_observe_skill_proposal names its proposal step".to_string()))?;
        Ok(ObserveNode { proposal: proposal.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_proposal_binds_its_content_and_may_name_a_skill() {
        let o = json!({"kind": "step_skill_proposal", "selection": "sel", "skill": "skl_01jx0000000000000000000001",
            "inputBindings": {"content": {"sourceNodeId": "a", "pointer": ""}}});
        let p = SkillProposalNode::parse(o.as_object().unwrap()).unwrap();
        assert_eq!((p.selection.as_str(), p.skill.is_some(), p.content.source.as_str()), ("sel", true, "a"));
        for bad in [
            json!({"kind": "step_skill_proposal", "selection": "sel"}),
            json!({"kind": "step_skill_proposal", "inputBindings": {"content": {"sourceNodeId": "a", "pointer": ""}}}),
            json!({"kind": "step_skill_proposal", "selection": "sel", "skill": "agt_1", "inputBindings": {"content": {"sourceNodeId": "a"}}}),
        ] {
            assert_eq!(SkillProposalNode::parse(bad.as_object().unwrap()).unwrap_err().0, "document_invalid", "{bad}");
        }
        assert!(ObserveNode::parse(json!({"kind": "step_observe_skill_proposal"}).as_object().unwrap()).is_err());
    }
}
