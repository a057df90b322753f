//! Memory: MemoryStores, their documents and versions, proposals, and the
//! mounts Sessions make of them.

use super::{Assembly, Play, Store};
use anyhow::Context;
use checkfu_core::Role;
use std::sync::Arc;

pub struct Memory;

#[async_trait::async_trait]
impl Play for Memory {
    fn role(&self) -> Role {
        Role::Memory
    }

    fn stores(&self) -> &'static [Store] {
        &[("memory", &checkfu_memory::MIGRATIONS)]
    }

    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()> {
        let opts = node.opts;
        let governance = node.reach(Role::Memory, Role::Governance)?;
        let sessions = node.reach(Role::Memory, Role::Sessions)?;
        let models = node.reach_later(Role::Memory, Role::ModelGateway)?;
        let (svc, db) = checkfu_memory::open(&opts.storage, governance, sessions, models).await.context("opening the memory store")?;
        let relay = checkfu_bus::outbox::Relay::new(db, node.bus.clone(), "memory");
        let blobs = checkfu_blobs::ObjectBlobs::open(&opts.blob_store).map_err(|e| anyhow::anyhow!("blob_store: {}", e.message))?;
        let svc = svc.with_blobs(Arc::new(blobs)).with_disabled(opts.features_disabled.clone()).with_outbox_wake(relay.wake.clone());
        node.spawn(relay.run(super::RELAY_EVERY, node.shutdown.clone()));
        // A Session's own stores are archived with it.
        node.spawn(checkfu_memory::consume(svc.clone(), node.bus.clone(), node.shutdown.clone()));
        node.spawn(checkfu_memory::dream(svc.clone(), node.shutdown.clone()));
        node.ready("memory", svc.clone(), |s| async move { s.ready().await });
        node.serve(Role::Memory, checkfu_memory::server(svc));
        Ok(())
    }
}
