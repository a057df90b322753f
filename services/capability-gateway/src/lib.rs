//! The capability gateway: tool execution that needs reach the sandbox does
//! not have. Today that is `web_fetch`: a GET to a host on the Session's
//! pinned SandboxProfile allowlist, refused for private, loopback and
//! link-local addresses, with each redirect checked again. See `DESIGN.md`.

pub mod fetch;
pub mod grpc;
pub mod targets;

use checkfu_proto::capability::v1::capability_gateway_service_server::CapabilityGatewayServiceServer;
use checkfu_proto::transport::Transport;

pub use fetch::{FetchLimits, Fetched, WebFetcher};

/// The tonic server for this role. `allow_private_targets` lets fetches
/// reach private, loopback and link-local addresses (local development and
/// tests only; production refuses them).
pub fn server(
    sessions: Transport,
    tokens: checkfu_core::capability::TokenKey,
    allow_private_targets: bool,
) -> CapabilityGatewayServiceServer<grpc::CapabilityGrpc> {
    let tokens = checkfu_proto::token::Verifier::new(tokens);
    let fetcher = WebFetcher::new(sessions, allow_private_targets, FetchLimits::default());
    CapabilityGatewayServiceServer::new(grpc::CapabilityGrpc { fetcher, tokens })
}
