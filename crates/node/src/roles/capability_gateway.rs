//! The capability gateway: reach the sandbox lacks — Connections and their
//! credentials, and the tools a Run calls through them.

use super::{Assembly, Play, Store};
use anyhow::Context;
use checkfu_core::Role;
use checkfu_store::Location;
use checkfu_store::envelope::KeyRing;
use std::sync::Arc;

pub struct CapabilityGateway;

/// How often ToolSources due for an automatic re-sync are looked for.
const SYNC_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

#[async_trait::async_trait]
impl Play for CapabilityGateway {
    fn role(&self) -> Role {
        Role::CapabilityGateway
    }

    fn stores(&self) -> &'static [Store] {
        &[("capability_gateway", &checkfu_capability_gateway::MIGRATIONS)]
    }

    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()> {
        let opts = node.opts;
        let sessions = node.reach(Role::CapabilityGateway, Role::Sessions)?;
        let governance = node.reach(Role::CapabilityGateway, Role::Governance)?;
        let settings = checkfu_capability_gateway::Settings {
            allow_private_targets: opts.allow_private_targets,
            credential_keys: credential_keys(opts.capability_gateway.credential_key_file.as_deref(), &opts.storage, true)
                .ok()
                .map(Arc::new),
            disabled: opts.features_disabled.clone(),
        };
        let (svc, db) =
            checkfu_capability_gateway::open(&opts.storage, governance, &settings).await.context("opening the capability gateway store")?;
        node.spawn(
            checkfu_bus::outbox::Relay::new(db, node.bus.clone(), "capability_gateway").run(super::RELAY_EVERY, node.shutdown.clone()),
        );
        let sealer = super::installation_key(opts, Role::CapabilityGateway)?;
        // The sandbox egress proxy: the only network route a sandbox has.
        let egress = match &opts.capability_gateway.egress_listen {
            Some(listen) if !opts.features_disabled.contains("sandbox_egress") => {
                let (listener, bound) = checkfu_capability_gateway::egress::bind(listen)
                    .await
                    .with_context(|| format!("binding the egress proxy on {listen}"))?;
                let proxy = checkfu_capability_gateway::egress_proxy(
                    svc.clone(),
                    sessions.clone(),
                    sealer.egress_key(),
                    opts.allow_private_targets,
                );
                node.spawn(proxy.serve(listener, node.shutdown.clone()));
                Some((sealer.egress_key(), opts.capability_gateway.egress_advertise.clone().unwrap_or_else(|| bound.to_string())))
            }
            _ => None,
        };
        let svc = svc.with_egress(egress.is_some());
        let tokens = sealer.token_key();
        node.spawn(checkfu_capability_gateway::sync_due(svc.clone(), SYNC_EVERY, node.shutdown.clone()));
        node.serve(
            Role::CapabilityGateway,
            checkfu_capability_gateway::server(svc.clone(), sessions, tokens, opts.allow_private_targets, egress),
        );
        node.serve(Role::CapabilityGateway, checkfu_capability_gateway::tool_sources_server(svc.clone()));
        node.serve(Role::CapabilityGateway, checkfu_capability_gateway::connections_server(svc));
        Ok(())
    }
}

/// The credential keys: the named key file, or (on SQLite, unnamed) the one
/// kept in the data directory, made on first start when `create`. Without
/// a readable key `credentials` is unavailable — said once, at start, not
/// at every request.
pub(crate) fn credential_keys(file: Option<&std::path::Path>, storage: &Location, create: bool) -> anyhow::Result<KeyRing> {
    let loaded = match (file, storage) {
        (Some(path), _) => KeyRing::load(path),
        (None, Location::SqliteDir(dir)) if create => KeyRing::load_or_create(&dir.join("credentials.key")),
        (None, Location::SqliteDir(dir)) => KeyRing::load(&dir.join("credentials.key")),
        (None, Location::Postgres(_)) => {
            let why = "no credential key file (CHECKFU_CREDENTIAL_KEY_FILE): Connection credentials are unavailable";
            tracing::warn!("{why}");
            anyhow::bail!(why);
        }
    };
    loaded.map_err(|e| {
        tracing::warn!(error = %e.message, "the credential key file is unreadable: Connection credentials are unavailable");
        anyhow::anyhow!("the credential key file: {}", e.message)
    })
}
