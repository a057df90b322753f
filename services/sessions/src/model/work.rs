//! Work items (api.md §17.13): an external_tools Session's claim on a
//! worker. The item is the lease; the Session's log stays the truth, so a
//! new holder reconciles from it.

use checkfu_core::id::{EnvironmentId, SandboxProfileId, SessionId, WorkId};
use checkfu_core::{Error, Result, string_enum};
use std::collections::BTreeMap;

string_enum!(WorkState { Queued = "queued", Starting = "starting", Active = "active", Stopping = "stopping", Stopped = "stopped" });

/// How long a delivered but unacknowledged item stays with its worker
/// before another poll may take it, unless the poll says otherwise.
pub const DEFAULT_RECLAIM_MS: i64 = 5_000;
pub const DEFAULT_TTL_SECONDS: i64 = 90;
pub const MIN_TTL_SECONDS: i64 = 10;
pub const MAX_TTL_SECONDS: i64 = 300;
/// `expected_last_heartbeat` before the first heartbeat.
pub const NO_HEARTBEAT: &str = "NO_HEARTBEAT";
/// A work token's prefix.
pub const WORK_TOKEN_PREFIX: &str = checkfu_core::WORK_TOKEN_PREFIX;

#[derive(Debug, Clone, PartialEq)]
pub struct Work {
    pub id: WorkId,
    pub profile_id: SandboxProfileId,
    pub environment_id: EnvironmentId,
    pub session_id: SessionId,
    pub state: WorkState,
    /// Bumped by every write (the store's compare-and-set).
    pub rev: i64,
    /// Bumped by every delivery: the fencing generation of its token.
    pub generation: i64,
    /// The Runner the current delivery went to.
    pub runner_id: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub created_ms: i64,
    pub delivered_ms: Option<i64>,
    pub acked_ms: Option<i64>,
    pub started_ms: Option<i64>,
    pub heartbeat_ms: Option<i64>,
    pub ttl_seconds: i64,
    pub lease_expires_ms: Option<i64>,
    pub stop_requested_ms: Option<i64>,
    pub stopped_ms: Option<i64>,
}

impl Work {
    pub fn new(profile_id: SandboxProfileId, environment_id: EnvironmentId, session_id: SessionId, now_ms: i64) -> Work {
        Work {
            id: WorkId::mint(),
            profile_id,
            environment_id,
            session_id,
            state: WorkState::Queued,
            rev: 0,
            generation: 0,
            runner_id: None,
            metadata: BTreeMap::new(),
            created_ms: now_ms,
            delivered_ms: None,
            acked_ms: None,
            started_ms: None,
            heartbeat_ms: None,
            ttl_seconds: DEFAULT_TTL_SECONDS,
            lease_expires_ms: None,
            stop_requested_ms: None,
            stopped_ms: None,
        }
    }

    /// Held by a worker whose lease has lapsed: it goes back in the queue.
    pub fn lease_lapsed(&self, now_ms: i64) -> bool {
        matches!(self.state, WorkState::Starting | WorkState::Active | WorkState::Stopping)
            && self.lease_expires_ms.is_some_and(|t| t < now_ms)
    }

    /// Whether the delivery `generation` still holds the item: not once
    /// it was delivered again, nor once its lease lapsed and the item went
    /// back in the queue (it has no holder until the next delivery).
    pub fn held_by(&self, generation: i64) -> bool {
        generation == self.generation && self.runner_id.is_some()
    }

    /// Back in the queue for the next delivery (a lapsed lease).
    pub fn requeue(&mut self) {
        self.state = WorkState::Queued;
        self.runner_id = None;
        self.delivered_ms = None;
        self.acked_ms = None;
        self.started_ms = None;
        self.heartbeat_ms = None;
        self.lease_expires_ms = None;
    }

    pub fn stop(&mut self, now_ms: i64) {
        self.state = WorkState::Stopped;
        self.stopped_ms = Some(now_ms);
        self.lease_expires_ms = None;
    }
}

/// A heartbeat's TTL: 10 to 300 s, 90 when not asked.
pub fn check_ttl(desired: Option<i64>) -> Result<i64> {
    let ttl = desired.unwrap_or(DEFAULT_TTL_SECONDS);
    if !(MIN_TTL_SECONDS..=MAX_TTL_SECONDS).contains(&ttl) {
        return Err(Error::invalid_field(
            "desired_ttl_seconds",
            format!("desired_ttl_seconds must be {MIN_TTL_SECONDS} to {MAX_TTL_SECONDS}"),
        ));
    }
    Ok(ttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_held_item_lapses() {
        let mut w = Work::new(SandboxProfileId::mint(), EnvironmentId::mint(), SessionId::mint(), 0);
        w.lease_expires_ms = Some(10);
        assert!(!w.lease_lapsed(20), "a queued item has no lease");
        w.state = WorkState::Active;
        assert!(w.lease_lapsed(20) && !w.lease_lapsed(5));
        w.requeue();
        assert_eq!((w.state, w.lease_expires_ms, w.heartbeat_ms), (WorkState::Queued, None, None));
        assert!(check_ttl(None).is_ok_and(|t| t == 90) && check_ttl(Some(9)).is_err() && check_ttl(Some(301)).is_err());
    }
}
