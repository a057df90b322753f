//! A bounded cache of transcripts by session. The log is append-only, so a
//! cached transcript is always a valid prefix: a Run starts from it and reads
//! only what came after. Losing the cache (or another runner taking the
//! session) only costs a full re-read; correctness never depends on it.

use crate::transcript::Transcript;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

pub struct TranscriptCache {
    capacity: usize,
    inner: Mutex<(HashMap<String, Transcript>, VecDeque<String>)>,
}

impl TranscriptCache {
    pub fn new(capacity: usize) -> Self {
        TranscriptCache { capacity: capacity.max(1), inner: Mutex::new((HashMap::new(), VecDeque::new())) }
    }

    /// Takes the session's transcript out (a Run owns it while it runs).
    pub fn take(&self, session_id: &str) -> Transcript {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut t = g.0.remove(session_id).unwrap_or_default();
        t.interrupted = false;
        t
    }

    /// Returns a transcript after a Run, evicting the oldest beyond capacity.
    pub fn put(&self, session_id: &str, t: Transcript) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *g;
        if map.insert(session_id.to_string(), t).is_none() {
            order.push_back(session_id.to_string());
        }
        while map.len() > self.capacity {
            match order.pop_front() {
                Some(old) => {
                    map.remove(&old);
                }
                None => break,
            }
        }
        order.retain(|k| map.contains_key(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_at_most_capacity_and_resets_interrupts() {
        let c = TranscriptCache::new(2);
        for s in ["a", "b", "c"] {
            c.put(s, Transcript { cursor: 7, interrupted: true, ..Default::default() });
        }
        assert_eq!(c.take("a").cursor, 0, "the oldest was evicted");
        let b = c.take("b");
        assert_eq!((b.cursor, b.interrupted), (7, false));
        assert_eq!(c.take("b").cursor, 0, "taken out while a Run owns it");
    }
}
