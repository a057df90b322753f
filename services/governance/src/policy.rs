//! ActionPolicy: rules over (subject, resource, permission) with a
//! disposition. When several rules match, deny > require_approval > allow;
//! when none does, the tool's own classification decides: read-only and
//! non-destructive over a read-only transport is allowed, a write or
//! destructive tool asks, and an MCP-bound tool always asks.

use checkfu_core::glob::glob;
use checkfu_core::id::{EnvironmentId, PolicyId};
use checkfu_core::{Error, Result, string_enum};
use serde::{Deserialize, Serialize};
use serde_json::Value;

string_enum!(
    Disposition { Allow = "allow", RequireApproval = "require_approval", Deny = "deny" }
);

impl Disposition {
    fn rank(self) -> u8 {
        match self {
            Disposition::Allow => 0,
            Disposition::RequireApproval => 1,
            Disposition::Deny => 2,
        }
    }
}

/// Subject kinds a rule may name (closed; `*` matches any).
pub const SUBJECT_KINDS: &[&str] = &["principal", "group", "agent_definition", "agent_installation", "surface_scope", "session", "*"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matcher {
    pub kind: String,
    #[serde(default = "star")]
    pub id_glob: String,
}

fn star() -> String {
    "*".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Assigned by the server: `<policy id>#<index>`. Accepted on input (so
    /// rules read back can be sent back) but always reassigned.
    #[serde(default)]
    pub id: String,
    pub subject: Matcher,
    pub resource: Matcher,
    #[serde(default = "star")]
    pub permission_glob: String,
    pub disposition: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ActionPolicy {
    pub id: PolicyId,
    pub environment_id: EnvironmentId,
    pub name: String,
    pub rules: Vec<Rule>,
    pub version: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

pub const MAX_RULES: usize = 200;

/// Reads a rule list from JSON (a 0.1.0 caller's `rules_json`): shape
/// only; [`check_rules`] validates it.
pub fn rules_from_json(v: Value) -> Result<Vec<Rule>> {
    serde_json::from_value(v).map_err(|e| Error::invalid_field("rules", format!("invalid rules: {e}")))
}

/// Parses and validates a rule list from JSON, assigning rule ids.
pub fn parse_rules(policy_id: &str, v: Value) -> Result<Vec<Rule>> {
    check_rules(policy_id, rules_from_json(v)?)
}

/// Validates a rule list, assigning rule ids (`<policy id>#<index>`).
pub fn check_rules(policy_id: &str, mut rules: Vec<Rule>) -> Result<Vec<Rule>> {
    if rules.len() > MAX_RULES {
        return Err(Error::invalid_field("rules", format!("at most {MAX_RULES} rules")));
    }
    for (i, r) in rules.iter_mut().enumerate() {
        let field = format!("rules[{i}]");
        if !SUBJECT_KINDS.contains(&r.subject.kind.as_str()) {
            return Err(Error::invalid_field(
                &format!("{field}.subject.kind"),
                format!("subject kind must be one of {}", SUBJECT_KINDS.join(", ")),
            ));
        }
        if r.resource.kind.is_empty() || r.resource.kind.chars().count() > 64 {
            return Err(Error::invalid_field(&format!("{field}.resource.kind"), "resource kind must be 1 to 64 characters (or *)"));
        }
        for (f, g) in
            [("subject.id_glob", &r.subject.id_glob), ("resource.id_glob", &r.resource.id_glob), ("permission_glob", &r.permission_glob)]
        {
            if g.is_empty() || g.chars().count() > 200 {
                return Err(Error::invalid_field(&format!("{field}.{f}"), "a glob must be 1 to 200 characters"));
            }
        }
        Disposition::parse(&format!("{field}.disposition"), &r.disposition)?;
        r.id = format!("{policy_id}#{i}");
    }
    Ok(rules)
}

/// Who is acting: a subject and everything it counts as (its groups, the
/// agent it runs, the session), each as `(kind, id)`.
#[derive(Debug, Clone, Default)]
pub struct Actor {
    pub identities: Vec<(String, String)>,
}

/// How a tool reaches things, for the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    ReadOnly,
    Write,
    Destructive,
    Mcp,
    /// The platform's own multiagent tools.
    Platform,
}

/// The tool a decision is about, as its declaration describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CalledTool {
    /// `builtin`, `custom`, `tool_source` (or `mcp`) or `platform`.
    pub kind: String,
    pub name: String,
    /// A custom tool's own say.
    pub read_only: bool,
    pub destructive: bool,
}

/// Classifies a tool (`{"type":"builtin","name"}`,
/// `{"type":"custom","read_only","destructive"}`, `{"type":"tool_source"}`).
pub fn classify(tool: &CalledTool) -> Result<ToolClass> {
    match tool.kind.as_str() {
        "builtin" => match tool.name.as_str() {
            "read" | "glob" | "grep" | "web_fetch" => Ok(ToolClass::ReadOnly),
            "write" | "edit" => Ok(ToolClass::Write),
            "bash" => Ok(ToolClass::Destructive),
            "" => Err(Error::invalid_field("tool.name", "a builtin tool is named")),
            other => Err(Error::invalid_field("tool.name", format!("unknown builtin tool {other:?}"))),
        },
        "custom" => Ok(if tool.destructive {
            ToolClass::Destructive
        } else if tool.read_only {
            ToolClass::ReadOnly
        } else {
            ToolClass::Write
        }),
        "tool_source" | "mcp" => Ok(ToolClass::Mcp),
        // Multiagent's spawn_agent and send_message (`use_agent`): with no
        // matching rule they are allowed; the roster and the coordinator's
        // use_agent rows already bound them (api.md §15.3).
        "platform" => Ok(ToolClass::Platform),
        _ => Err(Error::invalid_field("tool.type", "tool.type must be builtin, custom or tool_source")),
    }
}

/// The outcome of an evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub disposition: Disposition,
    pub matched_rule_ids: Vec<String>,
    pub reason: String,
}

/// Evaluates every rule of `policies` against the request. A rule's
/// resource matches when it matches any of `resources` (a ToolSource tool
/// is also its ToolSource and its Connection).
pub fn evaluate(policies: &[ActionPolicy], actor: &Actor, resources: &[(&str, &str)], permission: &str, tool: ToolClass) -> Decision {
    let mut matched: Vec<(&Rule, Disposition)> = vec![];
    for p in policies {
        for r in &p.rules {
            let subject_ok =
                actor.identities.iter().any(|(k, id)| (r.subject.kind == "*" || r.subject.kind == *k) && glob(&r.subject.id_glob, id));
            let resource_ok =
                resources.iter().any(|(kind, id)| (r.resource.kind == "*" || r.resource.kind == *kind) && glob(&r.resource.id_glob, id));
            if subject_ok && resource_ok && glob(&r.permission_glob, permission) {
                matched.push((r, Disposition::parse("disposition", &r.disposition).unwrap_or(Disposition::Deny)));
            }
        }
    }
    if let Some(top) = matched.iter().map(|(_, d)| *d).max_by_key(|d| d.rank()) {
        let ids: Vec<String> = matched.iter().filter(|(_, d)| *d == top).map(|(r, _)| r.id.clone()).collect();
        let reason = format!("{} matching rule(s); the strictest is {} (deny > require_approval > allow)", matched.len(), top.as_str());
        return Decision { disposition: top, matched_rule_ids: ids, reason };
    }
    let (disposition, reason) = match tool {
        ToolClass::ReadOnly => (Disposition::Allow, "no rule matched; a read-only, non-destructive tool is allowed by default"),
        ToolClass::Write => (Disposition::RequireApproval, "no rule matched; a tool that writes asks for approval by default"),
        ToolClass::Destructive => (Disposition::RequireApproval, "no rule matched; a destructive tool asks for approval by default"),
        ToolClass::Mcp => (Disposition::RequireApproval, "no rule matched; an MCP-bound tool is never allowed automatically"),
        ToolClass::Platform => (Disposition::Allow, "no rule matched; use_agent is allowed by default"),
    };
    Decision { disposition, matched_rule_ids: vec![], reason: reason.into() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_core::testing::tid;
    use serde_json::json;

    fn policy(rules: Value) -> ActionPolicy {
        ActionPolicy {
            id: tid("apol_1"),
            environment_id: tid("env_1"),
            name: "p".into(),
            rules: parse_rules("apol_1", rules).expect("valid"),
            version: 1,
            created_ms: 0,
            updated_ms: 0,
        }
    }

    fn actor() -> Actor {
        Actor {
            identities: vec![
                ("principal".into(), "prin_alice".into()),
                ("group".into(), "grp_ops".into()),
                ("agent_definition".into(), "agt_bot".into()),
            ],
        }
    }

    #[test]
    fn strictest_matching_rule_wins() {
        let p = policy(json!([
            {"subject": {"kind": "principal", "id_glob": "prin_*"}, "resource": {"kind": "tool", "id_glob": "*"}, "permission_glob": "*", "disposition": "allow"},
            {"subject": {"kind": "group", "id_glob": "grp_ops"}, "resource": {"kind": "tool", "id_glob": "bash"}, "permission_glob": "invoke", "disposition": "require_approval"},
            {"subject": {"kind": "*", "id_glob": "*"}, "resource": {"kind": "tool", "id_glob": "rm*"}, "disposition": "deny"},
        ]));
        let d = evaluate(std::slice::from_ref(&p), &actor(), &[("tool", "bash")], "invoke", ToolClass::Destructive);
        assert_eq!(d.disposition, Disposition::RequireApproval);
        assert_eq!(d.matched_rule_ids, vec!["apol_1#1"]);
        let d = evaluate(std::slice::from_ref(&p), &actor(), &[("tool", "rm_rf")], "invoke", ToolClass::Destructive);
        assert_eq!(d.disposition, Disposition::Deny);
        let d = evaluate(std::slice::from_ref(&p), &actor(), &[("tool", "read")], "invoke", ToolClass::ReadOnly);
        assert_eq!((d.disposition, d.matched_rule_ids.len()), (Disposition::Allow, 1));
    }

    #[test]
    fn a_tool_source_call_matches_rules_on_its_source_and_connection() {
        let allow =
            policy(json!([{"subject": {"kind": "*"}, "resource": {"kind": "tool_source", "id_glob": "tsrc_1"}, "disposition": "allow"}]));
        let resources = [("tool", "add"), ("tool_source", "tsrc_1"), ("connection", "conn_1")];
        let d = evaluate(std::slice::from_ref(&allow), &actor(), &resources, "invoke", ToolClass::Mcp);
        assert_eq!(d.disposition, Disposition::Allow);
        let deny =
            policy(json!([{"subject": {"kind": "*"}, "resource": {"kind": "connection", "id_glob": "conn_1"}, "disposition": "deny"}]));
        let d = evaluate(&[allow.clone(), deny], &actor(), &resources, "invoke", ToolClass::Mcp);
        assert_eq!(d.disposition, Disposition::Deny, "a deny on the Connection beats an allow on the ToolSource");
        let d = evaluate(&[], &actor(), &resources, "invoke", ToolClass::Mcp);
        assert_eq!(d.disposition, Disposition::RequireApproval, "no rule: an MCP tool asks");
        let d = evaluate(std::slice::from_ref(&allow), &actor(), &[("tool", "add")], "invoke", ToolClass::Mcp);
        assert_eq!(d.disposition, Disposition::RequireApproval, "the ToolSource's rule does not reach other tools");
    }

    fn called(decl: Value) -> CalledTool {
        let t = checkfu_proto::governance::v1::CalledTool::from_declaration(&decl);
        CalledTool { kind: t.r#type, name: t.name, read_only: t.read_only, destructive: t.destructive }
    }

    #[test]
    fn defaults_follow_the_tool_classification() {
        let none: Vec<ActionPolicy> = vec![];
        let a = actor();
        assert_eq!(
            evaluate(&none, &a, &[("tool", "read")], "invoke", classify(&called(json!({"type": "builtin", "name": "read"}))).expect("c"))
                .disposition,
            Disposition::Allow
        );
        assert_eq!(
            evaluate(&none, &a, &[("tool", "write")], "invoke", classify(&called(json!({"type": "builtin", "name": "write"}))).expect("c"))
                .disposition,
            Disposition::RequireApproval
        );
        assert_eq!(
            evaluate(&none, &a, &[("tool", "bash")], "invoke", classify(&called(json!({"type": "builtin", "name": "bash"}))).expect("c"))
                .disposition,
            Disposition::RequireApproval
        );
        let mcp = classify(&called(json!({"type": "tool_source", "tool_source_id": "tsrc_1"}))).expect("c");
        assert_eq!(evaluate(&none, &a, &[("tool", "search")], "invoke", mcp).disposition, Disposition::RequireApproval);
        let ro_custom = classify(&called(json!({"type": "custom", "read_only": true, "destructive": false}))).expect("c");
        assert_eq!(ro_custom, ToolClass::ReadOnly);
        assert_eq!(
            classify(&called(json!({"type": "custom", "read_only": true, "destructive": true}))).expect("c"),
            ToolClass::Destructive
        );
        assert!(classify(&called(json!({"type": "builtin", "name": "teleport"}))).is_err());
    }

    #[test]
    fn rules_are_validated() {
        assert!(
            parse_rules("apol_1", json!([{"subject": {"kind": "robot"}, "resource": {"kind": "tool"}, "disposition": "allow"}])).is_err()
        );
        assert!(parse_rules("apol_1", json!([{"subject": {"kind": "*"}, "resource": {"kind": "tool"}, "disposition": "maybe"}])).is_err());
        assert!(
            parse_rules("apol_1", json!([{"subject": {"kind": "*"}, "resource": {"kind": "tool"}, "disposition": "allow", "extra": 1}]))
                .is_err()
        );
        let ok = parse_rules("apol_1", json!([{"subject": {"kind": "session"}, "resource": {"kind": "tool"}, "disposition": "deny"}]))
            .expect("valid");
        assert_eq!((ok[0].id.as_str(), ok[0].subject.id_glob.as_str(), ok[0].permission_glob.as_str()), ("apol_1#0", "*", "*"));
    }
}
