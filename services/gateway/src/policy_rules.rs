//! ActionPolicy rules between the public JSON and the mesh's typed
//! `PolicyRule`: a body's rules read into it (shape only — governance
//! validates kinds, globs and dispositions) and a policy's rules rendered
//! back. The shape and its error message are governance's own, so a bad
//! rule is refused the same way whichever side reads it.

use checkfu_core::{Error, Result};
use checkfu_proto::governance::v1 as gov;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Matcher {
    kind: String,
    #[serde(default = "star")]
    id_glob: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    /// Assigned by governance; accepted so that rules read back can be
    /// sent back.
    #[serde(default)]
    id: String,
    subject: Matcher,
    resource: Matcher,
    #[serde(default = "star")]
    permission_glob: String,
    disposition: String,
}

fn star() -> String {
    "*".into()
}

/// A body's `rules` as the mesh carries them.
pub fn to_wire(rules: &[Value]) -> Result<Vec<gov::PolicyRule>> {
    let rules: Vec<Rule> =
        serde_json::from_value(Value::Array(rules.to_vec())).map_err(|e| Error::invalid_field("rules", format!("invalid rules: {e}")))?;
    let side = |m: Matcher| Some(gov::PolicyMatcher { kind: m.kind, id_glob: m.id_glob });
    Ok(rules
        .into_iter()
        .map(|r| gov::PolicyRule {
            id: r.id,
            subject: side(r.subject),
            resource: side(r.resource),
            permission_glob: r.permission_glob,
            disposition: r.disposition,
        })
        .collect())
}

/// A policy's rules as the public API shows them: from the typed list, or
/// from the JSON text of a 0.1.0 governance that sent only that.
#[allow(deprecated)]
pub fn view(p: &gov::ActionPolicy) -> Value {
    if p.rules.is_empty() && !p.rules_json.is_empty() {
        return crate::json_text::doc(&p.rules_json);
    }
    let side = |m: &Option<gov::PolicyMatcher>| {
        let m = m.clone().unwrap_or_default();
        Matcher { kind: m.kind, id_glob: m.id_glob }
    };
    let rules: Vec<Rule> = p
        .rules
        .iter()
        .map(|r| Rule {
            id: r.id.clone(),
            subject: side(&r.subject),
            resource: side(&r.resource),
            permission_glob: r.permission_glob.clone(),
            disposition: r.disposition.clone(),
        })
        .collect();
    serde_json::to_value(rules).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_read_from_a_body_render_back_with_their_defaults() {
        let body = [json!({"subject": {"kind": "principal"}, "resource": {"kind": "tool", "id_glob": "bash"}, "disposition": "deny"})];
        let wire = to_wire(&body).expect("valid");
        let p = gov::ActionPolicy { rules: wire, ..Default::default() };
        let want = json!([{"id": "", "subject": {"kind": "principal", "id_glob": "*"}, "resource": {"kind": "tool", "id_glob": "bash"},
            "permission_glob": "*", "disposition": "deny"}]);
        assert_eq!(view(&p), want);
    }

    #[test]
    #[allow(deprecated)]
    fn a_0_1_0_policy_renders_from_its_json() {
        let text = json!([{"id": "apol_1#0", "subject": {"kind": "*", "id_glob": "*"}, "resource": {"kind": "tool", "id_glob": "*"},
            "permission_glob": "*", "disposition": "allow"}]);
        let p = gov::ActionPolicy { rules_json: text.to_string(), ..Default::default() };
        assert_eq!(view(&p), text);
        assert_eq!(view(&gov::ActionPolicy::default()), json!([]), "no rules");
    }

    #[test]
    fn a_misshapen_rule_is_refused_with_governances_message() {
        let e = to_wire(&[json!({"subject": {"kind": "*"}, "resource": {"kind": "tool"}, "disposition": "allow", "extra": 1})])
            .expect_err("extra");
        assert_eq!(e.details["field"], "rules");
        assert!(e.message.starts_with("invalid rules: unknown field `extra`"), "{}", e.message);
    }
}
