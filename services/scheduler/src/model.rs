//! Automations and their firings (api.md §12.2, §12.5): domain types, and
//! the checks that turn the typed wire forms (their shape read by
//! `checkfu_proto::automation_spec`) into them once.

pub use checkfu_core::delivery_screen::DeliveryScreen;
use checkfu_core::id::{AutomationId, DeploymentId, EnvironmentId, FilteredDeliveryId, PrincipalId, SessionId};
use checkfu_core::{Error, Result, string_enum};
use checkfu_proto::automation_spec::invalid_target;
use checkfu_proto::scheduler::v1 as pb;
use checkfu_proto::sessions::v1 as ss;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use crate::triggers::{Trigger, Webhook};

/// A rendered prompt (and a saved one) is at most this long.
pub const MAX_PROMPT_BYTES: usize = 65_536;
pub const MAX_METADATA_BYTES: usize = 16 * 1024;
pub const MAX_NAME_CHARS: usize = 200;
/// A firing's `event` is at most this large (a signed ingest body's bound).
pub const MAX_EVENT_BYTES: usize = 1024 * 1024;

string_enum!(AutomationStatus { Active = "active", Paused = "paused" });
string_enum!(FiringState { Running = "running", Succeeded = "succeeded", Failed = "failed", Skipped = "skipped" });
string_enum!(FiringSource { Manual = "manual", Schedule = "schedule", Webhook = "webhook", Subscription = "subscription" });

/// Why an Automation is paused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseReason {
    /// `manual`, `readiness_blocked` or `occurrence_failed`.
    pub code: String,
    pub note: Option<String>,
}

/// A child Session's own Budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildBudget {
    pub limit: i64,
    #[serde(default = "default_metric")]
    pub metric: String,
}

fn default_metric() -> String {
    "model_spend".into()
}

/// An Agent target: children of one deployment at a pinned revision.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTarget {
    pub agent_deployment_id: String,
    /// Pinned when the target is saved (its deployment's revision then).
    pub deployment_revision: Option<i64>,
    pub prompt: String,
    pub budget: Option<ChildBudget>,
    pub session_target: SessionTarget,
    /// `input.delivery_screen`: frozen into each child (§18.8).
    pub delivery_screen: Option<DeliveryScreen>,
}

/// Which Session a firing's prompt goes to: a new child, or (saved, not
/// yet executable) a selected one.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionTarget {
    pub continue_selected: bool,
    /// The Session a `continue_selected` target names.
    pub session: Option<String>,
}

impl AgentTarget {
    /// A target as written (or stored): `{kind:"agent", ...}`; a steps
    /// target is written by graph apply only.
    pub fn parse(v: &Value) -> Result<AgentTarget> {
        AgentTarget::from_spec(pb::AgentTarget::from_json(v)?)
    }

    /// A target whose shape was read: checks its rules.
    pub fn from_spec(t: pb::AgentTarget) -> Result<AgentTarget> {
        DeploymentId::check("target.agent_deployment_id", &t.agent_deployment_id)?;
        if t.deployment_revision.is_some_and(|r| r < 1) {
            return Err(invalid_target("target.deployment_revision is 1 or more"));
        }
        if t.prompt.len() > MAX_PROMPT_BYTES {
            return Err(invalid_target("target.prompt is at most 64 KiB"));
        }
        if let Some(b) = &t.budget {
            if b.limit < 1 {
                return Err(invalid_target("target.budget.limit is a positive integer"));
            }
            if b.metric != "model_spend" && b.metric != "model_tokens" {
                return Err(invalid_target("target.budget.metric is model_spend or model_tokens"));
            }
        }
        let delivery_screen = t.input.and_then(|i| i.delivery_screen).map(|d| d.to_domain("target.input.delivery_screen")).transpose()?;
        let session_target = match t.session_target {
            None => SessionTarget { continue_selected: false, session: None },
            // A Session made elsewhere keeps how it delivers (§18.8).
            Some(s) if s.mode == "continue_selected" && delivery_screen.is_some() => {
                return Err(Error::invalid_field(
                    "target.input.delivery_screen",
                    "a continue_selected session_target takes no delivery_screen: the Session was created without one",
                )
                .with_reason("session_target_conflict"));
            }
            Some(s) if s.mode == "start_new" => SessionTarget { continue_selected: false, session: s.session },
            // The selected Session keeps its own Budget (api.md §18.4).
            Some(s) if s.mode == "continue_selected" && t.budget.is_some() => {
                return Err(Error::invalid_field(
                    "target.budget",
                    "a continue_selected session_target takes no budget: the Session keeps its own",
                )
                .with_reason("session_target_conflict"));
            }
            Some(s) if s.mode == "continue_selected" => {
                let session = s.session.ok_or_else(|| invalid_target("a continue_selected session_target names its session"))?;
                SessionId::check("target.session_target.session", &session)?;
                SessionTarget { continue_selected: true, session: Some(session) }
            }
            Some(_) => return Err(invalid_target("target.session_target.mode is start_new or continue_selected")),
        };
        Ok(AgentTarget {
            agent_deployment_id: t.agent_deployment_id,
            deployment_revision: t.deployment_revision,
            prompt: t.prompt,
            budget: t.budget.map(|b| ChildBudget { limit: b.limit, metric: b.metric }),
            session_target,
            delivery_screen,
        })
    }

    pub fn to_spec(&self) -> pb::AgentTarget {
        let mode = if self.session_target.continue_selected { "continue_selected" } else { "start_new" };
        pb::AgentTarget {
            agent_deployment_id: self.agent_deployment_id.clone(),
            deployment_revision: self.deployment_revision,
            prompt: self.prompt.clone(),
            budget: self.budget.as_ref().map(|b| pb::ChildBudget { limit: b.limit, metric: b.metric.clone() }),
            session_target: Some(pb::SessionTarget { mode: mode.into(), session: self.session_target.session.clone() }),
            input: self.delivery_screen.as_ref().map(|d| pb::TargetInput { delivery_screen: Some(ss::DeliveryScreen::of(d)) }),
        }
    }

    /// The Session a `continue_selected` target continues.
    pub fn continued_session(&self) -> Option<&str> {
        self.session_target.session.as_deref().filter(|_| self.session_target.continue_selected)
    }
}

/// A graph's `deliveryScreen` (camelCase: `modelRoutingProfileId`, `tier`,
/// `instructions`, `onFailure`) read as the API's screen and checked as it
/// is; stored step nodes keep the graph's spelling.
pub fn graph_screen(v: &Value) -> std::result::Result<DeliveryScreen, String> {
    let o = v.as_object().ok_or("deliveryScreen is an object")?;
    let mut snake = serde_json::Map::new();
    for (k, v) in o {
        let key = match k.as_str() {
            "modelRoutingProfileId" => "model_routing_profile_id",
            "tier" => "tier",
            "instructions" => "instructions",
            "onFailure" => "on_failure",
            other => return Err(format!("deliveryScreen has no field {other:?}")),
        };
        if !v.is_null() {
            snake.insert(key.into(), v.clone());
        }
    }
    let screen: DeliveryScreen = serde_json::from_value(Value::Object(snake)).map_err(|e| format!("deliveryScreen: {e}"))?;
    screen.check("deliveryScreen").map_err(|e| e.message)?;
    Ok(screen)
}

pub fn check_name(name: &str) -> Result<()> {
    let n = name.chars().count();
    if n == 0 || n > MAX_NAME_CHARS || name.chars().any(char::is_control) || name.trim().is_empty() {
        return Err(Error::invalid_field("name", "a name is 1 to 200 printable characters"));
    }
    Ok(())
}

pub fn check_metadata(v: &Value) -> Result<Value> {
    if v.is_null() {
        return Ok(json!({}));
    }
    if !v.is_object() || v.to_string().len() > MAX_METADATA_BYTES {
        return Err(Error::invalid_field("metadata", "metadata is an object of at most 16 KiB"));
    }
    Ok(v.clone())
}

/// A steps target: a compiled AutomationGraph program (api.md §12.7),
/// written only by graph apply. `steps` are the graph's non-trigger nodes
/// with their pins; `edges` all of its edges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepsTarget {
    pub program_sha256: String,
    pub steps: Vec<Value>,
    pub edges: Vec<Value>,
}

/// Step kinds this build runs (the rest keep readiness `unknown`).
pub const RUNS: &[&str] = &[
    "trigger",
    "step_agent",
    "step_parse_json",
    "decision",
    "step_wait",
    "step_approval",
    "step_check",
    "step_join",
    "step_connection",
    "step_memory_read",
    "step_memory_write",
    "step_select_history",
    "step_record_history",
    "step_skill_proposal",
    "step_observe_skill_proposal",
    "outcome",
];

impl StepsTarget {
    /// The routing profiles its Checks call, each once, sorted.
    pub fn check_profiles(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .steps
            .iter()
            .filter_map(|n| match n["kind"].as_str() {
                Some("step_check") => n["check"]["modelRoutingProfileId"].as_str(),
                Some("decision") if n["condition"]["kind"] == "check" => n["condition"]["check"]["modelRoutingProfileId"].as_str(),
                _ => None,
            })
            .map(String::from)
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Each routing profile a `step_agent`'s delivery screen calls, once.
    pub fn screen_profiles(&self) -> Vec<String> {
        let mut ids: Vec<String> =
            self.steps.iter().filter_map(|n| n["deliveryScreen"]["modelRoutingProfileId"].as_str()).map(String::from).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// Each `step_connection`'s pinned `(tool_source_id, connection_id,
    /// tool)`.
    pub fn connection_tools(&self) -> Vec<(String, String, String)> {
        let text = |n: &Value, k: &str| n[k].as_str().unwrap_or_default().to_string();
        self.steps
            .iter()
            .filter(|n| n["kind"] == "step_connection")
            .map(|n| (text(n, "toolSourceId"), text(n, "connectionId"), text(n, "tool")))
            .collect()
    }

    /// Each store a Memory step names, once, with whether any step writes
    /// it.
    pub fn memory_stores(&self) -> Vec<(String, bool)> {
        let mut stores: std::collections::BTreeMap<String, bool> = Default::default();
        for n in self.steps.iter().filter(|n| matches!(n["kind"].as_str(), Some("step_memory_read" | "step_memory_write"))) {
            *stores.entry(n["memoryStore"].as_str().unwrap_or_default().to_string()).or_default() |= n["kind"] == "step_memory_write";
        }
        stores.into_iter().collect()
    }

    /// Whether a program uses something this build cannot run yet.
    pub fn not_executable(&self) -> Option<String> {
        let mut later: Vec<String> =
            self.steps.iter().filter_map(|n| n["kind"].as_str()).filter(|k| !RUNS.contains(k)).map(String::from).collect();
        later.sort();
        later.dedup();
        (!later.is_empty()).then(|| {
            format!(
                "{} {} saved and planned but not executable on this installation yet",
                later.join(", "),
                if later.len() == 1 { "is" } else { "are" }
            )
        })
    }
}

/// Where a history frontier stands (api.md §18.7): the last Session a
/// graph recorded as processed, and the firing that moved it there.
#[derive(Debug, Clone, PartialEq)]
pub struct Frontier {
    pub name: String,
    pub position: String,
    pub firing_id: String,
}

/// What moving a frontier did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    Moved,
    /// This firing moved it there already.
    Already,
    /// It is no longer where the selection saw it.
    Since,
}

/// What a firing runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Agent(AgentTarget),
    Steps(StepsTarget),
}

impl Target {
    /// Each routing profile an evaluation of the target calls, with its
    /// purpose: Checks `decision`, delivery screens `delivery_screen`.
    pub fn evaluator_profiles(&self) -> Vec<(String, &'static str)> {
        match self {
            Target::Agent(t) => t.delivery_screen.iter().map(|d| (d.model_routing_profile_id.clone(), "delivery_screen")).collect(),
            Target::Steps(t) => {
                let checks = t.check_profiles().into_iter().map(|p| (p, "decision"));
                checks.chain(t.screen_profiles().into_iter().map(|p| (p, "delivery_screen"))).collect()
            }
        }
    }

    /// A stored target (either kind).
    pub fn stored(v: &Value) -> Result<Target> {
        if v.get("kind").and_then(Value::as_str) == Some("steps") {
            let mut rest = v.as_object().cloned().unwrap_or_default();
            rest.remove("kind");
            return serde_json::from_value(Value::Object(rest))
                .map(Target::Steps)
                .map_err(|e| Error::internal(format!("a stored steps target is unreadable: {e}")));
        }
        AgentTarget::parse(v).map(Target::Agent)
    }

    /// The stored (and compared) form, as the API shows it.
    pub fn to_json(&self) -> Value {
        self.to_spec().to_json()
    }

    pub fn to_spec(&self) -> pb::Target {
        use pb::target::Kind;
        pb::Target {
            kind: Some(match self {
                Target::Agent(a) => Kind::Agent(a.to_spec()),
                Target::Steps(s) => Kind::Steps(pb::StepsTarget {
                    program_sha256: s.program_sha256.clone(),
                    steps_json: s.steps.iter().map(Value::to_string).collect(),
                    edges_json: s.edges.iter().map(Value::to_string).collect(),
                }),
            }),
        }
    }

    /// Every `(deployment, pinned revision)` a firing may start children
    /// of.
    pub fn deployments(&self) -> Vec<(String, Option<i64>)> {
        match self {
            Target::Agent(a) => vec![(a.agent_deployment_id.clone(), a.deployment_revision)],
            Target::Steps(s) => s
                .steps
                .iter()
                .filter(|n| n["kind"] == "step_agent")
                .map(|n| (n["agentDeploymentId"].as_str().unwrap_or_default().to_string(), n["deploymentRevision"].as_i64()))
                .collect(),
        }
    }

    /// Each `(Session, deployment)` a `continue_selected` target or step
    /// continues (§18.4).
    pub fn continued_sessions(&self) -> Vec<(String, String)> {
        match self {
            Target::Agent(a) => a.continued_session().map(|s| (s.to_string(), a.agent_deployment_id.clone())).into_iter().collect(),
            Target::Steps(s) => s
                .steps
                .iter()
                .filter(|n| n["kind"] == "step_agent" && n["sessionTarget"]["mode"] == "continue_selected")
                .map(|n| {
                    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
                    (text(&n["sessionTarget"]["session"]), text(&n["agentDeploymentId"]))
                })
                .collect(),
        }
    }

    /// Why a firing of it cannot run yet (§12.9), if it cannot.
    /// Why it can never run on this installation: a `step_managed_tool`
    /// (api.md §18.11; a plan blocks it, so only one stored before that
    /// says so here).
    pub fn refused(&self) -> Option<String> {
        match self {
            Target::Steps(s) if s.steps.iter().any(|n| n["kind"] == "step_managed_tool") => {
                Some("managed_tools is unavailable (dependency_missing): a step_managed_tool cannot run here".into())
            }
            _ => None,
        }
    }

    pub fn not_executable(&self) -> Option<String> {
        match self {
            Target::Agent(_) => None,
            Target::Steps(s) => s.not_executable(),
        }
    }

    pub fn agent(&self) -> Option<&AgentTarget> {
        match self {
            Target::Agent(a) => Some(a),
            Target::Steps(_) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Automation {
    pub id: AutomationId,
    pub environment_id: EnvironmentId,
    pub name: String,
    pub service_principal_id: PrincipalId,
    pub status: AutomationStatus,
    pub pause_reason: Option<PauseReason>,
    pub triggers: Vec<Trigger>,
    pub target: Target,
    pub managed_by: Value,
    pub metadata: Value,
    /// Sealed at rest; empty: none (only a webhook trigger needs one).
    pub ingest_secret: String,
    pub version: i64,
    pub deleted_ms: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
    /// The pending occurrence's nominal time (`next_at`), read from its
    /// timer; never written through the Automation.
    pub next_ms: Option<i64>,
}

impl Automation {
    /// The schedule or one-time trigger, if any (there is at most one).
    pub fn timed(&self) -> Option<&Trigger> {
        self.triggers.iter().find(|t| t.is_timed())
    }

    pub fn subscription(&self) -> Option<&crate::triggers::Subscription> {
        self.triggers.iter().find_map(|t| match t {
            Trigger::Subscription(s) => Some(s),
            _ => None,
        })
    }

    pub fn webhook(&self) -> Option<&Webhook> {
        self.triggers.iter().find_map(|t| match t {
            Trigger::Webhook(w) => Some(w),
            _ => None,
        })
    }

    /// `triggers` as read: each with `next_at` (the pending occurrence on
    /// the timed one, null elsewhere).
    pub fn trigger_specs(&self) -> Vec<pb::Trigger> {
        crate::triggers::to_specs(&self.triggers, Some(self.next_ms))
    }
}

/// One check of an Automation's readiness.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub name: &'static str,
    /// `pass`, `fail` or `unknown`.
    pub status: &'static str,
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
}

impl Check {
    pub fn pass(name: &'static str) -> Check {
        Check { name, status: "pass", reason: None, resource_id: None }
    }
    pub fn fail(name: &'static str, reason: impl Into<String>, resource_id: Option<String>) -> Check {
        Check { name, status: "fail", reason: Some(reason.into()), resource_id }
    }
    pub fn unknown(name: &'static str, reason: impl Into<String>) -> Check {
        Check { name, status: "unknown", reason: Some(reason.into()), resource_id: None }
    }
}

/// An Automation's readiness, evaluated now.
#[derive(Debug, Clone, PartialEq)]
pub struct Readiness {
    pub checks: Vec<Check>,
    pub checked_ms: i64,
}

impl Readiness {
    /// `unknown` blocks like `fail`.
    pub fn ready(&self) -> bool {
        self.checks.iter().all(|c| c.status == "pass")
    }

    /// Whether a firing or a step may be admitted now: every check but
    /// `evaluators` and `session_target` passes. A Check's evaluator is
    /// checked where it is called — an unqualified one is never called, and
    /// the node records `evaluator_unqualified` and takes its `error` arm,
    /// the path its author wrote for a judgment that cannot be had — so
    /// revoking a qualification does not silently drop the firings of
    /// Automations that route around it. A continued Session is checked
    /// where its input is appended, which refuses with its own reason
    /// (`session_terminated`, `session_input_denied`).
    pub fn admits(&self) -> bool {
        self.checks.iter().all(|c| c.status == "pass" || c.name == "evaluators" || c.name == "session_target")
    }

    /// Whether a Connection or Memory step may be sent now: as
    /// [`Readiness::admits`], but `connections` and `memory` are left to
    /// the governed path, which re-checks the permission and the resource
    /// and refuses with its own reason (`permission_denied`,
    /// `policy_denied`, `memory_store_archived`).
    pub fn admits_calls(&self) -> bool {
        self.checks.iter().all(|c| c.status == "pass" || matches!(c.name, "evaluators" | "connections" | "session_target" | "memory"))
    }

    /// `ready`, or `blocked` while a check fails or is unknown.
    pub fn state(&self) -> &'static str {
        if self.ready() { "ready" } else { "blocked" }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "state": self.state(),
            "checked_at": checkfu_core::time::rfc3339(self.checked_ms),
            "checks": self.checks,
        })
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub model_spend_micro_usd: i64,
}

/// What a child Session (or one Run) reports it used.
impl From<checkfu_proto::sessions::v1::Usage> for Usage {
    fn from(u: checkfu_proto::sessions::v1::Usage) -> Usage {
        Usage { input_tokens: u.input_tokens, output_tokens: u.output_tokens, model_spend_micro_usd: u.model_spend_micro_usd }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, u: Usage) {
        self.input_tokens += u.input_tokens;
        self.output_tokens += u.output_tokens;
        self.model_spend_micro_usd += u.model_spend_micro_usd;
    }
}

/// A webhook event the admission filter stopped (`afdl_`).
#[derive(Debug, Clone, PartialEq)]
pub struct FilteredDelivery {
    pub id: FilteredDeliveryId,
    pub automation_id: AutomationId,
    pub dedupe_value: String,
    pub body_sha256: String,
    pub predicate_index: i64,
    pub created_ms: i64,
}

/// A signed event's dedupe identity and what it became.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub automation_id: AutomationId,
    /// The dedupe value's compact JSON (`"e1"`, `7`): a string and a number
    /// with the same text are different identities.
    pub dedupe_key: String,
    pub body_sha256: String,
    /// The firing it admitted, or empty.
    pub firing_id: String,
    /// The filtered delivery it recorded, or empty.
    pub filtered_id: String,
    pub created_ms: i64,
}

/// A child Session recorded before it is asked for: its id (minted here,
/// so asking again cannot make a second one) and the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildRequest {
    pub session_id: String,
    pub step_id: String,
    pub agent_deployment_id: String,
    pub deployment_revision: Option<i64>,
    pub principal_id: String,
    pub title: String,
    pub metadata: Value,
    pub prompt: String,
    pub budget: Option<ChildBudget>,
    pub firing_id: String,
    /// A reviewed step's Outcome (§18.2): the child starts with
    /// `user.define_outcome` whose description is the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Value>,
    /// A `continue_selected` input (§18.4): `session_id` is then the
    /// existing Session it continues, and nothing is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation: Option<crate::session_input::Continuation>,
    /// The screen the child holds its messages for (§18.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_screen: Option<DeliveryScreen>,
}

/// A timer a scheduler replica holds: an Automation's occurrence, taken
/// when due.
#[derive(Debug, Clone, PartialEq)]
pub struct Timer {
    pub id: String,
    pub kind: String,
    pub automation_id: AutomationId,
    pub scheduled_for_ms: i64,
    /// The holder's lease on it (unique per claim).
    pub holder: String,
}

/// What a write does to an Automation's occurrence timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm {
    /// Leave it as it is.
    Keep,
    /// A pending occurrence at this nominal time: due then when `awake`,
    /// else kept dormant (a paused one-time occurrence).
    Set { at: i64, awake: bool },
    /// Keep the pending occurrence, dormant.
    Sleep,
    /// Make a dormant occurrence due at its nominal time.
    Wake,
    /// No pending occurrence.
    Clear,
}

/// A prompt rendered against an event (§12.6).
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub text: String,
    /// `event…` references the event does not hold (rendered empty).
    pub missing: Vec<String>,
}

/// Renders `{{event}}` and `{{event.a.0.b}}` in `prompt`: strings raw,
/// other values compact JSON, missing ones empty; a prompt that references
/// no `{{event…}}` gets the event's compact JSON appended. No size check.
pub fn render(prompt: &str, event: &Value) -> Rendered {
    render_vars(prompt, &[("event", event)], event)
}

/// [`render`] over several named values (`{{item.a}}`, `{{item_index}}`);
/// a prompt that references none of them gets `unreferenced`'s compact
/// JSON appended.
pub fn render_vars(prompt: &str, vars: &[(&str, &Value)], unreferenced: &Value) -> Rendered {
    let mut out = String::with_capacity(prompt.len());
    let mut missing = vec![];
    let mut referenced = false;
    let mut rest = prompt;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else { break };
        let expr = rest[start + 2..start + 2 + len].trim();
        let root = expr.split('.').next().unwrap_or_default();
        let Some((_, value)) = vars.iter().find(|(name, _)| *name == root) else {
            out.push_str(&rest[..start + 2 + len + 2]);
            rest = &rest[start + 2 + len + 2..];
            continue;
        };
        referenced = true;
        out.push_str(&rest[..start]);
        let mut v = Some(*value);
        for seg in expr[root.len()..].split('.').filter(|s| !s.is_empty()) {
            v = v.and_then(|x| match x {
                Value::Object(m) => m.get(seg),
                Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            });
        }
        match v {
            Some(Value::String(s)) => out.push_str(s),
            Some(other) => out.push_str(&other.to_string()),
            None => missing.push(expr.to_string()),
        }
        rest = &rest[start + 2 + len + 2..];
    }
    out.push_str(rest);
    if !referenced {
        out.push_str("\n\n");
        out.push_str(&unreferenced.to_string());
    }
    Rendered { text: out, missing }
}

pub fn too_large() -> Error {
    Error::invalid_field("prompt", "the rendered prompt is over 65,536 bytes").with_reason("rendered_prompt_too_large")
}

/// The first message a child gets (§12.6): `prompt` rendered against the
/// firing's `event`, or as written when there is none.
pub fn render_prompt(prompt: &str, event: &Value) -> Result<String> {
    let text = if event.is_null() { prompt.to_string() } else { render(prompt, event).text };
    if text.len() > MAX_PROMPT_BYTES {
        return Err(too_large());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_render_event_paths_raw_and_append_an_unreferenced_event() {
        let e = json!({"title": "Q", "a": [{"b": 1}], "o": {"x": true}});
        assert_eq!(render_prompt("Summarize {{event.title}}", &e).expect("ok"), "Summarize Q");
        assert_eq!(render_prompt("{{ event.a.0.b }}-{{event.o}}-{{event.nope}}.", &e).expect("ok"), "1-{\"x\":true}-.");
        assert_eq!(render_prompt("Go", &json!({"k": 1})).expect("ok"), "Go\n\n{\"k\":1}");
        assert_eq!(render_prompt("Go {{event.k}}", &Value::Null).expect("ok"), "Go {{event.k}}", "no event: the prompt as written");
        assert_eq!(render_prompt("{{other}} {{event}}", &json!("s")).expect("ok"), "{{other}} s");
        let big = json!({"t": "x".repeat(70_000)});
        assert_eq!(render_prompt("{{event.t}}", &big).expect_err("too large").details["reason"], "rendered_prompt_too_large");
    }

    #[test]
    fn targets_are_checked() {
        let t = AgentTarget::parse(&json!({"kind": "agent", "agent_deployment_id": "dep_01jx0000000000000000000001", "prompt": "p"}))
            .expect("target");
        assert_eq!(t.session_target, SessionTarget { continue_selected: false, session: None });
        assert_eq!(AgentTarget::from_spec(t.to_spec()).expect("round trip"), t, "the typed form round-trips");
        assert_eq!(Target::Agent(t).to_json()["session_target"], json!({"mode": "start_new"}));
        let e = AgentTarget::parse(&json!({"kind": "steps"})).expect_err("graph only");
        assert_eq!(e.details["reason"], "steps_require_graph");
        assert!(AgentTarget::parse(&json!({"kind": "agent", "agent_deployment_id": "x", "prompt": ""})).is_err());
        let cs = json!({"kind": "agent", "agent_deployment_id": "dep_01jx0000000000000000000001", "prompt": "p",
            "session_target": {"mode": "continue_selected", "session": "sess_01jx0000000000000000000001"}, "budget": {"limit": 1}});
        assert_eq!(AgentTarget::parse(&cs).expect_err("no budget").details["reason"], "session_target_conflict");
        let mut cs = cs;
        cs.as_object_mut().expect("object").remove("budget");
        let t = AgentTarget::parse(&cs).expect("saved");
        assert_eq!(t.continued_session(), Some("sess_01jx0000000000000000000001"));
        assert_eq!(
            Target::Agent(t).to_json()["session_target"],
            json!({"mode": "continue_selected", "session": "sess_01jx0000000000000000000001"})
        );
        let mut unnamed = cs.clone();
        unnamed["session_target"] = json!({"mode": "continue_selected"});
        assert!(AgentTarget::parse(&unnamed).is_err(), "a continued Session is named");
        let typed = pb::AgentTarget { deployment_revision: Some(0), ..AgentTarget::parse(&cs).expect("saved").to_spec() };
        assert!(AgentTarget::from_spec(typed).is_err(), "a typed caller is held to the same rules");
    }
}
