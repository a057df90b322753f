//! CheckEvaluations (api.md §18.1): the record of one model judgment of a
//! Check node. It is saved in the firing's program in the same write that
//! settles the node, so recovery, a `check_result` Decision and the trace
//! read it, and nothing calls the model for that node again.

use crate::graph::checks::{Answer, Check, parse_answers};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The most input a Check hands its evaluator, as JSON text.
pub const MAX_CHECK_INPUT_BYTES: usize = 64 * 1024;

/// What an evaluation cost: tokens and integer micro-USD.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvaluationUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_micro_usd: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// `ceval_…`.
    pub id: String,
    pub step_id: String,
    /// The node's attempt it was made for (from 1; more with `retry`).
    pub attempt: i64,
    pub provider: String,
    pub model: String,
    pub qualification_id: Option<String>,
    /// Each question's `yes`, `no` or `uncertain`; `None` after an error.
    pub answers: Option<BTreeMap<String, String>>,
    /// The rule's verdict on the answers; `None` after an error.
    pub verdict: Option<String>,
    /// `evaluator_unqualified`, `check_provider_error`,
    /// `check_answer_invalid` or `check_input_too_large`.
    pub error: Option<String>,
    pub usage: EvaluationUsage,
    pub at_ms: i64,
}

impl Evaluation {
    /// The answers as typed values, when they were read.
    pub fn typed_answers(&self) -> Option<BTreeMap<String, Answer>> {
        self.answers.as_ref()?.iter().map(|(k, v)| Answer::parse(v).map(|a| (k.clone(), a))).collect()
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A Check node waiting for its evaluation: the Check and its input.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckCall {
    pub step_id: String,
    /// The node's attempt this evaluation is for.
    pub attempt: i64,
    pub check: Check,
    pub input: Value,
}

/// Holds a model's reply to exactly the shape a Check demands —
/// `{"answers":{<each question>: "yes"|"no"|"uncertain"}}`, nothing more —
/// and gives the answers and the rule's verdict; `None` for anything else
/// (`check_answer_invalid`).
pub fn read_reply(check: &Check, reply: &str) -> Option<(BTreeMap<String, Answer>, Answer)> {
    let v: Value = serde_json::from_str(reply).ok()?;
    let o = v.as_object().filter(|o| o.len() == 1)?;
    let answers = parse_answers(o.get("answers")?, &check.questions).ok()?;
    let verdict = check.rule.verdict(&answers);
    Some((answers, verdict))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check() -> Check {
        Check::parse(&json!({"modelRoutingProfileId": "mrp_e", "questions": [{"name": "billing", "question": "q"}, {"name": "tech", "question": "q"}],
            "rule": {"all": ["billing", "tech"]}}))
        .expect("check")
    }

    #[test]
    fn a_reply_is_held_to_exactly_the_shape_demanded() {
        let (answers, verdict) = read_reply(&check(), r#"{"answers":{"billing":"yes","tech":"uncertain"}}"#).expect("read");
        assert_eq!(verdict, Answer::Uncertain);
        assert_eq!(answers.get("billing"), Some(&Answer::Yes));
        for bad in [
            "",
            "not json",
            r#"{"answers":"no"}"#,
            r#"{"answers":{"billing":"yes"}}"#,
            r#"{"answers":{"billing":"yes","tech":"maybe"}}"#,
            r#"{"answers":{"billing":"yes","tech":"no","extra":"no"}}"#,
            r#"{"answers":{"billing":"yes","tech":"no"},"reason":"x"}"#,
        ] {
            assert_eq!(read_reply(&check(), bad), None, "{bad}");
        }
    }
}
