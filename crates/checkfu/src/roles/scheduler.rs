//! The scheduler: Automations (a placeholder that answers GetServiceInfo).

use super::{Assembly, Play};
use checkfu_core::Role;

pub struct Scheduler;

#[async_trait::async_trait]
impl Play for Scheduler {
    fn role(&self) -> Role {
        Role::Scheduler
    }

    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()> {
        node.serve(Role::Scheduler, checkfu_scheduler::server());
        Ok(())
    }
}
