//! The consuming loop every durable-topic reader shares: join a group,
//! hand each record to a handler, commit it only once handled.
//!
//! A handler's failure is retried (with backoff) before the record is
//! committed, so nothing is lost; a record it calls unreadable
//! (`Code::Invalid`) is logged and skipped, so one bad record never stops
//! the topic. A lost subscription is joined again.
//!
//! Commits are gathered: a commit is a request to the broker, and one per
//! record cost the broker more than the record itself. What was handled is
//! committed every [`COMMIT_EVERY`] records, at most [`COMMIT_AFTER`] after
//! the first of them, as soon as the topic goes quiet, and before the loop
//! stops — so a crash hands at most that much to the next member again, which
//! handlers take as they take any redelivery (they are idempotent on the
//! record id).

use crate::{Bus, Delivery, Record, Subscription};
use checkfu_core::Result;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Handled records that are committed together.
pub const COMMIT_EVERY: usize = 256;
/// The longest a handled record waits for its commit while records flow.
pub const COMMIT_AFTER: Duration = Duration::from_millis(500);
/// How long the topic must be quiet before what was handled is committed.
const QUIET: Duration = Duration::from_millis(20);

/// Handled deliveries not yet committed: the newest per partition (a commit
/// covers everything before it in its partition).
#[derive(Default)]
struct Handled {
    newest: BTreeMap<i32, Delivery>,
    count: usize,
    since: Option<Instant>,
}

impl Handled {
    fn add(&mut self, d: Delivery) {
        self.since.get_or_insert_with(Instant::now);
        self.count += 1;
        self.newest.insert(d.partition, d);
    }

    fn due(&self) -> bool {
        self.count >= COMMIT_EVERY || self.since.is_some_and(|s| s.elapsed() >= COMMIT_AFTER)
    }

    async fn commit(&mut self, sub: &mut Box<dyn Subscription>, topic: &str, group: &str) {
        for d in std::mem::take(&mut self.newest).into_values() {
            if let Err(e) = sub.commit(&d).await {
                tracing::warn!(topic, group, error = %e, "commit failed; records may be seen again (handlers are idempotent)");
            }
        }
        self.count = 0;
        self.since = None;
    }
}

/// Consumes `topic` as `group` until `stop`, handling each record with
/// `handle` before committing it.
pub async fn consume<F, Fut>(bus: Arc<dyn Bus>, topic: &'static str, group: &'static str, stop: CancellationToken, handle: F)
where
    F: Fn(Record) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let mut backoff = Duration::from_millis(200);
    loop {
        let mut sub = tokio::select! {
            s = bus.subscribe(topic, group) => match s {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(topic, group, error = %e, "cannot subscribe yet");
                    tokio::select! { () = stop.cancelled() => return, () = tokio::time::sleep(backoff) => {} }
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                    continue;
                }
            },
            () = stop.cancelled() => return,
        };
        let mut handled = Handled::default();
        loop {
            let waiting = !handled.newest.is_empty();
            let d = tokio::select! {
                d = sub.next() => d,
                () = tokio::time::sleep(QUIET), if waiting => {
                    handled.commit(&mut sub, topic, group).await;
                    continue;
                }
                () = stop.cancelled() => {
                    handled.commit(&mut sub, topic, group).await;
                    return;
                }
            };
            let d = match d {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(topic, group, error = %e, "the bus failed; subscribing again");
                    handled.commit(&mut sub, topic, group).await;
                    break;
                }
            };
            loop {
                match handle(d.record.clone()).await {
                    Ok(()) => break,
                    Err(e) if e.code == checkfu_core::Code::Invalid => {
                        tracing::warn!(topic, group, id = %d.record.id, error = %e, "skipping an unreadable record");
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(topic, group, error = %e, "handling a record failed; retrying");
                        tokio::select! {
                            () = stop.cancelled() => {
                                handled.commit(&mut sub, topic, group).await;
                                return;
                            }
                            () = tokio::time::sleep(backoff) => {}
                        }
                    }
                }
            }
            handled.add(d);
            if handled.due() {
                handled.commit(&mut sub, topic, group).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryBus;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The memory bus, counting the commits its subscriptions make.
    struct Counting {
        bus: MemoryBus,
        commits: Arc<AtomicUsize>,
    }

    struct CountingSub {
        inner: Box<dyn Subscription>,
        commits: Arc<AtomicUsize>,
    }

    #[async_trait::async_trait]
    impl Bus for Counting {
        async fn publish(&self, records: &[Record]) -> Result<()> {
            self.bus.publish(records).await
        }
        async fn subscribe(&self, topic: &str, group: &str) -> Result<Box<dyn Subscription>> {
            Ok(Box::new(CountingSub { inner: self.bus.subscribe(topic, group).await?, commits: self.commits.clone() }))
        }
        async fn ready(&self) -> bool {
            true
        }
    }

    #[async_trait::async_trait]
    impl Subscription for CountingSub {
        async fn next(&mut self) -> Result<Delivery> {
            self.inner.next().await
        }
        async fn commit(&mut self, d: &Delivery) -> Result<()> {
            self.commits.fetch_add(1, Ordering::SeqCst);
            self.inner.commit(d).await
        }
    }

    fn record(n: usize) -> Record {
        Record { topic: "t".into(), key: "k".into(), id: format!("evt_{n}"), payload: String::new(), headers: vec![] }
    }

    #[tokio::test]
    async fn handled_records_are_committed_together_and_all_of_them() {
        let bus = MemoryBus::new();
        let commits = Arc::new(AtomicUsize::new(0));
        let counting: Arc<dyn Bus> = Arc::new(Counting { bus: bus.clone(), commits: commits.clone() });
        bus.publish(&(0..300).map(record).collect::<Vec<_>>()).await.unwrap();
        let handled = Arc::new(AtomicUsize::new(0));
        let stop = CancellationToken::new();
        let h = handled.clone();
        let consumer = tokio::spawn(consume(counting, "t", "g", stop.clone(), move |_| {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        }));
        while handled.load(Ordering::SeqCst) < 300 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The topic is quiet: what was handled is committed without a stop.
        tokio::time::sleep(QUIET * 5).await;
        let n = commits.load(Ordering::SeqCst);
        assert!((1..=3).contains(&n), "300 records, {n} commits: gathered, not one per record, and made while quiet");
        stop.cancel();
        consumer.await.unwrap();
        // A new member of the group starts after all of them.
        bus.publish(&[record(300)]).await.unwrap();
        let mut again = bus.subscribe("t", "g").await.unwrap();
        assert_eq!(again.next().await.unwrap().record.id, "evt_300", "every handled record was committed");
    }
}
