//! A memo of each Session view's mapped log. CMA names a call by the event
//! that made it, so showing any page means reading the log from its start
//! (api.md §17.8). The log is append-only, so a view's mapping, once made,
//! only grows: the memo keeps the [`Mapper`] and the CMA events it produced
//! up to a seq, and the next read maps only what came after.
//!
//! It holds nothing a caller could not read: a page is served only after
//! the native API let the caller read the Session, and every caller who may
//! read a Session reads the same log. Bounded in events across all entries;
//! the least recently used go first.

use super::mapping::Mapper;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

/// CMA events kept across every entry.
const MAX_EVENTS: usize = 100_000;

/// One view's mapping so far.
#[derive(Default)]
pub struct Entry {
    pub mapper: Mapper,
    /// The last native seq mapped.
    pub last_seq: i64,
    /// The CMA events, with their native seqs, in order.
    pub mapped: Vec<(i64, Value)>,
    used: u64,
}

#[derive(Default)]
pub struct LogCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    tick: u64,
    events: usize,
}

impl LogCache {
    /// The entry for `key`, taken out while a request extends it (a
    /// concurrent request for the same view starts its own).
    pub fn take(&self, key: &str) -> Option<Entry> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let e = g.entries.remove(key)?;
        g.events -= e.mapped.len();
        Some(e)
    }

    /// Keeps `entry` for `key`, evicting the least recently used entries
    /// beyond the bound (an entry larger than the bound is not kept).
    pub fn put(&self, key: String, mut entry: Entry) {
        if entry.mapped.len() > MAX_EVENTS {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.tick += 1;
        entry.used = g.tick;
        g.events += entry.mapped.len();
        if let Some(old) = g.entries.insert(key, entry) {
            g.events -= old.mapped.len();
        }
        while g.events > MAX_EVENTS {
            let Some(oldest) = g.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) else { break };
            if let Some(e) = g.entries.remove(&oldest) {
                g.events -= e.mapped.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: usize) -> Entry {
        Entry { mapped: (0..n).map(|i| (i as i64 + 1, Value::Null)).collect(), last_seq: n as i64, ..Default::default() }
    }

    #[test]
    fn entries_come_back_and_the_least_recent_go_first() {
        let c = LogCache::default();
        c.put("a".into(), entry(60_000));
        c.put("b".into(), entry(30_000));
        assert_eq!(c.take("a").map(|e| e.last_seq), Some(60_000));
        assert!(c.take("a").is_none(), "taken out while in use");
        c.put("a".into(), entry(60_000));
        c.put("c".into(), entry(30_000));
        assert!(c.take("b").is_none(), "b was the least recently used");
        assert!(c.take("a").is_some() && c.take("c").is_some());
        c.put("huge".into(), entry(MAX_EVENTS + 1));
        assert!(c.take("huge").is_none(), "larger than the bound: not kept");
    }
}
