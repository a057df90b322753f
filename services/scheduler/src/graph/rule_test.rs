//! `test-rule` (api.md §18.1): a Check node's rule tried on answers the
//! author gives, against a saved revision — offline, so it needs no
//! qualified evaluator and records nothing. It lets an author see which
//! arm each combination of answers takes before anything runs.

use super::Graph;
use super::checks::{Answer, Rule, parse_answers};
use super::document::{Document, Kind, Node};
use crate::service::SchedulerService;
use checkfu_core::{Error, Result};
use serde_json::Value;

/// The verdict and the branch it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleTest {
    pub verdict: Answer,
    /// `continue`, `otherwise` or `uncertain` for a Decision; `then` for a
    /// `step_check`, which completes whatever the verdict.
    pub branch: &'static str,
}

fn node_refused(reason: &'static str, why: impl Into<String>) -> Error {
    Error::invalid_field("node", why).with_reason(reason)
}

impl SchedulerService {
    /// The rule of node `node` of revision `revision` of `g`, on `answers`
    /// (question name to `yes`, `no` or `uncertain`; exactly the Check's
    /// questions).
    pub async fn rule_test(&self, g: &Graph, revision: i64, node: &str, answers: &Value) -> Result<RuleTest> {
        let r = self.graph_revision(g, revision).await?;
        let d = Document::outline(&r.document)?;
        let parsed = |raw| Node::parse(raw).map_err(|(code, why)| node_refused(code, why));
        let raw = d.nodes.iter().find(|n| n["id"] == node).ok_or_else(|| Error::not_found("node", node))?;
        let n = parsed(raw)?;
        let (questions, rule, branch): (_, &Rule, Option<&'static str>) = match &n.kind {
            Kind::CheckDecision { check, .. } => (check.questions.clone(), &check.rule, None),
            Kind::StepCheck { check, .. } => (check.questions.clone(), &check.rule, Some("then")),
            Kind::CheckResult { source, rule } => {
                let raw =
                    d.nodes.iter().find(|m| m["id"] == source.as_str()).ok_or_else(|| {
                        node_refused("check_invalid", format!("the check_result's source {source:?} is not in the revision"))
                    })?;
                let source_node = parsed(raw)?;
                let check = source_node
                    .check()
                    .ok_or_else(|| node_refused("check_invalid", format!("{source:?} is not a check decision or a step_check")))?;
                if let Some(name) = rule.unknown_name(&check.questions) {
                    return Err(node_refused("check_invalid", format!("the rule reads {name:?}, which {source:?} does not ask")));
                }
                (check.questions.clone(), rule, None)
            }
            _ => return Err(node_refused("node_not_check", "the node is not a check decision, a check_result decision or a step_check")),
        };
        let answers =
            parse_answers(answers, &questions).map_err(|why| Error::invalid_field("answers", why).with_reason("answers_invalid"))?;
        let verdict = rule.verdict(&answers);
        Ok(RuleTest { verdict, branch: branch.unwrap_or_else(|| verdict.arm()) })
    }
}
