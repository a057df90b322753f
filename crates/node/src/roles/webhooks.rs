//! Outbound webhooks: endpoints, the consumers of the durable topics, and
//! delivery with retries.

use super::{Assembly, Play, Store};
use anyhow::Context;
use checkfu_core::Role;
use checkfu_webhooks::interest::Interest;

pub struct Webhooks;

/// How often deliveries due for a retry are looked for.
const DELIVER_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

#[async_trait::async_trait]
impl Play for Webhooks {
    fn role(&self) -> Role {
        Role::Webhooks
    }

    fn stores(&self) -> &'static [Store] {
        &[("webhooks", &checkfu_webhooks::MIGRATIONS)]
    }

    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()> {
        let opts = node.opts;
        // Signing secrets are sealed at rest under the installation key.
        let sealer = super::installation_key(opts, Role::Webhooks)?;
        let svc = checkfu_webhooks::open(&opts.storage, opts.allow_private_targets, sealer).await.context("opening the webhooks store")?;
        // Who wants which events is kept between ingests: in memory when
        // this process owns an embedded store (its writes are all the
        // writes), under the shared epoch when replicas share one.
        let svc = match (&opts.storage, node.epochs.clone()) {
            (checkfu_store::Location::SqliteDir(_), _) => svc.with_interest(Interest::local()),
            (_, Some(epochs)) => {
                node.spawn(super::keep_epoch(
                    epochs.clone(),
                    checkfu_webhooks::interest::EPOCH,
                    "cannot announce the webhook endpoints epoch; webhooks read the endpoints for every event",
                    node.shutdown.clone(),
                ));
                svc.with_interest(Interest::shared(epochs))
            }
            (_, None) => svc,
        };
        for topic in [checkfu_bus::SESSION_EVENTS, checkfu_bus::RESOURCE_EVENTS] {
            node.spawn(checkfu_webhooks::consume(svc.clone(), node.bus.clone(), topic, node.shutdown.clone()));
        }
        node.spawn(checkfu_webhooks::deliver(svc.clone(), DELIVER_EVERY, node.shutdown.clone()));
        node.serve(Role::Webhooks, checkfu_webhooks::server(svc));
        Ok(())
    }
}
