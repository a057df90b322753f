//! The `webhooks` role. Its gRPC service is defined and served so the mesh,
//! the charts and health checks treat it like every other role; the
//! behaviour it will own arrives with its own issue (see `DESIGN.md`).
//! Until then it answers only what it is — it fakes nothing.

checkfu_core::placeholder_role! {
    role: "webhooks",
    proto: checkfu_proto::webhooks::v1,
    server_mod: webhooks_service_server,
    service: WebhooksService,
    server: WebhooksServiceServer,
    owns: ["WebhookEndpoints", "delivery signing and retry schedule", "webhook deliveries", "inbound ingest verification"],
}
