//! What a node is made of: the roles it plays, where it keeps state, whom
//! it reaches and how, read from a validated configuration; and what
//! bootstrap made on this start. The roles read these; the node builds them.

use crate::mesh::MeshTls;
use checkfu_core::Role;
use checkfu_store::Location;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

/// How a node is put together: what the whole installation shares, then
/// one section per role, which only that role reads (a role's `start` takes
/// its own section and the shared fields, nothing of another role's).
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
    /// One-process installation: leases held by a previous process are
    /// released at start, since its runner died with it.
    pub embedded: bool,
    /// Kafka bootstrap servers; `None` keeps durable events on the
    /// in-process bus (the embedded installation).
    pub kafka_brokers: Option<String>,
    /// Redis for live fan-out across replicas and shared rate limits;
    /// `None` keeps both in process.
    pub redis_url: Option<String>,
    /// Seals stored secrets (webhook signing secrets) and signs capability
    /// tokens under the installation key; `None` on SQLite keeps a key in
    /// the data directory. A `Sealer`, never the key's text, so the options
    /// can be printed.
    pub sealer: Option<checkfu_store::sealed::Sealer>,
    /// Session files, workspace snapshots and memory contents: `s3://...`
    /// or a directory (the sessions and memory roles).
    pub blob_store: String,
    /// Features switched off (docs/api.md, "Features"); each role that
    /// serves one answers `feature_disabled` for it.
    pub features_disabled: checkfu_core::features::Disabled,
    /// Outbound fetches may reach private, loopback and link-local
    /// addresses (local development and tests; production refuses them):
    /// installation policy, which every role that reaches out obeys.
    pub allow_private_targets: bool,
    pub gateway: GatewayOptions,
    pub governance: GovernanceOptions,
    pub sessions: SessionsOptions,
    pub capability_gateway: CapabilityGatewayOptions,
    pub model_gateway: ModelGatewayOptions,
    pub scheduler: SchedulerOptions,
    pub runner: checkfu_runner::RunnerConfig,
}

/// The scheduler role's section: provider events (api.md §18.9).
#[derive(Debug, Clone, Default)]
pub struct SchedulerOptions {
    /// The public API's base, which providers call back
    /// (`https://checkfu.example.com`); empty: the one-process
    /// installation's own listener, else none (provider sources refused).
    pub public_url: String,
    /// Offer the `fake` provider: tests and local development only.
    pub test_providers: bool,
}

/// The gateway role's section: the public edge's limits and mounts.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// How often an idle SSE stream gets a `: ping` comment.
    pub sse_ping: Duration,
    /// Where the CMA-compatible projection is mounted (`/cma`).
    pub cma_prefix: String,
    /// Requests per second one principal may make (per installation).
    pub rate_limit_per_second: u32,
    /// Open SSE streams one principal may hold on one gateway.
    pub max_streams_per_principal: usize,
    /// Invalid API keys one client address may present per 10 s.
    pub auth_failures_per_window: u32,
}

/// The governance role's section.
#[derive(Debug, Clone)]
pub struct GovernanceOptions {
    /// Where bootstrap writes the first admin key (mode 0600).
    pub bootstrap_key_file: Option<PathBuf>,
    /// How long an ActionApproval waits for an answer.
    pub approval_ttl: Duration,
}

/// The sessions role's section.
#[derive(Debug, Clone)]
pub struct SessionsOptions {
    /// How long a Run's lease lasts without a heartbeat.
    pub run_lease: Duration,
    /// How often decided or expired ActionApprovals that Sessions have not
    /// seen yet are recorded in their logs.
    pub approval_sweep_every: Duration,
    /// SandboxProfiles may allow every public host (`allowed_hosts:["*"]`).
    pub allow_unrestricted_network: bool,
    /// Days an uploaded File lives by default (0: until deleted).
    pub files_retention_days: i64,
}

/// The capability gateway role's section.
#[derive(Debug, Clone)]
pub struct CapabilityGatewayOptions {
    /// The credential key file sealing Connection credentials; `None`
    /// keeps one in the data directory on SQLite and leaves `credentials`
    /// unavailable on PostgreSQL.
    pub credential_key_file: Option<PathBuf>,
    /// The sandbox egress proxy's listener; `None` runs none (sandboxes
    /// then have no network at all).
    pub egress_listen: Option<String>,
    /// The proxy's address as runners reach it; default the bound one.
    pub egress_advertise: Option<String>,
}

/// The model gateway role's section.
#[derive(Debug, Clone)]
pub struct ModelGatewayOptions {
    /// Where each provider's requests may go, with which key (installation
    /// configuration, never API input).
    pub endpoints: checkfu_model_gateway::endpoints::Endpoints,
}

/// How often the sessions role records approvals decided elsewhere.
const APPROVAL_SWEEP_EVERY: Duration = Duration::from_secs(2);

impl NodeOptions {
    /// The options a validated configuration describes, for `roles`;
    /// `embedded` for the one-process installation.
    pub fn from_config(config: &crate::config::Loaded, roles: BTreeSet<Role>, embedded: bool) -> anyhow::Result<NodeOptions> {
        let c = &config.config;
        let mut runner = checkfu_runner::RunnerConfig {
            heartbeat_every: Duration::from_millis(c.runner.heartbeat_ms),
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
            embedded,
            kafka_brokers: c.kafka_brokers.clone(),
            redis_url: c.redis_url.clone(),
            sealer: config.sealer.clone(),
            blob_store: c.blob_store.clone().unwrap_or_else(|| c.data_dir.join("blobs").display().to_string()),
            features_disabled: checkfu_core::features::Disabled::parse(&c.features_disabled)
                .map_err(|e| anyhow::anyhow!("features_disabled: {}", e.message))?,
            allow_private_targets: c.allow_private_targets,
            gateway: GatewayOptions {
                sse_ping: Duration::from_secs(c.timing.sse_ping_seconds),
                cma_prefix: c.cma_prefix.clone(),
                rate_limit_per_second: c.limits.rate_limit_per_second,
                max_streams_per_principal: c.limits.max_streams_per_principal as usize,
                auth_failures_per_window: c.limits.auth_failures_per_window,
            },
            governance: GovernanceOptions {
                bootstrap_key_file: Some(c.bootstrap_key_file()),
                approval_ttl: Duration::from_secs(c.timing.approval_ttl_seconds),
            },
            sessions: SessionsOptions {
                run_lease: Duration::from_millis(c.timing.run_lease_ms),
                approval_sweep_every: APPROVAL_SWEEP_EVERY,
                allow_unrestricted_network: c.allow_unrestricted_network,
                files_retention_days: c.files_retention_days,
            },
            capability_gateway: CapabilityGatewayOptions {
                credential_key_file: c.credential_key_file.clone(),
                egress_listen: (!c.egress_listen.is_empty()).then(|| c.egress_listen.clone()),
                egress_advertise: c.egress_advertise.clone(),
            },
            model_gateway: ModelGatewayOptions { endpoints: config.model_endpoints.clone() },
            scheduler: SchedulerOptions { public_url: c.public_url.clone().unwrap_or_default(), test_providers: c.test_providers },
            runner,
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
