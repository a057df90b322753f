//! The scheduler: Automations, their firings, the timer loop that fires
//! schedule occurrences, and the consumer that settles firings from their
//! child Sessions' events.

use super::{Assembly, Play, Store};
use anyhow::Context;
use checkfu_core::Role;

pub struct Scheduler;

#[async_trait::async_trait]
impl Play for Scheduler {
    fn role(&self) -> Role {
        Role::Scheduler
    }

    fn stores(&self) -> &'static [Store] {
        &[("scheduler", &checkfu_scheduler::MIGRATIONS)]
    }

    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()> {
        let opts = node.opts;
        let mesh = checkfu_scheduler::Mesh {
            governance: node.reach(Role::Scheduler, Role::Governance)?,
            sessions: node.reach(Role::Scheduler, Role::Sessions)?,
            models: node.reach_later(Role::Scheduler, Role::ModelGateway)?,
            capability: node.reach_later(Role::Scheduler, Role::CapabilityGateway)?,
            memory: node.reach_later(Role::Scheduler, Role::Memory)?,
        };
        if opts.scheduler.test_providers {
            tracing::warn!("the fake provider is offered (test_providers): for tests and local development only");
        }
        let sealer = super::installation_key(opts, Role::Scheduler)?;
        let (svc, db) = checkfu_scheduler::open(&opts.storage, mesh, sealer).await.context("opening the scheduler store")?;
        let relay = checkfu_bus::outbox::Relay::new(db, node.bus.clone(), "scheduler");
        let svc = svc
            .with_outbox_wake(relay.wake.clone())
            .with_providers(&opts.scheduler.public_url, opts.scheduler.test_providers)
            .with_features_disabled(opts.features_disabled.clone());
        node.spawn(relay.run(super::RELAY_EVERY, node.shutdown.clone()));
        node.spawn(checkfu_scheduler::consume(svc.clone(), node.bus.clone(), node.shutdown.clone()));
        node.spawn(checkfu_scheduler::subscriptions::consume(svc.clone(), node.bus.clone(), node.shutdown.clone()));
        node.spawn(checkfu_scheduler::occurrences::run(svc.clone(), node.shutdown.clone()));
        // Step programs left running by the last process continue.
        let recovering = svc.clone();
        node.spawn(async move { recovering.recover_programs().await });
        node.ready("scheduler", svc.clone(), |s| async move { s.ready().await });
        node.serve(Role::Scheduler, checkfu_scheduler::server(svc));
        Ok(())
    }
}
