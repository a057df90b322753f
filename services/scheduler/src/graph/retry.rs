//! Authored retries (api.md §18.6): `retry:{maxAttempts, backoffSeconds,
//! multiplier?}` on the nodes whose failures can be transient — a
//! `step_agent`, a `step_connection`, a `step_check`, a `check` Decision or
//! a Memory step.
//! Only failures that left no effect behind are retried (the program
//! decides which); the wait before attempt n+1 is `backoffSeconds ×
//! multiplier^(n−1)`, every one at most an hour.

use super::checks::unknown_field;
use serde_json::Value;

pub const MAX_ATTEMPTS: i64 = 5;
pub const MAX_BACKOFF_SECONDS: i64 = 3_600;
pub const MAX_MULTIPLIER: f64 = 4.0;
/// No wait between attempts is longer than this.
pub const MAX_WAIT_SECONDS: f64 = 3_600.0;

#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    pub max_attempts: i64,
    pub backoff_seconds: i64,
    pub multiplier: f64,
}

/// Whether a node of this kind (its raw `kind` and, for a Decision, its
/// condition's) may carry `retry`.
pub fn retryable(kind: &str, condition_kind: Option<&str>) -> bool {
    matches!(kind, "step_agent" | "step_connection" | "step_check" | "step_memory_read" | "step_memory_write")
        || (kind == "decision" && condition_kind == Some("check"))
}

impl Retry {
    /// Reads `retry`; every refusal is `invalid_retry`.
    pub fn parse(v: &Value) -> Result<Retry, String> {
        let o = v.as_object().ok_or("retry is {maxAttempts, backoffSeconds, multiplier?}")?;
        if let Some(k) = unknown_field(o, &["maxAttempts", "backoffSeconds", "multiplier"]) {
            return Err(format!("retry has no field {k:?}"));
        }
        let max_attempts = o
            .get("maxAttempts")
            .and_then(Value::as_i64)
            .filter(|n| (1..=MAX_ATTEMPTS).contains(n))
            .ok_or(format!("retry.maxAttempts is an integer from 1 to {MAX_ATTEMPTS}"))?;
        let backoff_seconds = o
            .get("backoffSeconds")
            .and_then(Value::as_i64)
            .filter(|n| (1..=MAX_BACKOFF_SECONDS).contains(n))
            .ok_or(format!("retry.backoffSeconds is an integer from 1 to {MAX_BACKOFF_SECONDS}"))?;
        let multiplier = match o.get("multiplier") {
            None | Some(Value::Null) => 1.0,
            Some(m) => m.as_f64().filter(|m| (1.0..=MAX_MULTIPLIER).contains(m)).ok_or("retry.multiplier is a number from 1 to 4")?,
        };
        let r = Retry { max_attempts, backoff_seconds, multiplier };
        if let Some(n) = (1..max_attempts).find(|n| r.wait_seconds(*n) > MAX_WAIT_SECONDS) {
            return Err(format!("the wait after attempt {n} would be {:.0} s; every wait is at most an hour", r.wait_seconds(n)));
        }
        Ok(r)
    }

    /// The wait after failed attempt `n` (from 1), in seconds.
    pub fn wait_seconds(&self, n: i64) -> f64 {
        self.backoff_seconds as f64 * self.multiplier.powi(i32::try_from(n - 1).unwrap_or(i32::MAX))
    }

    pub fn wait_ms(&self, n: i64) -> i64 {
        (self.wait_seconds(n) * 1000.0).round() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn retries_are_bounded_in_count_backoff_multiplier_and_every_wait() {
        let r = Retry::parse(&json!({"maxAttempts": 3, "backoffSeconds": 2, "multiplier": 3})).expect("valid");
        assert_eq!((r.wait_ms(1), r.wait_ms(2)), (2_000, 6_000));
        assert_eq!(Retry::parse(&json!({"maxAttempts": 1, "backoffSeconds": 1})).expect("valid").multiplier, 1.0);
        for bad in [
            json!({"maxAttempts": 6, "backoffSeconds": 1}),
            json!({"maxAttempts": 0, "backoffSeconds": 1}),
            json!({"maxAttempts": 2, "backoffSeconds": 3_601}),
            json!({"maxAttempts": 2, "backoffSeconds": 1, "multiplier": 5}),
            json!({"maxAttempts": 2, "backoffSeconds": 1, "jitter": true}),
            json!({"maxAttempts": 5, "backoffSeconds": 1_000, "multiplier": 2}),
            json!("3"),
        ] {
            assert!(Retry::parse(&bad).is_err(), "{bad}");
        }
        assert!(retryable("step_check", None) && retryable("decision", Some("check")));
        assert!(!retryable("decision", Some("predicates")) && !retryable("step_wait", None));
    }
}
