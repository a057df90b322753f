//! What governance reads on every request — the principal behind an API
//! key, and a principal's grants — kept in memory where this process is the
//! store's only writer (the embedded SQLite store: one process owns it).
//! Every write that could change an answer empties the cache once it has
//! committed, so a revoke still counts as soon as it is answered. On
//! PostgreSQL, where replicas share the rows, there is no cache.

use crate::model::Assignment;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Entries per map before it is emptied (a bound, not an eviction policy:
/// an installation has far fewer active keys and principals).
const MAX_ENTRIES: usize = 10_000;

#[derive(Debug, Default)]
pub(crate) struct ReadCache {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Moves on every invalidation: a read that began before a write must
    /// not put what it read back after the write emptied the cache.
    generation: u64,
    keys: HashMap<String, (String, String)>,
    reach: HashMap<String, Arc<Vec<Assignment>>>,
}

impl ReadCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    pub fn key(&self, secret_sha256: &str) -> Option<(String, String)> {
        self.lock().keys.get(secret_sha256).cloned()
    }

    /// Keeps a key's principal, read when the cache was at `generation`.
    pub fn put_key(&self, generation: u64, secret_sha256: &str, found: (String, String)) {
        let mut c = self.lock();
        if c.generation == generation {
            if c.keys.len() >= MAX_ENTRIES {
                c.keys.clear();
            }
            c.keys.insert(secret_sha256.to_string(), found);
        }
    }

    pub fn reach(&self, principal_id: &str) -> Option<Arc<Vec<Assignment>>> {
        self.lock().reach.get(principal_id).cloned()
    }

    /// Keeps a principal's grants, read when the cache was at `generation`.
    pub fn put_reach(&self, generation: u64, principal_id: &str, grants: Arc<Vec<Assignment>>) {
        let mut c = self.lock();
        if c.generation == generation {
            if c.reach.len() >= MAX_ENTRIES {
                c.reach.clear();
            }
            c.reach.insert(principal_id.to_string(), grants);
        }
    }

    /// After a write that may change an answer.
    pub fn invalidate(&self) {
        let mut c = self.lock();
        c.generation += 1;
        c.keys.clear();
        c.reach.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_from_before_a_write_is_not_kept() {
        let c = ReadCache::default();
        let before = c.generation();
        c.invalidate();
        c.put_key(before, "h", ("prin_1".into(), "key_1".into()));
        assert!(c.key("h").is_none(), "stale: read before the write");
        c.put_key(c.generation(), "h", ("prin_1".into(), "key_1".into()));
        assert!(c.key("h").is_some());
        c.invalidate();
        assert!(c.key("h").is_none());
    }
}
