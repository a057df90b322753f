//! A Deployment's execution plane between the public JSON and the mesh's
//! typed `ExecutionPlane`: a body's `execution` read into it (its shape,
//! with the sessions service's message; the service checks the pool and
//! that the plane suits the sandbox profile) and rendered back.

use checkfu_core::{Error, Result};
use checkfu_proto::sessions::v1 as ss;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The public shape; its serde errors are the ones the sessions service
/// gave for the same body before the plane was typed.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Plane {
    Managed,
    Runner { pool: String },
    ExternalTools { pool: String },
}

/// A body's `execution`: absent (or null) is managed.
pub fn to_wire(v: &Option<Value>) -> Result<Option<ss::ExecutionPlane>> {
    let Some(v) = v.as_ref().filter(|v| !v.is_null()) else { return Ok(None) };
    let plane: Plane = serde_json::from_value(v.clone()).map_err(|e| {
        Error::invalid_field(
            "execution",
            format!("execution must be {{kind:\"managed\"}}, {{kind:\"runner\", pool}} or {{kind:\"external_tools\", pool}}: {e}"),
        )
    })?;
    let (kind, pool) = match plane {
        Plane::Managed => ("managed", String::new()),
        Plane::Runner { pool } => ("runner", pool),
        Plane::ExternalTools { pool } => ("external_tools", pool),
    };
    Ok(Some(ss::ExecutionPlane { kind: kind.into(), pool }))
}

/// `{kind}` or `{kind, pool}`: from the typed plane, or from the JSON text
/// of a 0.1.0 sessions service; null when neither says.
pub fn view(typed: Option<&ss::ExecutionPlane>, json: &str) -> Value {
    let Some(p) = typed else { return crate::json_text::doc(json) };
    let plane = match p.kind.as_str() {
        "runner" => Plane::Runner { pool: p.pool.clone() },
        "external_tools" => Plane::ExternalTools { pool: p.pool.clone() },
        _ => Plane::Managed,
    };
    serde_json::to_value(plane).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plane_renders_as_its_body_said_it() {
        for body in [json!({"kind": "managed"}), json!({"kind": "runner", "pool": "gpu"}), json!({"kind": "external_tools", "pool": "ci"})]
        {
            let wire = to_wire(&Some(body.clone())).expect("valid");
            assert_eq!(view(wire.as_ref(), ""), body);
            assert_eq!(view(None, &body.to_string()), body, "a 0.1.0 service's text");
        }
        assert_eq!(to_wire(&None).expect("absent"), None);
        assert_eq!(to_wire(&Some(Value::Null)).expect("null"), None);
    }

    #[test]
    fn a_misshapen_plane_names_the_shapes() {
        let e = to_wire(&Some(json!({"kind": "runner"}))).expect_err("no pool");
        assert_eq!(e.details["field"], "execution");
        assert!(e.message.starts_with("execution must be {kind:\"managed\"}"), "{}", e.message);
        assert!(to_wire(&Some(json!({"kind": "sky"}))).is_err(), "no such plane");
    }
}
