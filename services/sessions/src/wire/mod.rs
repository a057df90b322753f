//! Wire types to domain types and back, for the gRPC adapters: each
//! message of `checkfu.sessions.v1` and `checkfu.runner.v1` that this
//! service answers or reads is made here, one file per domain, so the
//! adapters (`grpc.rs`, `grpc_runner.rs`, `grpc_work.rs`) only route.
//! Deprecated JSON text fields are still written (and read when the typed
//! field is absent) for a 0.1.0 peer, until the release after it.

pub(crate) mod budget;
pub(crate) mod catalog;
pub(crate) mod definition;
pub(crate) mod execution;
pub(crate) mod outcome;
pub mod run_state;
pub(crate) mod runner;
pub(crate) mod sandbox;
pub(crate) mod session;
pub(crate) mod thread;
pub(crate) mod tools;

use checkfu_core::{Error, Result};
use serde_json::Value;

/// Parses an optional JSON document from the wire; empty means absent.
pub(crate) fn json_or_null(field: &str, s: &str) -> Result<Value> {
    if s.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(s).map_err(|e| Error::invalid_field(field, format!("{field} is not valid JSON: {e}")))
}

pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}
