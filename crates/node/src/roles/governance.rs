//! Governance: identity, permissions, policies, approvals, budgets; and
//! the installation's bootstrap on its first start.

use super::{Assembly, Play, Store};
use crate::key_file::KeyFile;
use crate::options::BootstrapInfo;
use anyhow::Context;
use checkfu_core::Role;

pub struct Governance;

#[async_trait::async_trait]
impl Play for Governance {
    fn role(&self) -> Role {
        Role::Governance
    }

    fn stores(&self) -> &'static [Store] {
        &[("governance", &checkfu_governance::MIGRATIONS)]
    }

    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()> {
        let opts = node.opts;
        let (svc, db) = checkfu_governance::open(&opts.storage).await.context("opening the governance store")?;
        let mut svc = svc.with_approval_ttl_ms(opts.governance.approval_ttl.as_millis() as i64);
        if matches!(opts.storage, checkfu_store::Location::SqliteDir(_)) {
            // One process owns an embedded store, so its own writes are all
            // the writes: keys and grants can be kept in memory.
            svc = svc.with_read_cache();
        }
        if let Some(epochs) = &node.epochs {
            svc = svc.with_epochs(epochs.clone());
            // The gateways keep decisions only under a token governance made.
            node.spawn(super::keep_epoch(
                epochs.clone(),
                checkfu_ephemeral::DECISIONS_EPOCH,
                "cannot announce the decisions epoch; gateways ask governance for every decision",
                node.shutdown.clone(),
            ));
        }
        node.spawn(checkfu_bus::outbox::Relay::new(db, node.bus.clone(), "governance").run(super::RELAY_EVERY, node.shutdown.clone()));

        let path = opts.governance.bootstrap_key_file.clone().unwrap_or_else(|| "admin.key".into());
        let key_file = KeyFile::new(path.clone());
        let made = svc.bootstrap(|secret| key_file.place(secret).map_err(|e| checkfu_core::Error::internal(format!("{e:#}")))).await;
        match &made {
            Ok(b) if b.created => key_file.keep(),
            // Another replica bootstrapped, or the commit failed: what this
            // one placed is not a key of the installation.
            _ => key_file.discard(),
        }
        let made = made.context("bootstrapping the installation")?;
        if made.created {
            node.bootstrap =
                Some(BootstrapInfo { admin_principal_id: made.admin_principal_id, environment_id: made.environment_id, key_file: path });
        }

        // Console sessions that ended or expired are forgotten a day later.
        let purge = svc.clone();
        let stop = node.shutdown.clone();
        node.spawn(async move {
            loop {
                if let Err(e) = purge.purge_console_sessions().await {
                    tracing::warn!(error = %e, "purging console sessions failed");
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(std::time::Duration::from_secs(3600)) => {}
                }
            }
        });
        node.ready("governance", svc.clone(), |s| async move { s.ready().await });
        let tokens = super::installation_key(node.opts, Role::Governance)?.token_key();
        node.serve(Role::Governance, checkfu_governance::server(svc, tokens));
        Ok(())
    }
}
