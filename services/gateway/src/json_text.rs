//! The JSON text a service sent, read back: free JSON fields (metadata,
//! payloads) and, until the release after 0.1.0, a 0.1.0 peer's text in
//! place of a typed field; and a view rendered as a JSON value. Below every
//! module that renders answers, so each does both the same way.

use checkfu_core::Error;
use serde_json::Value;

/// A view as a JSON value, for an answer that passes through the
/// idempotency layer (which keeps values); a view that cannot render is a
/// 500, not a client's mistake.
pub fn value<T: serde::Serialize>(view: T) -> Result<Value, Error> {
    serde_json::to_value(view).map_err(|e| Error::internal(format!("an answer did not render: {e}")))
}

/// Parses a JSON document a service sent; empty (or unreadable) is null.
pub fn doc(s: &str) -> Value {
    if s.is_empty() { Value::Null } else { serde_json::from_str(s).unwrap_or(Value::Null) }
}
