//! Predicates (api.md §12.8 rule 5): the admission filter of a webhook
//! trigger and a Decision's condition. `equals` compares JSON without
//! coercion (`false` ≠ `"false"`, `0` ≠ `"0"`, `1` = `1.0`; objects, arrays
//! and null are never equal); `contains` is a substring test on strings. A
//! pointer that resolves to nothing never matches.

use checkfu_core::{Error, Result};
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

/// Why a predicate list was refused: `(index, reason code, detail)`.
pub type Refusal = (usize, &'static str, String);

/// Whether `p` is an RFC 6901 pointer: empty, or `/`-separated tokens whose
/// `~` escapes are `~0` or `~1`.
pub fn is_pointer(p: &str) -> bool {
    if p.is_empty() {
        return true;
    }
    if !p.starts_with('/') {
        return false;
    }
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return false;
        }
    }
    true
}

impl Predicate {
    /// `{kind:"equals"|"contains", pointer, value}`.
    pub fn parse(v: &Value) -> std::result::Result<Predicate, (&'static str, String)> {
        let Some(o) = v.as_object() else { return Err(("invalid_predicate", "a predicate is an object".into())) };
        if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "kind" | "pointer" | "value")) {
            return Err(("invalid_predicate", format!("a predicate has no field {k:?}")));
        }
        let op = match o.get("kind").and_then(Value::as_str) {
            Some("equals") => Op::Equals,
            Some("contains") => Op::Contains,
            _ => return Err(("invalid_predicate", "a predicate's kind is equals or contains".into())),
        };
        let pointer = match o.get("pointer") {
            Some(Value::String(p)) if is_pointer(p) => p.clone(),
            _ => return Err(("invalid_predicate", "a predicate's pointer is a JSON Pointer (RFC 6901)".into())),
        };
        let value = match o.get("value") {
            None | Some(Value::Null) => return Err(("invalid_predicate_value", "a predicate's value is not null".into())),
            Some(v) => v.clone(),
        };
        if op == Op::Contains && !value.is_string() {
            return Err(("invalid_predicate_value", "a contains predicate's value is a string".into()));
        }
        Ok(Predicate { op, pointer, value })
    }

    pub fn to_json(&self) -> Value {
        let kind = match self.op {
            Op::Equals => "equals",
            Op::Contains => "contains",
        };
        serde_json::json!({"kind": kind, "pointer": self.pointer, "value": self.value})
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
    let Some(o) = v.as_object() else { return Err((0, "invalid_predicate", "a condition is an object".into())) };
    if o.get("kind").and_then(Value::as_str) != Some("predicates") || o.keys().any(|k| k != "kind" && k != "predicates") {
        return Err((0, "invalid_predicate", "a condition is {kind:\"predicates\", predicates:[...]}".into()));
    }
    let Some(list) = o.get("predicates").and_then(Value::as_array) else {
        return Err((0, "invalid_predicate", "predicates is a list".into()));
    };
    if list.is_empty() || list.len() > 32 {
        return Err((0, "invalid_predicate", "a condition holds 1 to 32 predicates".into()));
    }
    list.iter().enumerate().map(|(i, p)| Predicate::parse(p).map_err(|(code, why)| (i, code, why))).collect()
}

/// The index of the first predicate that does not hold, if any.
pub fn first_failing(predicates: &[Predicate], doc: &Value) -> Option<usize> {
    predicates.iter().position(|p| !p.holds(doc))
}

/// A condition as an API error (400 with `reason`) for `field`.
pub fn condition_error(field: &str, (i, code, why): Refusal, reason: &str) -> Error {
    Error::invalid_field(&format!("{field}.predicates[{i}]"), why).with_details(serde_json::json!({"reason": reason, "code": code}))
}

/// Parses a condition for `field`, refusing it with `reason`.
pub fn parse_for(field: &str, v: &Value, reason: &str) -> Result<Vec<Predicate>> {
    parse_condition(v).map_err(|r| condition_error(field, r, reason))
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
    fn conditions_are_checked() {
        let ok = json!({"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/kind", "value": "issue"}]});
        let preds = parse_condition(&ok).expect("condition");
        assert_eq!(first_failing(&preds, &json!({"kind": "pr"})), Some(0));
        assert_eq!(first_failing(&preds, &json!({"kind": "issue"})), None);
        let null = json!({"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/x", "value": null}]});
        assert_eq!(parse_condition(&null).expect_err("null").1, "invalid_predicate_value");
        let bad_ptr = json!({"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "x", "value": 1}]});
        assert_eq!(parse_condition(&bad_ptr).expect_err("pointer").1, "invalid_predicate");
        assert!(is_pointer("/a~1b/~0") && !is_pointer("/a~2") && !is_pointer("a"));
    }
}
