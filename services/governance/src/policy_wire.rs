//! ActionPolicy rules on the mesh: the typed `PolicyRule` both ways, and
//! the JSON text a 0.1.0 peer still sends and reads (`rules_json`, kept
//! until the release after 0.1.0; docs/architecture.md, "JSON on the mesh").

use crate::policy::{Matcher, Rule, rules_from_json};
use checkfu_core::{Error, Result};
use checkfu_proto::governance::v1 as pb;

fn matcher(m: &Matcher) -> pb::PolicyMatcher {
    pb::PolicyMatcher { kind: m.kind.clone(), id_glob: m.id_glob.clone() }
}

pub fn rule(r: &Rule) -> pb::PolicyRule {
    pb::PolicyRule {
        id: r.id.clone(),
        subject: Some(matcher(&r.subject)),
        resource: Some(matcher(&r.resource)),
        permission_glob: r.permission_glob.clone(),
        disposition: r.disposition.clone(),
    }
}

/// A typed rule as the domain takes it; `check_rules` then validates it.
fn from_wire(i: usize, r: pb::PolicyRule) -> Result<Rule> {
    let side = |m: Option<pb::PolicyMatcher>, name: &str| {
        m.map(|m| Matcher { kind: m.kind, id_glob: m.id_glob })
            .ok_or_else(|| Error::invalid_field(&format!("rules[{i}].{name}"), format!("{name} is required")))
    };
    Ok(Rule {
        subject: side(r.subject, "subject")?,
        resource: side(r.resource, "resource")?,
        id: r.id,
        permission_glob: r.permission_glob,
        disposition: r.disposition,
    })
}

fn from_wire_all(rules: Vec<pb::PolicyRule>) -> Result<Vec<Rule>> {
    rules.into_iter().enumerate().map(|(i, r)| from_wire(i, r)).collect()
}

fn from_json_text(text: &str) -> Result<Vec<Rule>> {
    let v = serde_json::from_str(text).map_err(|e| Error::invalid_field("rules", format!("rules is not valid JSON: {e}")))?;
    rules_from_json(v)
}

/// A created policy's rules: the typed list, or a 0.1.0 caller's JSON
/// when only that came (a current caller fills both).
pub fn create_rules(typed: Vec<pb::PolicyRule>, json: &str) -> Result<Vec<Rule>> {
    if typed.is_empty() && !json.is_empty() { from_json_text(json) } else { from_wire_all(typed) }
}

/// An update's rules, when it replaces them: typed first, else a 0.1.0
/// caller's JSON.
pub fn update_rules(typed: Option<pb::PolicyRules>, json: Option<&str>) -> Result<Option<Vec<Rule>>> {
    match (typed, json) {
        (Some(t), _) => from_wire_all(t.rules).map(Some),
        (None, Some(j)) => from_json_text(j).map(Some),
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Rule {
        Rule {
            id: "apol_1#0".into(),
            subject: Matcher { kind: "principal".into(), id_glob: "prin_*".into() },
            resource: Matcher { kind: "tool".into(), id_glob: "bash".into() },
            permission_glob: "*".into(),
            disposition: "deny".into(),
        }
    }

    #[test]
    fn a_rule_crosses_the_mesh_unchanged_typed_or_as_a_0_1_0_peers_json() {
        let r = sample();
        assert_eq!(create_rules(vec![rule(&r)], "").expect("typed"), vec![r.clone()]);
        let text = json!([{"id": "apol_1#0", "subject": {"kind": "principal", "id_glob": "prin_*"},
            "resource": {"kind": "tool", "id_glob": "bash"}, "permission_glob": "*", "disposition": "deny"}])
        .to_string();
        assert_eq!(create_rules(vec![], &text).expect("json"), vec![r.clone()]);
        assert_eq!(update_rules(None, Some(&text)).expect("json"), Some(vec![r.clone()]));
        assert_eq!(update_rules(Some(pb::PolicyRules { rules: vec![] }), Some(&text)).expect("typed first"), Some(vec![]));
        assert_eq!(update_rules(None, None).expect("none"), None);
    }

    #[test]
    fn a_typed_rule_without_a_side_is_refused_by_name() {
        let r = pb::PolicyRule { subject: None, ..rule(&sample()) };
        let e = create_rules(vec![rule(&sample()), r], "").expect_err("no subject");
        assert_eq!(e.details["field"], "rules[1].subject");
        assert!(create_rules(vec![], "[{").is_err(), "broken JSON is a client error");
    }
}
