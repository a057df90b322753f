//! What a node is made of: the roles it plays, where it keeps state, whom
//! it reaches and how, read from a validated configuration; and what
//! bootstrap made on this start. The roles read these; the node builds them.

use crate::mesh::MeshTls;
use checkfu_core::Role;
use checkfu_store::Location;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// How a node is put together.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    pub roles: BTreeSet<Role>,
    pub storage: Location,
    /// Internal addresses (`https://host:port`) of roles this node does not
    /// play.
    pub remotes: BTreeMap<Role, String>,
    /// This process's mesh identity: needed to reach remote roles and to
    /// serve the internal listener.
    pub mesh: Option<MeshTls>,
    /// Where governance writes the bootstrap admin key (mode 0600).
    pub bootstrap_key_file: Option<PathBuf>,
    /// One-process installation: leases held by a previous process are
    /// released at start, since its runner died with it.
    pub embedded: bool,
    pub runner: checkfu_runner::RunnerConfig,
    /// How often an idle SSE stream gets a `: ping` comment.
    pub sse_ping: std::time::Duration,
    pub approvals: ApprovalTiming,
    /// How long a Run's lease lasts without a heartbeat.
    pub run_lease: std::time::Duration,
    /// Outbound fetches may reach private, loopback and link-local
    /// addresses (local development and tests; production refuses them).
    pub allow_private_targets: bool,
    /// SandboxProfiles may allow every public host (`allowed_hosts:["*"]`).
    pub allow_unrestricted_network: bool,
    /// Where the CMA-compatible projection is mounted (`/cma`).
    pub cma_prefix: String,
    /// Kafka bootstrap servers; `None` keeps durable events on the
    /// in-process bus (the embedded installation).
    pub kafka_brokers: Option<String>,
    /// Redis for live fan-out across replicas and shared rate limits;
    /// `None` keeps both in process.
    pub redis_url: Option<String>,
    /// Session files and workspace snapshots: `s3://...` or a directory.
    pub blob_store: String,
    /// Requests per second one principal may make (per installation).
    pub rate_limit_per_second: u32,
    /// Open SSE streams one principal may hold on one gateway.
    pub max_streams_per_principal: usize,
    /// Invalid API keys one client address may present per 10 s.
    pub auth_failures_per_window: u32,
    /// Seals stored secrets (webhook signing secrets) under the
    /// installation key; `None` on SQLite keeps a key in the data directory.
    /// A `Sealer`, never the key's text, so the options can be printed.
    pub sealer: Option<checkfu_store::sealed::Sealer>,
    /// Where the model gateway may send each provider's requests, with
    /// which key (installation configuration, never API input).
    pub model_endpoints: checkfu_model_gateway::endpoints::Endpoints,
    /// The credential key file sealing Connection credentials; `None`
    /// keeps one in the data directory on SQLite and leaves `credentials`
    /// unavailable on PostgreSQL.
    pub credential_key_file: Option<PathBuf>,
    /// Features switched off (api.md §16.8).
    pub features_disabled: checkfu_core::features::Disabled,
    /// The sandbox egress proxy's listener; `None` runs none (sandboxes
    /// then have no network at all).
    pub egress_listen: Option<String>,
    /// The proxy's address as runners reach it; default the bound one.
    pub egress_advertise: Option<String>,
    /// Days an uploaded File lives by default (0: until deleted).
    pub files_retention_days: i64,
}

/// How long ActionApprovals wait, and how often the sessions role records
/// decided or expired ones its Sessions have not seen yet.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalTiming {
    pub ttl: std::time::Duration,
    pub sweep_every: std::time::Duration,
}

impl Default for ApprovalTiming {
    fn default() -> Self {
        ApprovalTiming { ttl: std::time::Duration::from_secs(3600), sweep_every: std::time::Duration::from_secs(2) }
    }
}

impl NodeOptions {
    /// The options a validated configuration describes, for `roles`;
    /// `embedded` for the one-process installation.
    pub fn from_config(config: &crate::config::Loaded, roles: BTreeSet<Role>, embedded: bool) -> anyhow::Result<NodeOptions> {
        let c = &config.config;
        let mut runner = checkfu_runner::RunnerConfig {
            heartbeat_every: std::time::Duration::from_millis(c.runner.heartbeat_ms),
            workspaces: c.workspaces(),
            sandbox_cgroup: c.runner.sandbox_cgroup.clone(),
            kubernetes: (c.runner.sandbox_driver == "kubernetes").then(|| {
                let ns = c.runner.sandbox_namespace.clone().or_else(|| config.pod.namespace.clone()).unwrap_or_else(|| "default".into());
                checkfu_runner::kubernetes::KubeSettings {
                    storage_class: c.runner.sandbox_storage_class.clone(),
                    platform_namespace: config.pod.namespace.clone(),
                    ..checkfu_runner::kubernetes::KubeSettings::new(&ns)
                }
            }),
            ..Default::default()
        };
        if let Some(id) = &c.runner.id {
            runner.runner_id = id.clone();
        }
        Ok(NodeOptions {
            roles,
            storage: c.location(),
            remotes: c.remotes(),
            mesh: c.mesh.as_ref().map(|m| MeshTls::load(&m.files())).transpose()?,
            bootstrap_key_file: Some(c.bootstrap_key_file()),
            embedded,
            runner,
            sse_ping: std::time::Duration::from_secs(c.timing.sse_ping_seconds),
            approvals: ApprovalTiming { ttl: std::time::Duration::from_secs(c.timing.approval_ttl_seconds), ..Default::default() },
            run_lease: std::time::Duration::from_millis(c.timing.run_lease_ms),
            allow_private_targets: c.allow_private_targets,
            allow_unrestricted_network: c.allow_unrestricted_network,
            cma_prefix: c.cma_prefix.clone(),
            kafka_brokers: c.kafka_brokers.clone(),
            redis_url: c.redis_url.clone(),
            blob_store: c.blob_store.clone().unwrap_or_else(|| c.data_dir.join("blobs").display().to_string()),
            rate_limit_per_second: c.limits.rate_limit_per_second,
            max_streams_per_principal: c.limits.max_streams_per_principal as usize,
            auth_failures_per_window: c.limits.auth_failures_per_window,
            sealer: config.sealer.clone(),
            model_endpoints: config.model_endpoints.clone(),
            credential_key_file: c.credential_key_file.clone(),
            egress_listen: (!c.egress_listen.is_empty()).then(|| c.egress_listen.clone()),
            egress_advertise: c.egress_advertise.clone(),
            files_retention_days: c.files_retention_days,
            features_disabled: checkfu_core::features::Disabled::parse(&c.features_disabled)
                .map_err(|e| anyhow::anyhow!("features_disabled: {}", e.message))?,
        })
    }
}

/// What bootstrap did on this start.
#[derive(Debug, Clone)]
pub struct BootstrapInfo {
    pub admin_principal_id: String,
    pub environment_id: String,
    pub key_file: PathBuf,
}
