//! The managed runner: claims Runs and executes them (the agent loop and
//! the sandbox tools).

use super::{Assembly, Play};
use checkfu_core::Role;

pub struct Runner;

#[async_trait::async_trait]
impl Play for Runner {
    fn role(&self) -> Role {
        Role::Runner
    }

    fn waits_on(&self) -> &'static [Role] {
        &[Role::Sessions, Role::ModelGateway, Role::Governance, Role::CapabilityGateway]
    }

    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()> {
        let runner = checkfu_runner::Runner::new(
            node.reach(Role::Runner, Role::Runner)?,
            node.reach(Role::Runner, Role::ModelGateway)?,
            node.reach(Role::Runner, Role::Governance)?,
            node.reach(Role::Runner, Role::CapabilityGateway)?,
            node.opts.runner.clone(),
        );
        let shutdown = node.shutdown.clone();
        node.spawn(async move {
            if let checkfu_runner::Ended::Refused(why) = runner.serve(shutdown).await {
                tracing::error!("the managed runner was refused by the sessions service: {why}");
            }
        });
        Ok(())
    }
}
