//! Sessions domain types: the agent catalog documents, Sessions, Runs and
//! events. JSON from the wire is parsed into these once; an invalid tool
//! declaration or status never gets past the boundary.

mod budget;
mod claim;
mod files;
mod memory;
pub mod outcome;
pub mod roster;
mod run_state;
mod runner;
mod skills;
mod thread;
mod uploads;
mod work;
pub use budget::{Budget, BudgetChange, BudgetMetric, BudgetStatus};
pub use claim::*;
pub use files::*;
pub use memory::*;
pub use run_state::*;
pub use runner::*;
pub use skills::*;
pub use thread::*;
pub use uploads::*;
pub use work::*;

use checkfu_core::id::{AgentId, DeploymentId, EnvironmentId, EventId, PrincipalId, RoutingProfileId, RunId, SandboxProfileId, SessionId};
use checkfu_core::{Error, Result, string_enum};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

pub const MAX_INSTRUCTIONS_BYTES: usize = 64 * 1024;
pub const MAX_INITIAL_EVENTS: usize = 50;
pub const MAX_TOOLS: usize = 128;
pub const MAX_TEXT_BYTES: usize = 256 * 1024;

pub const BUILTIN_TOOLS: &[&str] = checkfu_core::tools::BUILTIN;

/// A tool the agent may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolDecl {
    Builtin {
        name: String,
    },
    Custom {
        name: String,
        #[serde(default)]
        description: String,
        #[serde(default = "empty_object")]
        input_schema: Value,
        #[serde(default)]
        read_only: bool,
        #[serde(default)]
        destructive: bool,
    },
    ToolSource {
        tool_source_id: String,
        tools: Vec<String>,
        /// The ToolSource's Connection, pinned when the version is
        /// published (never in a draft).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        connection_id: Option<String>,
    },
    /// A tool the platform itself answers (multiagent's `spawn_agent` and
    /// `send_message`): given to a Run, never declared in a draft.
    Platform {
        name: String,
        description: String,
        input_schema: Value,
    },
}

fn empty_object() -> Value {
    serde_json::json!({"type": "object"})
}

impl ToolDecl {
    /// The names this declaration makes callable.
    pub fn names(&self) -> Vec<String> {
        match self {
            ToolDecl::Builtin { name } | ToolDecl::Custom { name, .. } | ToolDecl::Platform { name, .. } => vec![name.clone()],
            ToolDecl::ToolSource { tools, .. } => tools.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_profile_id: Option<String>,
    /// The model as its author named it (a CMA client's `model.id`, say):
    /// shown back to them; the routing profile decides what runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allowed {
    #[serde(default)]
    pub allowed: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionVariable {
    #[serde(default)]
    pub tools: Allowed,
    #[serde(default)]
    pub skills: Allowed,
}

/// Longest agent or sandbox profile `description`, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 2048;

pub use checkfu_core::metadata::check as check_metadata;

/// An Agent's definition: the draft, and (frozen) every published version.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentDefinition {
    #[serde(default)]
    pub instructions: String,
    /// What the agent is for, for people choosing one (≤ 2,048 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Caller-defined labels: ≤ 16 pairs, keys ≤ 64 and values ≤ 512
    /// characters. Versioned with the rest of the definition.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    #[serde(default)]
    pub model: ModelRef,
    #[serde(default)]
    pub tools: Vec<ToolDecl>,
    /// The skills it mounts; a published version names each one's version.
    #[serde(default)]
    pub skills: Vec<SkillRef>,
    #[serde(default)]
    pub session_variable: SessionVariable,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiagent: Option<roster::Roster>,
}

impl AgentDefinition {
    /// Checks the rules a draft holds to (its shape was checked when it was
    /// read: `checkfu_proto::agent_definition`).
    pub fn validate(&self) -> Result<()> {
        if self.instructions.len() > MAX_INSTRUCTIONS_BYTES {
            return Err(Error::invalid_field("draft.instructions", "instructions are limited to 64 KiB"));
        }
        if self.description.as_ref().is_some_and(|d| d.chars().count() > MAX_DESCRIPTION_CHARS) {
            return Err(Error::invalid_field("draft.description", format!("description is limited to {MAX_DESCRIPTION_CHARS} characters")));
        }
        check_metadata("draft.metadata", &self.metadata)?;
        if self.model.label.as_ref().is_some_and(|l| l.is_empty() || l.len() > 256) {
            return Err(Error::invalid_field("draft.model.label", "model.label must be 1 to 256 bytes"));
        }
        if let Some(id) = &self.model.routing_profile_id {
            RoutingProfileId::check("draft.model.routing_profile_id", id)?;
        }
        if self.tools.len() > MAX_TOOLS {
            return Err(Error::invalid_field("draft.tools", format!("at most {MAX_TOOLS} tools")));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, t) in self.tools.iter().enumerate() {
            let field = format!("draft.tools[{i}]");
            match t {
                ToolDecl::Builtin { name } if !BUILTIN_TOOLS.contains(&name.as_str()) => {
                    return Err(Error::invalid_field(
                        &field,
                        format!("unknown builtin tool {name:?}; builtins are {}", BUILTIN_TOOLS.join(", ")),
                    ));
                }
                ToolDecl::Custom { name, input_schema, .. } => {
                    check_tool_name(&field, name)?;
                    if !input_schema.is_object() {
                        return Err(Error::invalid_field(&field, "input_schema must be a JSON Schema object"));
                    }
                }
                ToolDecl::ToolSource { tool_source_id, tools, connection_id } => {
                    checkfu_core::id::ToolSourceId::check(&format!("{field}.tool_source_id"), tool_source_id)?;
                    if connection_id.is_some() {
                        return Err(Error::invalid_field(
                            &format!("{field}.connection_id"),
                            "connection_id is pinned when the version is published, not declared",
                        ));
                    }
                    if tools.is_empty() {
                        return Err(Error::invalid_field(&format!("{field}.tools"), "name at least one tool of the ToolSource"));
                    }
                    for n in tools {
                        check_tool_name(&field, n)?;
                    }
                }
                ToolDecl::Platform { .. } => {
                    return Err(Error::invalid_field(&field, "platform tools are given by the platform, not declared"));
                }
                ToolDecl::Builtin { .. } => {}
            }
            for n in t.names() {
                if !seen.insert(n.clone()) {
                    return Err(Error::invalid_field(&field, format!("tool {n:?} is declared twice")));
                }
            }
        }
        if self.skills.len() > MAX_SKILLS {
            return Err(Error::invalid_field("draft.skills", format!("at most {MAX_SKILLS} skills")).with_reason("too_many_skills"));
        }
        for (i, s) in self.skills.iter().enumerate() {
            s.check(&format!("draft.skills[{i}]"))?;
        }
        for (i, s) in self.session_variable.skills.allowed.iter().enumerate() {
            checkfu_core::id::SkillId::check(&format!("draft.session_variable.skills.allowed[{i}]"), s)?;
        }
        Ok(())
    }

    /// The Connections this definition's pinned ToolSource declarations
    /// reach (a published version's; a draft pins none).
    pub fn connection_ids(&self) -> Vec<String> {
        let mut out: Vec<String> = vec![];
        for t in &self.tools {
            if let ToolDecl::ToolSource { connection_id: Some(c), .. } = t
                && !out.contains(c)
            {
                out.push(c.clone());
            }
        }
        out
    }

    pub fn tool_names(&self) -> Vec<String> {
        self.tools.iter().flat_map(ToolDecl::names).collect()
    }

    /// Publication refuses a `session_variable.*.allowed` entry the
    /// definition does not itself grant: a session may only narrow.
    pub fn check_publishable(&self) -> Result<()> {
        let tools = self.tool_names();
        for t in &self.session_variable.tools.allowed {
            if !tools.contains(t) {
                return Err(Error::invalid_field(
                    "draft.session_variable.tools.allowed",
                    format!("{t:?} is not a tool this agent declares"),
                ));
            }
        }
        for s in &self.session_variable.skills.allowed {
            if !self.skills.iter().any(|r| &r.skill_id == s) {
                return Err(Error::invalid_field(
                    "draft.session_variable.skills.allowed",
                    format!("{s:?} is not a skill this agent declares"),
                ));
            }
        }
        Ok(())
    }

    /// The canonical JSON whose SHA-256 is the release digest (object keys
    /// are sorted, so equal definitions hash equally).
    pub fn canonical_json(&self) -> String {
        serde_json::to_value(self).map(|v| v.to_string()).unwrap_or_default()
    }
}

/// Names the platform gives a coordinator's threads (api.md §15.3).
const PLATFORM_TOOLS: &[&str] = &["spawn_agent", "send_message"];

fn check_tool_name(field: &str, name: &str) -> Result<()> {
    if PLATFORM_TOOLS.contains(&name) {
        return Err(Error::invalid_field(field, format!("{name:?} is reserved for the platform's multiagent tools")));
    }
    let ok = !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok { Ok(()) } else { Err(Error::invalid_field(field, format!("{name:?} is not a valid name (1-64 of a-z, 0-9, _ and -)"))) }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub id: AgentId,
    pub environment_id: EnvironmentId,
    pub name: String,
    pub draft: AgentDefinition,
    pub latest_version: i64,
    pub version: i64,
    pub archived: bool,
    pub created_ms: i64,
    pub updated_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentVersion {
    pub agent_id: AgentId,
    pub environment_id: EnvironmentId,
    pub version: i64,
    pub release_sha256: String,
    pub definition: AgentDefinition,
    pub published_by: String,
    pub published_ms: i64,
}

// ---- sandbox profiles ------------------------------------------------------

/// Hosts `allow_package_managers` compiles into at publication.
pub const PACKAGE_MANAGER_HOSTS: &[&str] = &[
    "deb.debian.org",
    "security.debian.org",
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    #[serde(default)]
    pub allow_package_managers: bool,
    #[serde(default)]
    pub allow_mcp_servers: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    #[serde(default = "default_cpu")]
    pub cpu_millis: i64,
    #[serde(default = "default_mem")]
    pub memory_mib: i64,
    #[serde(default = "default_disk")]
    pub disk_mib: i64,
}

fn default_cpu() -> i64 {
    1000
}
fn default_mem() -> i64 {
    1024
}
fn default_disk() -> i64 {
    4096
}
/// How long a sandbox is kept when its profile does not say.
pub const DEFAULT_RETENTION_DAYS: i64 = 30;

fn default_retention() -> i64 {
    DEFAULT_RETENTION_DAYS
}

impl Default for Resources {
    fn default() -> Self {
        Resources { cpu_millis: default_cpu(), memory_mib: default_mem(), disk_mib: default_disk() }
    }
}

/// One immutable sandbox profile revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSpec {
    pub image: String,
    /// What the profile is for (≤ 2,048 characters); revised with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Caller-defined labels, as an Agent's (`check_metadata`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    #[serde(default)]
    pub packages: Vec<String>,
    #[serde(default)]
    pub network: Network,
    #[serde(default)]
    pub resources: Resources,
    #[serde(default = "default_retention")]
    pub retention_days: i64,
    /// Where its sandbox tools run: the platform's sandbox, or the holder of
    /// each Session's work item (api.md §17.13). Deployments pin a plane
    /// that matches.
    #[serde(default, skip_serializing_if = "SandboxExecution::is_managed")]
    pub execution: SandboxExecution,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxExecution {
    #[default]
    Managed,
    ExternalTools,
}

impl SandboxExecution {
    pub fn is_managed(&self) -> bool {
        *self == SandboxExecution::Managed
    }
}

impl SandboxSpec {
    /// Validates a requested revision and compiles it into the stored form:
    /// package-manager reach becomes explicit hosts, sorted and deduplicated.
    pub fn compile(v: Value) -> Result<SandboxSpec> {
        Self::compile_with(v, false)
    }

    /// As [`SandboxSpec::compile`]; `any_host` lets `allowed_hosts` be
    /// `["*"]`, every public host (an installation setting: the egress proxy
    /// still carries and records the traffic, and private addresses stay
    /// refused).
    pub fn compile_with(v: Value, any_host: bool) -> Result<SandboxSpec> {
        Self::requested(v)?.checked(any_host)
    }

    /// A requested revision as JSON (a 0.1.0 caller's text), its shape
    /// checked and absent fields defaulted; [`SandboxSpec::checked`] does
    /// the rest.
    pub fn requested(v: Value) -> Result<SandboxSpec> {
        serde_json::from_value(v).map_err(|e| Error::invalid(format!("invalid sandbox profile: {e}")))
    }

    /// Validates a requested revision (see [`SandboxSpec::compile_with`]).
    pub fn checked(mut self, any_host: bool) -> Result<SandboxSpec> {
        let s = &mut self;
        if s.image.trim().is_empty() || s.image.chars().count() > 512 {
            return Err(Error::invalid_field("image", "image must be 1 to 512 characters"));
        }
        if s.description.as_ref().is_some_and(|d| d.chars().count() > MAX_DESCRIPTION_CHARS) {
            return Err(Error::invalid_field("description", format!("description is limited to {MAX_DESCRIPTION_CHARS} characters")));
        }
        check_metadata("metadata", &s.metadata)?;
        if s.packages.len() > 256 || s.packages.iter().any(|p| p.is_empty() || p.len() > 200) {
            return Err(Error::invalid_field("packages", "at most 256 packages of 1 to 200 characters"));
        }
        let mut hosts = std::collections::BTreeSet::new();
        if s.network.allowed_hosts.iter().any(|h| h == "*") {
            if !any_host {
                return Err(Error::new(
                    checkfu_core::Code::PermissionDenied,
                    "this installation does not allow unrestricted sandbox networking",
                )
                .with_reason("environment_create_disabled"));
            }
            if s.network.allowed_hosts.len() > 1 {
                return Err(Error::invalid_field("network.allowed_hosts", "\"*\" allows every public host and stands alone"));
            }
        }
        for h in &s.network.allowed_hosts {
            let h = h.to_ascii_lowercase();
            if h != "*" && !valid_host(&h) {
                return Err(Error::invalid_field("network.allowed_hosts", format!("{h:?} is not a host name")));
            }
            hosts.insert(h);
        }
        if s.network.allow_package_managers {
            hosts.extend(PACKAGE_MANAGER_HOSTS.iter().map(|h| h.to_string()));
        }
        if hosts.len() > 256 {
            return Err(Error::invalid_field("network.allowed_hosts", "at most 256 hosts"));
        }
        if s.network.allow_mcp_servers && hosts.is_empty() {
            return Err(Error::invalid_field(
                "network.allow_mcp_servers",
                "allow_mcp_servers adds no host; list the MCP servers' hosts in allowed_hosts",
            ));
        }
        s.network.allowed_hosts = hosts.into_iter().collect();
        let r = &s.resources;
        if !(100..=64_000).contains(&r.cpu_millis) || !(128..=262_144).contains(&r.memory_mib) || !(256..=1_048_576).contains(&r.disk_mib) {
            return Err(Error::invalid_field(
                "resources",
                "resources out of range (cpu 100-64000 millis, memory 128-262144 MiB, disk 256-1048576 MiB)",
            ));
        }
        if !(1..=30).contains(&s.retention_days) {
            return Err(Error::invalid_field("retention_days", "retention_days must be 1 to 30"));
        }
        Ok(self)
    }
}

fn valid_host(h: &str) -> bool {
    let h = h.strip_prefix("*.").unwrap_or(h);
    !h.is_empty()
        && h.len() <= 253
        && h.split('.')
            .all(|l| !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') && !l.starts_with('-'))
}

#[derive(Debug, Clone, PartialEq)]
pub struct SandboxProfile {
    pub id: SandboxProfileId,
    pub environment_id: EnvironmentId,
    pub name: String,
    pub latest_revision: i64,
    pub created_ms: i64,
    /// Archived: nothing new pins it (revisions, deployments); Sessions
    /// already running keep theirs.
    pub archived_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SandboxRevision {
    pub profile_id: SandboxProfileId,
    pub revision: i64,
    pub spec: SandboxSpec,
    pub created_ms: i64,
}

// ---- deployments -----------------------------------------------------------

pub const BUILTIN_HARNESS: &str = "checkfu-builtin-1";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Execution {
    /// Absent from a Deployment's input: the managed plane.
    #[default]
    Managed,
    Runner {
        pool: String,
    },
    /// The loop runs on the managed plane; sandbox tool calls wait for the
    /// holder of the Session's work item, a Runner of `pool` (api.md §17.13).
    ExternalTools {
        pool: String,
    },
}

/// What a Deployment revision pins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pins {
    pub agent_version: i64,
    pub release_sha256: String,
    pub harness: String,
    pub model_routing_profile_id: RoutingProfileId,
    pub sandbox_profile_id: SandboxProfileId,
    pub sandbox_profile_revision: i64,
    pub execution: Execution,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    pub id: DeploymentId,
    pub environment_id: EnvironmentId,
    pub key: String,
    pub agent_id: AgentId,
    pub revision: i64,
    pub pins: Pins,
    pub created_ms: i64,
    pub updated_ms: i64,
}

// ---- sessions, runs, events -----------------------------------------------

string_enum!(SessionStatus { Idle = "idle", Running = "running", Rescheduling = "rescheduling", Terminated = "terminated" });
string_enum!(RunStatus { Queued = "queued", Running = "running", Completed = "completed" });

/// What a Session narrowed from its release, and the digests that pin it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub tools: Vec<String>,
    pub skills: Vec<String>,
    pub instructions: String,
    pub instructions_sha256: String,
    /// Digest of the agent release plus this selection.
    pub release_sha256: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub model_spend_micro_usd: i64,
}

impl Session {
    pub fn budget_id(&self) -> &str {
        self.budget.as_ref().map_or("", |b| b.id.as_str())
    }

    /// The tool uses (custom ones awaiting results, gated ones awaiting
    /// approval) a `requires_action` wait is still waiting on.
    pub fn waiting_ids(&self) -> Vec<String> {
        waiting_ids(self.status, &self.stop_reason)
    }

    /// Every ActionApproval the Session's `requires_action` wait holds.
    pub fn waiting_approvals(&self) -> Vec<String> {
        self.waiting_ids().iter().filter_map(|t| self.waiting_approval(t)).collect()
    }

    /// The ActionApproval a `requires_action` wait holds for `tool_use_id`.
    pub fn waiting_approval(&self, tool_use_id: &str) -> Option<String> {
        waiting_approval(self.status, &self.stop_reason, tool_use_id)
    }

    /// Every thread's waits: `(None` for the primary, else the child's id,
    /// the tool use ids it waits on)`, only threads that wait.
    pub fn thread_waits(&self) -> Vec<(Option<String>, Vec<String>)> {
        let mut out = vec![];
        let primary = self.waiting_ids();
        if !primary.is_empty() {
            out.push((None, primary));
        }
        for t in self.threads.iter().filter(|t| !t.archived()) {
            let w = waiting_ids(t.status, &t.stop_reason);
            if !w.is_empty() {
                out.push((Some(t.id.clone()), w));
            }
        }
        out
    }

    /// The ActionApproval any thread's wait holds for `tool_use_id`.
    pub fn any_waiting_approval(&self, tool_use_id: &str) -> Option<String> {
        self.waiting_approval(tool_use_id)
            .or_else(|| self.threads.iter().find_map(|t| waiting_approval(t.status, &t.stop_reason, tool_use_id)))
    }

    /// Every ActionApproval any thread's wait holds.
    pub fn all_waiting_approvals(&self) -> Vec<String> {
        self.thread_waits().into_iter().flat_map(|(_, ids)| ids).filter_map(|id| self.any_waiting_approval(&id)).collect()
    }
}

/// The tool use ids a thread in `status` with `stop_reason` waits on.
pub fn waiting_ids(status: SessionStatus, stop_reason: &Option<StopReason>) -> Vec<String> {
    match stop_reason.as_ref().filter(|_| status == SessionStatus::Idle).and_then(StopReason::wait) {
        Some(w) => w.waiting_on.clone(),
        None => vec![],
    }
}

fn waiting_approval(status: SessionStatus, stop_reason: &Option<StopReason>, tool_use_id: &str) -> Option<String> {
    if !waiting_ids(status, stop_reason).iter().any(|w| w == tool_use_id) {
        return None;
    }
    stop_reason.as_ref()?.wait()?.approvals.get(tool_use_id).cloned()
}

impl Usage {
    pub fn add(&mut self, o: Usage) {
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.model_spend_micro_usd += o.model_spend_micro_usd;
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub id: SessionId,
    pub environment_id: EnvironmentId,
    pub agent_id: AgentId,
    pub deployment_id: DeploymentId,
    pub deployment_revision: i64,
    pub principal_id: PrincipalId,
    pub status: SessionStatus,
    pub stop_reason: Option<StopReason>,
    pub title: String,
    pub metadata: Value,
    pub budget: Option<Budget>,
    pub usage: Usage,
    pub selection: Selection,
    pub pins: Pins,
    pub last_seq: i64,
    /// Seq of the newest `user.message`, so "input after X" needs no scan.
    pub last_user_message_seq: i64,
    /// The Session's newest Outcome, if it defined one (api.md §14).
    pub outcome: Option<outcome::Outcome>,
    /// Its child threads in spawn order (api.md §15); the primary is the
    /// Session itself.
    pub threads: Vec<SessionThread>,
    /// The ConnectionVaults it was created with (api.md §6, §17.10): shown,
    /// never consulted for credentials (calls use the pinned Connections).
    pub connection_vault_ids: Vec<String>,
    /// The screen every `agent.message` is held for (api.md §18.8), frozen
    /// at creation: an Automation's child carries its target's.
    pub delivery_screen: Option<checkfu_core::delivery_screen::DeliveryScreen>,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub version: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub id: RunId,
    pub session_id: SessionId,
    pub status: RunStatus,
    pub stop_reason: Option<StopReason>,
    pub execution_pins: ExecutionPins,
    pub usage: Usage,
    /// Seq of the input that started the Run.
    pub start_seq: i64,
    pub lease_id: String,
    pub generation: i64,
    pub lease_expires_ms: i64,
    pub runner_id: String,
    pub created_ms: i64,
    pub completed_ms: Option<i64>,
    /// W3C trace context of the request that admitted the Run.
    pub traceparent: String,
    /// Where it may execute: `""` on the managed plane, else a Runner
    /// pool's placement (`runner::placement`).
    pub placement: String,
    /// The child thread it runs, `None` for the primary.
    pub thread_id: Option<String>,
}

/// An event about to be appended; the store assigns `seq`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub id: EventId,
    pub event_type: String,
    pub run_id: Option<RunId>,
    pub thread_id: Option<String>,
    /// A cross-post's original event (api.md §15.2), else `None`.
    pub origin_event_id: Option<EventId>,
    pub authored_by: Value,
    pub caused_by: Value,
    pub payload: Value,
    pub created_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub id: EventId,
    pub session_id: SessionId,
    pub seq: i64,
    pub event_type: String,
    pub run_id: Option<RunId>,
    pub thread_id: Option<String>,
    /// A cross-post's original event (api.md §15.2), else `None`.
    pub origin_event_id: Option<EventId>,
    pub authored_by: Value,
    pub caused_by: Value,
    pub payload: Value,
    pub created_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_public_host_is_an_installation_setting_and_stands_alone() {
        let open = json!({"image": "debian:12", "network": {"allowed_hosts": ["*"]}});
        let e = SandboxSpec::compile(open.clone()).expect_err("off by default");
        assert_eq!((e.code, e.details["reason"].as_str()), (checkfu_core::Code::PermissionDenied, Some("environment_create_disabled")));
        assert_eq!(SandboxSpec::compile_with(open, true).expect("allowed").network.allowed_hosts, ["*"]);
        let mixed = json!({"image": "debian:12", "network": {"allowed_hosts": ["*", "example.com"]}});
        assert!(SandboxSpec::compile_with(mixed, true).is_err(), "* stands alone");
        let described = json!({"image": "debian:12", "description": "work", "metadata": {"k": "v"}});
        assert_eq!(SandboxSpec::compile(described).expect("valid").description.as_deref(), Some("work"));
    }
}
