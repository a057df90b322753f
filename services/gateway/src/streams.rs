//! What keeps an open SSE stream honest after it was admitted.
//!
//! - **Revocation reaches open streams.** A stream's right to read is
//!   checked again every [`RECHECK`]: its key (or console session) must
//!   still authenticate as the
//!   same Principal (not revoked, Principal not disabled) and that Principal
//!   must still read the Session. A definite "no" ends the stream; a
//!   governance outage does not (the next check decides). Streams that share
//!   a key and a Session share one verdict for [`VERDICT_TTL`], so a
//!   thousand followers cost one check, not a thousand. A stream therefore
//!   ends at most `RECHECK + VERDICT_TTL` plus one check's latency after the
//!   revocation: under 5 s.
//! - **Streams per Principal are capped** per gateway replica: past the
//!   cap a new stream is refused with 429 until one closes.

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use checkfu_core::cache::Bounded;
use checkfu_core::{Code, Error};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How often an open stream's right to read is checked again.
pub const RECHECK: Duration = Duration::from_secs(2);
/// How long one verdict serves every stream with the same key and Session.
pub const VERDICT_TTL: Duration = Duration::from_secs(1);
/// Open streams one Principal may hold on one gateway replica by default.
pub const DEFAULT_MAX_PER_PRINCIPAL: usize = 500;

pub struct Streams {
    open: Mutex<HashMap<String, usize>>,
    max_per_principal: usize,
    /// `(key id, session id)` → when it was decided, and whether it may read.
    verdicts: Bounded<(String, String), (Instant, bool)>,
}

impl Streams {
    pub fn new(max_per_principal: usize) -> Self {
        Streams { open: Mutex::new(HashMap::new()), max_per_principal: max_per_principal.max(1), verdicts: Bounded::new(100_000) }
    }

    /// Counts a new stream for `principal`, or refuses it past the cap.
    pub fn admit(self: &Arc<Self>, principal: &str) -> Result<Slot, ApiError> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(principal.to_string()).or_default();
        if *n >= self.max_per_principal {
            return Err(Error::new(
                Code::RateLimited,
                format!("{principal} already holds {} open streams on this gateway; close one first", self.max_per_principal),
            )
            .with_details(serde_json::json!({"retry_after_seconds": 1, "max_streams": self.max_per_principal}))
            .into());
        }
        *n += 1;
        Ok(Slot { streams: self.clone(), principal: principal.to_string() })
    }

    fn release(&self, principal: &str) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(principal) {
            *n -= 1;
            if *n == 0 {
                open.remove(principal);
            }
        }
    }
}

/// One open stream's place under its Principal's cap.
pub struct Slot {
    streams: Arc<Streams>,
    principal: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.streams.release(&self.principal);
    }
}

/// Whether the stream may go on reading: `Some(false)` on a definite no,
/// `None` when it could not be told (governance unreachable).
async fn may_read(st: &AppState, credential: &crate::auth::Credential, caller: &Caller, session_id: &str) -> Option<bool> {
    let memo = (caller.key_id.clone(), session_id.to_string());
    if let Some((at, verdict)) = st.streams.verdicts.get(&memo)
        && at.elapsed() < VERDICT_TTL
    {
        return Some(verdict);
    }
    let verdict = match decide(st, credential, caller, session_id).await {
        Ok(()) => true,
        Err(ApiError(e)) if matches!(e.code, Code::InvalidKey | Code::MissingKey | Code::PermissionDenied | Code::NotFound) => false,
        Err(_) => return None,
    };
    st.streams.verdicts.insert(memo, (Instant::now(), verdict));
    Some(verdict)
}

async fn decide(st: &AppState, credential: &crate::auth::Credential, caller: &Caller, session_id: &str) -> Result<(), ApiError> {
    let now = crate::auth::reauthenticate(st, credential).await?;
    if now.principal_id != caller.principal_id {
        return Err(Error::new(Code::InvalidKey, "the key now belongs to another principal").into());
    }
    crate::authz::may_read(st, &now, session_id).await
}

/// Ends `stop` once the stream may no longer read; returns when the stream
/// is gone (`gone` cancelled) or ended.
pub async fn watch(
    st: AppState,
    credential: crate::auth::Credential,
    caller: Caller,
    session_id: String,
    stop: CancellationToken,
    gone: CancellationToken,
) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + RECHECK, RECHECK);
    loop {
        tokio::select! {
            () = gone.cancelled() => return,
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if may_read(&st, &credential, &caller, &session_id).await == Some(false) {
            tracing::info!(principal = %caller.principal_id, session = %session_id, "ending a stream whose access was revoked");
            stop.cancel();
            return;
        }
    }
}
