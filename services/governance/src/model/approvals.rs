//! ActionApprovals and StandingApprovals as data: what an approval froze,
//! where it stands, what was asked and answered (`crate::approvals` decides).

use checkfu_core::id::{AgentId, ApprovalId, EnvironmentId, PrincipalId, RunId, SessionId, StandingApprovalId};
use checkfu_core::string_enum;
use serde_json::{Value, json};

string_enum!(
    /// Where an ActionApproval stands.
    ApprovalStatus { Pending = "pending", Approved = "approved", Denied = "denied", Expired = "expired" }
);

/// How long an approval waits for a response unless configured otherwise.
pub const DEFAULT_APPROVAL_TTL_MS: i64 = 60 * 60 * 1000;
/// The longest a StandingApproval may last.
pub const MAX_STANDING_TTL_SECONDS: i64 = 30 * 24 * 60 * 60;
/// Arguments frozen into one approval are bounded like a request body.
pub const MAX_ARGUMENTS_BYTES: usize = 256 * 1024;

/// The context an approval decides, fixed when it was asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frozen {
    pub principal_id: String,
    pub agent_id: String,
    pub tool: String,
    pub connection_id: String,
    pub arguments: Value,
    pub arguments_sha256: String,
}

impl Frozen {
    pub fn to_json(&self) -> Value {
        json!({
            "principal_id": self.principal_id,
            "agent_id": self.agent_id,
            "tool": self.tool,
            "connection_id": self.connection_id,
            "arguments": self.arguments,
            "arguments_sha256": self.arguments_sha256,
        })
    }

    pub fn from_json(v: &Value) -> Frozen {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        Frozen {
            principal_id: s("principal_id"),
            agent_id: s("agent_id"),
            tool: s("tool"),
            connection_id: s("connection_id"),
            arguments: v.get("arguments").cloned().unwrap_or(Value::Null),
            arguments_sha256: s("arguments_sha256"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionApproval {
    pub id: ApprovalId,
    pub environment_id: EnvironmentId,
    pub status: ApprovalStatus,
    pub session_id: SessionId,
    pub run_id: RunId,
    pub tool_use_id: String,
    pub frozen: Frozen,
    /// One-time: cleared when the approval is decided or expires.
    pub response_token: String,
    pub expires_ms: i64,
    pub responder_principal_id: String,
    pub responded_ms: Option<i64>,
    /// `approve` or `deny` once decided (`deny` for an expired one).
    pub decision: String,
    pub standing_approval_id: String,
    /// The Session has recorded the outcome.
    pub settled: bool,
    pub created_ms: i64,
    /// What a denial given inside the Session tells the agent (at most 4 KiB).
    pub deny_message: String,
    /// An Automation's approval step: the firing and step it holds up
    /// (empty for a Session's tool call).
    pub automation_firing_id: String,
    pub step_id: String,
}

impl ActionApproval {
    /// Whether an Automation's approval step asked for it.
    pub fn for_step(&self) -> bool {
        !self.automation_firing_id.is_empty()
    }
}

/// What an Automation's approval step asks for.
#[derive(Debug, Clone)]
pub struct StepAsk {
    pub environment_id: String,
    pub automation_firing_id: String,
    pub step_id: String,
    /// The Automation's service Principal.
    pub principal_id: String,
    pub title: String,
    pub ttl_seconds: i64,
    /// A `step_connection`'s call to freeze (api.md §18.3); `None` for a
    /// `step_approval`.
    pub call: Option<StepCall>,
}

/// The call a `step_connection`'s approval freezes, and its attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct StepCall {
    pub tool: String,
    pub connection_id: String,
    pub arguments: serde_json::Value,
    pub attempt: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandingApproval {
    pub id: StandingApprovalId,
    pub environment_id: EnvironmentId,
    pub principal_id: PrincipalId,
    pub agent_id: AgentId,
    pub tool: String,
    pub connection_id: String,
    pub expires_ms: i64,
    pub created_from_approval_id: ApprovalId,
    pub created_by: String,
    pub revoked_ms: Option<i64>,
    pub created_ms: i64,
}

/// What the execution plane asks about.
#[derive(Debug, Clone, Default)]
pub struct ApprovalAsk {
    pub environment_id: String,
    pub session_id: String,
    pub run_id: String,
    pub tool_use_id: String,
    pub principal_id: String,
    pub agent_id: String,
    pub tool: String,
    pub connection_id: String,
    pub arguments: Value,
}

/// How an ask was answered.
#[derive(Debug, Clone)]
pub enum Asked {
    /// A StandingApproval covers the exact tuple: allowed without asking.
    Standing(String),
    Pending(Box<ActionApproval>),
}

/// One response to an approval.
#[derive(Debug, Clone, Default)]
pub struct Response {
    pub id: String,
    pub decision: String,
    pub response_token: String,
    pub standing_ttl_seconds: i64,
    pub responder_id: String,
    /// Given inside the Session (`user.tool_confirmation`): the caller is
    /// authenticated on the Session itself, so no token is needed.
    pub in_session: bool,
    /// Only with a denial given inside the Session.
    pub deny_message: String,
}
