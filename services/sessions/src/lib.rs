//! The sessions service: the agent catalog, Sessions with their gapless
//! event log and live stream, Runs, and the control-plane side of the runner
//! protocol. See `DESIGN.md` beside this crate.

pub mod approvals;
pub mod budget;
pub mod capability;
pub mod catalog;
pub mod files;
mod focus;
pub mod grpc;
pub mod grpc_runner;
pub mod grpc_work;
mod handoff;
pub mod input;
pub mod live;
pub mod memory;
pub mod model;
pub mod outcomes;
pub mod roster;
pub mod runners;
pub mod runs;
pub mod service;
pub mod skills;
pub mod store;
pub mod thread_tools;
pub mod threads;
pub mod upload_grpc;
pub mod uploads;
pub mod upstream;
pub mod work;

use checkfu_core::Result;
use checkfu_proto::runner::v1::runner_service_server::RunnerServiceServer;
use checkfu_proto::sessions::v1::files_service_server::FilesServiceServer;
use checkfu_proto::sessions::v1::sessions_service_server::SessionsServiceServer;
use checkfu_proto::sessions::v1::skills_service_server::SkillsServiceServer;
use checkfu_store::{Db, Location, Migrations};
use std::sync::Arc;

pub use service::SessionsService;

static SQLITE: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite/sessions");
static POSTGRES: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres/sessions");

pub const MIGRATIONS: Migrations = Migrations { sqlite: &SQLITE, postgres: &POSTGRES };

/// Opens the store and builds the service; the database handle is for the
/// outbox relay.
pub async fn open(location: &Location) -> Result<(SessionsService, Db)> {
    let db = Db::open(location, "sessions", &MIGRATIONS).await?;
    Ok((SessionsService::new(Arc::new(store::SqlSessionsStore::new(db.clone()))), db))
}

pub fn server(svc: SessionsService) -> SessionsServiceServer<grpc::SessionsGrpc> {
    SessionsServiceServer::new(grpc::SessionsGrpc { svc })
}

pub fn files_server(svc: SessionsService) -> FilesServiceServer<upload_grpc::UploadsGrpc> {
    FilesServiceServer::new(upload_grpc::UploadsGrpc { svc })
}

pub fn skills_server(svc: SessionsService) -> SkillsServiceServer<upload_grpc::UploadsGrpc> {
    // A bundle is at most 8 MiB (and its paths), sent in one message.
    SkillsServiceServer::new(upload_grpc::UploadsGrpc { svc }).max_decoding_message_size(16 * 1024 * 1024)
}

pub fn runner_server(svc: SessionsService) -> RunnerServiceServer<grpc_runner::RunnerGrpc> {
    RunnerServiceServer::new(grpc_runner::RunnerGrpc { svc })
}
