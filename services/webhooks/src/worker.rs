//! The webhooks role's two loops: one consumes a durable topic into
//! deliveries, the other delivers what is due.

use crate::{GROUP, WebhooksService};
use checkfu_bus::Bus;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Consumes `topic` into deliveries until `stop`. A record is committed
/// only after its deliveries are stored; a failure retries the record.
pub async fn consume(svc: WebhooksService, bus: Arc<dyn Bus>, topic: &'static str, stop: CancellationToken) {
    let mut backoff = Duration::from_millis(200);
    loop {
        let mut sub = tokio::select! {
            s = bus.subscribe(topic, GROUP) => match s {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(topic, error = %e, "webhooks: cannot subscribe yet");
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
                    tracing::warn!(topic, error = %e, "webhooks: the bus failed; resubscribing");
                    break;
                }
            };
            let span =
                tracing::info_span!("webhooks.ingest", otel.name = "webhooks.ingest", checkfu.role = "webhooks", event_id = %d.record.id);
            checkfu_telemetry::adopt_traceparent(&span, d.record.header("traceparent").unwrap_or_default());
            loop {
                match svc.ingest(&d.record).instrument(span.clone()).await {
                    Ok(_) => break,
                    Err(e) if e.code == checkfu_core::Code::Invalid => {
                        tracing::warn!(topic, id = %d.record.id, error = %e, "webhooks: skipping an unreadable event");
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(topic, error = %e, "webhooks: storing deliveries failed; retrying");
                        tokio::select! { () = stop.cancelled() => return, () = tokio::time::sleep(backoff) => {} }
                    }
                }
            }
            if let Err(e) = sub.commit(&d).await {
                tracing::warn!(topic, error = %e, "webhooks: commit failed; the record may be seen again (deduplicated)");
            }
        }
    }
}

/// Delivers due deliveries every `every` until `stop`.
pub async fn deliver(svc: WebhooksService, every: Duration, stop: CancellationToken) {
    loop {
        match svc.deliver_due().await {
            Ok(n) if n > 0 => continue,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "webhooks: delivery round failed"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}
