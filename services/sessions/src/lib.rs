//! The sessions service: the agent catalog, Sessions with their gapless
//! event log and live stream, Runs, and the control-plane side of the runner
//! protocol. See `DESIGN.md` beside this crate.

pub mod approvals;
pub mod budget;
pub mod builder;
pub mod capability;
pub mod catalog;
pub mod draft;
pub mod files;
pub mod grpc;
pub mod grpc_runner;
pub mod grpc_work;
mod handoff;
pub mod input;
pub mod live;
pub mod log;
pub mod memory;
pub mod model;
pub mod outcomes;
mod pollers;
pub mod runners;
pub mod runs;
mod screen;
pub mod service;
pub mod store;
mod sweeps;
pub mod thread_tools;
pub mod threads;
pub mod uploads;
pub mod upstream;
pub mod wire;
pub mod work;

use checkfu_core::Result;
use checkfu_proto::runner::v1::runner_service_server::RunnerServiceServer;
use checkfu_proto::sessions::v1::files_service_server::FilesServiceServer;
use checkfu_proto::sessions::v1::sessions_service_server::SessionsServiceServer;
use checkfu_proto::sessions::v1::skills_service_server::SkillsServiceServer;
use checkfu_store::{Db, Location, Migrations};
use std::sync::Arc;

pub use builder::Builder;
pub use service::SessionsService;

pub const MIGRATIONS: Migrations = checkfu_store::migrations!("../../migrations/sessions":
    "0001_init",
    "0002_budgets",
    "0003_outbox" by_dialect,
    "0004_run_trace",
    "0005_runners",
    "0006_files_sandboxes",
    "0007_uploads_skills",
    "0008_memory_mounts",
    "0009_outcomes",
    "0010_threads",
    "0011_sandbox_archive",
    "0012_connection_vaults",
    "0013_work_items",
    "0014_delivery_screen",
);

/// Opens the store and starts building the service on it; the database
/// handle is for the outbox relay.
pub async fn open(location: &Location) -> Result<(Builder, Db)> {
    let db = Db::open(location, "sessions", &MIGRATIONS).await?;
    Ok((Builder::new(Arc::new(store::SqlSessionsStore::new(db.clone()))), db))
}

pub fn server(svc: SessionsService) -> SessionsServiceServer<grpc::SessionsGrpc> {
    SessionsServiceServer::new(grpc::SessionsGrpc { svc })
}

pub fn files_server(uploads: uploads::Uploads) -> FilesServiceServer<uploads::grpc::UploadsGrpc> {
    FilesServiceServer::new(uploads::grpc::UploadsGrpc { uploads })
}

pub fn skills_server(uploads: uploads::Uploads) -> SkillsServiceServer<uploads::grpc::UploadsGrpc> {
    // A bundle is at most 8 MiB (and its paths), sent in one message.
    SkillsServiceServer::new(uploads::grpc::UploadsGrpc { uploads }).max_decoding_message_size(16 * 1024 * 1024)
}

pub fn runner_server(svc: &SessionsService) -> RunnerServiceServer<grpc_runner::RunnerGrpc> {
    RunnerServiceServer::new(grpc_runner::RunnerGrpc { runs: svc.runs.clone(), threads: svc.threads.clone() })
}
