//! The capability gateway: reach beyond the sandbox, held by the platform.
//! It owns Connections and the credentials they hold (sealed under the
//! installation's credential keys and opened only here), and `web_fetch`:
//! a GET to a host on the Session's pinned SandboxProfile allowlist,
//! refused for private, loopback and link-local addresses, with each
//! redirect checked again. See `DESIGN.md`.

pub mod connections;
pub mod egress;
pub mod fetch;
pub mod grpc;
pub mod grpc_connections;
pub mod grpc_tool_sources;
pub mod mcp;
pub mod model;
pub mod oauth;
pub mod provider_api;
pub mod step_calls;
pub mod store;
pub mod targets;
pub mod tool_sources;
pub mod versioned;

use checkfu_core::Result;
use checkfu_proto::capability::v1::capability_gateway_service_server::CapabilityGatewayServiceServer;
use checkfu_proto::capability::v1::connections_service_server::ConnectionsServiceServer;
use checkfu_proto::capability::v1::tool_sources_service_server::ToolSourcesServiceServer;
use checkfu_proto::transport::Transport;
use checkfu_store::{Db, Location, Migrations};
use std::sync::Arc;

pub use connections::{ReachService, Rewrapped};
pub use fetch::{FetchLimits, Fetched, WebFetcher};

pub const MIGRATIONS: Migrations = checkfu_store::migrations!("../../migrations/capability_gateway":
    "0001_connections" by_dialect,
    "0002_tool_sources",
    "0003_egress_denials",
);

/// What the capability gateway is built from.
pub struct Settings {
    /// Fetches and Connections may reach private, loopback and link-local
    /// addresses (local development and tests only; production refuses them).
    pub allow_private_targets: bool,
    /// The credential key file's keys; `None` leaves `credentials` unavailable.
    pub credential_keys: Option<Arc<checkfu_store::envelope::KeyRing>>,
    pub disabled: checkfu_core::features::Disabled,
}

/// Opens the store and builds the Connections service; the database handle
/// is for the outbox relay.
pub async fn open(location: &Location, governance: Transport, settings: &Settings) -> Result<(ReachService, Db)> {
    let db = Db::open(location, "capability_gateway", &MIGRATIONS).await?;
    let svc = ReachService::new(
        Arc::new(store::SqlReachStore::new(db.clone())),
        settings.credential_keys.clone(),
        governance,
        settings.allow_private_targets,
        settings.disabled.clone(),
    );
    Ok((svc, db))
}

/// `checkfu credentials rewrap`: every stored credential's data key
/// wrapped again by the key file's first key.
pub async fn rewrap(location: &Location, keys: &checkfu_store::envelope::KeyRing) -> Result<Rewrapped> {
    let db = Db::open(location, "capability_gateway", &MIGRATIONS).await?;
    connections::rewrap_all(&store::SqlReachStore::new(db), keys).await
}

/// The tonic server for the tools a Run calls; `egress` is the egress
/// proxy's token key and the address runners reach it at, when it runs.
pub fn server(
    reach: ReachService,
    sessions: Transport,
    tokens: checkfu_core::capability::TokenKey,
    allow_private_targets: bool,
    egress: Option<(checkfu_core::capability::TokenKey, String)>,
) -> CapabilityGatewayServiceServer<grpc::CapabilityGrpc> {
    let tokens = checkfu_proto::token::Verifier::new(tokens);
    let fetcher = WebFetcher::new(sessions, allow_private_targets, FetchLimits::default());
    CapabilityGatewayServiceServer::new(grpc::CapabilityGrpc { fetcher, reach, tokens, egress })
}

/// The sandbox egress proxy: `listener` bound by the caller.
pub fn egress_proxy(
    reach: ReachService,
    sessions: Transport,
    key: checkfu_core::capability::TokenKey,
    allow_private: bool,
) -> egress::EgressProxy {
    egress::EgressProxy {
        key,
        allowlists: WebFetcher::new(sessions, allow_private, FetchLimits::default()),
        allow_private,
        denials: std::sync::Arc::new(reach),
    }
}

/// The tonic server for managing ToolSources (the gateway's) and resolving
/// them at publication (the sessions service's).
pub fn tool_sources_server(svc: ReachService) -> ToolSourcesServiceServer<grpc_tool_sources::ToolSourcesGrpc> {
    ToolSourcesServiceServer::new(grpc_tool_sources::ToolSourcesGrpc { svc })
}

/// Re-syncs ToolSources whose interval is due, until `shutdown`.
pub async fn sync_due(svc: ReachService, every: std::time::Duration, shutdown: tokio_util::sync::CancellationToken) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Err(e) = svc.sync_due().await {
            tracing::warn!(error = %e.message, "the periodic tool source sync failed");
        }
    }
}

/// The tonic server for managing Connections (the gateway's).
pub fn connections_server(svc: ReachService) -> ConnectionsServiceServer<grpc_connections::ConnectionsGrpc> {
    ConnectionsServiceServer::new(grpc_connections::ConnectionsGrpc { svc })
}
