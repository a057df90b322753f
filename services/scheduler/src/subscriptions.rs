//! `subscription` triggers (api.md §18.10): an Automation fires on the
//! platform's own events — what a webhook endpoint could be sent — read
//! from the durable topics with a consumer group of their own, so a slow
//! or failing subscription never holds up settling firings.
//!
//! Exactly once per (Automation, event): the event's id is the firing's
//! dedupe identity, claimed in the transaction that records the firing (as
//! a signed delivery's is, §12.4), and a record is committed only after it
//! was handled — so redelivery, a restart and two replicas reading the
//! same event all meet the one firing already recorded. An Automation
//! fires only on events after it was created, never while paused (nothing
//! is kept for later), and never on events about itself or a Session one
//! of its firings started or continued: a subscription on
//! `session.status_idle` cannot feed itself.

use crate::admission::Admission;
use crate::model::{Automation, AutomationStatus, Delivery, FiringSource};
use crate::service::SchedulerService;
use checkfu_bus::{Bus, Record};
use checkfu_core::notice::{Notice, deliverable};
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The consumer group subscriptions read the platform's events with.
pub const GROUP: &str = "checkfu-scheduler-subscriptions";

impl SchedulerService {
    /// Admits a firing of each Automation subscribed to this event.
    pub async fn on_platform_event(&self, r: &Record) -> Result<()> {
        if r.header("type").is_some_and(|t| !deliverable(t)) {
            return Ok(());
        }
        let p: Value = serde_json::from_str(&r.payload).map_err(|e| Error::invalid(format!("unreadable event: {e}")))?;
        let Some(notice) = Notice::of(&p) else { return Ok(()) };
        let subscribed = self.store.subscribed_automations(&notice.environment_id).await?;
        if subscribed.is_empty() {
            return Ok(());
        }
        let at_ms = notice.created_at.as_str().and_then(|t| checkfu_core::time::parse_rfc3339(t, 9)).unwrap_or_else(now_ms);
        let event = notice.envelope(&r.id);
        for a in subscribed {
            if !self.wants(&a, &notice, &event, at_ms).await? {
                continue;
            }
            let delivery = Delivery {
                automation_id: a.id.clone(),
                dedupe_key: json!(r.id).to_string(),
                body_sha256: checkfu_core::sha256_hex(event.to_string()),
                firing_id: String::new(),
                filtered_id: String::new(),
                created_ms: now_ms(),
            };
            let adm = Admission {
                source: FiringSource::Subscription,
                event: event.clone(),
                scheduled_for_ms: 0,
                dedupe_value: r.id.clone(),
                actor: String::new(),
                delivery: Some(delivery),
                webhook_source_id: String::new(),
            };
            // `None`: this event already fired it (redelivered, or read by
            // another replica too).
            self.admit(&a, adm).await?;
        }
        Ok(())
    }

    /// Whether `a` fires on this event: active, subscribed to it, created
    /// before it, its filter holding, and the event not about itself or
    /// its own Sessions.
    async fn wants(&self, a: &Automation, notice: &Notice, event: &Value, at_ms: i64) -> Result<bool> {
        let Some(s) = a.subscription() else { return Ok(false) };
        if a.status != AutomationStatus::Active || a.deleted_ms != 0 || at_ms < a.created_ms {
            return Ok(false);
        }
        if !s.wants(&notice.event_type, &notice.data) || crate::predicates::first_failing(&s.filter, event).is_some() {
            return Ok(false);
        }
        let about = |k: &str| notice.data.get(k).and_then(Value::as_str).unwrap_or_default();
        if about("resource_id") == a.id.as_str() {
            return Ok(false);
        }
        for session in [about("session_id"), about("resource_id")].into_iter().filter(|s| s.starts_with("sess_")) {
            if self.store.automations_of_session(session).await?.iter().any(|id| id == a.id.as_str()) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Consumes the platform's durable topics until `stop`, firing
/// subscriptions.
pub async fn consume(svc: SchedulerService, bus: Arc<dyn Bus>, stop: CancellationToken) {
    let topics = [checkfu_bus::SESSION_EVENTS, checkfu_bus::RESOURCE_EVENTS];
    let readers = topics.map(|topic| {
        let (svc, bus, stop) = (svc.clone(), bus.clone(), stop.clone());
        checkfu_bus::consume(bus, topic, GROUP, stop, move |record| {
            let svc = svc.clone();
            async move { svc.on_platform_event(&record).await }
        })
    });
    let [a, b] = readers;
    tokio::join!(a, b);
}
