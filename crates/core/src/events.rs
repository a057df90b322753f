//! Event types every crate names: the catalogue shared by the services
//! that write them, the runner that reads them, the gateway that documents
//! them, the webhooks that deliver them and the CLI that prints them.
//! Adding an event type is a variant here (and a row in docs/api.md).

crate::string_enum!(
    /// Every event type a Session's log holds.
    EventType {
        UserMessage = "user.message",
        UserInterrupt = "user.interrupt",
        UserToolConfirmation = "user.tool_confirmation",
        UserCustomToolResult = "user.custom_tool_result",
        UserDefineOutcome = "user.define_outcome",
        // A sandbox tool's result from the holder of the Session's work
        // item (api.md §17.13); never accepted from other clients.
        UserToolResult = "user.tool_result",
        AgentMessage = "agent.message",
        // A delivery screen's verdict on an agent.message (api.md §18.8),
        // written before the message, or instead of it when withheld.
        MessageScreened = "message.screened",
        AgentThinking = "agent.thinking",
        AgentToolUse = "agent.tool_use",
        AgentToolResult = "agent.tool_result",
        AgentCustomToolUse = "agent.custom_tool_use",
        SpanModelRequestStart = "span.model_request_start",
        SpanModelRequestEnd = "span.model_request_end",
        SessionCreated = "session.created",
        SessionUpdated = "session.updated",
        SessionUsage = "session.usage",
        SessionError = "session.error",
        SessionStatusRunning = "session.status_running",
        SessionStatusIdle = "session.status_idle",
        SessionStatusRescheduled = "session.status_rescheduled",
        SessionStatusTerminated = "session.status_terminated",
        RunCreated = "run.created",
        RunCompleted = "run.completed",
        RunActionAuthorized = "run.action_authorized",
        ActionApprovalPending = "action_approval.pending",
        ActionApprovalResolved = "action_approval.resolved",
        PolicyDenied = "policy.denied",
        EgressDenied = "egress.denied",
        MemoryAccessed = "memory.accessed",
        MemoryProposalCreated = "memory.proposal_created",
        MemoryWritebackRefused = "memory.writeback_refused",
        OutcomeEvaluationStarted = "outcome.evaluation_started",
        OutcomeEvaluationCompleted = "outcome.evaluation_completed",
        SessionThreadCreated = "session.thread_created",
        SessionThreadStatusRunning = "session.thread_status_running",
        SessionThreadStatusIdle = "session.thread_status_idle",
        SessionThreadStatusRescheduled = "session.thread_status_rescheduled",
        SessionThreadStatusTerminated = "session.thread_status_terminated",
        AgentThreadMessageSent = "agent.thread_message_sent",
        AgentThreadMessageReceived = "agent.thread_message_received",
    }
);

impl EventType {
    /// What the public API accepts from clients.
    pub const USER: &'static [EventType] = &[
        EventType::UserMessage,
        EventType::UserInterrupt,
        EventType::UserToolConfirmation,
        EventType::UserCustomToolResult,
        EventType::UserDefineOutcome,
    ];

    /// The only input a Session waiting on action accepts.
    pub const SETTLE: &'static [EventType] = &[EventType::UserToolConfirmation, EventType::UserCustomToolResult, EventType::UserInterrupt];

    /// What an execution plane may append for its Run; lifecycle events
    /// (`session.status_*`, `run.created`/`run.completed`) are written only
    /// by the sessions service.
    pub const RUNNER: &'static [EventType] = &[
        EventType::SpanModelRequestStart,
        EventType::SpanModelRequestEnd,
        EventType::AgentMessage,
        EventType::AgentThinking,
        EventType::AgentToolUse,
        EventType::AgentToolResult,
        EventType::AgentCustomToolUse,
        EventType::RunActionAuthorized,
        EventType::ActionApprovalPending,
        EventType::PolicyDenied,
        EventType::EgressDenied,
        EventType::SessionError,
    ];

    /// Types streamed as previews (deltas) while they are produced; a
    /// client asks for them with `event_deltas`.
    pub const PREVIEWED: &'static [&'static str] = &[EventType::AgentMessage.as_str(), EventType::AgentThinking.as_str()];

    /// Written by the agent (its author is the Agent, not the system).
    pub fn by_agent(self) -> bool {
        self.as_str().starts_with("agent.")
    }
}

/// The text of an event payload's content blocks (`payload[field]`), the
/// text blocks joined by newlines; other blocks are skipped.
pub fn text_of(payload: &serde_json::Value, field: &str) -> String {
    let blocks = payload.get(field).and_then(serde_json::Value::as_array).map(Vec::as_slice).unwrap_or_default();
    blocks.iter().filter_map(|b| b.get("text").and_then(serde_json::Value::as_str)).collect::<Vec<_>>().join("\n")
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    "connection.created",
    "connection.revoked",
    "connection.refresh_failed",
    "vault_credential.refresh_failed",
    "automation.created",
    "automation.paused",
    "automation.resumed",
    "automation.deleted",
    "skill_proposal.created",
    "skill_proposal.adopted",
    "skill_proposal.rejected",
    "provider_webhook_registration.activated",
    "provider_webhook_registration.degraded",
    "provider_webhook_registration.revoked",
    "memory_store.created",
    "memory_store.archived",
    "memory_store.deleted",
    "outcome.evaluation_started",
    "outcome.evaluation_completed",
    "session.thread_created",
    "session.thread_idled",
    "session.thread_terminated",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_and_the_subsets_hold_catalogued_types() {
        for t in EventType::ALL {
            assert_eq!(EventType::parse("type", t.as_str()).ok(), Some(*t));
        }
        assert!(EventType::SETTLE.iter().all(|t| EventType::USER.contains(t)), "settles are user input");
        assert!(EventType::RUNNER.iter().all(|t| !EventType::USER.contains(t)), "a runner never writes user input");
        assert!(EventType::parse("type", "agent.nope").is_err());
    }
}
