//! The webhooks service: outbound WebhookEndpoints, one delivery per
//! (endpoint, platform event) taken from the durable event bus, and a
//! worker that delivers them signed, on the fixed retry schedule. See
//! `DESIGN.md`.

pub mod clock;
pub mod grpc;
pub mod model;
pub mod service;
pub mod signature;
pub mod store;

use checkfu_bus::Bus;
use checkfu_core::Result;
use checkfu_proto::webhooks::v1::webhooks_service_server::WebhooksServiceServer;
use checkfu_store::{Db, Location, Migrations};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use service::WebhooksService;

static SQLITE: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite/webhooks");
static POSTGRES: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres/webhooks");

pub const MIGRATIONS: Migrations = Migrations { sqlite: &SQLITE, postgres: &POSTGRES };

/// The consumer group the webhooks role reads the bus with.
pub const GROUP: &str = "checkfu-webhooks";

/// Opens the store and builds the service on the system clock.
/// Opens the service; signing secrets are sealed at rest under `sealer`.
pub async fn open(location: &Location, allow_private_targets: bool, sealer: checkfu_store::sealed::Sealer) -> Result<WebhooksService> {
    let db = Db::open(location, "webhooks", &MIGRATIONS).await?;
    Ok(WebhooksService::new(Arc::new(store::SqlWebhooksStore::new(db, sealer)), Arc::new(clock::SystemClock), allow_private_targets))
}

pub fn server(svc: WebhooksService) -> WebhooksServiceServer<grpc::WebhooksGrpc> {
    WebhooksServiceServer::new(grpc::WebhooksGrpc { svc })
}

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
