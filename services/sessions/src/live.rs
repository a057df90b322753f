//! Live fan-out of a Session's committed events and ephemeral previews to
//! subscribers in this process. Subscribers never rely on it for
//! completeness: they replay from the store and use the hub only to learn
//! sooner, filling any gap (or lag) from the store again.

use crate::model::Event;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::broadcast;

/// An ephemeral preview of an event being produced; never persisted.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta {
    /// `event_start` or `event_delta`.
    pub kind: &'static str,
    pub event_type: String,
    pub preview_id: String,
    pub text: String,
    pub run_id: String,
}

#[derive(Debug, Clone)]
pub enum Item {
    Event(Event),
    Delta(Delta),
}

const CHANNEL_CAPACITY: usize = 1024;

#[derive(Default)]
pub struct Hub {
    channels: Mutex<HashMap<String, broadcast::Sender<Item>>>,
}

impl Hub {
    pub fn subscribe(&self, session_id: &str) -> broadcast::Receiver<Item> {
        let mut map = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(session_id.to_string()).or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0).subscribe()
    }

    pub fn publish(&self, session_id: &str, item: Item) {
        let mut map = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = map.get(session_id) {
            if tx.receiver_count() == 0 {
                map.remove(session_id);
            } else {
                let _ = tx.send(item);
            }
        }
    }
}
