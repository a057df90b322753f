//! The memory service: MemoryStores (versioned trees of text documents),
//! MemoryProposals and the mounts Sessions make of them (api.md §13,
//! `docs/memory.md`).
//!
//! Read top-down: `model.rs` (domain types and limits), `service.rs`
//! (stores, documents and versions, with every access checked and audited),
//! `proposals.rs` (review), `mounts.rs` (what sessions asks for a Session's
//! mounts), `dreams/` (curation passes whose output is a new store), `content.rs` (content by digest, large content in the blob
//! store), `store/` (storage, with its conformance suite), `wire.rs` (the
//! typed answers), `view.rs` (their API JSON as a 0.1.0 gateway reads it,
//! until the release after 0.1.0), `grpc.rs` (the wire).

pub mod automation;
pub mod content;
pub mod dreams;
pub mod grpc;
pub mod model;
pub mod mounts;
pub mod proposals;
pub mod service;
pub mod store;
pub mod view;
pub mod wire;

use checkfu_core::Result;
use checkfu_proto::memory::v1::memory_service_server::MemoryServiceServer;
use checkfu_proto::transport::Transport;
use checkfu_store::{Db, Location, Migrations};
use std::sync::Arc;

pub use service::MemoryService;

pub const MIGRATIONS: Migrations = checkfu_store::migrations!("../../migrations/memory":
    "0001_memory" by_dialect,
    "0002_dreams",
    "0003_automation_writes",
);

/// Opens the store and builds the service; the database handle is for the
/// outbox relay.
pub async fn open(location: &Location, governance: Transport, sessions: Transport, models: Transport) -> Result<(MemoryService, Db)> {
    let db = Db::open(location, "memory", &MIGRATIONS).await?;
    Ok((MemoryService::new(Arc::new(store::SqlMemoryDb::new(db.clone())), governance, sessions, models), db))
}

/// The memory role's consumer group on the session events topic.
pub const GROUP: &str = "checkfu-memory";

/// Consumes session events until `stop`: a Session's own stores are
/// archived with it.
pub async fn consume(svc: MemoryService, bus: Arc<dyn checkfu_bus::Bus>, stop: tokio_util::sync::CancellationToken) {
    checkfu_bus::consume(bus, checkfu_bus::SESSION_EVENTS, GROUP, stop, |record| {
        let svc = svc.clone();
        async move { svc.on_session_event(&record).await }
    })
    .await
}

/// Runs Dreams until `stop`.
pub async fn dream(svc: MemoryService, stop: tokio_util::sync::CancellationToken) {
    dreams::run::work(svc, stop).await
}

pub fn server(svc: MemoryService) -> MemoryServiceServer<grpc::MemoryGrpc> {
    MemoryServiceServer::new(grpc::MemoryGrpc { svc })
}
