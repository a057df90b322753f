//! The `capability-gateway` role. Its gRPC service is defined and served so the mesh,
//! the charts and health checks treat it like every other role; the
//! behaviour it will own arrives with its own issue (see `DESIGN.md`).
//! Until then it answers only what it is — it fakes nothing.

checkfu_core::placeholder_role! {
    role: "capability-gateway",
    proto: checkfu_proto::capability::v1,
    server_mod: capability_gateway_service_server,
    service: CapabilityGatewayService,
    server: CapabilityGatewayServiceServer,
    owns: ["web_fetch", "MCP ToolSources", "Connections and ConnectionVaults", "sandbox egress allowlist enforcement"],
}
