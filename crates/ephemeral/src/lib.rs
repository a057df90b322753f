//! Ephemeral state shared across replicas: live fan-out (committed events
//! and previews reaching subscribers on every replica), per-principal
//! rate limits, and the epochs that tell every replica's caches a change
//! happened. Redis in production ([`redis_impl`]), in-process embedded
//! ([`memory`]); one conformance suite runs against both. Nothing here is
//! the truth: a lost fan-out message is recovered from the store by the
//! subscriber, a limiter that forgets only forgives, and an epoch that is
//! lost comes back as a token nobody cached under.

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

/// Named epochs: tokens that move whenever what a cache might hold stops
/// being true (governance moves `decisions` after every change to keys,
/// Principals, groups or grants). A cache tags what it keeps with the token
/// it read *before* asking the truth, and uses an entry only while the token
/// read now is the same — so a change whose [`Epochs::advance`] has returned
/// reaches every request that reads the token after it. Tokens are random,
/// never counters: a store that lost a token (Redis restarted) cannot hand
/// out one anything was cached under. Only the writer mints tokens: an epoch
/// nobody announces on has none, and a reader without a token keeps nothing.
#[async_trait::async_trait]
pub trait Epochs: Send + Sync + 'static {
    /// The epoch's current token; `None` when it has none.
    async fn current(&self, name: &str) -> Result<Option<String>>;
    /// Moves the epoch to a new token; every [`Epochs::current`] that starts
    /// after this returns sees it (or a later one).
    async fn advance(&self, name: &str) -> Result<()>;
    /// Gives the epoch a token when it has none (after a restart of the
    /// store); leaves one it has.
    async fn ensure(&self, name: &str) -> Result<()>;
}

/// The epoch every gateway keeps its decisions and catalog rows under:
/// governance moves it after a change to keys, grants, Principals or
/// Environments, the sessions service after one to an Agent, a
/// SandboxProfile or a Deployment.
pub const DECISIONS_EPOCH: &str = "decisions";

/// Moves `name` after a committed change, before the change is answered:
/// three tries, 100 and 200 ms apart. The last failure comes back when none
/// took; the caller answers that the change is saved but not yet announced.
pub async fn announce(epochs: &dyn Epochs, name: &str) -> Result<()> {
    let mut last = None;
    for attempt in 0..3u64 {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(100 * attempt)).await;
        }
        match epochs.advance(name).await {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| checkfu_core::Error::unavailable("the epoch could not be moved")))
}

/// A token no reader has seen: 128 random bits.
pub(crate) fn fresh_token() -> String {
    checkfu_core::new_secret("")[..32].to_string()
}
