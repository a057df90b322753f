//! Thin gRPC handlers: convert, call, map errors.

use crate::fetch::WebFetcher;
use checkfu_proto::capability::v1 as pb;
use checkfu_proto::capability::v1::capability_gateway_service_server::CapabilityGatewayService as Rpc;
use tonic::{Request, Response, Status};

pub struct CapabilityGrpc {
    pub fetcher: WebFetcher,
    /// A tool runs only for a Run whose lease its token names, and only if
    /// the Run's pins allow that tool.
    pub tokens: checkfu_proto::token::Verifier,
}

#[tonic::async_trait]
impl Rpc for CapabilityGrpc {
    async fn get_service_info(&self, _: Request<pb::GetServiceInfoRequest>) -> Result<Response<pb::ServiceInfo>, Status> {
        Ok(Response::new(pb::ServiceInfo {
            role: "capability-gateway".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            owns: vec!["web_fetch".into(), "MCP ToolSources".into(), "Connections and ConnectionVaults".into()],
            serving_behaviour: true,
        }))
    }

    async fn web_fetch(&self, r: Request<pb::WebFetchRequest>) -> Result<Response<pb::WebFetchResponse>, Status> {
        let scope = self.tokens.verify(&r)?;
        let r = r.into_inner();
        checkfu_core::id::SessionId::check("session_id", &r.session_id)?;
        if r.session_id != scope.session_id || !scope.tools.iter().any(|t| t == "web_fetch") {
            return Err(Status::permission_denied("the capability token does not allow web_fetch for this Session"));
        }
        let f = self.fetcher.fetch(&r.session_id, &r.url).await?;
        Ok(Response::new(pb::WebFetchResponse {
            status: u32::from(f.status),
            content_type: f.content_type,
            body: f.body,
            truncated: f.truncated,
            final_url: f.final_url,
        }))
    }
}
