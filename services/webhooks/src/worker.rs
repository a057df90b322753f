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
    checkfu_bus::consume(bus, topic, GROUP, stop, |record| {
        let svc = svc.clone();
        async move {
            let span =
                tracing::info_span!("webhooks.ingest", otel.name = "webhooks.ingest", checkfu.role = "webhooks", event_id = %record.id);
            checkfu_telemetry::adopt_traceparent(&span, record.header("traceparent").unwrap_or_default());
            svc.ingest(&record).instrument(span).await.map(|_| ())
        }
    })
    .await
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
