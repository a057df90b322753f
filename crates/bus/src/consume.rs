//! The consuming loop every durable-topic reader shares: join a group,
//! hand each record to a handler, commit it only once handled.
//!
//! A handler's failure is retried (with backoff) before the record is
//! committed, so nothing is lost; a record it calls unreadable
//! (`Code::Invalid`) is logged and skipped, so one bad record never stops
//! the topic. A lost subscription is joined again.

use crate::{Bus, Record};
use checkfu_core::Result;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
        loop {
            let d = tokio::select! {
                d = sub.next() => d,
                () = stop.cancelled() => return,
            };
            let d = match d {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(topic, group, error = %e, "the bus failed; subscribing again");
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
                        tokio::select! { () = stop.cancelled() => return, () = tokio::time::sleep(backoff) => {} }
                    }
                }
            }
            if let Err(e) = sub.commit(&d).await {
                tracing::warn!(topic, group, error = %e, "commit failed; the record may be seen again (handlers are idempotent)");
            }
        }
    }
}
