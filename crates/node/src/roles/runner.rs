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
        let mut runner = checkfu_runner::Runner::new(
            node.reach(Role::Runner, Role::Runner)?,
            node.reach(Role::Runner, Role::ModelGateway)?,
            node.reach(Role::Runner, Role::Governance)?,
            node.reach(Role::Runner, Role::CapabilityGateway)?,
            node.opts.runner.clone(),
        );
        if let Some(k) = &node.opts.runner.kubernetes {
            let pods = checkfu_runner::kubernetes::KubeSandboxes::connect(k.clone()).await.map_err(anyhow::Error::msg)?;
            tracing::info!(namespace = %k.namespace, "sandbox tools run in sandbox pods (the Kubernetes plane)");
            runner = runner.with_kubernetes(std::sync::Arc::new(pods));
            let (sweeper, stop, every) = (runner.clone(), node.shutdown.clone(), k.sweep_every);
            node.spawn(async move {
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(every) => {}
                    }
                    match sweeper.sweep_sandboxes().await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(deleted = n, "deleted the Sandboxes of ended Sessions"),
                        Err(e) => tracing::warn!(error = %e, "sweeping Sandboxes failed"),
                    }
                }
            });
        }
        let shutdown = node.shutdown.clone();
        node.spawn(async move {
            if let checkfu_runner::Ended::Refused(why) = runner.serve(shutdown).await {
                tracing::error!("the managed runner was refused by the sessions service: {why}");
            }
        });
        Ok(())
    }
}
