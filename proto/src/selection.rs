//! A Session's tool or skill selection as the public JSON gives it — names,
//! each a string or an object with a `name` — read into the typed
//! `Selection`: by the gateway from a body, and by the sessions service
//! from a 0.1.0 caller's JSON text.

use crate::sessions::v1::Selection;
use checkfu_core::Error;
use serde_json::Value;

impl Selection {
    /// The names of `entries`; `field` names the list in an error.
    pub fn from_json(field: &str, entries: &[Value]) -> Result<Selection, Error> {
        let names = entries
            .iter()
            .map(|x| match x {
                Value::String(s) => Ok(s.clone()),
                Value::Object(o) => o
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| Error::invalid_field(field, "each entry needs a name")),
                _ => Err(Error::invalid_field(field, "each entry must be a name")),
            })
            .collect::<Result<_, _>>()?;
        Ok(Selection { names })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_strings_or_objects_with_a_name() {
        let s = Selection::from_json("tools", &[json!("bash"), json!({"name": "read", "note": 1})]).expect("names");
        assert_eq!(s.names, ["bash", "read"]);
        assert_eq!(Selection::from_json("skills", &[json!({})]).expect_err("no name").details["field"], "skills");
        assert!(Selection::from_json("tools", &[json!(3)]).is_err(), "a number names nothing");
    }
}
