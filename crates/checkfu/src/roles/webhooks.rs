//! Outbound webhooks: endpoints, the consumers of the durable topics, and
//! delivery with retries.

use super::{Assembly, Play, Store};
use anyhow::{Context, bail};
use checkfu_core::Role;
use checkfu_store::Location;
use checkfu_store::sealed::Sealer;

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
        let sealer = match (&opts.sealer, &opts.storage) {
            (Some(s), _) => s.clone(),
            (None, Location::SqliteDir(dir)) => {
                Sealer::load_or_create(&dir.join("secrets.key")).map_err(|e| anyhow::anyhow!("the secrets key: {}", e.message))?
            }
            (None, _) => bail!("the webhooks role seals signing secrets at rest: set CHECKFU_SECRETS_KEY (32+ characters)"),
        };
        let svc = checkfu_webhooks::open(&opts.storage, opts.allow_private_targets, sealer).await.context("opening the webhooks store")?;
        for topic in [checkfu_bus::SESSION_EVENTS, checkfu_bus::RESOURCE_EVENTS] {
            node.spawn(checkfu_webhooks::consume(svc.clone(), node.bus.clone(), topic, node.shutdown.clone()));
        }
        node.spawn(checkfu_webhooks::deliver(svc.clone(), DELIVER_EVERY, node.shutdown.clone()));
        node.serve(Role::Webhooks, checkfu_webhooks::server(svc));
        Ok(())
    }
}
