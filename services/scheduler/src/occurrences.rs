//! Schedule occurrences (api.md §12.3), fired from the timer store. The
//! scheduler holds no task per Automation: each replica runs one loop that
//! takes due timers in batches (`claim_due`, one query for all of them),
//! admits each occurrence and re-arms or consumes its timer.
//!
//! - An occurrence has at most one firing (`source:"schedule"`, unique in
//!   the store), so a replica that takes a timer whose holder died rejoins
//!   the firing that holder recorded instead of making another.
//! - Recurring occurrences due while the Automation was paused or the
//!   scheduler was down are skipped: one found more than
//!   [`MISSED_AFTER_MS`] late is not fired, and the next one after now is
//!   armed instead.
//! - A one-time occurrence is kept while paused (dormant) and fires once
//!   when admission is possible, with its original `scheduled_for`; its
//!   timer is consumed once its firing exists. If that firing ends `failed`
//!   or `skipped`, the Automation pauses (`occurrence_failed`) unless `at`
//!   changed since.
//! - Dispatch is as soon as a timer is due: no jitter is added.

use crate::admission::Admission;
use crate::firing::Firing;
use crate::model::*;
use crate::service::SchedulerService;
use checkfu_core::Result;
use checkfu_core::time::now_ms;
use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A recurring occurrence found later than this is a missed one.
pub const MISSED_AFTER_MS: i64 = 30_000;
/// How long a replica holds a timer it took; a crash frees it after this.
pub const LEASE_MS: i64 = 30_000;
/// Timers taken per query.
pub const BATCH: i64 = 256;
/// Occurrences admitted at once by one replica.
const CONCURRENCY: usize = 32;
/// The longest a replica sleeps between looks (other replicas' writes do
/// not wake it).
const IDLE_LOOK: Duration = Duration::from_millis(250);
/// How often pending children are recovered and old dedupe identities
/// forgotten.
const RECOVER_EVERY_MS: i64 = 5_000;
const SWEEP_EVERY_MS: i64 = 3_600_000;
/// How often decided approvals of approval steps are looked for.
const APPROVALS_EVERY_MS: i64 = 500;
/// Dedupe identities are kept at least 30 days (§12.4).
pub const DEDUPE_KEPT_MS: i64 = 31 * 24 * 3_600_000;

impl SchedulerService {
    /// Handles one taken timer.
    pub async fn run_timer(&self, t: Timer) -> Result<()> {
        if t.kind == "wait" {
            self.wake_step(&t.id).await?;
            self.store.finish_timer(&t, Arm::Clear).await?;
            return Ok(());
        }
        let a = self.store.get_automation(&t.automation_id).await?.filter(|a| a.deleted_ms == 0);
        let Some(a) = a else {
            self.store.finish_timer(&t, Arm::Clear).await?;
            return Ok(());
        };
        match a.timed() {
            None => {
                self.store.finish_timer(&t, Arm::Clear).await?;
            }
            // A write re-armed the timer since it was taken; that stands.
            Some(Trigger::Once(at)) if *at != t.scheduled_for_ms => {}
            Some(Trigger::Once(at)) => {
                let at = *at;
                if a.status == AutomationStatus::Paused {
                    self.store.finish_timer(&t, Arm::Sleep).await?;
                    return Ok(());
                }
                let f = self.admit_occurrence(&a, at).await?;
                self.store.finish_timer(&t, Arm::Clear).await?;
                if let Some(f) = f {
                    self.after_settle(&f).await;
                }
            }
            Some(Trigger::Schedule(s)) => {
                let now = now_ms();
                if a.status == AutomationStatus::Paused {
                    self.store.finish_timer(&t, Arm::Clear).await?;
                    return Ok(());
                }
                if now - t.scheduled_for_ms > MISSED_AFTER_MS {
                    tracing::info!(automation_id = %a.id, scheduled_for_ms = t.scheduled_for_ms, "a missed recurring occurrence is skipped");
                    let arm = s.next_after(now).map_or(Arm::Clear, |at| Arm::Set { at, awake: true });
                    self.store.finish_timer(&t, arm).await?;
                    return Ok(());
                }
                self.admit_occurrence(&a, t.scheduled_for_ms).await?;
                let arm = s.next_after(t.scheduled_for_ms).map_or(Arm::Clear, |at| Arm::Set { at, awake: true });
                self.store.finish_timer(&t, arm).await?;
            }
            Some(Trigger::Webhook(_) | Trigger::Subscription(_)) => {}
        }
        Ok(())
    }

    /// The occurrence's firing: admitted now, or the one an earlier holder
    /// recorded.
    async fn admit_occurrence(&self, a: &Automation, scheduled_for_ms: i64) -> Result<Option<Firing>> {
        if let Some(f) = self.store.firing_for_occurrence(&a.id, scheduled_for_ms).await? {
            return Ok(Some(f));
        }
        let adm = Admission {
            source: FiringSource::Schedule,
            event: Value::Null,
            scheduled_for_ms,
            dedupe_value: String::new(),
            actor: String::new(),
            delivery: None,
            webhook_source_id: String::new(),
        };
        match self.admit(a, adm).await? {
            Some(f) => Ok(Some(f)),
            None => self.store.firing_for_occurrence(&a.id, scheduled_for_ms).await,
        }
    }

    /// After a firing settled: a one-time occurrence's firing that ended
    /// `failed` or `skipped` pauses its Automation (`occurrence_failed`),
    /// unless `at` changed since it was admitted.
    pub(crate) async fn after_settle(&self, f: &Firing) {
        if f.source != FiringSource::Schedule || !f.failed_or_skipped() {
            return;
        }
        let Ok(Some(a)) = self.store.get_automation(&f.automation_id).await else { return };
        if a.deleted_ms != 0 || a.timed() != Some(&Trigger::Once(f.scheduled_for_ms)) {
            return;
        }
        let reason =
            PauseReason { code: "occurrence_failed".into(), note: f.error.as_ref().and_then(|e| e["reason"].as_str()).map(String::from) };
        if let Err(e) = self.pause_for(a.id.as_str(), None, reason).await {
            tracing::warn!(automation_id = %a.id, error = %e.message, "could not pause an Automation whose occurrence failed");
        }
    }
}

/// The timer loop of one replica, until `stop`.
pub async fn run(svc: SchedulerService, stop: CancellationToken) {
    let replica = checkfu_core::id::FiringId::mint().to_string().replace("afire_", "sched_");
    let mut claims: u64 = 0;
    let mut last_recover = 0;
    let mut last_approvals = 0;
    let mut last_sweep = 0;
    while !stop.is_cancelled() {
        let now = now_ms();
        claims += 1;
        let holder = format!("{replica}:{claims}");
        let full = match svc.store.claim_due(&holder, now, now + LEASE_MS, BATCH).await {
            Ok(timers) => {
                let n = timers.len() as i64;
                futures_util::stream::iter(timers)
                    .for_each_concurrent(CONCURRENCY, |t| {
                        let svc = svc.clone();
                        async move {
                            let id = t.automation_id.clone();
                            if let Err(e) = svc.run_timer(t).await {
                                tracing::warn!(automation_id = %id, error = %e.message, "an occurrence failed; its timer is retried when its lease ends");
                            }
                        }
                    })
                    .await;
                n == BATCH
            }
            Err(e) => {
                tracing::warn!(error = %e.message, "could not take due timers");
                false
            }
        };
        if now - last_approvals >= APPROVALS_EVERY_MS {
            last_approvals = now;
            if let Err(e) = svc.settle_approvals().await {
                tracing::warn!(error = %e.message, "could not settle approval steps");
            }
        }
        if now - last_recover >= RECOVER_EVERY_MS {
            last_recover = now;
            if let Err(e) = svc.recover_children().await {
                tracing::warn!(error = %e.message, "could not recover pending children");
            }
        }
        if now - last_sweep >= SWEEP_EVERY_MS {
            last_sweep = now;
            if let Err(e) = svc.store.sweep_deliveries(now - DEDUPE_KEPT_MS).await {
                tracing::warn!(error = %e.message, "could not forget old dedupe identities");
            }
        }
        if full {
            continue;
        }
        let wait = match svc.store.next_due().await {
            Ok(Some(due)) => Duration::from_millis(u64::try_from(due - now_ms()).unwrap_or(0)).min(IDLE_LOOK),
            _ => IDLE_LOOK,
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = svc.timer_wake.notified() => {}
            _ = stop.cancelled() => {}
        }
    }
}
