//! Ephemeral state shared across replicas: live fan-out (committed events
//! and previews reaching subscribers on every replica) and per-principal
//! rate limits. Redis in production ([`redis_impl`]), in-process embedded
//! ([`memory`]); one conformance suite runs against both. Nothing here is
//! the truth: a lost fan-out message is recovered from the store by the
//! subscriber, and a limiter that forgets only forgives.

pub mod memory;
pub mod outage;
pub mod redis_impl;

#[cfg(test)]
mod conformance;

use checkfu_core::Result;
use std::time::Duration;
use tokio::sync::mpsc;

/// Publish/subscribe of opaque payloads on named channels.
#[async_trait::async_trait]
pub trait Fanout: Send + Sync + 'static {
    /// Best effort: returns once handed to the transport.
    async fn publish(&self, channel: &str, payload: Vec<u8>) -> Result<()>;
    /// Every message on a channel starting with `prefix`, as `(channel,
    /// payload)`, from now on. Reconnects by itself; messages published
    /// while disconnected are lost (subscribers recover from the store).
    async fn subscribe_prefix(&self, prefix: &str) -> Result<mpsc::Receiver<(String, Vec<u8>)>>;
}

/// Whether a request may go ahead now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Yes,
    /// Over the limit: retry after this long.
    No {
        retry_after: Duration,
    },
}

/// Fixed-window counters: at most `limit` hits per `window` per key.
#[async_trait::async_trait]
pub trait RateLimiter: Send + Sync + 'static {
    async fn hit(&self, key: &str, limit: u32, window: Duration) -> Result<Admit>;
}
