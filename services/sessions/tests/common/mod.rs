//! What the sessions service's integration tests share.

use checkfu_core::testing::tid;
use checkfu_sessions::model::*;
use serde_json::json;

/// An idle Session of one Agent and deployment, with no events yet.
pub fn session(id: &str) -> Session {
    Session {
        id: tid(id),
        environment_id: tid("env_1"),
        agent_id: tid("agt_1"),
        deployment_id: tid("dep_1"),
        deployment_revision: 1,
        principal_id: tid("prin_1"),
        status: SessionStatus::Idle,
        stop_reason: None,
        title: String::new(),
        metadata: json!({}),
        budget: None,
        usage: Usage::default(),
        selection: Selection::default(),
        pins: Pins {
            agent_version: 1,
            release_sha256: "r".into(),
            harness: BUILTIN_HARNESS.into(),
            model_routing_profile_id: tid("mrp_01jx0000000000000000000001"),
            sandbox_profile_id: tid("sbp_01jx0000000000000000000001"),
            sandbox_profile_revision: 1,
            execution: Execution::Managed,
        },
        last_seq: 0,
        last_user_message_seq: 0,
        outcome: None,
        threads: vec![],
        connection_vault_ids: vec![],
        delivery_screen: None,
        created_ms: 1,
        updated_ms: 1,
        version: 1,
    }
}

/// A principal's event of type `t` with an empty payload, about to be
/// appended.
pub fn event(t: &str) -> NewEvent {
    NewEvent {
        id: checkfu_core::id::EventId::mint(),
        event_type: t.into(),
        run_id: None,
        thread_id: None,
        origin_event_id: None,
        authored_by: json!(null),
        caused_by: json!({"kind": "principal", "id": "prin_1"}),
        payload: json!({}),
        created_ms: 1,
    }
}
