//! A row of the sessions service's tables read back as its domain type,
//! and a domain value written as a column: one place for every store file.

use crate::model::*;
use checkfu_core::id::TypedId;
use checkfu_core::{Error, Result};
use checkfu_store::db_err;
use checkfu_store::sqlx::{Row, any::AnyRow};
use serde::de::DeserializeOwned;

pub(super) fn s(r: &AnyRow, c: &str) -> Result<String> {
    r.try_get(c).map_err(db_err)
}
pub(super) fn id<T: TypedId>(r: &AnyRow, c: &str) -> Result<T> {
    s(r, c).map(T::stored)
}
pub(super) fn opt_id<T: TypedId>(r: &AnyRow, c: &str) -> Result<Option<T>> {
    let raw: Option<String> = r.try_get(c).map_err(db_err)?;
    Ok(raw.map(T::stored))
}
pub(super) fn i(r: &AnyRow, c: &str) -> Result<i64> {
    r.try_get(c).map_err(db_err)
}
pub(super) fn json<T: DeserializeOwned>(r: &AnyRow, c: &str) -> Result<T> {
    serde_json::from_str(&s(r, c)?).map_err(|e| Error::internal(format!("stored {c} unreadable: {e}")))
}
pub(super) fn opt_json<T: DeserializeOwned>(r: &AnyRow, c: &str) -> Result<Option<T>> {
    let raw: Option<String> = r.try_get(c).map_err(db_err)?;
    raw.map(|t| serde_json::from_str(&t).map_err(|e| Error::internal(format!("stored {c} unreadable: {e}")))).transpose()
}
pub(super) fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}
pub(super) fn agent(r: &AnyRow) -> Result<Agent> {
    Ok(Agent {
        id: id(r, "id")?,
        environment_id: id(r, "environment_id")?,
        name: s(r, "name")?,
        draft: json(r, "draft_json")?,
        latest_version: i(r, "latest_version")?,
        version: i(r, "version")?,
        archived: i(r, "archived")? != 0,
        created_ms: i(r, "created_ms")?,
        updated_ms: i(r, "updated_ms")?,
    })
}

pub(super) fn agent_version(r: &AnyRow) -> Result<AgentVersion> {
    Ok(AgentVersion {
        agent_id: id(r, "agent_id")?,
        environment_id: id(r, "environment_id")?,
        version: i(r, "version")?,
        release_sha256: s(r, "release_sha256")?,
        definition: json(r, "definition_json")?,
        published_by: s(r, "published_by")?,
        published_ms: i(r, "published_ms")?,
    })
}

pub(super) fn sandbox_profile(r: &AnyRow) -> Result<SandboxProfile> {
    Ok(SandboxProfile {
        id: id(r, "id")?,
        environment_id: id(r, "environment_id")?,
        name: s(r, "name")?,
        latest_revision: i(r, "latest_revision")?,
        created_ms: i(r, "created_ms")?,
        archived_ms: r.try_get("archived_ms").map_err(db_err)?,
    })
}

pub(super) fn sandbox_revision(r: &AnyRow) -> Result<SandboxRevision> {
    Ok(SandboxRevision {
        profile_id: id(r, "profile_id")?,
        revision: i(r, "revision")?,
        spec: json(r, "spec_json")?,
        created_ms: i(r, "created_ms")?,
    })
}

pub(super) fn deployment(r: &AnyRow) -> Result<Deployment> {
    Ok(Deployment {
        id: id(r, "id")?,
        environment_id: id(r, "environment_id")?,
        key: s(r, "key")?,
        agent_id: id(r, "agent_id")?,
        revision: i(r, "revision")?,
        pins: json(r, "pins_json")?,
        created_ms: i(r, "created_ms")?,
        updated_ms: i(r, "updated_ms")?,
    })
}

pub(super) fn outcome(r: &AnyRow) -> Result<crate::model::outcome::Outcome> {
    serde_json::from_str(&s(r, "outcome_json")?).map_err(|e| Error::internal(format!("stored outcome unreadable: {e}")))
}

pub(super) fn session(r: &AnyRow) -> Result<Session> {
    Ok(Session {
        id: id(r, "id")?,
        environment_id: id(r, "environment_id")?,
        agent_id: id(r, "agent_id")?,
        deployment_id: id(r, "deployment_id")?,
        deployment_revision: i(r, "deployment_revision")?,
        principal_id: id(r, "principal_id")?,
        status: SessionStatus::parse("status", &s(r, "status")?)?,
        stop_reason: opt_json(r, "stop_reason_json")?,
        title: s(r, "title")?,
        metadata: json(r, "metadata_json")?,
        budget: opt_json(r, "budget_json")?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| Error::internal(format!("stored budget unreadable: {e}")))?,
        usage: Usage {
            input_tokens: i(r, "input_tokens")?,
            output_tokens: i(r, "output_tokens")?,
            model_spend_micro_usd: i(r, "spend_micro_usd")?,
        },
        selection: json(r, "selection_json")?,
        pins: json(r, "pins_json")?,
        last_seq: i(r, "last_seq")?,
        last_user_message_seq: i(r, "last_user_message_seq")?,
        outcome: opt_json(r, "outcome_json")?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| Error::internal(format!("stored outcome unreadable: {e}")))?,
        threads: json(r, "threads_json")?,
        connection_vault_ids: json(r, "connection_vault_ids_json")?,
        delivery_screen: opt_json(r, "delivery_screen_json")?
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| Error::internal(format!("stored delivery screen unreadable: {e}")))?,
        created_ms: i(r, "created_ms")?,
        updated_ms: i(r, "updated_ms")?,
        version: i(r, "version")?,
    })
}

pub(super) fn event(r: &AnyRow) -> Result<Event> {
    Ok(Event {
        id: id(r, "id")?,
        session_id: id(r, "session_id")?,
        seq: i(r, "seq")?,
        event_type: s(r, "type")?,
        run_id: opt_id(r, "run_id")?,
        thread_id: r.try_get("thread_id").map_err(db_err)?,
        origin_event_id: opt_id(r, "origin_event_id")?,
        authored_by: json(r, "authored_by_json")?,
        caused_by: json(r, "caused_by_json")?,
        payload: json(r, "payload_json")?,
        created_ms: i(r, "created_ms")?,
    })
}

pub(super) fn run(r: &AnyRow) -> Result<Run> {
    Ok(Run {
        id: id(r, "id")?,
        session_id: id(r, "session_id")?,
        status: RunStatus::parse("status", &s(r, "status")?)?,
        stop_reason: opt_json(r, "stop_reason_json")?,
        execution_pins: json(r, "pins_json")?,
        usage: Usage {
            input_tokens: i(r, "input_tokens")?,
            output_tokens: i(r, "output_tokens")?,
            model_spend_micro_usd: i(r, "spend_micro_usd")?,
        },
        start_seq: i(r, "start_seq")?,
        lease_id: s(r, "lease_id")?,
        generation: i(r, "generation")?,
        lease_expires_ms: i(r, "lease_expires_ms")?,
        runner_id: s(r, "runner_id")?,
        created_ms: i(r, "created_ms")?,
        completed_ms: r.try_get("completed_ms").map_err(db_err)?,
        placement: s(r, "placement")?,
        traceparent: s(r, "traceparent")?,
        thread_id: Some(s(r, "thread_id")?).filter(|t| !t.is_empty()),
    })
}
