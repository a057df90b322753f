//! Who polled for work items recently, on this replica: the
//! `workers_polling` figure of a pool's stats.

use std::collections::HashMap;
use std::sync::Mutex;

/// Workers seen polling this recently count in `workers_polling`.
const POLLING_WINDOW_MS: i64 = 30_000;

/// Who polled which profile when, on this replica (`work_stats`).
#[derive(Default)]
pub struct Pollers(Mutex<HashMap<(String, String), i64>>);

impl Pollers {
    pub(crate) fn seen(&self, profile_id: &str, worker_id: &str, now: i64) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|_, at| now - *at < POLLING_WINDOW_MS);
        if !worker_id.is_empty() && worker_id.len() <= 200 {
            m.insert((profile_id.to_string(), worker_id.to_string()), now);
        }
    }

    pub(crate) fn count(&self, profile_id: &str, now: i64) -> i64 {
        let m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.iter().filter(|((p, _), at)| p == profile_id && now - **at < POLLING_WINDOW_MS).count() as i64
    }
}
