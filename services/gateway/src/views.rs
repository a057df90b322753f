//! Public response shapes (docs/api.md), built from the services' wire types.
//! They derive the OpenAPI schemas, so the document and the JSON cannot
//! drift apart. JSON documents services carry as strings are inlined.

use checkfu_proto::governance::v1 as gov;
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::sessions::v1 as ss;
use checkfu_proto::webhooks::v1 as wh;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub use crate::json_text::doc;

pub fn opt(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// A page of a collection, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Page<T> {
    pub data: Vec<T>,
    /// Opaque token for the next page; null on the last one.
    pub next_page: Option<String>,
}

pub fn page<T, U>(items: &[T], next_page: &str, f: impl Fn(&T) -> U) -> Page<U> {
    Page { data: items.iter().map(f).collect(), next_page: opt(next_page) }
}

/// The error envelope of every non-2xx response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
    pub request_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Dotted type: `validation.invalid`, `permission.denied`, ...
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    #[schema(value_type = Object)]
    pub details: Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Principal {
    pub id: String,
    /// `human` or `service`.
    pub kind: String,
    pub name: String,
    pub disabled: bool,
    pub created_at: String,
}

pub fn principal(p: &gov::Principal) -> Principal {
    Principal { id: p.id.clone(), kind: p.kind.clone(), name: p.name.clone(), disabled: p.disabled, created_at: p.created_at.clone() }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKey {
    pub id: String,
    pub principal_id: String,
    pub name: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
    /// Only in the response that creates the key; stored only as a hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

pub fn api_key(k: &gov::ApiKey) -> ApiKey {
    ApiKey {
        id: k.id.clone(),
        principal_id: k.principal_id.clone(),
        name: k.name.clone(),
        created_at: k.created_at.clone(),
        revoked_at: opt(&k.revoked_at),
        secret: None,
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Group {
    pub id: String,
    pub name: String,
    pub member_ids: Vec<String>,
    pub created_at: String,
}

pub fn group(g: &gov::Group) -> Group {
    Group { id: g.id.clone(), name: g.name.clone(), member_ids: g.member_ids.clone(), created_at: g.created_at.clone() }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Environment {
    pub id: String,
    pub name: String,
    pub version: i64,
    pub disabled: bool,
    pub created_at: String,
}

pub fn environment(e: &gov::Environment) -> Environment {
    Environment { id: e.id.clone(), name: e.name.clone(), version: e.version, disabled: e.disabled, created_at: e.created_at.clone() }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Ref {
    pub kind: String,
    pub id: String,
}

fn rref(r: &Option<gov::ResourceRef>) -> Ref {
    let r = r.clone().unwrap_or_default();
    Ref { kind: r.kind, id: r.id }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PermissionAssignment {
    pub id: String,
    pub subject: Ref,
    pub permission: String,
    pub resource: Ref,
    /// The Environment holding the resource; null for installation-wide ones.
    pub environment_id: Option<String>,
    pub created_by: String,
    pub created_at: String,
    /// What compiled this row (`{kind:"connection_vault", id}`): it changes
    /// only with its vault (a direct delete answers 409 `managed_by_vault`).
    /// Null for a direct grant.
    pub via: Option<Ref>,
}

pub fn assignment(a: &gov::PermissionAssignment) -> PermissionAssignment {
    PermissionAssignment {
        id: a.id.clone(),
        subject: rref(&a.subject),
        permission: a.permission.clone(),
        resource: rref(&a.resource),
        environment_id: opt(&a.environment_id),
        created_by: a.created_by.clone(),
        created_at: a.created_at.clone(),
        via: a.via.as_ref().map(|v| Ref { kind: v.kind.clone(), id: v.id.clone() }),
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Agent {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    /// The editable definition: instructions, model, tools, skills, session_variable, multiagent.
    #[schema(value_type = Object)]
    pub draft: Value,
    /// Null until the first publish.
    pub latest_version: Option<i64>,
    pub version: i64,
    pub archived: bool,
    pub created_at: String,
    pub updated_at: String,
}

pub fn agent(a: &ss::Agent) -> Agent {
    Agent {
        id: a.id.clone(),
        environment_id: a.environment_id.clone(),
        name: a.name.clone(),
        draft: doc(&a.draft_json),
        latest_version: (a.latest_version != 0).then_some(a.latest_version),
        version: a.version,
        archived: a.archived,
        created_at: a.created_at.clone(),
        updated_at: a.updated_at.clone(),
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AgentVersion {
    pub agent_id: String,
    pub version: i64,
    /// SHA-256 of the definition's canonical JSON.
    pub release_sha256: String,
    #[schema(value_type = Object)]
    pub definition: Value,
    pub published_by: String,
    pub published_at: String,
}

pub fn agent_version(v: &ss::AgentVersion) -> AgentVersion {
    AgentVersion {
        agent_id: v.agent_id.clone(),
        version: v.version,
        release_sha256: v.release_sha256.clone(),
        definition: doc(&v.definition_json),
        published_by: v.published_by.clone(),
        published_at: v.published_at.clone(),
    }
}

/// One immutable sandbox profile revision.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SandboxRevision {
    pub profile_id: String,
    pub revision: i64,
    pub image: String,
    /// What the profile is for, as this revision was published with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Caller-defined labels of this revision.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    pub packages: Vec<String>,
    /// `{allowed_hosts, allow_package_managers, allow_mcp_servers}`; package-manager hosts are listed explicitly.
    #[schema(value_type = Object)]
    pub network: crate::sandbox_wire::Network,
    /// `{cpu_millis, memory_mib, disk_mib}`.
    #[schema(value_type = Object)]
    pub resources: crate::sandbox_wire::Resources,
    pub retention_days: i64,
    /// `managed`, or `external_tools` (api.md §17.13).
    pub execution: String,
    pub created_at: String,
}

pub fn sandbox_revision(r: &ss::SandboxRevision) -> SandboxRevision {
    let spec = crate::sandbox_wire::rendered(r);
    SandboxRevision {
        profile_id: r.profile_id.clone(),
        revision: r.revision,
        image: spec.image,
        description: spec.description,
        metadata: spec.metadata,
        packages: spec.packages,
        network: spec.network,
        resources: spec.resources,
        retention_days: spec.retention_days,
        execution: spec.execution,
        created_at: r.created_at.clone(),
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SandboxProfile {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    pub latest_revision: i64,
    pub created_at: String,
    /// When it was archived (nothing new pins it); `null` while active.
    pub archived_at: Option<String>,
    /// The latest revision, when the response includes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest: Option<SandboxRevision>,
}

pub fn sandbox_profile(p: &ss::SandboxProfile) -> SandboxProfile {
    SandboxProfile {
        id: p.id.clone(),
        environment_id: p.environment_id.clone(),
        name: p.name.clone(),
        latest_revision: p.latest_revision,
        created_at: p.created_at.clone(),
        archived_at: opt(&p.archived_at),
        latest: None,
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Candidate {
    /// `anthropic`, `openai` or `scripted`.
    pub provider: String,
    pub model: String,
    /// `minimal`, `low`, `medium`, `high` or `max`.
    pub effort: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_id: Option<String>,
    /// The installation endpoint this candidate uses; absent: the
    /// provider's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// A provider endpoint the installation configured.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelEndpoint {
    /// What a candidate's `endpoint` names.
    pub name: String,
    /// `anthropic` or `openai`.
    pub provider: String,
    /// Where requests go (never with credentials).
    pub base_url: String,
    /// Whether the installation holds a key for it.
    pub key_configured: bool,
    /// The provider's default endpoint (used when a candidate names none).
    pub default: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ModelRoutingProfile {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    /// Ordered fallbacks.
    pub candidates: Vec<Candidate>,
    pub created_at: String,
}

pub fn routing_profile(p: &mg::RoutingProfile) -> ModelRoutingProfile {
    ModelRoutingProfile {
        id: p.id.clone(),
        environment_id: p.environment_id.clone(),
        name: p.name.clone(),
        candidates: p
            .candidates
            .iter()
            .map(|c| Candidate {
                provider: c.provider.clone(),
                model: c.model.clone(),
                effort: c.effort.clone(),
                connection_id: opt(&c.connection_id),
                endpoint: opt(&c.endpoint),
            })
            .collect(),
        created_at: p.created_at.clone(),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PriceEntry {
    pub provider: String,
    /// `*` prices every model of the provider not listed by name.
    pub model: String,
    pub input_micro_usd_per_mtok: i64,
    pub output_micro_usd_per_mtok: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Pins {
    pub agent_version: i64,
    pub release_sha256: String,
    pub harness: String,
    pub model_routing_profile_id: String,
    pub sandbox_profile_id: String,
    pub sandbox_profile_revision: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AgentDeployment {
    pub id: String,
    pub environment_id: String,
    pub key: String,
    pub agent_id: String,
    pub revision: i64,
    pub pins: Pins,
    /// `{kind: "managed"}`, `{kind: "runner", pool}` or
    /// `{kind: "external_tools", pool}` (the loop runs managed; sandbox
    /// tools run at the holder of each Session's work item, api.md §17.13).
    #[schema(value_type = Object)]
    pub execution: Value,
    pub created_at: String,
    pub updated_at: String,
}

// Reads the deprecated JSON text of a 0.1.0 sessions service.
#[allow(deprecated)]
pub fn deployment(d: &ss::Deployment) -> AgentDeployment {
    let p = d.pins.clone().unwrap_or_default();
    AgentDeployment {
        id: d.id.clone(),
        environment_id: d.environment_id.clone(),
        key: d.key.clone(),
        agent_id: d.agent_id.clone(),
        revision: d.revision,
        execution: crate::execution_wire::view(p.execution.as_ref(), &p.execution_json),
        pins: Pins {
            agent_version: p.agent_version,
            release_sha256: p.release_sha256,
            harness: p.harness,
            model_routing_profile_id: p.model_routing_profile_id,
            sandbox_profile_id: p.sandbox_profile_id,
            sandbox_profile_revision: p.sandbox_profile_revision,
        },
        created_at: d.created_at.clone(),
        updated_at: d.updated_at.clone(),
    }
}

#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub model_spend_micro_usd: i64,
}

fn usage(u: &Option<ss::Usage>) -> Usage {
    let u = u.unwrap_or_default();
    Usage { input_tokens: u.input_tokens, output_tokens: u.output_tokens, model_spend_micro_usd: u.model_spend_micro_usd }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Session {
    pub id: String,
    pub environment_id: String,
    pub agent_deployment_id: String,
    pub deployment_revision: i64,
    pub principal_id: String,
    /// `idle`, `running`, `rescheduling` or `terminated`.
    pub status: String,
    /// `{type: "end_turn" | "requires_action" | "budget_reached" | "retries_exhausted", ...}`.
    #[schema(value_type = Option<Object>)]
    pub stop_reason: Value,
    pub title: String,
    #[schema(value_type = Object)]
    pub metadata: Value,
    pub budget_id: Option<String>,
    pub usage: Usage,
    /// The execution plane its deployment pinned: `{kind: "managed"}`, or
    /// `{kind: "runner", pool, queued_for_pool}` where `queued_for_pool`
    /// says its Run waits for a Runner of that pool to claim it.
    #[schema(value_type = Object)]
    pub execution: Value,
    /// When the Session's sandbox (its workspace) expires: fixed when it
    /// first materialised, never extended; null before. A turn after it
    /// starts with a fresh filesystem.
    pub sandbox_expires_at: Option<String>,
    /// `{expires_at, unenforced: [{field, reason}]}`: the SandboxProfile
    /// fields the plane running it does not enforce; null before the
    /// sandbox materialised.
    #[schema(value_type = Option<Object>)]
    pub sandbox: Value,
    /// The Connections its release pins (ids only, never a secret).
    pub connection_ids: Vec<String>,
    /// The ConnectionVaults it was created with: recorded, never a source of
    /// credentials (calls use `connection_ids`).
    pub connection_vault_ids: Vec<String>,
    /// MemoryStores it mounts: `{type: "memory_store", memory_store_id,
    /// access, mount_name, store_version}` (the head when it was created).
    #[schema(value_type = Vec<Object>)]
    pub resources: Value,
    /// The seq of its newest event (0: none yet). The log is gapless from
    /// 1, so `GET …/events?after_seq={last_seq - n}` is its newest `n`
    /// events: a reader opens a long log at its end without reading it all.
    pub last_seq: i64,
    pub created_at: String,
    pub updated_at: String,
    pub version: i64,
}

// Reads the deprecated JSON text of a 0.1.0 sessions service.
#[allow(deprecated)]
fn execution(s: &ss::Session) -> Value {
    let mut e = crate::execution_wire::view(s.execution.as_ref(), &s.execution_json);
    if e.is_null() {
        e = serde_json::json!({"kind": "managed"});
    }
    if e.get("kind").and_then(Value::as_str) == Some("runner") {
        e["queued_for_pool"] = Value::Bool(s.queued_for_pool);
    }
    e
}

/// `{expires_at, unenforced}` once the sandbox materialised, else null:
/// from the typed summary, or a 0.1.0 sessions service's JSON text.
#[allow(deprecated)]
fn sandbox(s: &ss::Session) -> Value {
    if let Some(x) = &s.sandbox {
        let unenforced: Vec<Value> = x.unenforced.iter().map(|u| serde_json::json!({"field": u.field, "reason": u.reason})).collect();
        return serde_json::json!({"expires_at": checkfu_core::time::rfc3339(x.expires_at_ms), "unenforced": unenforced});
    }
    let v = doc(&s.sandbox_json);
    let Some(at) = v.get("expires_at_ms").and_then(Value::as_i64) else { return Value::Null };
    serde_json::json!({"expires_at": checkfu_core::time::rfc3339(at), "unenforced": v.get("unenforced").cloned().unwrap_or(Value::Array(vec![]))})
}

/// The MemoryStores a Session mounts, as its `resources`: from the typed
/// list, or a 0.1.0 sessions service's JSON text.
#[allow(deprecated)]
fn resources(s: &ss::Session) -> Value {
    if s.memory_resources.is_empty() && !s.resources_json.is_empty() {
        return doc(&s.resources_json);
    }
    let list = s
        .memory_resources
        .iter()
        .map(|m| {
            serde_json::json!({"type": "memory_store", "memory_store_id": m.memory_store_id, "access": m.access,
                "mount_name": m.mount_name, "store_version": m.store_version})
        })
        .collect();
    Value::Array(list)
}

// Reads the deprecated JSON text of a 0.1.0 sessions service.
#[allow(deprecated)]
pub fn session(s: &ss::Session) -> Session {
    let sandbox = sandbox(s);
    Session {
        id: s.id.clone(),
        environment_id: s.environment_id.clone(),
        agent_deployment_id: s.agent_deployment_id.clone(),
        deployment_revision: s.deployment_revision,
        principal_id: s.principal_id.clone(),
        status: s.status.clone(),
        stop_reason: checkfu_proto::views::stop_reason(s.stop_reason.as_ref(), &s.stop_reason_json),
        title: s.title.clone(),
        metadata: doc(&s.metadata_json),
        budget_id: opt(&s.budget_id),
        usage: usage(&s.usage),
        execution: execution(s),
        sandbox_expires_at: sandbox.get("expires_at").and_then(Value::as_str).map(str::to_string),
        sandbox,
        connection_ids: s.connection_ids.clone(),
        connection_vault_ids: s.connection_vault_ids.clone(),
        resources: resources(s),
        last_seq: s.last_seq,
        created_at: s.created_at.clone(),
        updated_at: s.updated_at.clone(),
        version: s.version,
    }
}

/// A file captured from a Session's outputs folder.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SessionFile {
    pub id: String,
    /// Relative to the outputs folder (`/mnt/session/outputs`).
    pub path: String,
    pub size: i64,
    /// Empty when the file was `too_large` to be read.
    pub sha256: String,
    /// `captured`, `too_large` (over 64 MiB) or `over_capacity` (past the
    /// Session's 64 files or 256 MiB).
    pub status: String,
    pub run_id: String,
    pub captured_at: String,
}

pub fn session_file(f: &ss::SessionFile) -> SessionFile {
    SessionFile {
        id: f.id.clone(),
        path: f.path.clone(),
        size: f.size,
        sha256: f.sha256.clone(),
        status: f.status.clone(),
        run_id: f.run_id.clone(),
        captured_at: f.captured_at.clone(),
    }
}

/// A single-use pairing code; `code` is shown once.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunnerPairing {
    pub id: String,
    pub environment_id: String,
    pub principal_id: String,
    pub pool: String,
    /// Redeem it with `checkfu runner --pairing-code`; shown once.
    pub code: Option<String>,
    pub expires_at: String,
    pub created_at: String,
}

pub fn runner_pairing(p: ss::RunnerPairing) -> RunnerPairing {
    RunnerPairing {
        id: p.id,
        environment_id: p.environment_id,
        principal_id: p.principal_id,
        pool: p.pool,
        code: Some(p.code),
        expires_at: p.expires_at,
        created_at: p.created_at,
    }
}

/// A self-hosted Runner.
#[derive(Debug, Serialize, ToSchema)]
pub struct Runner {
    pub id: String,
    pub environment_id: String,
    pub pool: String,
    pub principal_id: String,
    pub name: String,
    /// `active` or `revoked`.
    pub status: String,
    pub last_seen_at: Option<String>,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

pub fn runner(r: &ss::Runner) -> Runner {
    Runner {
        id: r.id.clone(),
        environment_id: r.environment_id.clone(),
        pool: r.pool.clone(),
        principal_id: r.principal_id.clone(),
        name: r.name.clone(),
        status: r.status.clone(),
        last_seen_at: opt(&r.last_seen_at),
        created_at: r.created_at.clone(),
        revoked_at: opt(&r.revoked_at),
    }
}

/// A persisted event of a Session's log.
#[derive(Debug, Serialize, ToSchema)]
pub struct Event {
    pub id: String,
    pub session_id: String,
    /// Starts at 1 and grows by exactly 1 per event of the Session (a
    /// thread's view skips the other threads' seqs).
    pub seq: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub created_at: String,
    pub run_id: Option<String>,
    /// The child thread the event belongs to; null for the primary.
    pub session_thread_id: Option<String>,
    /// A cross-post's original event (the copy in the primary view of a
    /// child's event); null elsewhere.
    pub origin_event_id: Option<String>,
    /// The input's `authored_by`, `{kind: "agent", id}` for agent output, null for system events.
    #[schema(value_type = Object)]
    pub authored_by: Value,
    #[schema(value_type = Object)]
    pub caused_by: Value,
    #[schema(value_type = Object)]
    pub payload: Value,
}

// Reads a 0.1.0 sessions service's author and cause text when the typed
// ones are absent (a system event has neither: its text says null).
#[allow(deprecated)]
pub fn event(e: &ss::Event) -> Event {
    Event {
        id: e.id.clone(),
        session_id: e.session_id.clone(),
        seq: e.seq,
        kind: e.r#type.clone(),
        created_at: e.created_at.clone(),
        run_id: opt(&e.run_id),
        session_thread_id: opt(&e.session_thread_id),
        origin_event_id: opt(&e.origin_event_id),
        authored_by: match &e.authored_by {
            Some(a) => ss::Author::json(Some(a)),
            None => doc(&e.authored_by_json),
        },
        caused_by: match &e.caused_by {
            Some(c) => ss::Cause::json(Some(c)),
            None => doc(&e.caused_by_json),
        },
        payload: doc(&e.payload_json),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Run {
    pub id: String,
    pub session_id: String,
    /// `queued`, `running` or `completed`.
    pub status: String,
    #[schema(value_type = Option<Object>)]
    pub stop_reason: Value,
    #[schema(value_type = Object)]
    pub execution_pins: Value,
    pub usage: Usage,
    pub created_at: String,
    pub completed_at: Option<String>,
}

// Reads the deprecated JSON text of a 0.1.0 sessions service.
#[allow(deprecated)]
pub fn run(r: &ss::Run) -> Run {
    Run {
        id: r.id.clone(),
        session_id: r.session_id.clone(),
        status: r.status.clone(),
        stop_reason: checkfu_proto::views::stop_reason(r.stop_reason.as_ref(), &r.stop_reason_json),
        execution_pins: checkfu_proto::views::execution_pins(r.execution_pins.as_ref(), &r.execution_pins_json),
        usage: usage(&r.usage),
        created_at: r.created_at.clone(),
        completed_at: opt(&r.completed_at),
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ActionPolicy {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    /// Each rule with its server-assigned `id` (`<policy id>#<index>`).
    #[schema(value_type = Vec<Object>)]
    pub rules: Value,
    pub version: i64,
    pub created_at: String,
    pub updated_at: String,
}

pub fn action_policy(p: &gov::ActionPolicy) -> ActionPolicy {
    ActionPolicy {
        id: p.id.clone(),
        environment_id: p.environment_id.clone(),
        name: p.name.clone(),
        rules: crate::policy_rules::view(p),
        version: p.version,
        created_at: p.created_at.clone(),
        updated_at: p.updated_at.clone(),
    }
}

/// The result of a dry-run evaluation.
#[derive(Debug, Serialize, ToSchema)]
pub struct Evaluation {
    /// `allow`, `require_approval` or `deny`.
    pub disposition: String,
    pub matched_rule_ids: Vec<String>,
    pub reason: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEvent {
    pub id: String,
    pub actor_id: String,
    /// e.g. `permission_assignment.created`, `action_policy.updated`, `api_key.revoked`.
    pub action: String,
    pub resource: Ref,
    #[schema(value_type = Object)]
    pub details: Value,
    pub created_at: String,
}

pub fn audit_event(a: &gov::AuditEvent) -> AuditEvent {
    AuditEvent {
        id: a.id.clone(),
        actor_id: a.actor_id.clone(),
        action: a.action.clone(),
        resource: rref(&a.resource),
        details: doc(&a.details_json),
        created_at: a.created_at.clone(),
    }
}

/// What an ActionApproval decides, frozen when it was asked for.
#[derive(Debug, Serialize, ToSchema)]
pub struct FrozenAction {
    pub principal_id: String,
    pub agent_id: String,
    pub tool: String,
    pub connection_id: Option<String>,
    #[schema(value_type = Object)]
    pub arguments: Value,
    pub arguments_sha256: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ActionApproval {
    pub id: String,
    pub environment_id: String,
    /// `pending`, `approved`, `denied` or `expired`.
    pub status: String,
    /// `null` for an Automation's approval step.
    pub session_id: Option<String>,
    pub run_id: Option<String>,
    pub tool_use_id: Option<String>,
    /// The Automation firing and step an approval step holds up (else null).
    pub automation_firing_id: Option<String>,
    pub step_id: Option<String>,
    pub frozen: FrozenAction,
    pub expires_at: String,
    pub responder_principal_id: Option<String>,
    pub responded_at: Option<String>,
    /// `approve` or `deny` once decided; an expired approval counts as `deny`.
    pub decision: Option<String>,
    /// The one-time token a response must carry: only while pending, and
    /// only to callers holding `approve` on the Environment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_token: Option<String>,
    /// The StandingApproval an approve response minted, if it asked for one.
    pub standing_approval_id: Option<String>,
    pub created_at: String,
}

/// `show_token`: the caller holds `approve` on the approval's Environment.
pub fn action_approval(a: &gov::ActionApproval, show_token: bool) -> ActionApproval {
    let f = a.frozen.clone().unwrap_or_default();
    ActionApproval {
        id: a.id.clone(),
        environment_id: a.environment_id.clone(),
        status: a.status.clone(),
        session_id: opt(&a.session_id),
        run_id: opt(&a.run_id),
        tool_use_id: opt(&a.tool_use_id),
        automation_firing_id: opt(&a.automation_firing_id),
        step_id: opt(&a.step_id),
        frozen: FrozenAction {
            principal_id: f.principal_id,
            agent_id: f.agent_id,
            tool: f.tool,
            connection_id: opt(&f.connection_id),
            arguments: doc(&f.arguments_json),
            arguments_sha256: f.arguments_sha256,
        },
        expires_at: a.expires_at.clone(),
        responder_principal_id: opt(&a.responder_principal_id),
        responded_at: opt(&a.responded_at),
        decision: opt(&a.decision),
        response_token: if show_token && a.status == "pending" { opt(&a.response_token) } else { None },
        standing_approval_id: opt(&a.standing_approval_id),
        created_at: a.created_at.clone(),
    }
}

/// The exact tuple a StandingApproval covers.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalTuple {
    pub principal_id: String,
    pub agent_id: String,
    pub tool: String,
    pub connection_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StandingApproval {
    pub id: String,
    pub environment_id: String,
    pub tuple: ApprovalTuple,
    pub expires_at: String,
    pub created_from_approval_id: String,
    pub created_by: String,
    pub revoked_at: Option<String>,
    pub created_at: String,
}

pub fn standing_approval(s: &gov::StandingApproval) -> StandingApproval {
    StandingApproval {
        id: s.id.clone(),
        environment_id: s.environment_id.clone(),
        tuple: ApprovalTuple {
            principal_id: s.principal_id.clone(),
            agent_id: s.agent_id.clone(),
            tool: s.tool.clone(),
            connection_id: opt(&s.connection_id),
        },
        expires_at: s.expires_at.clone(),
        created_from_approval_id: s.created_from_approval_id.clone(),
        created_by: s.created_by.clone(),
        revoked_at: opt(&s.revoked_at),
        created_at: s.created_at.clone(),
    }
}

/// What a Budget covers.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Scope {
    /// `session`.
    pub kind: String,
    pub id: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Budget {
    pub id: String,
    pub environment_id: String,
    pub scope: Scope,
    /// `model_spend` (integer micro-USD) or `model_tokens`.
    pub metric: String,
    pub limit: i64,
    pub consumed: i64,
    /// `active` or `paused`; `detached` in the answer to its detachment.
    pub status: String,
    pub version: i64,
    pub created_at: String,
    pub updated_at: String,
}

pub fn budget(b: &ss::Budget) -> Budget {
    Budget {
        id: b.id.clone(),
        environment_id: b.environment_id.clone(),
        scope: Scope { kind: "session".into(), id: b.session_id.clone() },
        metric: b.metric.clone(),
        limit: b.limit,
        consumed: b.consumed,
        status: b.status.clone(),
        version: b.version,
        created_at: b.created_at.clone(),
        updated_at: b.updated_at.clone(),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookEndpoint {
    pub id: String,
    /// `null` for an installation-wide endpoint.
    pub environment_id: Option<String>,
    pub url: String,
    pub event_types: Vec<String>,
    pub disabled: bool,
    pub version: i64,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    /// Only when created or rotated: the signing secret, shown once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

pub fn webhook_endpoint(e: &wh::Endpoint, secret: Option<String>) -> WebhookEndpoint {
    WebhookEndpoint {
        id: e.id.clone(),
        environment_id: opt(&e.environment_id),
        url: e.url.clone(),
        event_types: e.event_types.clone(),
        disabled: e.disabled,
        version: e.version,
        created_by: e.created_by.clone(),
        created_at: e.created_at.clone(),
        updated_at: e.updated_at.clone(),
        secret,
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookAttempt {
    pub number: i32,
    pub at: String,
    /// `null` when no response arrived.
    pub response_code: Option<i32>,
    pub error: Option<String>,
    pub duration_ms: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookDelivery {
    pub id: String,
    pub endpoint_id: String,
    /// The `id` every attempt carries.
    pub event_id: String,
    pub event_type: String,
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    pub attempts: i32,
    pub last_response_code: Option<i32>,
    /// When the next attempt is due (pending deliveries only).
    pub next_attempt_at: Option<String>,
    pub created_at: String,
    pub history: Vec<WebhookAttempt>,
}

pub fn webhook_delivery(d: &wh::Delivery) -> WebhookDelivery {
    WebhookDelivery {
        id: d.id.clone(),
        endpoint_id: d.endpoint_id.clone(),
        event_id: d.event_id.clone(),
        event_type: d.event_type.clone(),
        status: d.status.clone(),
        attempts: d.attempts,
        last_response_code: (d.last_response_code != 0).then_some(d.last_response_code),
        next_attempt_at: opt(&d.next_attempt_at),
        created_at: d.created_at.clone(),
        history: d
            .history
            .iter()
            .map(|a| WebhookAttempt {
                number: a.number,
                at: a.at.clone(),
                response_code: (a.response_code != 0).then_some(a.response_code),
                error: opt(&a.error),
                duration_ms: a.duration_ms,
            })
            .collect(),
    }
}
