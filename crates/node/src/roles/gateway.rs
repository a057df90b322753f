//! The gateway: the public REST/SSE API, authentication, rate limits,
//! idempotency.

use super::{Assembly, Play, Store};
use anyhow::Context;
use checkfu_core::Role;
use std::sync::Arc;

pub struct Gateway;

#[async_trait::async_trait]
impl Play for Gateway {
    fn role(&self) -> Role {
        Role::Gateway
    }

    fn stores(&self) -> &'static [Store] {
        &[("gateway", &checkfu_gateway::MIGRATIONS)]
    }

    fn waits_on(&self) -> &'static [Role] {
        &[Role::Governance, Role::Sessions, Role::ModelGateway]
    }

    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()> {
        let opts = node.opts;
        let upstreams = checkfu_gateway::Upstreams {
            governance: node.reach(Role::Gateway, Role::Governance)?,
            sessions: node.reach(Role::Gateway, Role::Sessions)?,
            model_gateway: node.reach(Role::Gateway, Role::ModelGateway)?,
            webhooks: node.reach(Role::Gateway, Role::Webhooks)?,
            capability_gateway: node.reach(Role::Gateway, Role::CapabilityGateway)?,
            scheduler: node.reach(Role::Gateway, Role::Scheduler)?,
            memory: node.reach(Role::Gateway, Role::Memory)?,
        };
        let limiter: Arc<dyn checkfu_ephemeral::RateLimiter> = match &node.redis {
            Some(r) => Arc::new(r.clone()),
            None => Arc::new(checkfu_ephemeral::memory::MemoryLimiter::default()),
        };
        let mut limits = checkfu_gateway::RateLimits::new(limiter, opts.gateway.rate_limit_per_second);
        limits.max_streams_per_principal = opts.gateway.max_streams_per_principal;
        limits.auth_failures_per_window = opts.gateway.auth_failures_per_window;
        // The sessions service announces catalog writes to the epoch this
        // node reads when it plays the role here or when Redis is shared.
        let keep_catalog = node.redis.is_some() || opts.roles.contains(&Role::Sessions);
        let state = checkfu_gateway::AppState::open(
            &opts.storage,
            upstreams,
            node.shutdown.clone(),
            opts.gateway.sse_ping,
            limits,
            node.epochs.clone(),
            keep_catalog,
        )
        .await
        .context("opening the gateway store")?;
        node.ready("gateway", state.idem.clone(), |i| async move { i.ready().await });
        let edge = checkfu_gateway::runner_edge::RunnerEdge {
            sessions: checkfu_proto::sessions::v1::sessions_service_client::SessionsServiceClient::new(
                node.reach(Role::Gateway, Role::Sessions)?,
            ),
            runner: node.reach(Role::Gateway, Role::Runner)?,
            models: node.reach(Role::Gateway, Role::ModelGateway)?,
            governance: node.reach(Role::Gateway, Role::Governance)?,
            capabilities: node.reach(Role::Gateway, Role::CapabilityGateway)?,
        };
        let native = checkfu_gateway::router(state.clone());
        let cma_on = !opts.features_disabled.contains("cma_projection");
        let cma = checkfu_gateway::cma::router(state, native.clone(), &opts.gateway.cma_prefix, cma_on);
        node.api = Some(native.merge(cma).merge(checkfu_gateway::runner_edge::routes(edge)));
        Ok(())
    }
}
