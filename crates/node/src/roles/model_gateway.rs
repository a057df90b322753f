//! The model gateway: routing profiles, provider endpoints and their keys,
//! usage metering.

use super::{Assembly, Play, Store};
use anyhow::Context;
use checkfu_core::Role;

pub struct ModelGateway;

#[async_trait::async_trait]
impl Play for ModelGateway {
    fn role(&self) -> Role {
        Role::ModelGateway
    }

    fn stores(&self) -> &'static [Store] {
        &[("model_gateway", &checkfu_model_gateway::MIGRATIONS)]
    }

    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()> {
        let mut endpoints = node.opts.model_gateway.endpoints.clone();
        endpoints.allow_private |= node.opts.allow_private_targets;
        let svc = checkfu_model_gateway::open(&node.opts.storage, endpoints).await.context("opening the model-gateway store")?;
        node.ready("model-gateway", svc.clone(), |s| async move { s.ready().await });
        let tokens = super::installation_key(node.opts, Role::ModelGateway)?.token_key();
        node.serve(Role::ModelGateway, checkfu_model_gateway::server(svc, tokens));
        Ok(())
    }
}
