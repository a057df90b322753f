//! The JSON text a service sent, read back: free JSON fields (metadata,
//! payloads) and, until the release after 0.1.0, a 0.1.0 peer's text in
//! place of a typed field. Below every module that renders answers, so
//! each reads it the same way.

use serde_json::Value;

/// Parses a JSON document a service sent; empty (or unreadable) is null.
pub fn doc(s: &str) -> Value {
    if s.is_empty() { Value::Null } else { serde_json::from_str(s).unwrap_or(Value::Null) }
}
