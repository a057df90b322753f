//! Event types every crate names: the catalogue shared by the services
//! that write them, the gateway that documents them and the webhooks that
//! deliver them.

/// Event types a webhook endpoint may subscribe to (exactly, or by a glob
/// such as `session.status_*`). Only these are ever delivered: deliveries
/// are thin notices of state changes, never conversation content.
pub const SUBSCRIBABLE: &[&str] = &[
    "session.status_running",
    "session.status_idle",
    "session.status_rescheduled",
    "session.status_terminated",
    "run.created",
    "run.completed",
    "run.action_authorized",
    "action_approval.pending",
    "action_approval.resolved",
    "agent.created",
    "agent.updated",
    "agent.archived",
    "agent_deployment.created",
    "agent_deployment.updated",
    "environment.created",
    "environment.updated",
    "sandbox_profile.created",
    "sandbox_profile.updated",
];
