//! Who an API key belongs to and what a Principal may do, kept in each
//! gateway replica so that a request does not ask governance twice (or
//! more) before it starts its work.
//!
//! The contract stays what it is without the cache: a request that starts
//! after a revoking call (a key revoked, a grant or membership removed, a
//! Principal or an Environment disabled) has been answered is decided on
//! the new rows.
//! Governance moves the shared `decisions` epoch (Redis; in process when
//! the installation is one process) after every such write and before
//! answering it. Here each request reads the epoch once, after it began and
//! before its first decision, and uses an entry only when it was kept under
//! that same epoch; an entry is kept under the epoch read *before*
//! governance was asked, so an answer that raced a change is never used
//! after it. No entry is used once it is [`MAX_AGE`] old, whatever the
//! epoch says (the bound when a change could not be announced), and
//! without an epoch — none configured, or Redis unreachable — every
//! decision is asked of governance as before.

use crate::error::ApiResult;
use checkfu_core::cache::Bounded;
use checkfu_ephemeral::Epochs;
use checkfu_ephemeral::outage::FailureLog;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The epoch governance and the sessions service move.
use checkfu_ephemeral::DECISIONS_EPOCH as EPOCH;

/// The oldest decision used: the same bound an open stream's re-check has.
pub const MAX_AGE: Duration = Duration::from_secs(5);

/// Keys kept (each a SHA-256 digest and its Principal); beyond it the map
/// starts over.
const MAX_KEYS: usize = 10_000;

/// Permission answers kept; beyond it the map starts over.
const MAX_CHECKS: usize = 100_000;

/// One reading of the epoch, made by the first decision that needs it.
type Reading = Arc<tokio::sync::OnceCell<Option<Arc<str>>>>;

tokio::task_local! {
    /// The epoch as one request read it: filled by its first decision,
    /// emptied by [`Decisions::renew`] after a write the request made.
    static REQUEST_EPOCH: Arc<std::sync::Mutex<Reading>>;
}

/// An answer kept under the epoch read before it was asked.
pub type Kept<T> = checkfu_core::cache::Kept<Arc<str>, T>;

/// The gateway's decision cache (one per replica).
pub struct Decisions {
    epochs: Option<Arc<dyn Epochs>>,
    keys: Bounded<String, Kept<(String, String)>>,
    checks: Bounded<String, Kept<bool>>,
    max_age: Duration,
    unreachable: FailureLog,
}

impl Decisions {
    /// A cache that follows `epochs`; `None` keeps nothing (every decision
    /// is asked of governance).
    pub fn new(epochs: Option<Arc<dyn Epochs>>) -> Self {
        Decisions {
            epochs,
            keys: Bounded::new(MAX_KEYS),
            checks: Bounded::new(MAX_CHECKS),
            max_age: MAX_AGE,
            unreachable: FailureLog::new("the decisions epoch is unreachable; asking governance for every decision"),
        }
    }

    /// Runs `request` as one request: its decisions share one reading of
    /// the epoch, made after it began.
    pub async fn scope<F: Future>(request: F) -> F::Output {
        REQUEST_EPOCH.scope(Arc::default(), request).await
    }

    /// After a write this request made (or tried: a conflict means another
    /// request wrote): what it decides or reads next is read under the
    /// epoch as it is now, which that write moved, not under the reading
    /// made before it.
    pub fn renew() {
        let _ = REQUEST_EPOCH.try_with(|r| *r.lock().unwrap_or_else(|p| p.into_inner()) = Reading::default());
    }

    /// The epoch to decide under: the request's reading, or a fresh one
    /// outside a request (an open stream's re-check).
    async fn epoch(&self) -> Option<Arc<str>> {
        let epochs = self.epochs.as_ref()?;
        let read = || async {
            match epochs.current(EPOCH).await {
                Ok(t) => {
                    self.unreachable.recovered();
                    t.map(Arc::from)
                }
                Err(e) => {
                    self.unreachable.failed(&e);
                    None
                }
            }
        };
        match REQUEST_EPOCH.try_with(|r| r.lock().unwrap_or_else(|p| p.into_inner()).clone()) {
            Ok(reading) => reading.get_or_init(read).await.clone(),
            Err(_) => read().await,
        }
    }

    /// The Principal and key id behind the key with SHA-256 `digest`, kept
    /// or asked of governance with `ask`. Invalid keys are never kept.
    pub async fn key<F>(&self, digest: &str, ask: F) -> ApiResult<(String, String)>
    where
        F: Future<Output = ApiResult<(String, String)>>,
    {
        self.kept(&self.keys, digest, ask).await
    }

    /// Whether `principal_id` holds `permission` on the resource, kept or
    /// asked of governance with `ask`. Refusals are kept too: a grant is a
    /// change that moves the epoch.
    pub async fn check<F>(&self, question: [&str; 5], ask: F) -> ApiResult<bool>
    where
        F: Future<Output = ApiResult<bool>>,
    {
        self.kept(&self.checks, &question.join("\u{1f}"), ask).await
    }

    /// What `map` keeps for `key` under the request's epoch, else what
    /// `ask` answers, kept under the epoch read before it was asked (an
    /// error is never kept). Without an epoch every call asks.
    pub async fn kept<T: Clone, F>(&self, map: &Bounded<String, Kept<T>>, key: &str, ask: F) -> ApiResult<T>
    where
        F: Future<Output = ApiResult<T>>,
    {
        let Some(epoch) = self.epoch().await else { return ask.await };
        if let Some(hit) = map.get(key).and_then(|k| k.valid_under(&*epoch, self.max_age)) {
            return Ok(hit);
        }
        let found = ask.await?;
        map.insert(key.to_string(), Kept::new(epoch, found.clone()));
        Ok(found)
    }

    /// Whether Environment `id` is disabled, kept or asked with `ask`:
    /// governance moves the epoch when an Environment is disabled or
    /// enabled, so no Session starts in one after that call returned.
    pub async fn environment_disabled<F>(&self, id: &str, ask: F) -> ApiResult<bool>
    where
        F: Future<Output = ApiResult<bool>>,
    {
        // Its own key space among the answers: no Principal id has a space.
        self.check(["environment disabled", id, "", "", ""], ask).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_ephemeral::memory::MemoryEpochs;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counted(asked: &AtomicUsize, answer: bool) -> impl Future<Output = ApiResult<bool>> + '_ {
        asked.fetch_add(1, Ordering::SeqCst);
        async move { Ok(answer) }
    }

    const Q: [&str; 5] = ["prin_1", "invoke", "agent", "agt_1", "env_1"];

    #[tokio::test]
    async fn an_answer_is_kept_until_the_epoch_moves() {
        let epochs = Arc::new(MemoryEpochs::default());
        epochs.ensure(EPOCH).await.unwrap();
        let d = Decisions::new(Some(epochs.clone()));
        let asked = AtomicUsize::new(0);
        assert!(d.check(Q, counted(&asked, true)).await.unwrap());
        assert!(d.check(Q, counted(&asked, false)).await.unwrap(), "kept: the second answer is not asked for");
        assert_eq!(asked.load(Ordering::SeqCst), 2, "the future is made, but only the first is awaited");
        epochs.advance(EPOCH).await.unwrap();
        assert!(!d.check(Q, counted(&asked, false)).await.unwrap(), "after a change, governance's answer");
    }

    #[tokio::test]
    async fn a_request_decides_under_the_epoch_it_read_first() {
        let epochs = Arc::new(MemoryEpochs::default());
        epochs.ensure(EPOCH).await.unwrap();
        let d = Decisions::new(Some(epochs.clone()));
        Decisions::scope(async {
            assert!(d.check(Q, async { Ok(true) }).await.unwrap());
            // A change during the request: the request keeps its reading
            // (it began before the change was answered)...
            epochs.advance(EPOCH).await.unwrap();
            assert!(d.check(Q, async { Ok(false) }).await.unwrap());
        })
        .await;
        // ...and the next request reads the new epoch.
        Decisions::scope(async { assert!(!d.check(Q, async { Ok(false) }).await.unwrap()) }).await;
    }

    #[tokio::test]
    async fn an_answer_asked_before_a_change_is_not_used_after_it() {
        let epochs = Arc::new(MemoryEpochs::default());
        epochs.ensure(EPOCH).await.unwrap();
        let d = Decisions::new(Some(epochs.clone()));
        // The answer races a revoke: governance answered from the old rows,
        // the revoke moved the epoch before this answer was kept.
        let stale = async {
            epochs.advance(EPOCH).await.unwrap();
            Ok(true)
        };
        assert!(d.check(Q, stale).await.unwrap());
        assert!(!d.check(Q, async { Ok(false) }).await.unwrap(), "kept under the epoch read before asking, so unused now");
    }

    #[tokio::test]
    async fn keys_and_errors() {
        let d = Decisions::new(Some(announced().await));
        let invalid = async { Err(checkfu_core::Error::new(checkfu_core::Code::InvalidKey, "no").into()) };
        assert!(d.key("h", invalid).await.is_err());
        let found = d.key("h", async { Ok(("prin_1".to_string(), "key_1".to_string())) }).await.unwrap();
        assert_eq!(found.0, "prin_1", "an invalid answer was not kept");
        let kept = d.key("h", async { Ok(("prin_2".to_string(), "key_2".to_string())) }).await.unwrap();
        assert_eq!(kept.0, "prin_1");
    }

    async fn announced() -> Arc<MemoryEpochs> {
        let epochs = Arc::new(MemoryEpochs::default());
        epochs.ensure(EPOCH).await.unwrap();
        epochs
    }

    #[tokio::test]
    async fn without_an_epoch_nothing_is_kept() {
        for d in [Decisions::new(None), Decisions::new(Some(Arc::new(MemoryEpochs::default())))] {
            assert!(d.check(Q, async { Ok(true) }).await.unwrap());
            assert!(!d.check(Q, async { Ok(false) }).await.unwrap(), "no cache, or an epoch nobody announces on");
        }
    }

    #[tokio::test]
    async fn nothing_older_than_the_bound_is_used() {
        let mut d = Decisions::new(Some(announced().await));
        d.max_age = Duration::from_millis(50);
        assert!(d.check(Q, async { Ok(true) }).await.unwrap());
        assert!(d.check(Q, async { Ok(false) }).await.unwrap(), "kept within the bound");
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(!d.check(Q, async { Ok(false) }).await.unwrap());
    }
}
