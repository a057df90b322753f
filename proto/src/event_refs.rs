//! An event's `authored_by` and `caused_by` between their public JSON and
//! the typed `Author` and `Cause`: the sessions service stores and checks
//! the JSON form, the gateway renders it, and the mesh carries the typed
//! one. Both directions are lossless for every form the platform writes.

use crate::sessions::v1::{Author, Cause, author::Who};
use serde_json::{Map, Value, json};

impl Author {
    /// A principal id (a string) or `{kind: "agent", id}`; `None` for
    /// null, a system event's author, and for any other form.
    pub fn from_json(v: &Value) -> Option<Author> {
        let who = match v {
            Value::String(id) => Who::PrincipalId(id.clone()),
            Value::Object(o) if o.get("kind").and_then(Value::as_str) == Some("agent") => {
                Who::AgentId(o.get("id").and_then(Value::as_str).unwrap_or_default().to_string())
            }
            _ => return None,
        };
        Some(Author { who: Some(who) })
    }

    /// The public form of an author; null for none.
    pub fn json(a: Option<&Author>) -> Value {
        match a.and_then(|a| a.who.as_ref()) {
            Some(Who::PrincipalId(id)) => Value::String(id.clone()),
            Some(Who::AgentId(id)) => json!({"kind": "agent", "id": id}),
            None => Value::Null,
        }
    }
}

impl Cause {
    /// `{kind, id, work_id?, ...}`; `None` for anything but an object.
    pub fn from_json(v: &Value) -> Option<Cause> {
        let mut rest = v.as_object()?.clone();
        let mut take = |k: &str| {
            if !matches!(rest.get(k), Some(Value::String(_))) {
                return String::new();
            }
            match rest.remove(k) {
                Some(Value::String(s)) => s,
                _ => String::new(),
            }
        };
        let (kind, id, work_id) = (take("kind"), take("id"), take("work_id"));
        let extra_json = if rest.is_empty() { String::new() } else { Value::Object(rest).to_string() };
        Some(Cause { kind, id, work_id, extra_json })
    }

    /// The public form of a cause; null for none.
    pub fn json(c: Option<&Cause>) -> Value {
        let Some(c) = c else { return Value::Null };
        let mut o = match serde_json::from_str::<Value>(&c.extra_json) {
            Ok(Value::Object(extra)) => extra,
            _ => Map::new(),
        };
        o.insert("kind".into(), Value::String(c.kind.clone()));
        o.insert("id".into(), Value::String(c.id.clone()));
        if !c.work_id.is_empty() {
            o.insert("work_id".into(), Value::String(c.work_id.clone()));
        }
        Value::Object(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_author_the_platform_writes_reads_back() {
        for v in [json!("prin_1"), json!({"kind": "agent", "id": "agt_1"})] {
            assert_eq!(Author::json(Author::from_json(&v).as_ref()), v);
        }
        assert_eq!(Author::from_json(&Value::Null), None, "a system event has none");
        assert_eq!(Author::json(None), Value::Null);
    }

    #[test]
    fn every_cause_reads_back_with_a_clients_own_keys() {
        for v in [
            json!({"kind": "principal", "id": "prin_1"}),
            json!({"kind": "runner", "id": "rnr_1", "work_id": "work_1"}),
            json!({"kind": "surface", "id": "cli", "version": 3, "work_id": 7}),
        ] {
            assert_eq!(Cause::json(Cause::from_json(&v).as_ref()), v);
        }
        let c = Cause::from_json(&json!({"kind": "runner", "id": "rnr_1", "work_id": "work_1"})).expect("object");
        assert_eq!((c.work_id.as_str(), c.extra_json.as_str()), ("work_1", ""));
        assert_eq!(Cause::from_json(&json!("prin_1")), None, "not an object");
        assert_eq!(Cause::json(None), Value::Null);
    }
}
