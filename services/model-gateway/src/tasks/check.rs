//! A typed Check's judgment (api.md §18.1): `yes`, `no` or `uncertain` for
//! each named question about an input. The gateway renders the prompt and
//! hands back the model's reply object as given; the caller holds it to
//! the exact shape it demanded (`{"answers":{<name>:…}}`), so a reply that
//! breaks it is the caller's `check_answer_invalid`, never a guess here.
//!
//! The scripted model answers by rule lines, so Check journeys run
//! offline and deterministically: a question's `require: T` (yes iff the
//! input's JSON text contains T), `forbid: T` (no iff it does) and
//! `uncertain: T` (uncertain iff it does), combined as `all` in
//! three-valued logic (no rules: yes); the instructions' `error: T` fails
//! the call and `invalid: T` breaks the reply's shape, each iff the input
//! contains T.

use super::grade::{Verdict, rule};
use super::tokens;
use crate::model::{Effort, Usage};
use checkfu_core::{Error, Result};
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckTask {
    pub instructions: String,
    /// `(name, question)`.
    pub questions: Vec<(String, String)>,
    /// The input, as JSON text.
    pub input: String,
    /// The Check's `tier`: every candidate's effort for this call.
    pub effort: Option<Effort>,
}

pub(super) const SYSTEM: &str = "You answer questions about an input, each with exactly one of \"yes\", \"no\" or \"uncertain\". \
Answer \"uncertain\" whenever the input does not settle the question. \
Reply with only a JSON object {\"answers\":{\"<question name>\":\"yes\"|\"no\"|\"uncertain\"}} naming every question once and nothing else.";

impl CheckTask {
    pub(super) fn size(&self) -> usize {
        self.instructions.len() + self.questions.iter().map(|(n, q)| n.len() + q.len()).sum::<usize>() + self.input.len()
    }

    pub(super) fn prompt(&self) -> String {
        let mut user = String::new();
        if !self.instructions.is_empty() {
            user.push_str(&format!("Instructions:\n{}\n\n", self.instructions));
        }
        user.push_str("Questions:\n");
        for (name, question) in &self.questions {
            user.push_str(&format!("- {name}: {question}\n"));
        }
        user.push_str(&format!("\nInput (JSON):\n{}\n", self.input));
        user
    }

    /// The instructions' rule `kind: T` whose T the input contains.
    fn instructed(&self, kind: &str) -> bool {
        self.instructions.lines().filter_map(|l| l.trim().strip_prefix(kind)).any(|t| self.input.contains(t.trim()))
    }

    /// A question's answer by its rule lines, read as an Outcome's
    /// grader reads them (`grade.rs`): all must hold; none is yes.
    fn answer(&self, question: &str) -> &'static str {
        match Verdict::all(question.lines().map(str::trim).filter_map(|line| rule(line, &self.input))) {
            Verdict::True => "yes",
            Verdict::False => "no",
            Verdict::Unresolved => "uncertain",
        }
    }

    /// The scripted model's reply (or its failure) and usage: ⌈characters
    /// sent ÷ 4⌉ in, ⌈reply ÷ 4⌉ out.
    pub(super) fn scripted(&self) -> Result<(String, Usage)> {
        if self.instructed("error:") {
            return Err(Error::unavailable("the scripted evaluator failed, as its instructions' error rule asks"));
        }
        let reply = if self.instructed("invalid:") {
            json!({"answers": "not the object asked for"})
        } else {
            let answers: Map<String, Value> = self.questions.iter().map(|(name, q)| (name.clone(), Value::from(self.answer(q)))).collect();
            json!({ "answers": answers })
        }
        .to_string();
        let sent = SYSTEM.chars().count() + self.prompt().chars().count();
        Ok((reply.clone(), Usage { input_tokens: tokens(sent), output_tokens: tokens(reply.chars().count()) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(instructions: &str, input: Value) -> CheckTask {
        CheckTask {
            instructions: instructions.into(),
            questions: vec![
                ("billing".into(), "require: invoice".into()),
                ("tech".into(), "uncertain: maybe".into()),
                ("both".into(), "require: invoice\nforbid: refund".into()),
                ("free".into(), "Is it polite?".into()),
            ],
            input: input.to_string(),
            effort: None,
        }
    }

    fn answers(t: &CheckTask) -> Value {
        let (reply, _) = t.scripted().expect("answered");
        serde_json::from_str::<Value>(&reply).expect("json")["answers"].clone()
    }

    #[test]
    fn scripted_rules_answer_each_question_in_three_valued_logic() {
        assert_eq!(answers(&task("", json!({"t": "invoice"}))), json!({"billing": "yes", "tech": "yes", "both": "yes", "free": "yes"}));
        assert_eq!(
            answers(&task("", json!({"t": "maybe a refund"}))),
            json!({"billing": "no", "tech": "uncertain", "both": "no", "free": "yes"})
        );
    }

    #[test]
    fn instructions_fail_the_call_or_break_the_reply_only_when_the_input_matches() {
        assert!(task("error: boom", json!("boom")).scripted().is_err());
        assert!(task("error: boom", json!("calm")).scripted().is_ok());
        assert_eq!(answers(&task("invalid: odd", json!("odd"))), json!("not the object asked for"));
        let (reply, usage) = task("", json!("x")).scripted().expect("answered");
        assert_eq!(usage.output_tokens, tokens(reply.chars().count()));
        assert!(usage.input_tokens > 0);
    }
}
