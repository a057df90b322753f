//! The scheduler service: Automations, their firings and (to come) timers
//! and graphs. See api.md §12 and `docs/automations.md`.
//!
//! This build fires Automations manually, with an Agent target: schedule
//! and webhook triggers and graphs are refused (400 `capability_unavailable`)
//! rather than stored and never fired.

pub mod grpc;
pub mod model;
pub mod service;
pub mod settle;
pub mod store;

use checkfu_core::Result;
use checkfu_proto::scheduler::v1::scheduler_service_server::SchedulerServiceServer;
use checkfu_proto::transport::Transport;
use checkfu_store::{Db, Location, Migrations};
use std::sync::Arc;

pub use service::SchedulerService;
pub use settle::consume;

static SQLITE: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite/scheduler");
static POSTGRES: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres/scheduler");

pub const MIGRATIONS: Migrations = Migrations { sqlite: &SQLITE, postgres: &POSTGRES };

/// Opens the store and builds the service; the database handle is for the
/// outbox relay.
pub async fn open(location: &Location, governance: Transport, sessions: Transport) -> Result<(SchedulerService, Db)> {
    let db = Db::open(location, "scheduler", &MIGRATIONS).await?;
    Ok((SchedulerService::new(Arc::new(store::SqlSchedulerStore::new(db.clone())), governance, sessions), db))
}

pub fn server(svc: SchedulerService) -> SchedulerServiceServer<grpc::SchedulerGrpc> {
    SchedulerServiceServer::new(grpc::SchedulerGrpc { svc })
}
