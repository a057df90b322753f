//! Public request bodies. Unknown fields are refused, types are checked by
//! serde, and a failure names the offending path in `details.field`. They
//! derive the OpenAPI request schemas.

use crate::sandbox_wire::{Network, Resources};
use checkfu_core::Error;
use checkfu_proto::sessions::v1 as ss;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// Parses a JSON object body into `T`, with the envelope on failure.
pub fn parse<T: DeserializeOwned>(v: &Value) -> Result<T, Error> {
    // JSON has one number type: `3.0` is the integer 3 (JSON Schema says
    // so too), so integral floats are taken as integers.
    let v = &integral(v.clone());
    serde_path_to_error::deserialize(v).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner().to_string();
        let err = Error::invalid(if field == "." { inner.clone() } else { format!("{field}: {inner}") });
        if field == "." {
            // An unknown or missing top-level field: serde names it in the message.
            let named = inner.split('`').nth(1).unwrap_or_default().to_string();
            if named.is_empty() { err } else { err.with_details(serde_json::json!({"field": named})) }
        } else {
            err.with_details(serde_json::json!({"field": field}))
        }
    })
}

fn integral(v: Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(integral).collect()),
        Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, integral(v))).collect()),
        other => other,
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePrincipal {
    /// `human` or `service`.
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdatePrincipal {
    pub disabled: Option<bool>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiKey {
    pub name: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Named {
    pub name: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMember {
    pub principal_id: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateEnvironment {
    pub disabled: Option<bool>,
    pub expected_version: Option<i64>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RefBody {
    pub kind: String,
    pub id: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAssignment {
    /// `principal`, `group` or `agent_definition`.
    pub subject: RefBody,
    /// `admin`, `manage`, `invoke`, `act_as`, `use_connection`, `use_agent`, `approve` or `read`.
    pub permission: String,
    /// `installation` (id `*`), `environment`, `agent`, `connection`, `memory_store`, `principal` or `group`.
    pub resource: RefBody,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAgent {
    pub environment_id: String,
    pub name: String,
    /// Instructions, model, tools, skills, session_variable, multiagent.
    #[schema(value_type = Option<Object>)]
    pub draft: Option<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateAgent {
    pub name: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub draft: Option<Value>,
    pub expected_version: Option<i64>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishVersion {
    pub expected_version: Option<i64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSandboxProfile {
    pub environment_id: String,
    pub name: String,
    pub image: String,
    pub packages: Option<Vec<String>>,
    /// `{allowed_hosts, allow_package_managers, allow_mcp_servers}`.
    #[schema(value_type = Option<Object>)]
    pub network: Option<Network>,
    /// `{cpu_millis, memory_mib, disk_mib}`.
    #[schema(value_type = Option<Object>)]
    pub resources: Option<Resources>,
    pub retention_days: Option<i64>,
    /// What the profile is for (≤ 2,048 characters); revised with it.
    pub description: Option<String>,
    /// Caller-defined labels: ≤ 16 pairs, keys ≤ 64, values ≤ 512 characters.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<BTreeMap<String, String>>,
    /// Where its sandbox tools run: `managed` (default) or `external_tools`
    /// (the holder of each Session's work item, api.md §17.13).
    pub execution: Option<SandboxExecution>,
}

// Serialized, absent fields left out, it is the JSON text a 0.1.0 sessions
// service reads (a plain comment: a doc comment would describe the schema).
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishSandboxRevision {
    pub image: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packages: Option<Vec<String>>,
    #[schema(value_type = Option<Object>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    #[schema(value_type = Option<Object>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<i64>,
    /// What the profile is for (≤ 2,048 characters); revised with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Caller-defined labels: ≤ 16 pairs, keys ≤ 64, values ≤ 512 characters.
    #[schema(value_type = Option<Object>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    /// Where its sandbox tools run: `managed` (default) or `external_tools`
    /// (the holder of each Session's work item, api.md §17.13).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<SandboxExecution>,
}

impl CreateSandboxProfile {
    /// The Environment, the name, and the revision 1 it describes.
    pub fn split(self) -> (String, String, PublishSandboxRevision) {
        let revision = PublishSandboxRevision {
            image: self.image,
            packages: self.packages,
            network: self.network,
            resources: self.resources,
            retention_days: self.retention_days,
            description: self.description,
            metadata: self.metadata,
            execution: self.execution,
        };
        (self.environment_id, self.name, revision)
    }
}

impl PublishSandboxRevision {
    /// The revision it describes, absent fields left for the sessions
    /// service's defaults.
    pub fn spec(self) -> ss::SandboxSpec {
        ss::SandboxSpec {
            image: self.image,
            description: self.description,
            metadata: self.metadata.unwrap_or_default().into_iter().collect(),
            packages: self.packages.unwrap_or_default(),
            network: self.network.map(Into::into),
            resources: self.resources.map(Into::into),
            retention_days: self.retention_days,
            execution: match self.execution {
                None => String::new(),
                Some(SandboxExecution::Managed) => "managed".into(),
                Some(SandboxExecution::ExternalTools) => "external_tools".into(),
            },
        }
    }
}

/// Where a sandbox profile's tools run.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SandboxExecution {
    Managed,
    ExternalTools,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CandidateBody {
    pub provider: String,
    pub model: String,
    /// Defaults to `medium`.
    pub effort: Option<String>,
    pub connection_id: Option<String>,
    /// A provider endpoint the installation configured (`GET
    /// /v1/model-endpoints`); omitted, the provider's default. A base URL
    /// cannot be given: credentials go only to configured hosts.
    pub endpoint: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRoutingProfile {
    pub environment_id: String,
    pub name: String,
    pub candidates: Vec<CandidateBody>,
}

/// A review's finding that a (provider, model) may judge for a purpose.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEvaluatorQualification {
    /// `scripted`, `openai` or `anthropic`.
    pub provider: String,
    /// The model as routing candidates name it.
    pub model: String,
    /// `decision` (a Check) or `delivery_screen`.
    pub purpose: String,
    /// What the review found, or where its record is; 1–4,000 characters.
    pub evidence: String,
    /// When the review happened (RFC 3339), not in the future.
    pub reviewed_at: String,
    /// In the future, and at most 366 days after `reviewed_at`.
    pub expires_at: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDeployment {
    pub environment_id: String,
    /// Unique per Environment.
    pub key: String,
    pub agent_id: String,
    pub agent_version: i64,
    pub model_routing_profile_id: String,
    pub sandbox_profile_id: String,
    /// Defaults to the profile's latest revision.
    pub sandbox_profile_revision: Option<i64>,
    /// Defaults to the built-in harness.
    pub harness: Option<String>,
    /// `{kind: "managed"}` (default) or `{kind: "runner", pool}`.
    #[schema(value_type = Option<Object>)]
    pub execution: Option<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeploymentRevision {
    pub agent_version: i64,
    pub model_routing_profile_id: String,
    pub sandbox_profile_id: String,
    pub sandbox_profile_revision: Option<i64>,
    pub harness: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub execution: Option<Value>,
}

/// One input event.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InputEvent {
    /// `user.message`, `user.interrupt`, `user.tool_confirmation`, `user.custom_tool_result` or `user.define_outcome`.
    #[serde(rename = "type")]
    pub kind: String,
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
    /// Required: the principal the input speaks for (the caller or one it may act as).
    pub authored_by: Option<String>,
    /// Required: `{kind, id}` of what caused the input.
    #[schema(value_type = Option<Object>)]
    pub caused_by: Option<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    pub agent_deployment_id: String,
    /// Defaults to the caller.
    pub principal_id: Option<String>,
    /// At most 50, processed in order; more than one requires an Idempotency-Key.
    pub initial_events: Option<Vec<InputEvent>>,
    pub title: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// A session-scoped Budget, compiled into a real Budget (`GET /v1/budgets`).
    pub budget: Option<NewBudget>,
    /// At most 64 KiB; appended to the release's instructions and pinned by digest.
    pub instructions: Option<String>,
    /// Names from the release's `session_variable.tools.allowed`; may only narrow.
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    /// Skill ids from the release's `session_variable.skills.allowed`; may only narrow.
    #[schema(value_type = Option<Vec<Object>>)]
    pub skills: Option<Vec<Value>>,
    /// Files given to the Session from the start: `[{type:"file", file_id}]`,
    /// each visible to the caller and in the Session's Environment (at most 20).
    #[schema(value_type = Option<Vec<Object>>)]
    pub resources: Option<Vec<Value>>,
    /// ConnectionVaults of the Session's Environment the caller may read
    /// (`manage`; 404 otherwise), not archived (400 `vault_archived`); at
    /// most 20. Recorded on the Session; calls use the pinned Connections.
    pub connection_vault_ids: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateSession {
    /// At most 500 bytes; omitted keeps it.
    pub title: Option<String>,
    /// An object of at most 16 KiB, replacing the current one; omitted keeps it.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateSelection {
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub skills: Option<Vec<Value>>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateActionPolicy {
    pub environment_id: String,
    pub name: String,
    /// `[{subject:{kind, id_glob}, resource:{kind, id_glob}, permission_glob, disposition}]`.
    #[schema(value_type = Vec<Object>)]
    pub rules: Vec<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateActionPolicy {
    pub name: Option<String>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub rules: Option<Vec<Value>>,
    pub expected_version: Option<i64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluateAction {
    /// Whose policies apply; defaults to the resource's Environment when it is an agent or environment.
    pub environment_id: Option<String>,
    pub subject: RefBody,
    pub resource: RefBody,
    pub permission: String,
    /// The tool declaration being called, e.g. `{"type":"builtin","name":"bash"}`.
    #[schema(value_type = Object)]
    pub tool: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn failures_name_the_field() {
        let e = parse::<CreateAgent>(&json!({"environment_id": 7, "name": "x"})).expect_err("refused");
        assert_eq!(e.details["field"], "environment_id");
        let e = parse::<CreateAgent>(&json!({"environment_id": "e", "name": "x", "colour": "red"})).expect_err("refused");
        assert_eq!(e.details["field"], "colour");
        let e = parse::<CreateAgent>(&json!({"environment_id": "e"})).expect_err("refused");
        assert_eq!(e.details["field"], "name");
        let e = parse::<CreateRoutingProfile>(&json!({"environment_id": "e", "name": "n", "candidates": [{"provider": "scripted"}]}))
            .expect_err("refused");
        assert!(e.message.contains("candidates[0]"), "{}", e.message);
    }
}

/// Ask for a StandingApproval on the approved call's exact tuple.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StandingRequest {
    /// 1 s to 30 days; longer asks are capped at 30 days.
    pub ttl_seconds: i64,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RespondToApproval {
    /// `approve` or `deny`.
    pub decision: String,
    /// The approval's one-time token.
    pub response_token: String,
    #[serde(default)]
    pub standing: Option<StandingRequest>,
}

/// A Budget's cap: an integer limit in micro-USD (`model_spend`, the
/// default) or provider tokens (`model_tokens`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewBudget {
    pub limit: i64,
    #[serde(default)]
    pub metric: Option<String>,
}

/// What a Budget covers: one Session.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetScope {
    /// `session`.
    pub kind: String,
    pub id: String,
}

/// A pairing code for a self-hosted Runner.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRunnerPairing {
    pub environment_id: String,
    /// The Principal the Runner acts as; the caller must be it or hold `act_as` on it.
    pub principal_id: String,
    /// The pool the Runner serves (`execution: {kind: "runner", pool}`).
    pub pool: String,
    /// How long the code can be redeemed: 1 to 900 seconds; default 600.
    #[serde(default)]
    pub ttl_seconds: Option<i64>,
}

/// Attaches a Budget to an existing Session.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateBudget {
    pub scope: BudgetScope,
    pub limit: i64,
    #[serde(default)]
    pub metric: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateBudget {
    /// The new limit; strictly above `consumed` re-opens admission.
    pub limit: i64,
    #[serde(default)]
    pub expected_version: Option<i64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhookEndpoint {
    /// Where deliveries are POSTed (http or https; private addresses are
    /// refused unless the installation allows them).
    pub url: String,
    /// Event types or globs over them (`session.status_*`).
    pub event_types: Vec<String>,
    /// The Environment whose events it receives; omitted, every Environment
    /// (installation admins only).
    #[serde(default)]
    pub environment_id: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateWebhookEndpoint {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub event_types: Option<Vec<String>>,
    #[serde(default)]
    pub disabled: Option<bool>,
    #[serde(default)]
    pub expected_version: Option<i64>,
}
