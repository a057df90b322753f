//! Sessions: the event log, Runs and their leases, the runner protocol.

use super::{Assembly, Play, Store};
use anyhow::Context;
use checkfu_core::Role;
use std::sync::Arc;

pub struct Sessions;

/// How often expired sandboxes' snapshots and expired uploads are looked for.
const SANDBOX_SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// How often gradings a dead process left are looked for.
const GRADING_SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(30);
/// How often lapsed work leases (api.md §17.13) go back in the queue; a
/// poll or heartbeat also sweeps first.
const WORK_SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

#[async_trait::async_trait]
impl Play for Sessions {
    fn role(&self) -> Role {
        Role::Sessions
    }

    fn stores(&self) -> &'static [Store] {
        &[("sessions", &checkfu_sessions::MIGRATIONS)]
    }

    async fn start(&self, node: &mut Assembly<'_>) -> anyhow::Result<()> {
        let opts = node.opts;
        let governance = node.reach(Role::Sessions, Role::Governance)?;
        // The capability gateway starts after sessions (it calls sessions too).
        let tool_sources = node.reach_later(Role::Sessions, Role::CapabilityGateway)?;
        // The memory role starts after sessions (it calls sessions too).
        let memory = node.reach_later(Role::Sessions, Role::Memory)?;
        // Outcomes' graders.
        let models = node.reach_later(Role::Sessions, Role::ModelGateway)?;
        let (svc, db) = checkfu_sessions::open(&opts.storage).await.context("opening the sessions store")?;
        let relay = checkfu_bus::outbox::Relay::new(db, node.bus.clone(), "sessions");
        let tokens = super::installation_key(opts, Role::Sessions)?.token_key();
        let blobs = checkfu_blobs::ObjectBlobs::open(&opts.blob_store).map_err(|e| anyhow::anyhow!("blob_store: {}", e.message))?;
        let mut svc = svc
            .with_governance(governance)
            .with_tool_sources(tool_sources)
            .with_memory(memory)
            .with_models(models)
            .with_token_key(tokens)
            .with_blobs(Arc::new(blobs))
            .with_upload_settings(checkfu_sessions::model::UploadSettings {
                disabled: opts.features_disabled.clone(),
                retention_days: opts.sessions.files_retention_days,
            })
            .with_unrestricted_network(opts.sessions.allow_unrestricted_network)
            .with_outbox_wake(relay.wake.clone())
            .with_lease_ms(opts.sessions.run_lease.as_millis() as i64)
            .with_epochs(node.epochs.clone());
        if let Some(r) = &node.redis {
            svc = svc.with_fanout(Arc::new(r.clone())).await.context("subscribing to the live fan-out")?;
        }
        let svc = svc.build();
        node.spawn(relay.run(super::RELAY_EVERY, node.shutdown.clone()));
        node.spawn(svc.approvals.clone().run_approval_sweeper(opts.sessions.approval_sweep_every, node.shutdown.clone()));
        node.spawn(svc.runs.clone().run_sandbox_sweeper(SANDBOX_SWEEP_EVERY, node.shutdown.clone()));
        node.spawn(svc.uploads.clone().run_upload_sweeper(SANDBOX_SWEEP_EVERY, node.shutdown.clone()));
        node.spawn(svc.outcomes.clone().run_grading_sweeper(GRADING_SWEEP_EVERY, node.shutdown.clone()));
        node.spawn(svc.runs.clone().run_work_sweeper(WORK_SWEEP_EVERY, node.shutdown.clone()));
        if opts.embedded {
            // The previous process's runner died with it.
            let n = svc.runs.release_orphaned_leases().await?;
            if n > 0 {
                tracing::info!(runs = n, "resuming runs interrupted by the previous shutdown");
            }
        }
        node.ready("sessions", svc.clone(), |s| async move { s.ready().await });
        node.serve(Role::Runner, checkfu_sessions::runner_server(&svc));
        node.serve(Role::Sessions, checkfu_sessions::files_server(svc.uploads.clone()));
        node.serve(Role::Sessions, checkfu_sessions::skills_server(svc.uploads.clone()));
        node.serve(Role::Sessions, checkfu_sessions::server(svc));
        Ok(())
    }
}
