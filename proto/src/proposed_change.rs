//! A MemoryProposal's changes as the public JSON gives them —
//! `[{path, content|null, expected_sha256: null|digest}]` — read into typed
//! `ProposedChange`s: by the gateway from a body, and by the memory service
//! from a 0.1.0 gateway's JSON text. Only the shape is checked here (so a
//! malformed body is refused before the gateway's idempotency layer); the
//! memory service checks paths, contents, digests and the count.

use crate::memory::v1::ProposedChange;
use checkfu_core::Error;
use serde::Deserialize;
use serde_json::Value;

/// One change's shape; `expected_sha256` tells `null` from left out.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Shape {
    path: String,
    content: Option<String>,
    #[serde(default, deserialize_with = "present")]
    expected_sha256: Option<Option<String>>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(Option::<String>::deserialize(d)?))
}

impl ProposedChange {
    /// The changes of `changes`; each error names its entry
    /// (`changes[i]`).
    pub fn list_from_json(changes: &Value) -> Result<Vec<ProposedChange>, Error> {
        let list = changes.as_array().ok_or_else(|| Error::invalid_field("changes", "changes must be a list"))?;
        list.iter()
            .enumerate()
            .map(|(i, c)| {
                let field = format!("changes[{i}]");
                let s = Shape::deserialize(c).map_err(|e| Error::invalid_field(&field, format!("{field}: {e}")))?;
                Ok(ProposedChange {
                    path: s.path,
                    content: s.content,
                    expect_absent: matches!(s.expected_sha256, Some(None)),
                    expected_sha256: s.expected_sha256.flatten(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn null_a_digest_and_left_out_are_three_expectations() {
        let v = json!([
            {"path": "/a", "content": "x", "expected_sha256": null},
            {"path": "/b", "content": null, "expected_sha256": "ab"},
            {"path": "/c", "content": "y"},
        ]);
        let c = ProposedChange::list_from_json(&v).expect("shape");
        assert_eq!((c[0].expect_absent, c[0].expected_sha256.as_deref()), (true, None));
        assert_eq!((c[1].expect_absent, c[1].expected_sha256.as_deref(), c[1].content.as_deref()), (false, Some("ab"), None));
        assert_eq!((c[2].expect_absent, c[2].expected_sha256.as_deref()), (false, None), "left out: refused by the service");
    }

    #[test]
    fn a_bad_shape_names_its_entry() {
        let e = ProposedChange::list_from_json(&json!({"path": "/a"})).expect_err("not a list");
        assert_eq!(e.message, "changes must be a list");
        let e =
            ProposedChange::list_from_json(&json!([{"path": "/a", "content": "x", "expected_sha256": null}, {"path": "/b", "extra": 1}]))
                .expect_err("unknown field");
        assert_eq!(e.details["field"], "changes[1]");
        assert!(e.message.starts_with("changes[1]: unknown field `extra`"), "{}", e.message);
    }
}
