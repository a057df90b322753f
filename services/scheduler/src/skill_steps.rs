//! Skill steps in a program (api.md §18.7). A `step_skill_proposal` whose
//! selection chose no Session proposes nothing (output
//! `{skill_proposal_id: null}`); else it asks for one SkillProposal of its
//! bound `SKILL.md`, which its firing and step key, so asking again after a
//! crash answers the same one. A `step_observe_skill_proposal` reads once
//! whether its proposal's skill was adopted — `empty`, `pending` or
//! `evidence` — and that answer is saved and never rewritten.

use crate::program::{Outcome, Program};
use crate::skill_record::{SkillAnswer, SkillReceipt, SkillWork};
use serde_json::{Value, json};

impl Program {
    /// Settles a Skill step that needs no service on reaching it: `Some`
    /// outcome for an empty selection (or an empty proposal observed), a
    /// content that is no text; `None` when it must be asked.
    pub(crate) fn skill_at_once(&mut self, id: &str, n: &Value, event: &Value, now: i64) -> Option<Outcome> {
        let kind = n["kind"].as_str().unwrap_or_default();
        let empty = match kind {
            "step_skill_proposal" => self.output_of(&n["selection"])["session_ids"].as_array().is_none_or(Vec::is_empty),
            _ => self.output_of(&n["proposal"])["skill_proposal_id"].is_null(),
        };
        if empty {
            let (output, receipt) = match kind {
                "step_skill_proposal" => (json!({"skill_proposal_id": null}), ("propose", None)),
                _ => (json!({"disposition": "empty"}), ("observe", Some("empty".to_string()))),
            };
            self.skill_receipt(id, receipt.0, None, receipt.1, None, "empty", None, now);
            if let Some(s) = self.steps.iter_mut().find(|s| s.id == id) {
                s.output = Some(output);
            }
            return Some(Outcome::completed());
        }
        if kind == "step_skill_proposal" && !self.read_bound(event, &n["inputBindings"]["content"]).is_ok_and(|c| c.is_string()) {
            return Some(Outcome::failed("skill_md_invalid"));
        }
        None
    }

    fn output_of(&self, step: &Value) -> Value {
        step.as_str().and_then(|id| self.step(id)).and_then(|s| s.output.clone()).unwrap_or(Value::Null)
    }

    /// The Skill steps `running` with no answer saved.
    pub fn skill_work(&self, event: &Value) -> Vec<SkillWork> {
        self.steps
            .iter()
            .filter(|s| self.is_running(&s.id))
            .filter(|s| !self.skills.iter().any(|r| r.step_id == s.id))
            .filter_map(|s| {
                let n = self.target.steps.iter().find(|n| n["id"] == s.id.as_str())?;
                match s.kind.as_str() {
                    "step_skill_proposal" => Some(SkillWork::Propose {
                        step_id: s.id.clone(),
                        skill: n["skill"].as_str().map(String::from),
                        content: self.read_bound(event, &n["inputBindings"]["content"]).ok()?.as_str()?.to_string(),
                    }),
                    "step_observe_skill_proposal" => Some(SkillWork::Observe {
                        step_id: s.id.clone(),
                        proposal_id: self.output_of(&n["proposal"])["skill_proposal_id"].as_str()?.to_string(),
                    }),
                    _ => None,
                }
            })
            .collect()
    }

    /// Saves a Skill step's answer and settles it: `false` when it moved
    /// on or has its answer already.
    pub fn skill_answered(&mut self, w: &SkillWork, answer: SkillAnswer, now: i64) -> bool {
        let id = w.step_id().to_string();
        if !self.is_running(&id) || self.skills.iter().any(|r| r.step_id == id) {
            return false;
        }
        let operation = match w {
            SkillWork::Propose { .. } => "propose",
            SkillWork::Observe { .. } => "observe",
        };
        let observed = match w {
            SkillWork::Observe { proposal_id, .. } => Some(proposal_id.clone()),
            SkillWork::Propose { .. } => None,
        };
        let (output, outcome) = match answer {
            SkillAnswer::Proposed { skill_proposal_id } => {
                self.skill_receipt(&id, operation, Some(skill_proposal_id.clone()), None, None, "proposed", None, now);
                (Some(json!({"skill_proposal_id": skill_proposal_id})), Outcome::completed())
            }
            SkillAnswer::Observed { disposition, skill } => {
                let mut output = json!({"disposition": disposition});
                if let Some((skill_id, version)) = &skill {
                    output["skill"] = json!(skill_id);
                    output["version"] = json!(version);
                }
                self.skill_receipt(&id, operation, observed, Some(disposition), skill, "observed", None, now);
                (Some(output), Outcome::completed())
            }
            SkillAnswer::Failed(reason) => {
                self.skill_receipt(&id, operation, observed, None, None, "failed", Some(reason.clone()), now);
                (None, Outcome::failed(&reason))
            }
        };
        if let Some(s) = self.steps.iter_mut().find(|s| s.id == id) {
            s.output = output;
        }
        self.set(&id, outcome, now);
        true
    }

    #[allow(clippy::too_many_arguments)] // one receipt's fields
    fn skill_receipt(
        &mut self,
        step_id: &str,
        operation: &str,
        skill_proposal_id: Option<String>,
        disposition: Option<String>,
        skill: Option<(String, i64)>,
        result: &str,
        error: Option<String>,
        now: i64,
    ) {
        self.skills.push(SkillReceipt {
            step_id: step_id.into(),
            operation: operation.into(),
            skill_proposal_id,
            disposition,
            skill_id: skill.as_ref().map(|s| s.0.clone()),
            version: skill.map(|s| s.1),
            result: result.into(),
            error,
            at_ms: now,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history_record::{HistoryAnswer, HistoryWork};
    use crate::model::StepsTarget;

    fn program() -> Program {
        let steps = vec![
            json!({"kind": "trigger", "id": "hook", "trigger": {"kind": "webhook"}}),
            json!({"kind": "step_select_history", "id": "sel", "frontier": "learn", "limit": 10}),
            json!({"kind": "step_skill_proposal", "id": "prop", "selection": "sel",
                "inputBindings": {"content": {"sourceNodeId": "hook", "pointer": "/skill"}}}),
            json!({"kind": "step_observe_skill_proposal", "id": "obs", "proposal": "prop"}),
        ];
        let edges = vec![
            json!({"kind": "starts", "from": "hook", "to": "sel"}),
            json!({"kind": "then", "from": "sel", "to": "prop"}),
            json!({"kind": "then", "from": "prop", "to": "obs"}),
        ];
        Program::new(StepsTarget { program_sha256: "x".into(), steps, edges }, "hook".into())
    }

    fn selected(p: &mut Program, event: &Value, ids: &[&str]) {
        p.advance(event, false, 1);
        let w: Vec<HistoryWork> = p.history_work();
        p.history_answered(
            &w[0],
            HistoryAnswer::Selected { base: String::new(), session_ids: ids.iter().map(|s| s.to_string()).collect() },
            2,
        );
        p.advance(event, false, 2);
    }

    #[test]
    fn an_empty_selection_proposes_nothing_and_is_observed_empty() {
        let mut p = program();
        let event = json!({"skill": "---\nname: x\n---"});
        selected(&mut p, &event, &[]);
        assert!(p.skill_work(&event).is_empty());
        assert_eq!(p.step("obs").unwrap().output, Some(json!({"disposition": "empty"})));
        assert_eq!(p.result.as_deref(), Some("succeeded"));
    }

    #[test]
    fn a_proposal_is_asked_once_and_its_observation_saved_once() {
        let mut p = program();
        let event = json!({"skill": "SKILL"});
        selected(&mut p, &event, &["sess_1"]);
        let work = p.skill_work(&event);
        assert_eq!(work, vec![SkillWork::Propose { step_id: "prop".into(), skill: None, content: "SKILL".into() }]);
        assert!(p.skill_answered(&work[0], SkillAnswer::Proposed { skill_proposal_id: "skprop_1".into() }, 3));
        p.advance(&event, false, 3);
        let work = p.skill_work(&event);
        assert_eq!(work, vec![SkillWork::Observe { step_id: "obs".into(), proposal_id: "skprop_1".into() }]);
        let pending = SkillAnswer::Observed { disposition: "pending".into(), skill: None };
        assert!(p.skill_answered(&work[0], pending, 4));
        let later = SkillAnswer::Observed { disposition: "evidence".into(), skill: Some(("skl_1".into(), 1)) };
        assert!(!p.skill_answered(&work[0], later, 5), "never rewritten");
        assert_eq!(p.step("obs").unwrap().output, Some(json!({"disposition": "pending"})));
    }

    #[test]
    fn content_that_is_no_text_is_no_skill() {
        let mut p = program();
        let event = json!({"skill": 7});
        selected(&mut p, &event, &["sess_1"]);
        assert_eq!(p.step("prop").unwrap().outcome.as_ref().and_then(|o| o.reason.as_deref()), Some("skill_md_invalid"));
    }
}
