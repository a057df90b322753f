//! `checkfu policies ...`: ActionPolicies (allow, require_approval, deny
//! over subject, resource and permission globs; deny > require_approval >
//! allow), and `evaluate`, a dry run that records nothing.

use crate::client::{Client, ClientArgs, read_json, usage};
use crate::output::{Printer, s};
use crate::resolve::{self, POLICY};
use checkfu_core::tools::BUILTIN as BUILTINS;
use clap::Subcommand;
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Subcommand)]
pub enum PoliciesAction {
    /// ActionPolicies, by Environment.
    List {
        #[arg(long)]
        environment: Option<String>,
    },
    /// Show one policy and its rules.
    Get { policy: String },
    /// Create a policy from rules: `--rule 'principal:* tool:bash invoke deny'`
    /// (subject kind:id-glob, resource kind:id-glob, permission glob,
    /// disposition; repeat) or `--rules-file` (a JSON array of rules).
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        environment: Option<String>,
        #[arg(long = "rule")]
        rules: Vec<String>,
        #[arg(long)]
        rules_file: Option<PathBuf>,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Replace a policy's rules (and/or rename it).
    Update {
        policy: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long = "rule")]
        rules: Vec<String>,
        #[arg(long)]
        rules_file: Option<PathBuf>,
        #[arg(long)]
        expected_version: Option<i64>,
    },
    /// Delete a policy (audited).
    Delete { policy: String },
    /// How a call would be decided now, recording nothing.
    Evaluate {
        /// `principal:NAME`, `group:NAME`, `agent:NAME`, `session:ID`, ...
        #[arg(long)]
        subject: String,
        /// The tool called (a built-in's name; other tools with --tool-file).
        #[arg(long)]
        tool: Option<String>,
        /// The tool's declaration as JSON (custom or tool_source).
        #[arg(long)]
        tool_file: Option<PathBuf>,
        /// `tool:NAME` (default: the tool), `connection:ID` or `agent:ID`.
        #[arg(long)]
        resource: Option<String>,
        #[arg(long, default_value = "invoke")]
        permission: String,
        #[arg(long)]
        environment: Option<String>,
    },
}

fn line(v: &Value) -> String {
    format!("{}  {}  {} rule(s)  v{}", s(v, "id"), s(v, "name"), v["rules"].as_array().map_or(0, Vec::len), v["version"])
}

/// `principal:* tool:bash invoke deny` as a rule.
pub fn rule(spec: &str) -> anyhow::Result<Value> {
    let parts: Vec<&str> = spec.split_whitespace().collect();
    let [subject, resource, permission, disposition] = parts.as_slice() else {
        return Err(usage(format!("a rule is 'SUBJECT_KIND:ID_GLOB RESOURCE_KIND:ID_GLOB PERMISSION_GLOB DISPOSITION', not {spec:?}")));
    };
    let glob = |s: &str| -> anyhow::Result<Value> {
        let (kind, id) = s.split_once(':').unwrap_or((s, "*"));
        Ok(json!({"kind": kind, "id_glob": id}))
    };
    Ok(json!({"subject": glob(subject)?, "resource": glob(resource)?, "permission_glob": permission, "disposition": disposition}))
}

fn rules(flags: &[String], file: Option<&PathBuf>) -> anyhow::Result<Option<Value>> {
    let mut all: Vec<Value> = flags.iter().map(|r| rule(r)).collect::<anyhow::Result<_>>()?;
    if let Some(f) = file {
        let v = read_json(f, "the rules")?;
        let listed = match v {
            Value::Array(a) => a,
            Value::Object(mut o) => match o.remove("rules") {
                Some(Value::Array(a)) => a,
                _ => return Err(usage("--rules-file holds a JSON array of rules, or {\"rules\": [...]}")),
            },
            _ => return Err(usage("--rules-file holds a JSON array of rules, or {\"rules\": [...]}")),
        };
        all.extend(listed);
    }
    Ok((!all.is_empty() || file.is_some()).then_some(Value::Array(all)))
}

pub async fn policies(args: ClientArgs, action: PoliciesAction, out: &mut impl Write) -> anyhow::Result<()> {
    let c = Client::new(&args)?;
    let p = Printer::of(&args);
    match action {
        PoliciesAction::List { environment } => {
            let env = resolve::environment_filter(&c, environment.as_deref()).await?;
            p.lines(out, &c.every("/v1/action-policies", &[("environment_id", env)]).await?, line)
        }
        PoliciesAction::Get { policy } => {
            p.detail(out, &c.get(&format!("/v1/action-policies/{}", resolve::id(&c, POLICY, &policy, None).await?)).await?)
        }
        PoliciesAction::Create { name, environment, rules: flags, rules_file, idempotency_key } => {
            let rules = rules(&flags, rules_file.as_ref())?.ok_or_else(|| usage("a policy needs rules: --rule or --rules-file"))?;
            let body = json!({"environment_id": resolve::environment(&c, environment.as_deref()).await?, "name": name, "rules": rules});
            p.line(out, &c.create("/v1/action-policies", &body, idempotency_key.as_deref()).await?, line)
        }
        PoliciesAction::Update { policy, name, rules: flags, rules_file, expected_version } => {
            let id = resolve::id(&c, POLICY, &policy, None).await?;
            let mut body = json!({});
            if let Some(r) = rules(&flags, rules_file.as_ref())? {
                body["rules"] = r;
            }
            if let Some(n) = name {
                body["name"] = json!(n);
            }
            if let Some(v) = expected_version {
                body["expected_version"] = json!(v);
            }
            p.line(out, &c.post(&format!("/v1/action-policies/{id}"), &body).await?, line)
        }
        PoliciesAction::Delete { policy } => {
            let id = resolve::id(&c, POLICY, &policy, None).await?;
            p.line(out, &c.delete(&format!("/v1/action-policies/{id}")).await?, |v| format!("deleted {}", line(v)))
        }
        PoliciesAction::Evaluate { subject, tool, tool_file, resource, permission, environment } => {
            let (kind, name) = subject.split_once(':').ok_or_else(|| usage(format!("--subject is kind:name, not {subject:?}")))?;
            let kind = if kind == "agent" { "agent_definition" } else { kind };
            let subject_id = match resolve::by_ref_kind(kind) {
                Some(k) => resolve::id(&c, k, name, None).await?,
                None => name.to_string(),
            };
            let declaration = match (&tool_file, &tool) {
                (Some(f), _) => read_json(f, "the tool declaration")?,
                (None, Some(t)) if BUILTINS.contains(&t.as_str()) => json!({"type": "builtin", "name": t}),
                (None, Some(t)) => return Err(usage(format!("{t:?} is not a built-in tool: give its declaration with --tool-file"))),
                (None, None) => return Err(usage("name the tool: --tool NAME or --tool-file FILE")),
            };
            let resource = match resource {
                Some(r) => {
                    let (k, i) = r.split_once(':').ok_or_else(|| usage(format!("--resource is kind:id, not {r:?}")))?;
                    json!({"kind": k, "id": i})
                }
                None => json!({"kind": "tool", "id": declaration["name"].as_str().unwrap_or_default()}),
            };
            let body = json!({
                "environment_id": resolve::environment(&c, environment.as_deref()).await?,
                "subject": {"kind": kind, "id": subject_id},
                "resource": resource,
                "permission": permission,
                "tool": declaration,
            });
            let e = c.post("/v1/action-policies/evaluate", &body).await?;
            p.line(out, &e, |e| {
                let rules: Vec<&str> = e["matched_rule_ids"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                let matched = if rules.is_empty() { "no rule matched".to_string() } else { format!("rules {}", rules.join(", ")) };
                format!("{}  ({matched}): {}", s(e, "disposition"), s(e, "reason"))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::rule;
    use serde_json::json;

    #[test]
    fn a_rule_reads_subject_resource_permission_disposition() {
        assert_eq!(
            rule("principal:* tool:bash invoke deny").unwrap(),
            json!({"subject": {"kind": "principal", "id_glob": "*"}, "resource": {"kind": "tool", "id_glob": "bash"}, "permission_glob": "invoke", "disposition": "deny"})
        );
        assert_eq!(rule("* tool invoke allow").unwrap()["subject"], json!({"kind": "*", "id_glob": "*"}));
        assert!(rule("principal:* deny").is_err());
    }
}
