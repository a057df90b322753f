//! The embedded bus: one ordered in-memory log per topic, and one shared
//! cursor per consumer group. It lives as long as the process, which is all
//! the embedded installation needs: the outbox (on disk) is what survives a
//! restart, and it is relayed again from where it stood.

use crate::{Bus, Delivery, Record, Subscription};
use checkfu_core::Result;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

#[derive(Default)]
struct Topic {
    records: Vec<Record>,
    /// Next offset to hand out, and the committed offset, per group.
    groups: HashMap<String, (usize, usize)>,
}

#[derive(Default, Clone)]
pub struct MemoryBus {
    topics: Arc<Mutex<HashMap<String, Topic>>>,
    published: Arc<Notify>,
}

impl MemoryBus {
    pub fn new() -> Self {
        Self::default()
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
                topics.entry(r.topic.clone()).or_default().records.push(r.clone());
            }
        });
        self.published.notify_waiters();
        Ok(())
    }

    async fn subscribe(&self, topic: &str, group: &str) -> Result<Box<dyn Subscription>> {
        self.with(|topics| {
            let t = topics.entry(topic.to_string()).or_default();
            // A (re)joining member starts after what the group committed.
            let committed = t.groups.get(group).map_or(0, |g| g.1);
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
                let len = t.records.len();
                let g = t.groups.entry(self.group.clone()).or_default();
                if g.0 >= len {
                    return None;
                }
                let offset = g.0;
                g.0 += 1;
                Some(Delivery { record: t.records[offset].clone(), partition: 0, offset: offset as i64 })
            });
            if let Some(d) = next {
                return Ok(d);
            }
            published.await;
        }
    }

    async fn commit(&mut self, d: &Delivery) -> Result<()> {
        self.bus.with(|topics| {
            if let Some(g) = topics.get_mut(&self.topic).and_then(|t| t.groups.get_mut(&self.group)) {
                g.1 = g.1.max(d.offset as usize + 1);
            }
        });
        Ok(())
    }
}
