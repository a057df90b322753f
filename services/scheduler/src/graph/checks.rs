//! Typed Checks (api.md §18.1): a fail-closed model judgment, written as
//! questions answered `yes`, `no` or `uncertain` and a rule over their
//! names that turns the answers into a verdict.
//!
//! Rules read in three-valued (Kleene) logic — `yes` true, `no` false,
//! `uncertain` unknown — so an answer the model could not give never
//! counts as yes: `all` is yes only when every entry is, `any` is no only
//! when every entry is, `not` swaps yes and no and keeps uncertain.
//! Everything here is pure: the offline `test-rule` endpoint and the
//! planner read it without a model call, a qualification or a record.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// At most this many questions a Check, and entries in one `all`/`any`.
pub const MAX_QUESTIONS: usize = 16;
pub const MAX_RULE_ENTRIES: usize = 16;
/// Rules nest at most this deep (a bare name is depth 1).
pub const MAX_RULE_DEPTH: usize = 4;
/// A question's text, in characters.
pub const MAX_QUESTION_CHARS: usize = 2_000;
/// A Check's instructions, in bytes.
pub const MAX_INSTRUCTIONS_BYTES: usize = 16 * 1024;

/// One answer, and also a verdict: the same three values, ordered by
/// truth (no < uncertain < yes), so that `all` is the least of its
/// entries and `any` the greatest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Answer {
    No,
    Uncertain,
    Yes,
}

impl Answer {
    pub fn parse(s: &str) -> Option<Answer> {
        match s {
            "yes" => Some(Answer::Yes),
            "no" => Some(Answer::No),
            "uncertain" => Some(Answer::Uncertain),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Yes => "yes",
            Answer::No => "no",
            Answer::Uncertain => "uncertain",
        }
    }

    /// The Decision arm a verdict takes.
    pub fn arm(self) -> &'static str {
        match self {
            Answer::Yes => "continue",
            Answer::No => "otherwise",
            Answer::Uncertain => "uncertain",
        }
    }
}

/// A rule over question names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    Name(String),
    Not(Box<Rule>),
    All(Vec<Rule>),
    Any(Vec<Rule>),
}

impl Rule {
    /// Reads a rule: a name, `{"not": r}`, `{"all": [r…]}` or `{"any":
    /// [r…]}`, within the entry and depth limits.
    pub fn parse(v: &Value) -> Result<Rule, String> {
        Rule::parse_at(v, 1)
    }

    fn parse_at(v: &Value, depth: usize) -> Result<Rule, String> {
        if depth > MAX_RULE_DEPTH {
            return Err(format!("a rule nests at most {MAX_RULE_DEPTH} deep"));
        }
        match v {
            Value::String(name) => Ok(Rule::Name(name.clone())),
            Value::Object(o) if o.len() == 1 => {
                let (op, inner) = o.iter().next().ok_or("a rule is a name or one of not, all, any")?;
                match op.as_str() {
                    "not" => Ok(Rule::Not(Box::new(Rule::parse_at(inner, depth + 1)?))),
                    "all" | "any" => {
                        let entries = inner.as_array().ok_or_else(|| format!("{op} takes a list of rules"))?;
                        if entries.is_empty() || entries.len() > MAX_RULE_ENTRIES {
                            return Err(format!("{op} takes 1 to {MAX_RULE_ENTRIES} rules"));
                        }
                        let rules = entries.iter().map(|e| Rule::parse_at(e, depth + 1)).collect::<Result<Vec<_>, _>>()?;
                        Ok(if op == "all" { Rule::All(rules) } else { Rule::Any(rules) })
                    }
                    other => Err(format!("{other:?} is not a rule operator (not, all, any)")),
                }
            }
            _ => Err("a rule is a question name or an object with one of not, all, any".into()),
        }
    }

    /// The names the rule reads.
    pub fn names(&self) -> Vec<&str> {
        match self {
            Rule::Name(n) => vec![n.as_str()],
            Rule::Not(r) => r.names(),
            Rule::All(rs) | Rule::Any(rs) => rs.iter().flat_map(Rule::names).collect(),
        }
    }

    /// Whether every name the rule reads is one of `questions`; the first
    /// that is not, otherwise.
    pub fn unknown_name<'a>(&'a self, questions: &[Question]) -> Option<&'a str> {
        self.names().into_iter().find(|n| !questions.iter().any(|q| q.name == *n))
    }

    /// The verdict over `answers` (a name without an answer is uncertain;
    /// the caller makes sure there is none).
    pub fn verdict(&self, answers: &BTreeMap<String, Answer>) -> Answer {
        match self {
            Rule::Name(n) => answers.get(n).copied().unwrap_or(Answer::Uncertain),
            Rule::Not(r) => match r.verdict(answers) {
                Answer::Yes => Answer::No,
                Answer::No => Answer::Yes,
                Answer::Uncertain => Answer::Uncertain,
            },
            // A parsed list is never empty; the fallbacks are each
            // operator's identity.
            Rule::All(rs) => rs.iter().map(|r| r.verdict(answers)).min().unwrap_or(Answer::Yes),
            Rule::Any(rs) => rs.iter().map(|r| r.verdict(answers)).max().unwrap_or(Answer::No),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub name: String,
    pub question: String,
}

/// A Check as a graph document writes it (camelCase).
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub model_routing_profile_id: String,
    /// An `effort` override for the call.
    pub tier: Option<String>,
    pub instructions: String,
    pub questions: Vec<Question>,
    pub rule: Rule,
}

/// The first key of `o` that is not one of `allowed`.
pub(super) fn unknown_field<'a>(o: &'a Map<String, Value>, allowed: &[&str]) -> Option<&'a str> {
    o.keys().map(String::as_str).find(|k| !allowed.contains(k))
}

/// A name a Check's questions (and a join's collected outputs) go by.
pub(super) fn is_question_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && s.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl Check {
    /// Reads a Check; every refusal is the document's `check_invalid`.
    pub fn parse(v: &Value) -> Result<Check, String> {
        let o = v.as_object().ok_or("a check is an object")?;
        if let Some(k) = unknown_field(o, &["modelRoutingProfileId", "tier", "instructions", "questions", "rule"]) {
            return Err(format!("a check has no field {k:?}"));
        }
        let profile = o.get("modelRoutingProfileId").and_then(Value::as_str).ok_or("a check names its modelRoutingProfileId (mrp_…)")?;
        if !profile.starts_with("mrp_") {
            return Err("modelRoutingProfileId is an mrp_…".into());
        }
        let tier = match o.get("tier") {
            None | Some(Value::Null) => None,
            Some(Value::String(t)) if matches!(t.as_str(), "minimal" | "low" | "medium" | "high" | "max") => Some(t.clone()),
            Some(_) => return Err("tier is an effort: minimal, low, medium, high or max".into()),
        };
        let instructions = match o.get("instructions") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) if s.len() <= MAX_INSTRUCTIONS_BYTES => s.clone(),
            Some(Value::String(_)) => return Err("instructions are at most 16 KiB".into()),
            Some(_) => return Err("instructions are a string".into()),
        };
        let questions = questions(o)?;
        let rule = Rule::parse(o.get("rule").ok_or("a check has a rule")?)?;
        if let Some(n) = rule.unknown_name(&questions) {
            return Err(format!("the rule reads {n:?}, which is not one of the check's questions"));
        }
        Ok(Check { model_routing_profile_id: profile.to_string(), tier, instructions, questions, rule })
    }
}

fn questions(o: &Map<String, Value>) -> Result<Vec<Question>, String> {
    let list = o.get("questions").and_then(Value::as_array).ok_or("a check has a list of questions")?;
    if list.is_empty() || list.len() > MAX_QUESTIONS {
        return Err(format!("a check asks 1 to {MAX_QUESTIONS} questions"));
    }
    let mut out: Vec<Question> = Vec::with_capacity(list.len());
    for (i, q) in list.iter().enumerate() {
        let q = q.as_object().ok_or_else(|| format!("questions[{i}] is {{name, question}}"))?;
        if let Some(k) = unknown_field(q, &["name", "question"]) {
            return Err(format!("questions[{i}] has no field {k:?}"));
        }
        let name = q.get("name").and_then(Value::as_str).ok_or_else(|| format!("questions[{i}].name is a string"))?;
        if !is_question_name(name) {
            return Err(format!("questions[{i}].name is a lowercase name (a letter, then letters, digits or _; at most 64)"));
        }
        if out.iter().any(|p| p.name == name) {
            return Err(format!("two questions are named {name:?}"));
        }
        let text = q.get("question").and_then(Value::as_str).ok_or_else(|| format!("questions[{i}].question is a string"))?;
        if text.is_empty() || text.chars().count() > MAX_QUESTION_CHARS {
            return Err(format!("questions[{i}].question is 1 to {MAX_QUESTION_CHARS} characters"));
        }
        out.push(Question { name: name.to_string(), question: text.to_string() });
    }
    Ok(out)
}

/// Reads answers given for `questions`: exactly their names, each `yes`,
/// `no` or `uncertain`.
pub fn parse_answers(v: &Value, questions: &[Question]) -> Result<BTreeMap<String, Answer>, String> {
    let o = v.as_object().ok_or("answers is an object of question name to yes, no or uncertain")?;
    let mut out = BTreeMap::new();
    for (name, a) in o {
        if !questions.iter().any(|q| &q.name == name) {
            return Err(format!("{name:?} is not one of the check's questions"));
        }
        let a = a.as_str().and_then(Answer::parse).ok_or_else(|| format!("answers.{name} is yes, no or uncertain"))?;
        out.insert(name.clone(), a);
    }
    if let Some(q) = questions.iter().find(|q| !out.contains_key(&q.name)) {
        return Err(format!("answers has no answer to {:?}", q.name));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answers(pairs: &[(&str, Answer)]) -> BTreeMap<String, Answer> {
        pairs.iter().map(|(n, a)| (n.to_string(), *a)).collect()
    }

    #[test]
    fn rules_read_in_three_valued_logic() {
        use Answer::*;
        let rule = |v: Value| Rule::parse(&v).expect("rule");
        let a = answers(&[("billing", Yes), ("tech", Uncertain), ("spam", No)]);
        assert_eq!(rule(json!("billing")).verdict(&a), Yes);
        assert_eq!(rule(json!({"not": "billing"})).verdict(&a), No);
        assert_eq!(rule(json!({"not": "tech"})).verdict(&a), Uncertain, "not keeps uncertain");
        assert_eq!(rule(json!({"all": ["billing", "tech"]})).verdict(&a), Uncertain, "unknown never counts as yes");
        assert_eq!(rule(json!({"all": ["tech", "spam"]})).verdict(&a), No, "a no decides all");
        assert_eq!(rule(json!({"any": ["tech", "billing"]})).verdict(&a), Yes, "a yes decides any");
        assert_eq!(rule(json!({"any": ["spam", "tech"]})).verdict(&a), Uncertain);
        assert_eq!(rule(json!({"any": ["spam", {"not": "billing"}]})).verdict(&a), No);
        assert_eq!(Yes.arm(), "continue");
        assert_eq!(No.arm(), "otherwise");
        assert_eq!(Uncertain.arm(), "uncertain");
    }

    #[test]
    fn rules_are_bounded_in_entries_and_depth() {
        let deep = json!({"not": {"not": {"not": "a"}}});
        assert!(Rule::parse(&deep).is_ok(), "depth 4");
        assert!(Rule::parse(&json!({"not": deep})).is_err(), "depth 5");
        let names: Vec<Value> = (0..17).map(|_| json!("a")).collect();
        assert!(Rule::parse(&json!({"all": names[..16]})).is_ok());
        assert!(Rule::parse(&json!({"all": names})).is_err(), "17 entries");
        assert!(Rule::parse(&json!({"any": []})).is_err());
        assert!(Rule::parse(&json!({"xor": ["a"]})).is_err());
        assert!(Rule::parse(&json!({"all": ["a"], "any": ["a"]})).is_err(), "one operator an object");
        assert!(Rule::parse(&json!(3)).is_err());
    }

    fn check(extra: Value) -> Value {
        let mut c = json!({
            "modelRoutingProfileId": "mrp_e",
            "questions": [{"name": "billing", "question": "require: invoice"}, {"name": "tech", "question": "uncertain: maybe"}],
            "rule": "billing"
        });
        if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
            c.extend(extra.clone());
        }
        c
    }

    #[test]
    fn a_check_is_read_strictly() {
        let c = Check::parse(&check(json!({}))).expect("check");
        assert_eq!(c.questions.len(), 2);
        assert_eq!(c.rule, Rule::Name("billing".into()));
        let refused = |extra: Value| Check::parse(&check(extra)).expect_err("refused");
        assert!(refused(json!({"rule": "nope"})).contains("nope"), "a rule names the check's questions");
        assert!(refused(json!({"questions": []})).contains("1 to 16"));
        refused(json!({"questions": [{"name": "a", "question": "x"}, {"name": "a", "question": "y"}], "rule": "a"}));
        refused(json!({"questions": [{"name": "Billing", "question": "x"}], "rule": "Billing"}));
        refused(json!({"questions": [{"name": "a", "question": "x".repeat(2_001)}], "rule": "a"}));
        refused(json!({"instructions": "x".repeat(16 * 1024 + 1)}));
        refused(json!({"modelRoutingProfileId": "dep_1"}));
        refused(json!({"tier": "huge"}));
        refused(json!({"extra": 1}));
        let seventeen: Vec<Value> = (0..17).map(|i| json!({"name": format!("q{i}"), "question": "x"})).collect();
        refused(json!({"questions": seventeen, "rule": "q0"}));
    }

    #[test]
    fn answers_name_exactly_the_questions() {
        let c = Check::parse(&check(json!({}))).expect("check");
        let got = parse_answers(&json!({"billing": "yes", "tech": "uncertain"}), &c.questions).expect("answers");
        assert_eq!(c.rule.verdict(&got), Answer::Yes);
        assert!(parse_answers(&json!({"billing": "yes"}), &c.questions).is_err(), "a missing name");
        assert!(parse_answers(&json!({"billing": "yes", "tech": "no", "x": "no"}), &c.questions).is_err(), "an extra name");
        assert!(parse_answers(&json!({"billing": "maybe", "tech": "no"}), &c.questions).is_err(), "not an answer");
        assert!(parse_answers(&json!([]), &c.questions).is_err());
    }
}
