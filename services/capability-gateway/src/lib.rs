//! The `capability-gateway` role. Its gRPC service is defined and served so the mesh,
//! the charts and health checks treat it like every other role; the
//! behaviour it will own arrives with its own issue (see `DESIGN.md`).
//! Until then it answers only what it is — it fakes nothing.

use checkfu_proto::capability::v1 as pb;
use checkfu_proto::capability::v1::capability_gateway_service_server::{CapabilityGatewayService, CapabilityGatewayServiceServer};
use tonic::{Request, Response, Status};

pub const ROLE: &str = "capability-gateway";

/// What this role will own once built.
pub const OWNS: &[&str] = &["web_fetch", "MCP ToolSources", "Connections and ConnectionVaults", "sandbox egress allowlist enforcement"];

#[derive(Debug, Default)]
pub struct CapabilityGatewayGrpc;

#[tonic::async_trait]
impl CapabilityGatewayService for CapabilityGatewayGrpc {
    async fn get_service_info(&self, _: Request<pb::GetServiceInfoRequest>) -> Result<Response<pb::ServiceInfo>, Status> {
        Ok(Response::new(pb::ServiceInfo {
            role: ROLE.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            owns: OWNS.iter().map(|s| s.to_string()).collect(),
            serving_behaviour: false,
        }))
    }
}

pub fn server() -> CapabilityGatewayServiceServer<CapabilityGatewayGrpc> {
    CapabilityGatewayServiceServer::new(CapabilityGatewayGrpc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn describes_itself_without_claiming_behaviour() {
        let info = CapabilityGatewayGrpc.get_service_info(Request::new(pb::GetServiceInfoRequest {})).await.expect("info").into_inner();
        assert_eq!(info.role, ROLE);
        assert!(!info.serving_behaviour);
        assert!(!info.owns.is_empty());
    }
}
