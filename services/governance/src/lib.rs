//! The governance service: who exists, how they prove it, and which rows give
//! them reach. See `DESIGN.md` beside this crate for what it owns.

pub mod approvals;
pub mod console;
pub mod grpc;
pub mod model;
pub mod policy;
mod read_cache;
pub mod service;
pub mod store;
pub mod vaults;

use checkfu_core::Result;
use checkfu_proto::governance::v1::governance_service_server::GovernanceServiceServer;
use checkfu_store::{Db, Location, Migrations};
use std::sync::Arc;

pub use service::{Bootstrapped, GovernanceService};

static SQLITE: checkfu_store::sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite/governance");
static POSTGRES: checkfu_store::sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres/governance");

pub const MIGRATIONS: Migrations = Migrations { sqlite: &SQLITE, postgres: &POSTGRES };

/// Opens the governance store at `location` and builds the service; the
/// database handle is for the outbox relay.
pub async fn open(location: &Location) -> Result<(GovernanceService, Db)> {
    let db = Db::open(location, "governance", &MIGRATIONS).await?;
    Ok((GovernanceService::new(Arc::new(store::SqlGovernanceStore::new(db.clone()))), db))
}

/// The tonic server for this service.
/// The tonic server for this role; `tokens` checks the capability tokens a
/// self-hosted Runner's calls carry through the public edge.
pub fn server(svc: GovernanceService, tokens: checkfu_core::capability::TokenKey) -> GovernanceServiceServer<grpc::GovernanceGrpc> {
    GovernanceServiceServer::new(grpc::GovernanceGrpc { svc, tokens: checkfu_proto::token::Verifier::new(tokens) })
}
