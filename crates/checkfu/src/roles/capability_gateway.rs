//! The capability gateway: tools that need reach the sandbox lacks.

use super::{Assembly, Play};
use checkfu_core::Role;

pub struct CapabilityGateway;

#[async_trait::async_trait]
impl Play for CapabilityGateway {
    fn role(&self) -> Role {
        Role::CapabilityGateway
    }

    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()> {
        let sessions = node.reach(Role::CapabilityGateway, Role::Sessions)?;
        let tokens = super::installation_key(node.opts, Role::CapabilityGateway)?.token_key();
        node.serve(Role::CapabilityGateway, checkfu_capability_gateway::server(sessions, tokens, node.opts.allow_private_targets));
        Ok(())
    }
}
