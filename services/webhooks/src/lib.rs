//! The webhooks service: outbound WebhookEndpoints, one delivery per
//! (endpoint, platform event) taken from the durable event bus, and a
//! worker that delivers them signed, on the fixed retry schedule. See
//! `DESIGN.md`.

pub mod clock;
pub mod grpc;
pub mod interest;
pub mod model;
pub mod service;
pub mod store;
pub mod worker;

use checkfu_core::Result;
use checkfu_proto::webhooks::v1::webhooks_service_server::WebhooksServiceServer;
use checkfu_store::{Db, Location, Migrations};
use std::sync::Arc;

pub use service::WebhooksService;
pub use worker::{consume, deliver};

pub const MIGRATIONS: Migrations = checkfu_store::migrations!("../../migrations/webhooks":
    "0001_init",
);

/// The consumer group the webhooks role reads the bus with.
pub const GROUP: &str = "checkfu-webhooks";

/// Opens the store and builds the service on the system clock; signing
/// secrets are sealed at rest under `sealer`.
pub async fn open(location: &Location, allow_private_targets: bool, sealer: checkfu_store::sealed::Sealer) -> Result<WebhooksService> {
    let db = Db::open(location, "webhooks", &MIGRATIONS).await?;
    Ok(WebhooksService::new(Arc::new(store::SqlWebhooksStore::new(db, sealer)), Arc::new(clock::SystemClock), allow_private_targets))
}

pub fn server(svc: WebhooksService) -> WebhooksServiceServer<grpc::WebhooksGrpc> {
    WebhooksServiceServer::new(grpc::WebhooksGrpc { svc })
}
