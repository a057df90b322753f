//! What a `continue_selected` firing sent into an existing Session
//! (api.md §18.4): the input event and the Run it admitted, by which the
//! firing — or its step — settles.

use checkfu_proto::scheduler::v1 as pb;
use serde::{Deserialize, Serialize};

/// An accepted input, as a step and the trace show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInput {
    pub session_id: String,
    pub event_id: String,
    pub run_id: String,
}

impl SessionInput {
    pub fn to_spec(&self) -> pb::SessionInput {
        pb::SessionInput { session_id: self.session_id.clone(), event_id: self.event_id.clone(), run_id: self.run_id.clone() }
    }
}

/// An input as the scheduler keeps it: recorded under its key before it is
/// asked for (`accepted` empty), then accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRecord {
    /// [`Continuation::key`].
    pub key: String,
    pub firing_id: String,
    /// Empty for an Agent target's.
    pub step_id: String,
    pub session_id: String,
    /// The input event's place in the Session's log (0 until accepted):
    /// only an interrupt after it ends this input's Run.
    pub event_seq: i64,
    pub accepted: Option<SessionInput>,
}

/// A `continue_selected` input as it is recorded before it is asked for:
/// unique by `key`, appended as `event_id` — minted here, so asking again
/// (recovery, a replica) can only rejoin it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Continuation {
    /// `{firing}/{step}/{attempt}`; an Agent target's step is `-`.
    pub key: String,
    pub event_id: String,
}

impl Continuation {
    pub fn new(firing_id: &str, step_id: &str, attempt: i64) -> Continuation {
        let step = if step_id.is_empty() { "-" } else { step_id };
        Continuation { key: format!("{firing_id}/{step}/{attempt}"), event_id: checkfu_core::id::EventId::mint().to_string() }
    }
}
