//! A Deployment's pinned execution plane on the mesh, typed
//! (`ExecutionPlane`). Until the release after 0.1.0 the JSON text field it
//! replaces is written too, and a 0.1.0 caller's JSON is still read
//! (docs/architecture.md, "JSON on the mesh").

use crate::model::Execution;
use checkfu_core::{Error, Result};
use checkfu_proto::sessions::v1 as pb;
use serde_json::Value;

pub fn execution(e: &Execution) -> pb::ExecutionPlane {
    let (kind, pool) = match e {
        Execution::Managed => ("managed", ""),
        Execution::Runner { pool } => ("runner", pool.as_str()),
        Execution::ExternalTools { pool } => ("external_tools", pool.as_str()),
    };
    pb::ExecutionPlane { kind: kind.into(), pool: pool.into() }
}

const SHAPES: &str = "execution must be {kind:\"managed\"}, {kind:\"runner\", pool} or {kind:\"external_tools\", pool}";

/// A Deployment input's plane: the typed one, else a 0.1.0 caller's JSON;
/// managed when neither says.
pub fn execution_input(typed: Option<pb::ExecutionPlane>, json: &str) -> Result<Execution> {
    let Some(t) = typed else {
        if json.is_empty() {
            return Ok(Execution::Managed);
        }
        let v: Value =
            serde_json::from_str(json).map_err(|e| Error::invalid_field("execution", format!("execution is not valid JSON: {e}")))?;
        if v.is_null() {
            return Ok(Execution::Managed);
        }
        return serde_json::from_value(v).map_err(|e| Error::invalid_field("execution", format!("{SHAPES}: {e}")));
    };
    match (t.kind.as_str(), t.pool) {
        ("managed", p) if p.is_empty() => Ok(Execution::Managed),
        ("managed", _) => Err(Error::invalid_field("execution.pool", format!("{SHAPES}: a managed plane has no pool"))),
        ("runner", pool) => Ok(Execution::Runner { pool }),
        ("external_tools", pool) => Ok(Execution::ExternalTools { pool }),
        (kind, _) => Err(Error::invalid_field("execution.kind", format!("{SHAPES}: not {kind:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plane_reads_back_typed_or_from_a_0_1_0_callers_json() {
        for e in [Execution::Managed, Execution::Runner { pool: "gpu".into() }, Execution::ExternalTools { pool: "ci".into() }] {
            assert_eq!(execution_input(Some(execution(&e)), "").expect("typed"), e);
            let text = serde_json::to_string(&e).expect("serialises");
            assert_eq!(execution_input(None, &text).expect("json"), e);
        }
        assert_eq!(execution_input(None, "").expect("absent"), Execution::Managed);
        assert_eq!(execution_input(None, "null").expect("null"), Execution::Managed);
        let bad = pb::ExecutionPlane { kind: "cloud".into(), pool: String::new() };
        assert_eq!(execution_input(Some(bad), "").expect_err("kind").details["field"], "execution.kind");
        assert!(execution_input(None, r#"{"kind":"runner"}"#).is_err(), "a runner plane names its pool");
    }
}
