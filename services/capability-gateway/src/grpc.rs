//! Thin gRPC handlers for the tools a Run calls: convert, check the
//! capability token's scope, call, map errors.

use crate::connections::ReachService;
use crate::fetch::WebFetcher;
use checkfu_proto::capability::v1 as pb;
use checkfu_proto::capability::v1::capability_gateway_service_server::CapabilityGatewayService as Rpc;
use tonic::{Request, Response, Status};

pub struct CapabilityGrpc {
    pub fetcher: WebFetcher,
    pub reach: ReachService,
    /// The egress proxy's token key and address; `None`: no proxy here.
    pub egress: Option<(checkfu_core::capability::TokenKey, String)>,
    /// A tool runs only for a Run whose lease its token names, and only if
    /// the Run's pins allow that tool.
    pub tokens: checkfu_proto::token::Verifier,
}

impl CapabilityGrpc {
    /// The call's token names this Session and allows `tool`.
    fn scoped<T>(&self, r: &Request<T>, session_id: &str, tool: &str) -> Result<(), Status> {
        let scope = self.tokens.verify(r)?;
        checkfu_core::id::SessionId::check("session_id", session_id)?;
        if session_id != scope.session_id || !scope.tools.iter().any(|t| t == tool) {
            return Err(Status::permission_denied(format!("the capability token does not allow {tool} for this Session")));
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl Rpc for CapabilityGrpc {
    async fn get_service_info(&self, _: Request<pb::GetServiceInfoRequest>) -> Result<Response<pb::ServiceInfo>, Status> {
        Ok(Response::new(pb::ServiceInfo {
            role: "capability-gateway".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            owns: vec!["web_fetch".into(), "MCP ToolSources".into(), "Connections and their credentials".into()],
            serving_behaviour: true,
        }))
    }

    async fn web_fetch(&self, r: Request<pb::WebFetchRequest>) -> Result<Response<pb::WebFetchResponse>, Status> {
        let session_id = r.get_ref().session_id.clone();
        self.scoped(&r, &session_id, "web_fetch")?;
        let r = r.into_inner();
        let f = self.fetcher.fetch(&r.session_id, &r.url).await?;
        Ok(Response::new(pb::WebFetchResponse {
            status: u32::from(f.status),
            content_type: f.content_type,
            body: f.body,
            truncated: f.truncated,
            final_url: f.final_url,
        }))
    }

    async fn offered_tools(&self, r: Request<pb::OfferedToolsRequest>) -> Result<Response<pb::OfferedToolsResponse>, Status> {
        let scope = self.tokens.verify(&r)?;
        let r = r.into_inner();
        if r.session_id != scope.session_id {
            return Err(Status::permission_denied("the capability token is for another Session"));
        }
        // Only tools the Run's pins declare.
        let names: Vec<String> = r.names.into_iter().filter(|n| scope.tools.contains(n)).take(500).collect();
        let tools = self.reach.offered(&r.tool_source_id, &names).await?;
        Ok(Response::new(pb::OfferedToolsResponse {
            tools: tools
                .into_iter()
                .map(|t| pb::OfferedTool { name: t.name, description: t.description, input_schema_json: t.input_schema.to_string() })
                .collect(),
        }))
    }

    async fn get_connection_status(
        &self,
        r: Request<pb::ConnectionStatusRequest>,
    ) -> Result<Response<pb::ConnectionStatusResponse>, Status> {
        let scope = self.tokens.verify(&r)?;
        let r = r.into_inner();
        if r.session_id != scope.session_id {
            return Err(Status::permission_denied("the capability token is for another Session"));
        }
        let status = self.reach.connection_status(&r.connection_id, &scope.environment_id).await?;
        Ok(Response::new(pb::ConnectionStatusResponse { status }))
    }

    async fn grant_egress(&self, r: Request<pb::GrantEgressRequest>) -> Result<Response<pb::GrantEgressResponse>, Status> {
        let claims = self.tokens.verify(&r)?;
        if r.get_ref().session_id != claims.session_id {
            return Err(Status::permission_denied("the capability token is for another Session"));
        }
        self.reach.require("sandbox_egress")?;
        let Some((key, address)) = &self.egress else {
            return Err(checkfu_core::features::unavailable("sandbox_egress", checkfu_core::features::DEPENDENCY_MISSING).into());
        };
        let token = crate::egress::mint(key, &claims)?;
        Ok(Response::new(pb::GrantEgressResponse { token, proxy_address: address.clone() }))
    }

    async fn take_egress_denials(
        &self,
        r: Request<pb::TakeEgressDenialsRequest>,
    ) -> Result<Response<pb::TakeEgressDenialsResponse>, Status> {
        let claims = self.tokens.verify(&r)?;
        if r.get_ref().session_id != claims.session_id {
            return Err(Status::permission_denied("the capability token is for another Session"));
        }
        let taken = self.reach.store.take_denials(&claims.run_id).await?;
        Ok(Response::new(pb::TakeEgressDenialsResponse {
            denials: taken
                .into_iter()
                .map(|d| pb::EgressDenial { host: d.host, port: u32::from(d.port), reason: d.reason.as_str().into() })
                .collect(),
        }))
    }

    async fn call_tool(&self, r: Request<pb::CallToolRequest>) -> Result<Response<pb::CallToolResponse>, Status> {
        let (session_id, tool) = (r.get_ref().session_id.clone(), r.get_ref().tool.clone());
        // Scoped to this ToolSource's tool, not any tool of that name.
        self.scoped(&r, &session_id, &format!("{}/{tool}", r.get_ref().tool_source_id))?;
        let r = r.into_inner();
        if r.arguments_json.len() > 1024 * 1024 {
            return Err(Status::invalid_argument("arguments are at most 1 MiB of JSON"));
        }
        let arguments: serde_json::Value = if r.arguments_json.is_empty() {
            serde_json::json!({})
        } else {
            serde_json::from_str(&r.arguments_json).map_err(|_| Status::invalid_argument("arguments must be JSON"))?
        };
        let a = self.reach.call(&r.tool_source_id, &r.connection_id, &r.tool, arguments).await;
        Ok(Response::new(pb::CallToolResponse { text: a.text, is_error: a.is_error }))
    }

    // Mesh-authorized: only the scheduler calls these (proto/src/mesh.rs).
    async fn resolve_step_tool(&self, r: Request<pb::ResolveStepToolRequest>) -> Result<Response<pb::ResolveStepToolResponse>, Status> {
        let r = r.into_inner();
        let t = self.reach.resolve_step_tool(&r.environment_id, &r.tool_source, &r.tool).await?;
        Ok(Response::new(pb::ResolveStepToolResponse {
            tool_source_id: t.tool_source_id,
            connection_id: t.connection_id,
            tool_source_status: t.tool_source_status,
            connection_status: t.connection_status,
            offered: t.offered,
            input_schema_json: t.input_schema.map(|s| s.to_string()).unwrap_or_default(),
            call_timeout_seconds: t.call_timeout_seconds,
        }))
    }

    async fn call_step_tool(&self, r: Request<pb::CallStepToolRequest>) -> Result<Response<pb::CallStepToolResponse>, Status> {
        let r = r.into_inner();
        if r.arguments_json.len() > 64 * 1024 {
            return Err(Status::invalid_argument("a step's arguments are at most 64 KiB of JSON"));
        }
        let arguments: serde_json::Value =
            serde_json::from_str(&r.arguments_json).map_err(|_| Status::invalid_argument("arguments must be JSON"))?;
        let a = self
            .reach
            .call_for_step(&r.environment_id, &r.tool_source_id, &r.connection_id, &r.tool, arguments, &r.connection_call_id)
            .await;
        Ok(Response::new(pb::CallStepToolResponse {
            outcome: a.outcome.into(),
            code: a.code,
            content: a.content,
            structured_content_json: a.structured.map(|v| v.to_string()).unwrap_or_default(),
        }))
    }
    async fn call_provider_api(&self, r: Request<pb::ProviderApiRequest>) -> Result<Response<pb::ProviderApiResponse>, Status> {
        let r = r.into_inner();
        if r.body_json.len() > 64 * 1024 {
            return Err(Status::invalid_argument("a provider request's body is at most 64 KiB of JSON"));
        }
        let body = match r.body_json.as_str() {
            "" => None,
            text => Some(serde_json::from_str(text).map_err(|_| Status::invalid_argument("body_json must be JSON"))?),
        };
        let call = crate::provider_api::ProviderCall {
            environment_id: r.environment_id,
            connection_id: r.connection_id,
            method: r.method,
            path: r.path,
            body,
        };
        let a = self.reach.call_provider_api(call).await;
        Ok(Response::new(pb::ProviderApiResponse {
            outcome: a.outcome.into(),
            status: u32::from(a.status),
            body_json: a.body.map(|v| v.to_string()).unwrap_or_default(),
            code: a.code,
            message: a.message,
        }))
    }
}
