//! An Outcome's grading (api.md §14.2–14.3): a fresh context that sees only
//! the rubric, the criteria, the report declaration and the evidence.
//!
//! Report outputs are judged the same way for every provider: the evidence
//! message is parsed as JSON from its first `{` to its last `}`, without
//! coercion (`"7"` is not 7); a missing or ill-typed value is
//! `unresolved`, one outside its `acceptance` is `false`. The rubric and
//! the criteria are the model's to judge; the scripted model judges their
//! rule lines (`require:`, `forbid:`, `uncertain:`).

use super::tokens;
use crate::model::Usage;
use checkfu_core::{Error, Result};
use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    True,
    False,
    Unresolved,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::True => "true",
            Verdict::False => "false",
            Verdict::Unresolved => "unresolved",
        }
    }

    fn word(self) -> &'static str {
        match self {
            Verdict::True => "pass",
            Verdict::False => "fail",
            Verdict::Unresolved => "unresolved",
        }
    }

    /// A false anywhere is false; else an unresolved is unresolved.
    pub(super) fn all(verdicts: impl IntoIterator<Item = Verdict>) -> Verdict {
        verdicts.into_iter().fold(Verdict::True, |acc, v| match (acc, v) {
            (Verdict::False, _) | (_, Verdict::False) => Verdict::False,
            (Verdict::Unresolved, _) | (_, Verdict::Unresolved) => Verdict::Unresolved,
            _ => Verdict::True,
        })
    }

    fn parse(s: &str) -> Verdict {
        match s {
            "true" | "pass" => Verdict::True,
            "false" | "fail" => Verdict::False,
            _ => Verdict::Unresolved,
        }
    }
}

/// A report output as declared.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportOutput {
    pub name: String,
    /// `string`, `integer`, `number` or `boolean`.
    pub kind: String,
    pub description: String,
    pub acceptance: Option<Acceptance>,
}

/// What a reported value must be to pass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Acceptance {
    /// Listed: the value is one of these JSON scalars.
    pub values: Option<Vec<Value>>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Acceptance {
    /// `{values?, min?, max?}` (a 0.1.0 caller's text); null is none.
    pub fn from_json(v: &Value) -> Option<Acceptance> {
        let o = v.as_object()?;
        Some(Acceptance {
            values: o.get("values").and_then(Value::as_array).cloned(),
            min: o.get("min").and_then(Value::as_f64),
            max: o.get("max").and_then(Value::as_f64),
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct GradeTask {
    pub rubric: String,
    /// `(name, question)`.
    pub criteria: Vec<(String, String)>,
    pub report: Vec<ReportOutput>,
    pub evidence_message: String,
    /// `(path, sha256)` of the captured output files.
    pub evidence_files: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Judgment {
    /// `rubric`, `criterion` or `report`.
    pub source: String,
    pub name: String,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Graded {
    pub judgments: Vec<Judgment>,
    /// The report's values as extracted (declared names only).
    pub report: Map<String, Value>,
    pub explanation: String,
    pub feedback: String,
}

pub(super) const SYSTEM: &str = "You grade an agent's work against a rubric and named criteria, seeing only the evidence given. \
Answer with only a JSON object {\"judgments\":[{\"source\":\"rubric\"|\"criterion\",\"name\":\"…\",\"verdict\":\"true\"|\"false\"|\"unresolved\",\"reason\":\"…\"}],\"feedback\":\"…\"}: \
one judgment for the rubric (name \"rubric\") and one per criterion (its name); \"unresolved\" when the evidence cannot decide; \
feedback tells the agent what to change when anything is false.";

/// A rule line's verdict on the evidence, or `None` for a line that is no rule.
pub(super) fn rule(line: &str, evidence: &str) -> Option<Verdict> {
    let contains = |t: &str| evidence.contains(t.trim());
    if let Some(t) = line.strip_prefix("require:") {
        return Some(if contains(t) { Verdict::True } else { Verdict::False });
    }
    if let Some(t) = line.strip_prefix("forbid:") {
        return Some(if contains(t) { Verdict::False } else { Verdict::True });
    }
    if let Some(t) = line.strip_prefix("uncertain:") {
        return Some(if contains(t) { Verdict::Unresolved } else { Verdict::True });
    }
    None
}

impl GradeTask {
    pub(super) fn size(&self) -> usize {
        self.rubric.len() + self.criteria.iter().map(|(n, q)| n.len() + q.len()).sum::<usize>() + self.evidence_message.len()
    }

    pub(super) fn prompt(&self) -> String {
        let mut user = format!("Rubric:\n{}\n\n", self.rubric);
        if !self.criteria.is_empty() {
            user.push_str("Criteria:\n");
            for (name, question) in &self.criteria {
                user.push_str(&format!("- {name}: {question}\n"));
            }
            user.push('\n');
        }
        user.push_str(&format!("The agent's final message:\n{}\n", self.evidence_message));
        if !self.evidence_files.is_empty() {
            user.push_str("\nFiles it left (path, sha256):\n");
            for (path, sha) in &self.evidence_files {
                user.push_str(&format!("- {path} {sha}\n"));
            }
        }
        user
    }

    /// The report's values and their judgments and explanation lines.
    fn report(&self) -> (Map<String, Value>, Vec<(Judgment, String)>) {
        let parsed: Option<Map<String, Value>> =
            super::json_object(&self.evidence_message).and_then(|o| serde_json::from_str::<Value>(o).ok()).and_then(|v| match v {
                Value::Object(m) => Some(m),
                _ => None,
            });
        let mut values = Map::new();
        let mut out = vec![];
        for o in &self.report {
            let value = parsed.as_ref().and_then(|m| m.get(&o.name)).cloned();
            let verdict = match &value {
                Some(v) if typed(&o.kind, v) => {
                    if accepted(&o.acceptance, v) {
                        Verdict::True
                    } else {
                        Verdict::False
                    }
                }
                _ => Verdict::Unresolved,
            };
            let shown = value.clone().unwrap_or(Value::Null);
            if let Some(v) = value {
                values.insert(o.name.clone(), v);
            }
            let line = format!("{} report {}={}", verdict.word(), o.name, shown);
            out.push((Judgment { source: "report".into(), name: o.name.clone(), verdict }, line));
        }
        (values, out)
    }

    /// Rule lines: `require: T` (true iff the evidence message contains
    /// T), `forbid: T` (iff not), `uncertain: T` (unresolved iff it does);
    /// other lines are ignored; no rules is true. Usage: ⌈characters of
    /// rubric, questions and evidence ÷ 4⌉ in, ⌈explanation ÷ 4⌉ out.
    pub(super) fn scripted(&self) -> (Graded, Usage) {
        let mut lines = vec![];
        let mut judgments = vec![];
        let mut judge = |source: &str, name: &str, text: &str, lines: &mut Vec<String>| {
            let mut verdicts = vec![];
            for line in text.lines().map(str::trim) {
                if let Some(v) = rule(line, &self.evidence_message) {
                    lines.push(format!("{} {line}", v.word()));
                    verdicts.push(v);
                }
            }
            judgments.push(Judgment { source: source.into(), name: name.into(), verdict: Verdict::all(verdicts) });
        };
        judge("rubric", "rubric", &self.rubric, &mut lines);
        for (name, question) in &self.criteria {
            judge("criterion", name, question, &mut lines);
        }
        let (report, reported) = self.report();
        for (j, line) in reported {
            judgments.push(j);
            lines.push(line);
        }
        let explanation = lines.join("\n");
        let feedback = lines.iter().filter(|l| l.starts_with("fail ")).cloned().collect::<Vec<_>>().join("\n");
        let read = self.rubric.chars().count()
            + self.criteria.iter().map(|(_, q)| q.chars().count()).sum::<usize>()
            + self.evidence_message.chars().count();
        let usage = Usage { input_tokens: tokens(read), output_tokens: tokens(explanation.chars().count()) };
        (Graded { judgments, report, explanation, feedback }, usage)
    }

    /// A real model's judgments of the rubric and criteria, with the
    /// report judged as for every provider; one it left out is unresolved.
    pub(super) fn parse(&self, object: &str) -> Result<Graded> {
        #[derive(Deserialize)]
        struct Said {
            source: String,
            name: String,
            verdict: String,
            #[serde(default)]
            reason: String,
        }
        #[derive(Deserialize)]
        struct Answer {
            judgments: Vec<Said>,
            #[serde(default)]
            feedback: String,
        }
        let a: Answer = serde_json::from_str(object)
            .map_err(|e| Error::unavailable(format!("the grader's answer was not the judgments asked for: {e}")))?;
        let mut judgments = vec![];
        let mut lines = vec![];
        let wanted = std::iter::once(("rubric", "rubric")).chain(self.criteria.iter().map(|(n, _)| ("criterion", n.as_str())));
        for (source, name) in wanted {
            let said = a.judgments.iter().find(|s| s.source == source && s.name == name);
            let verdict = said.map_or(Verdict::Unresolved, |s| Verdict::parse(&s.verdict));
            let reason = said.map(|s| s.reason.as_str()).unwrap_or("no judgment given");
            lines.push(format!("{} {source} {name}: {reason}", verdict.word()));
            judgments.push(Judgment { source: source.into(), name: name.into(), verdict });
        }
        let (report, reported) = self.report();
        for (j, line) in reported {
            judgments.push(j);
            lines.push(line);
        }
        let fails: Vec<&String> = lines.iter().filter(|l| l.starts_with("fail ")).collect();
        let feedback =
            if a.feedback.trim().is_empty() { fails.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n") } else { a.feedback };
        Ok(Graded { judgments, report, explanation: lines.join("\n"), feedback })
    }
}

fn typed(kind: &str, v: &Value) -> bool {
    match kind {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => false,
    }
}

fn accepted(acceptance: &Option<Acceptance>, v: &Value) -> bool {
    let Some(a) = acceptance else { return true };
    if let Some(values) = &a.values
        && !values.contains(v)
    {
        return false;
    }
    let n = v.as_f64();
    if let (Some(min), Some(n)) = (a.min, n)
        && n < min
    {
        return false;
    }
    if let (Some(max), Some(n)) = (a.max, n)
        && n > max
    {
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(rubric: &str, evidence: &str) -> GradeTask {
        GradeTask { rubric: rubric.into(), evidence_message: evidence.into(), ..Default::default() }
    }

    fn verdicts(g: &Graded) -> Vec<(&str, &str, &str)> {
        g.judgments.iter().map(|j| (j.source.as_str(), j.name.as_str(), j.verdict.as_str())).collect()
    }

    #[test]
    fn rule_lines_judge_the_evidence() {
        let (g, usage) = task("require: hello\nignored line\n  forbid: bye  ", "echo: hello").scripted();
        assert_eq!(verdicts(&g), [("rubric", "rubric", "true")]);
        assert_eq!(g.explanation, "pass require: hello\npass forbid: bye");
        assert_eq!(g.feedback, "");
        assert_eq!(usage, Usage { input_tokens: tokens(42 + 11), output_tokens: tokens(35) });
        let (g, _) = task("require: goodbye", "echo: hello").scripted();
        assert_eq!((g.judgments[0].verdict, g.feedback.as_str()), (Verdict::False, "fail require: goodbye"));
        let (g, _) = task("uncertain: maybe\nrequire: x", "maybe x").scripted();
        assert_eq!(g.judgments[0].verdict, Verdict::Unresolved);
        let (g, _) = task("uncertain: maybe\nforbid: x", "maybe x").scripted();
        assert_eq!(g.judgments[0].verdict, Verdict::False, "a false outranks an unresolved");
        let (g, _) = task("", "anything").scripted();
        assert_eq!((g.judgments[0].verdict, g.explanation.as_str()), (Verdict::True, ""), "no rules: satisfied");
    }

    #[test]
    fn criteria_are_judged_by_their_questions() {
        let mut t = task("", "echo: hello");
        t.criteria = vec![("greets".into(), "require: hello".into()), ("leaves".into(), "require: bye".into())];
        let (g, _) = t.scripted();
        assert_eq!(verdicts(&g), [("rubric", "rubric", "true"), ("criterion", "greets", "true"), ("criterion", "leaves", "false")]);
        assert_eq!(g.feedback, "fail require: bye");
    }

    #[test]
    fn report_values_are_typed_without_coercion_and_checked_against_acceptance() {
        let out = |name: &str, kind: &str, acceptance: Value| ReportOutput {
            name: name.into(),
            kind: kind.into(),
            description: String::new(),
            acceptance: Acceptance::from_json(&acceptance),
        };
        let mut t = task("", r#"echo: {"score": 7, "label": "ok", "text": "7", "ratio": 0.5}"#);
        t.report = vec![
            out("score", "integer", json!({"min": 5})),
            out("label", "string", json!({"values": ["ok", "fine"]})),
            out("text", "integer", Value::Null),
            out("ratio", "number", json!({"max": 0.25})),
            out("missing", "boolean", Value::Null),
        ];
        let (g, _) = t.scripted();
        assert_eq!(
            &verdicts(&g)[1..],
            [
                ("report", "score", "true"),
                ("report", "label", "true"),
                ("report", "text", "unresolved"),
                ("report", "ratio", "false"),
                ("report", "missing", "unresolved"),
            ]
        );
        assert_eq!(g.report.get("score"), Some(&json!(7)));
        assert!(g.explanation.contains("pass report score=7"), "{}", g.explanation);
        assert_eq!(g.feedback, "fail report ratio=0.5");
        let mut strict = task("", r#"{"score": 7}"#);
        strict.report = vec![out("score", "integer", json!({"min": 8}))];
        assert_eq!(strict.scripted().0.feedback, "fail report score=7");
    }

    #[test]
    fn a_real_graders_answer_fills_what_it_left_out_as_unresolved() {
        let mut t = task("be kind", "hello");
        t.criteria = vec![("short".into(), "Is it short?".into())];
        let g = t.parse(r#"{"judgments":[{"source":"rubric","name":"rubric","verdict":"false","reason":"rude"}]}"#).unwrap();
        assert_eq!(verdicts(&g), [("rubric", "rubric", "false"), ("criterion", "short", "unresolved")]);
        assert_eq!(g.feedback, "fail rubric rubric: rude");
        assert!(t.parse(r#"{"verdict": 1}"#).is_err());
    }
}
