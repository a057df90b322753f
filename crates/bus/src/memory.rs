//! The embedded bus: one ordered in-memory log per topic, and one shared
//! cursor per consumer group. It lives as long as the process, which is all
//! the embedded installation needs: the outbox (on disk) is what survives a
//! restart, and it is relayed again from where it stood.
//!
//! Like a broker's retention, a topic keeps only its newest records
//! ([`RETAIN`]), so a long-running process does not hold every event it
//! ever relayed; unlike it, a record a group has not committed yet is never
//! dropped. A group that joins later starts at the oldest record kept.

use crate::{Bus, Delivery, Record, Subscription};
use checkfu_core::Result;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Records a topic keeps beyond what every group has committed.
pub const RETAIN: usize = 10_000;

#[derive(Default)]
struct Topic {
    /// The records from offset `base` on.
    records: VecDeque<Record>,
    base: usize,
    /// Next offset to hand out, and the committed offset, per group.
    groups: HashMap<String, (usize, usize)>,
}

impl Topic {
    fn end(&self) -> usize {
        self.base + self.records.len()
    }

    /// Drops the records every group has committed, beyond the newest
    /// `retain`.
    fn trim(&mut self, retain: usize) {
        let committed = self.groups.values().map(|g| g.1).min().unwrap_or(usize::MAX);
        let below = committed.min(self.end().saturating_sub(retain));
        while self.base < below && self.records.pop_front().is_some() {
            self.base += 1;
        }
    }
}

#[derive(Clone)]
pub struct MemoryBus {
    topics: Arc<Mutex<HashMap<String, Topic>>>,
    published: Arc<Notify>,
    retain: usize,
}

impl Default for MemoryBus {
    fn default() -> Self {
        Self::with_retention(RETAIN)
    }
}

impl MemoryBus {
    pub fn new() -> Self {
        Self::default()
    }

    /// A bus whose topics keep `retain` records beyond what every group
    /// has committed.
    pub fn with_retention(retain: usize) -> Self {
        MemoryBus { topics: Arc::default(), published: Arc::default(), retain }
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Topic>) -> T) -> T {
        let mut guard = match self.topics.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }
}

#[async_trait::async_trait]
impl Bus for MemoryBus {
    async fn publish(&self, records: &[Record]) -> Result<()> {
        self.with(|topics| {
            for r in records {
                let t = topics.entry(r.topic.clone()).or_default();
                t.records.push_back(r.clone());
                t.trim(self.retain);
            }
        });
        self.published.notify_waiters();
        Ok(())
    }

    async fn subscribe(&self, topic: &str, group: &str) -> Result<Box<dyn Subscription>> {
        self.with(|topics| {
            let t = topics.entry(topic.to_string()).or_default();
            // A (re)joining member starts after what the group committed.
            let committed = t.groups.get(group).map_or(t.base, |g| g.1);
            t.groups.insert(group.to_string(), (committed, committed));
        });
        Ok(Box::new(MemorySubscription { bus: self.clone(), topic: topic.into(), group: group.into() }))
    }

    async fn ready(&self) -> bool {
        true
    }
}

struct MemorySubscription {
    bus: MemoryBus,
    topic: String,
    group: String,
}

#[async_trait::async_trait]
impl Subscription for MemorySubscription {
    async fn next(&mut self) -> Result<Delivery> {
        loop {
            let published = self.bus.published.notified();
            tokio::pin!(published);
            published.as_mut().enable();
            let next = self.bus.with(|topics| {
                let t = topics.entry(self.topic.clone()).or_default();
                let (base, end) = (t.base, t.end());
                let g = t.groups.entry(self.group.clone()).or_insert((base, base));
                if g.0 >= end {
                    return None;
                }
                let offset = g.0;
                g.0 += 1;
                Some(Delivery { record: t.records[offset - base].clone(), partition: 0, offset: offset as i64 })
            });
            if let Some(d) = next {
                return Ok(d);
            }
            published.await;
        }
    }

    async fn commit(&mut self, d: &Delivery) -> Result<()> {
        let retain = self.bus.retain;
        self.bus.with(|topics| {
            if let Some(t) = topics.get_mut(&self.topic) {
                if let Some(g) = t.groups.get_mut(&self.group) {
                    g.1 = g.1.max(d.offset as usize + 1);
                }
                t.trim(retain);
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: usize) -> Record {
        Record { topic: "t".into(), key: "k".into(), id: format!("evt_{n}"), payload: String::new(), headers: vec![] }
    }

    #[tokio::test]
    async fn a_topic_keeps_only_its_newest_records_and_never_an_uncommitted_one() {
        let bus = MemoryBus::with_retention(5);
        let mut slow = bus.subscribe("t", "slow").await.expect("subscribe");
        let mut fast = bus.subscribe("t", "fast").await.expect("subscribe");
        bus.publish(&(0..20).map(record).collect::<Vec<_>>()).await.expect("publish");
        for _ in 0..20 {
            let d = fast.next().await.expect("next");
            fast.commit(&d).await.expect("commit");
        }
        let first = slow.next().await.expect("next");
        slow.commit(&first).await.expect("commit");
        // `slow` committed only offset 0: everything after it is kept.
        assert_eq!(bus.with(|t| (t["t"].base, t["t"].records.len())), (1, 19));
        for n in 1..20 {
            let d = slow.next().await.expect("next");
            assert_eq!(d.record.id, format!("evt_{n}"), "nothing uncommitted was dropped");
            slow.commit(&d).await.expect("commit");
        }
        // Both committed everything: only the newest 5 remain.
        assert_eq!(bus.with(|t| (t["t"].base, t["t"].records.len())), (15, 5));
        let mut late = bus.subscribe("t", "late").await.expect("subscribe");
        assert_eq!(late.next().await.expect("next").record.id, "evt_15", "a new group starts at the oldest record kept");
    }
}
