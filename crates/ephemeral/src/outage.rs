//! Warnings about a shared service (Redis) that keeps failing, without one
//! per call: callers go on without it (fan-out subscribers catch up from
//! the store, the rate limiter lets requests through), so a warning per
//! publish or per request would only flood the logs.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The first failure is logged, then a count at most every
/// [`FailureLog::EVERY`], and a note when the calls work again. Shared by
/// concurrent callers; a success costs one atomic load.
pub struct FailureLog {
    /// What fails and what happens meanwhile, for the warning.
    what: &'static str,
    /// The last call failed.
    failing: AtomicBool,
    state: Mutex<Unreported>,
}

#[derive(Default)]
struct Unreported {
    /// Failures since the last warning.
    count: u64,
    /// When the last warning was (`None`: none in this outage).
    last: Option<Instant>,
}

impl FailureLog {
    pub const EVERY: Duration = Duration::from_secs(30);

    pub fn new(what: &'static str) -> Self {
        FailureLog { what, failing: AtomicBool::new(false), state: Mutex::default() }
    }

    /// Counts a failure; returns whether it was logged.
    pub fn failed(&self, e: &dyn std::fmt::Display) -> bool {
        self.failing.store(true, Ordering::Relaxed);
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.count += 1;
        if s.last.is_some_and(|at| at.elapsed() < Self::EVERY) {
            return false;
        }
        tracing::warn!(error = %e, failures = s.count, "{}", self.what);
        s.count = 0;
        s.last = Some(Instant::now());
        true
    }

    /// A call worked: ends the outage, noting it if there was one.
    pub fn recovered(&self) {
        if !self.failing.swap(false, Ordering::Relaxed) {
            return;
        }
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        tracing::info!(unreported_failures = s.count, "works again: {}", self.what);
        *s = Unreported::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_warned_once_per_interval_and_again_after_recovering() {
        let log = FailureLog::new("test: failing");
        assert!(log.failed(&"redis down"), "the first failure is logged");
        assert!(!log.failed(&"redis down"), "the next ones within the interval are only counted");
        assert_eq!(log.state.lock().expect("lock").count, 1);
        log.recovered();
        assert!(log.failed(&"redis down again"), "a new outage is logged at once");
        log.state.lock().expect("lock").last = Instant::now().checked_sub(FailureLog::EVERY);
        assert!(log.failed(&"still down"), "and again once the interval has passed");
    }
}
