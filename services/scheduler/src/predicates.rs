//! Predicates (api.md §12.8 rule 5): the admission filter of a webhook
//! trigger and a Decision's condition. `equals` compares JSON without
//! coercion (`false` ≠ `"false"`, `0` ≠ `"0"`, `1` = `1.0`; objects, arrays
//! and null are never equal); `contains` is a substring test on strings. A
//! pointer that resolves to nothing never matches.

pub use checkfu_proto::automation_spec::{Refusal, is_pointer};
use checkfu_proto::scheduler::v1 as pb;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Equals,
    Contains,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    pub op: Op,
    /// An RFC 6901 JSON Pointer (`""` is the whole document).
    pub pointer: String,
    pub value: Value,
}

impl Predicate {
    /// A predicate as written, its shape read by
    /// `checkfu_proto::automation_spec`; a refusal is `(code, detail)`.
    pub fn parse(v: &Value) -> std::result::Result<Predicate, (&'static str, String)> {
        pb::Predicate::from_json(v).map(|p| Predicate::from_spec(&p))
    }

    /// The typed form, whose shape was read (on whichever side of the mesh).
    pub fn from_spec(p: &pb::Predicate) -> Predicate {
        Predicate { op: if p.kind == "contains" { Op::Contains } else { Op::Equals }, pointer: p.pointer.clone(), value: p.value() }
    }

    pub fn to_spec(&self) -> pb::Predicate {
        let kind = match self.op {
            Op::Equals => "equals",
            Op::Contains => "contains",
        };
        pb::Predicate { kind: kind.into(), pointer: self.pointer.clone(), value_json: self.value.to_string() }
    }

    /// Whether the predicate holds of `doc`.
    pub fn holds(&self, doc: &Value) -> bool {
        let Some(found) = doc.pointer(&self.pointer) else { return false };
        match self.op {
            Op::Equals => equals(found, &self.value),
            Op::Contains => match (found, &self.value) {
                (Value::String(s), Value::String(needle)) => s.contains(needle.as_str()),
                _ => false,
            },
        }
    }
}

/// Same JSON type and value: numbers by value (`1` = `1.0`), strings
/// exactly, booleans; objects, arrays and null are never equal.
pub fn equals(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
            (Some(x), Some(y), _, _) => x == y,
            (_, _, Some(x), Some(y)) => x == y,
            _ => x.as_f64().zip(y.as_f64()).is_some_and(|(x, y)| x == y),
        },
        _ => false,
    }
}

/// `{kind:"predicates", predicates:[...]}`, refused with the first bad
/// entry's index and reason.
pub fn parse_condition(v: &Value) -> std::result::Result<Vec<Predicate>, Refusal> {
    Ok(checkfu_proto::automation_spec::condition_from_json(v)?.iter().map(Predicate::from_spec).collect())
}

/// The index of the first predicate that does not hold, if any.
pub fn first_failing(predicates: &[Predicate], doc: &Value) -> Option<usize> {
    predicates.iter().position(|p| !p.holds(doc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(kind: &str, pointer: &str, value: Value) -> Predicate {
        Predicate::parse(&json!({"kind": kind, "pointer": pointer, "value": value})).expect("predicate")
    }

    #[test]
    fn equals_never_coerces() {
        let doc = json!({"flag": false, "n": 1, "f": 1.0, "s": "false", "z": "0", "o": {}, "a": [], "nul": null, "e": ""});
        assert!(p("equals", "/flag", json!(false)).holds(&doc));
        assert!(!p("equals", "/s", json!(false)).holds(&doc), "\"false\" is not false");
        assert!(!p("equals", "/z", json!(0)).holds(&doc), "\"0\" is not 0");
        assert!(p("equals", "/n", json!(1.0)).holds(&doc), "1 = 1.0");
        assert!(p("equals", "/f", json!(1)).holds(&doc));
        assert!(p("equals", "/e", json!("")).holds(&doc), "text may be empty");
        assert!(!p("equals", "/o", json!({})).holds(&doc), "objects are unequal");
        assert!(!p("equals", "/a", json!([])).holds(&doc), "arrays are unequal");
        assert!(!p("equals", "/missing", json!(1)).holds(&doc), "a missing pointer never matches");
        assert!(p("contains", "/s", json!("als")).holds(&doc));
        assert!(!p("contains", "/n", json!("1")).holds(&doc), "contains is for strings");
    }

    #[test]
    fn conditions_hold_when_every_predicate_does() {
        let ok = json!({"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/kind", "value": "issue"}]});
        let preds = parse_condition(&ok).expect("condition");
        assert_eq!(first_failing(&preds, &json!({"kind": "pr"})), Some(0));
        assert_eq!(first_failing(&preds, &json!({"kind": "issue"})), None);
        assert_eq!(Predicate::from_spec(&preds[0].to_spec()), preds[0], "the typed form round-trips");
    }
}
