//! Memory stores (a placeholder that answers GetServiceInfo).

use super::{Assembly, Play};
use checkfu_core::Role;

pub struct Memory;

#[async_trait::async_trait]
impl Play for Memory {
    fn role(&self) -> Role {
        Role::Memory
    }

    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()> {
        node.serve(Role::Memory, checkfu_memory::server());
        Ok(())
    }
}
