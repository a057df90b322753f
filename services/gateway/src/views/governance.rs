//! ActionPolicies, audit, approvals and Budgets.

use super::common::{doc, opt};
use super::identity::{Ref, rref};
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::sessions::v1 as ss;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

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
    /// `null` for an Automation's steps, which act with no agent.
    pub agent_id: Option<String>,
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
            agent_id: opt(&f.agent_id),
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
