//! One convention for naming a resource on the command line: its id, or
//! its exact name. A name that matches nothing is the API's `not_found`
//! (exit 1); one that matches several is a usage error listing them (exit
//! 2), so the person picks an id. `--environment` may be left out when
//! exactly one Environment is visible.

use crate::client::{Client, Refusal, usage};
use serde_json::Value;

/// A kind of resource the command line names.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// For messages: `agent`, `deployment`.
    pub noun: &'static str,
    /// The collection (`/v1/agents`).
    pub path: &'static str,
    /// The id prefix (`agt`).
    pub prefix: &'static str,
    /// The field its name is in (`name`; a deployment's is `key`).
    pub name_field: &'static str,
}

macro_rules! kinds {
    ($($konst:ident = $noun:literal, $path:literal, $prefix:literal, $field:literal;)*) => {
        $(pub const $konst: Kind = Kind { noun: $noun, path: $path, prefix: $prefix, name_field: $field };)*
    };
}

kinds! {
    ENVIRONMENT = "environment", "/v1/environments", "env", "name";
    AGENT = "agent", "/v1/agents", "agt", "name";
    DEPLOYMENT = "deployment", "/v1/agent-deployments", "dep", "key";
    SANDBOX_PROFILE = "sandbox profile", "/v1/sandbox-profiles", "sbp", "name";
    ROUTING_PROFILE = "model routing profile", "/v1/model-routing-profiles", "mrp", "name";
    PRINCIPAL = "principal", "/v1/principals", "prin", "name";
    GROUP = "group", "/v1/groups", "grp", "name";
    POLICY = "action policy", "/v1/action-policies", "apol", "name";
    WEBHOOK = "webhook endpoint", "/v1/webhook-endpoints", "whep", "url";
    RUNNER = "runner", "/v1/runners", "rnr", "name";
    SESSION = "session", "/v1/sessions", "sess", "title";
    CONNECTION = "connection", "/v1/connections", "conn", "name";
    VAULT = "connection vault", "/v1/connection-vaults", "cvlt", "name";
    TOOL_SOURCE = "tool source", "/v1/tool-sources", "tsrc", "name";
    AUTOMATION = "automation", "/v1/automations", "auto", "name";
    GRAPH = "automation graph", "/v1/automation-graphs", "agph", "name";
    MEMORY_STORE = "memory store", "/v1/memory-stores", "mstr", "name";
    SKILL = "skill", "/v1/skills", "skl", "name";
    BUDGET = "budget", "/v1/budgets", "bud", "id";
    API_KEY = "api key", "/v1/api-keys", "key", "id";
    GRANT = "permission assignment", "/v1/permission-assignments", "pa", "id";
}

/// A kind by the name the API gives it in a `{kind, id}` reference.
pub fn by_ref_kind(kind: &str) -> Option<Kind> {
    Some(match kind {
        "environment" => ENVIRONMENT,
        "agent" | "agent_definition" => AGENT,
        "principal" => PRINCIPAL,
        "group" => GROUP,
        "connection" => CONNECTION,
        "memory_store" => MEMORY_STORE,
        "session" => SESSION,
        _ => return None,
    })
}

/// Resource names by id, read once per kind: for printing references.
#[derive(Default)]
pub struct Names {
    known: std::collections::HashMap<String, String>,
    read: std::collections::HashSet<&'static str>,
}

impl Names {
    /// `kind`'s name for `id`, or the id when it cannot be read.
    pub async fn of(&mut self, c: &Client, kind: &str, id: &str) -> String {
        if let Some(k) = by_ref_kind(kind)
            && !self.read.contains(k.path)
        {
            self.read.insert(k.path);
            for v in c.every(k.path, &[]).await.unwrap_or_default() {
                if let (Some(i), Some(n)) = (v["id"].as_str(), v[k.name_field].as_str()) {
                    self.known.insert(i.to_string(), n.to_string());
                }
            }
        }
        self.known.get(id).cloned().unwrap_or_else(|| id.to_string())
    }
}

/// Whether `s` is an id of `kind` (`agt_` and a lowercase ULID).
pub fn is_id(kind: &Kind, s: &str) -> bool {
    s.strip_prefix(kind.prefix)
        .and_then(|r| r.strip_prefix('_'))
        .is_some_and(|u| u.len() == 26 && u.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// The id of the `kind` named `name_or_id` (within `environment`, when
/// given).
pub async fn id(c: &Client, kind: Kind, name_or_id: &str, environment: Option<&str>) -> anyhow::Result<String> {
    Ok(one(c, kind, name_or_id, environment).await?.0)
}

/// The `kind` named `name_or_id`: its id, and the resource when it was
/// found by name (an id is taken as it is, unread).
pub async fn one(c: &Client, kind: Kind, name_or_id: &str, environment: Option<&str>) -> anyhow::Result<(String, Option<Value>)> {
    if is_id(&kind, name_or_id) {
        return Ok((name_or_id.to_string(), None));
    }
    let all = c.every(kind.path, &[("environment_id", environment.map(str::to_string))]).await?;
    let matches: Vec<Value> = all.into_iter().filter(|v| v[kind.name_field].as_str() == Some(name_or_id)).collect();
    match matches.as_slice() {
        [only] => Ok((only["id"].as_str().unwrap_or_default().to_string(), Some(only.clone()))),
        [] => Err(Refusal {
            status: 404,
            kind: "not_found".into(),
            message: format!("no {} you can see is named {name_or_id:?}", kind.noun),
            details: Value::Null,
            request_id: None,
        }
        .into()),
        several => {
            let lines: Vec<String> = several
                .iter()
                .map(|v| format!("  {}  {}", v["id"].as_str().unwrap_or_default(), v["environment_id"].as_str().unwrap_or_default()))
                .collect();
            Err(usage(format!(
                "{} {} are named {name_or_id:?}; name one by its id:\n{}",
                several.len(),
                plural(kind.noun),
                lines.join("\n")
            )))
        }
    }
}

fn plural(noun: &str) -> String {
    if noun.ends_with('y') { format!("{}ies", noun.trim_end_matches('y')) } else { format!("{noun}s") }
}

/// The Environment `--environment` names, or the only one visible.
pub async fn environment(c: &Client, given: Option<&str>) -> anyhow::Result<String> {
    if let Some(e) = given {
        return id(c, ENVIRONMENT, e, None).await;
    }
    let all = c.every(ENVIRONMENT.path, &[]).await?;
    match all.as_slice() {
        [only] => Ok(only["id"].as_str().unwrap_or_default().to_string()),
        [] => Err(usage("no Environment is visible to this key; name one with --environment")),
        several => {
            let names: Vec<String> = several
                .iter()
                .map(|e| format!("  {}  {}", e["id"].as_str().unwrap_or_default(), e["name"].as_str().unwrap_or_default()))
                .collect();
            Err(usage(format!("{} Environments are visible; name one with --environment:\n{}", several.len(), names.join("\n"))))
        }
    }
}

/// The Environment filter of a list: the one named, or none (every
/// Environment the key may read).
pub async fn environment_filter(c: &Client, given: Option<&str>) -> anyhow::Result<Option<String>> {
    match given {
        Some(e) => Ok(Some(id(c, ENVIRONMENT, e, None).await?)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_told_from_names() {
        assert!(is_id(&AGENT, "agt_01jx0000000000000000000000"));
        assert!(!is_id(&AGENT, "dep_01jx0000000000000000000000"), "another kind's id is a name");
        assert!(!is_id(&AGENT, "helper"));
        assert!(!is_id(&AGENT, "agt_short"));
        assert_eq!(plural("policy"), "policies");
        assert_eq!(plural("agent"), "agents");
    }
}
