//! The governance service: who exists, how they prove it, and which rows give
//! them reach. See `DESIGN.md` beside this crate for what it owns.

pub mod approvals;
pub mod console;
pub mod grpc;
pub mod model;
pub mod policy;
mod policy_wire;
mod read_cache;
pub mod service;
pub mod store;
pub mod vaults;

use checkfu_core::Result;
use checkfu_proto::governance::v1::governance_service_server::GovernanceServiceServer;
use checkfu_store::{Db, Location, Migrations};
use std::sync::Arc;

pub use service::{Bootstrapped, GovernanceService};

pub const MIGRATIONS: Migrations = checkfu_store::migrations!("../../migrations/governance":
    "0001_init",
    "0002_action_policies",
    "0003_approvals",
    "0004_outbox" by_dialect,
    "0005_installation",
    "0006_connection_vaults" by_dialect,
    "0007_approval_deny_message",
    "0008_step_approvals",
    "0009_vault_metadata",
    "0010_console_sessions",
);

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
