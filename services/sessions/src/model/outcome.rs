//! Outcomes (api.md §14): a revise-until-done loop inside one Session. A
//! grader in a separate context judges each graded Run; `needs_revision`
//! starts another Run with the grader's feedback, until the work satisfies
//! the rubric or the iterations run out.
//!
//! The Outcome lives on its Session's row (its state moves in the same
//! commit as the events that record it) and is kept in the `outcomes`
//! table for reading by id.

use checkfu_core::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub const MAX_DESCRIPTION_BYTES: usize = 16 * 1024;
pub const MAX_RUBRIC_BYTES: usize = 64 * 1024;
pub const MAX_ITERATIONS: i64 = 20;
pub const MAX_CRITERIA: usize = 32;
pub const MAX_REPORT_OUTPUTS: usize = 32;
/// The most evaluations an Outcome keeps (interrupted ones use no
/// iteration, so they are bounded here instead).
pub const MAX_EVALUATIONS: usize = 64;

checkfu_core::string_enum!(OutcomeStatus {
    Active = "active",
    Satisfied = "satisfied",
    MaxIterationsReached = "max_iterations_reached",
    Interrupted = "interrupted",
    Failed = "failed",
});

/// A criterion: a question the grader answers about the evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Criterion {
    pub name: String,
    pub question: String,
    pub failure: String,
}

/// A report output the grader extracts from the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportOutput {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportDeclaration {
    pub extraction: String,
    pub outputs: Vec<ReportOutput>,
}

/// A `user.define_outcome` as validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Definition {
    pub description: String,
    pub rubric: String,
    pub max_iterations: i64,
    pub criteria: Vec<Criterion>,
    pub report: Option<ReportDeclaration>,
}

/// A grading under way: the Run it grades and its iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grading {
    pub iteration: i64,
    pub run_id: String,
    /// The `outcome.evaluation_started` event's seq.
    pub started_seq: i64,
    pub started_ms: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeUsage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_micro_usd: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub id: String,
    pub session_id: String,
    pub define_event_id: String,
    pub definition: Definition,
    pub status: OutcomeStatus,
    pub reason: Option<String>,
    pub iterations_used: i64,
    /// Each `outcome.evaluation_completed` payload, oldest first.
    pub evaluations: Vec<Value>,
    pub report: Option<Value>,
    pub usage: OutcomeUsage,
    pub created_ms: i64,
    pub completed_ms: i64,
    /// Set while a grader is at work.
    pub grading: Option<Grading>,
    /// The evidence digest of the last evaluation the grader could not
    /// decide: equal evidence again is not graded again.
    pub last_unavailable_sha256: Option<String>,
    /// A `user.interrupt` reached the primary while a Run was under way:
    /// that Run's end is not graded.
    pub interrupt_requested: bool,
}

impl Outcome {
    pub fn active(&self) -> bool {
        self.status == OutcomeStatus::Active
    }

    /// Records an evaluation (the newest [`MAX_EVALUATIONS`] are kept).
    pub fn record(&mut self, evaluation: Value) {
        self.evaluations.push(evaluation);
        if self.evaluations.len() > MAX_EVALUATIONS {
            self.evaluations.remove(0);
        }
    }
}

fn bad(field: &str, message: impl Into<String>) -> Error {
    Error::invalid_field(&format!("payload.{field}"), message)
}

fn check_name(field: &str, name: &str) -> Result<()> {
    let ok = name.len() <= 64
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok { Ok(()) } else { Err(bad(field, "a name matches ^[a-z][a-z0-9_]{0,63}$")) }
}

impl Definition {
    /// Validates a `user.define_outcome` payload (§14.1); anything else is 400.
    pub fn parse(p: &Value) -> Result<Definition> {
        let description = p.get("description").and_then(Value::as_str).ok_or_else(|| bad("description", "description is required"))?;
        if description.is_empty() || description.len() > MAX_DESCRIPTION_BYTES {
            return Err(bad("description", "description must be 1 byte to 16 KiB"));
        }
        let rubric = p.get("rubric").and_then(Value::as_str).ok_or_else(|| bad("rubric", "rubric is required, a string"))?;
        if rubric.len() > MAX_RUBRIC_BYTES {
            return Err(bad("rubric", "rubric holds at most 64 KiB"));
        }
        let max_iterations = p.get("max_iterations").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=MAX_ITERATIONS).contains(&max_iterations) {
            return Err(bad("max_iterations", "max_iterations must be 1 to 20"));
        }
        let criteria = match p.get("criteria").filter(|v| !v.is_null()) {
            None => vec![],
            Some(v) => Self::criteria(v)?,
        };
        let report = match p.get("report").filter(|v| !v.is_null()) {
            None => None,
            Some(v) => Some(Self::report(v)?),
        };
        if let Some(extra) = p.as_object().and_then(|o| {
            o.keys().find(|k| !["description", "rubric", "max_iterations", "criteria", "report", "session_thread_id"].contains(&k.as_str()))
        }) {
            return Err(bad(extra, format!("user.define_outcome has no field {extra:?}")));
        }
        Ok(Definition { description: description.into(), rubric: rubric.into(), max_iterations, criteria, report })
    }

    fn criteria(v: &Value) -> Result<Vec<Criterion>> {
        let list = v.as_array().ok_or_else(|| bad("criteria", "criteria must be an array"))?;
        if list.is_empty() || list.len() > MAX_CRITERIA {
            return Err(bad("criteria", "criteria hold 1 to 32 entries"));
        }
        let mut out: Vec<Criterion> = vec![];
        for (i, c) in list.iter().enumerate() {
            let f = |k: &str| format!("criteria[{i}].{k}");
            let name = c.get("name").and_then(Value::as_str).ok_or_else(|| bad(&f("name"), "a criterion needs a name"))?;
            check_name(&f("name"), name)?;
            if out.iter().any(|o| o.name == name) {
                return Err(bad(&f("name"), format!("criterion {name:?} appears twice")));
            }
            let question = c.get("question").and_then(Value::as_str).ok_or_else(|| bad(&f("question"), "a criterion needs a question"))?;
            if question.is_empty() || question.len() > MAX_DESCRIPTION_BYTES {
                return Err(bad(&f("question"), "a question is 1 byte to 16 KiB"));
            }
            match c.get("failure").and_then(Value::as_str) {
                Some("fail_closed") => {}
                Some("fail_open") => {
                    return Err(bad(&f("failure"), "fail_open is not offered: an undecided criterion never passes (use fail_closed)"));
                }
                _ => return Err(bad(&f("failure"), "failure is required: \"fail_closed\"")),
            }
            if let Some(k) = c.as_object().and_then(|o| o.keys().find(|k| !["name", "question", "failure"].contains(&k.as_str()))) {
                return Err(bad(&f(k), format!("a criterion has no field {k:?}")));
            }
            out.push(Criterion { name: name.into(), question: question.into(), failure: "fail_closed".into() });
        }
        Ok(out)
    }

    fn report(v: &Value) -> Result<ReportDeclaration> {
        match v.get("extraction").and_then(Value::as_str) {
            Some("json") => {}
            _ => return Err(bad("report.extraction", "report.extraction must be \"json\"")),
        }
        let list = v.get("outputs").and_then(Value::as_array).ok_or_else(|| bad("report.outputs", "report.outputs must be an array"))?;
        if list.is_empty() || list.len() > MAX_REPORT_OUTPUTS {
            return Err(bad("report.outputs", "report.outputs hold 1 to 32 entries"));
        }
        let mut outputs: Vec<ReportOutput> = vec![];
        for (i, o) in list.iter().enumerate() {
            let f = |k: &str| format!("report.outputs[{i}].{k}");
            let name = o.get("name").and_then(Value::as_str).ok_or_else(|| bad(&f("name"), "an output needs a name"))?;
            check_name(&f("name"), name)?;
            if outputs.iter().any(|x| x.name == name) {
                return Err(bad(&f("name"), format!("output {name:?} appears twice")));
            }
            let kind = o.get("type").and_then(Value::as_str).unwrap_or_default();
            if !["string", "integer", "number", "boolean"].contains(&kind) {
                return Err(bad(&f("type"), "type must be string, integer, number or boolean"));
            }
            let description = match o.get("description").filter(|v| !v.is_null()) {
                None => None,
                Some(d) => Some(
                    d.as_str().filter(|d| d.len() <= 4096).ok_or_else(|| bad(&f("description"), "a string of at most 4 KiB"))?.to_string(),
                ),
            };
            let acceptance = match o.get("acceptance").filter(|v| !v.is_null()) {
                None => None,
                Some(a) => Some(Self::acceptance(&f("acceptance"), kind, a)?),
            };
            outputs.push(ReportOutput { name: name.into(), kind: kind.into(), description, acceptance });
        }
        Ok(ReportDeclaration { extraction: "json".into(), outputs })
    }

    fn acceptance(field: &str, kind: &str, a: &Value) -> Result<Value> {
        let o = a.as_object().ok_or_else(|| bad(field, "acceptance must be an object"))?;
        for (k, v) in o {
            match k.as_str() {
                "values" => {
                    let values =
                        v.as_array().filter(|l| !l.is_empty() && l.len() <= 100).ok_or_else(|| bad(field, "values: 1 to 100 values"))?;
                    let typed = values.iter().all(|x| match kind {
                        "string" => x.is_string(),
                        "integer" => x.is_i64() || x.is_u64(),
                        "number" => x.is_number(),
                        _ => x.is_boolean(),
                    });
                    if !typed {
                        return Err(bad(field, format!("values must be of the output's type, {kind}")));
                    }
                }
                "min" | "max" => {
                    if !matches!(kind, "integer" | "number") {
                        return Err(bad(field, "min and max apply to integer and number outputs only"));
                    }
                    if !v.is_number() {
                        return Err(bad(field, format!("{k} must be a number")));
                    }
                }
                other => return Err(bad(field, format!("acceptance has no field {other:?}"))),
            }
        }
        if let (Some(min), Some(max)) = (o.get("min").and_then(Value::as_f64), o.get("max").and_then(Value::as_f64))
            && min > max
        {
            return Err(bad(field, "min is above max"));
        }
        Ok(a.clone())
    }

    /// The declaration as the API shows it (`report_declaration`).
    pub fn report_json(&self) -> Value {
        self.report.as_ref().map_or(Value::Null, |r| json!(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(p: Value) -> Result<Definition> {
        Definition::parse(&p)
    }

    fn base() -> Value {
        json!({"description": "say hello", "rubric": "require: hello", "max_iterations": 3})
    }

    fn with(k: &str, v: Value) -> Value {
        let mut p = base();
        p[k] = v;
        p
    }

    #[test]
    fn a_definition_is_checked_whole() {
        assert_eq!(parse(base()).unwrap().max_iterations, 3);
        for bad in [
            with("max_iterations", json!(0)),
            with("max_iterations", json!(21)),
            with("description", json!("")),
            with("rubric", Value::Null),
            with("criteria", json!([])),
            with("criteria", json!([{"name": "a", "question": "q", "failure": "fail_open"}])),
            with("criteria", json!([{"name": "a", "question": "q"}])),
            with("criteria", json!([{"name": "Bad", "question": "q", "failure": "fail_closed"}])),
            with(
                "criteria",
                json!([{"name": "a", "question": "q", "failure": "fail_closed"}, {"name": "a", "question": "r", "failure": "fail_closed"}]),
            ),
            with("report", json!({"extraction": "lines", "outputs": [{"name": "a", "type": "string"}]})),
            with("report", json!({"extraction": "json", "outputs": []})),
            with(
                "report",
                json!({"extraction": "json", "outputs": (0..33).map(|i| json!({"name": format!("o{i}"), "type": "string"})).collect::<Vec<_>>()}),
            ),
            with("report", json!({"extraction": "json", "outputs": [{"name": "a", "type": "string", "acceptance": {"min": 1}}]})),
            with("report", json!({"extraction": "json", "outputs": [{"name": "a", "type": "date"}]})),
            with("unknown", json!(1)),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
        let full = with("criteria", json!([{"name": "greets", "question": "require: hello", "failure": "fail_closed"}]));
        let mut full = full;
        full["report"] = json!({"extraction": "json", "outputs": [{"name": "score", "type": "integer", "acceptance": {"min": 5}}]});
        let d = parse(full).unwrap();
        assert_eq!((d.criteria.len(), d.report.unwrap().outputs[0].kind.as_str()), (1, "integer"));
    }
}
