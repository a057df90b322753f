//! The scheduler service: Automations, their triggers and timers, signed
//! ingest, and firings. See api.md §12 and `docs/automations.md`.
//!
//! Read top-down: `service.rs` (writes and readiness), `admission.rs` (one
//! durable path into a firing and its child), `occurrences.rs` (the timer
//! loop), `ingest.rs` (signed webhooks), `settle.rs` (firings settled from
//! their children's events), `graph/` (AutomationGraphs: a document, its
//! plan, and applying it as a steps target), `steps.rs` and `program.rs`
//! (running that target), `grpc.rs` and `automation_wire.rs` (the wire).

pub mod admission;
mod automation_wire;
mod calls;
pub mod connection_call;
mod connection_steps;
mod continuation;
pub mod evaluation;
pub mod firing;
pub mod for_each;
pub mod graph;
pub mod grpc;
mod history_calls;
pub mod history_record;
pub mod history_steps;
mod in_flight;
pub mod ingest;
mod judge;
pub mod memory_access;
mod memory_calls;
pub mod memory_steps;
pub mod model;
pub mod occurrences;
pub mod predicates;
pub mod program;
mod provider_calls;
pub mod provider_ingest;
mod provider_wire;
pub mod providers;
pub mod service;
pub mod session_input;
pub mod settle;
mod skill_calls;
pub mod skill_proposal;
pub mod skill_record;
pub mod skill_steps;
pub mod steps;
pub mod store;
pub mod subscriptions;
pub mod trace;
mod trace_wire;
pub mod triggers;
pub mod webhook_source;

use checkfu_core::Result;
use checkfu_proto::scheduler::v1::scheduler_service_server::SchedulerServiceServer;
use checkfu_store::sealed::Sealer;
use checkfu_store::{Db, Location, Migrations};
use std::sync::Arc;

pub use service::{Mesh, SchedulerService};
pub use settle::consume;

pub const MIGRATIONS: Migrations = checkfu_store::migrations!("../../migrations/scheduler":
    "0001_automations" by_dialect,
    "0002_triggers",
    "0003_graphs",
    "0004_programs",
    "0005_inputs",
    "0006_subscriptions",
    "0007_frontiers",
    "0008_skill_proposals",
    "0009_webhook_sources",
);

/// Opens the store and builds the service; the database handle is for the
/// outbox relay. `sealer` seals ingest secrets at rest.
pub async fn open(location: &Location, mesh: service::Mesh, sealer: Sealer) -> Result<(SchedulerService, Db)> {
    let db = Db::open(location, "scheduler", &MIGRATIONS).await?;
    Ok((SchedulerService::new(Arc::new(store::SqlSchedulerStore::new(db.clone())), mesh, sealer), db))
}

pub fn server(svc: SchedulerService) -> SchedulerServiceServer<grpc::SchedulerGrpc> {
    SchedulerServiceServer::new(grpc::SchedulerGrpc { svc })
}
