//! Transcripts by session. The log is append-only, so a cached transcript
//! is always a valid prefix: a Run starts from it and reads only what came
//! after. Losing the cache (or another runner taking the session) only costs
//! a full re-read; correctness never depends on it.

use crate::transcript::Transcript;
use checkfu_core::cache::Bounded;

pub struct TranscriptCache(Bounded<String, Transcript>);

impl TranscriptCache {
    pub fn new(capacity: usize) -> Self {
        TranscriptCache(Bounded::new(capacity))
    }

    /// Takes the session's transcript out (a Run owns it while it runs).
    pub fn take(&self, session_id: &str) -> Transcript {
        let mut t = self.0.remove(&session_id.to_string()).unwrap_or_default();
        t.interrupted = false;
        t
    }

    /// Returns a transcript after a Run.
    pub fn put(&self, session_id: &str, t: Transcript) {
        self.0.insert(session_id.to_string(), t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taking_resets_interrupts_and_leaves_nothing_behind() {
        let c = TranscriptCache::new(2);
        let mut t = Transcript::default();
        (t.cursor, t.interrupted) = (7, true);
        c.put("b", t);
        let b = c.take("b");
        assert_eq!((b.cursor, b.interrupted), (7, false));
        assert_eq!(c.take("b").cursor, 0, "taken out while a Run owns it");
    }
}
