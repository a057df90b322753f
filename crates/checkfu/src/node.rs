//! A node: a set of roles in one process, on two listeners.
//!
//! - The **public** listener serves the REST/SSE API (with the gateway
//!   role), health and metrics — nothing internal.
//! - The **internal** listener (only under `checkfu serve`) serves the
//!   roles' gRPC services to the other roles of the mesh, over mutual TLS
//!   with the installation CA (`mesh.rs`), each call authorized by the
//!   calling role (`checkfu_proto::mesh`).
//!
//! Roles this node plays call each other in process, through the same
//! generated clients and the same authorization; `checkfu up` plays every
//! role and opens no internal listener at all.

use crate::health;
use crate::mesh::MeshTls;
use crate::roles::{self, Assembly, Started};
use anyhow::{Context, bail};
use checkfu_core::Role;
use checkfu_proto::transport::{self, Transport};
use checkfu_store::Location;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

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
                let ns =
                    c.runner.sandbox_namespace.clone().or_else(|| std::env::var("POD_NAMESPACE").ok()).unwrap_or_else(|| "default".into());
                checkfu_runner::kubernetes::KubeSettings {
                    storage_class: c.runner.sandbox_storage_class.clone(),
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

pub struct Node {
    /// The public listener's address.
    pub addr: SocketAddr,
    /// The internal (mutual TLS) listener's address, under `serve`.
    pub internal_addr: Option<SocketAddr>,
    pub bootstrap: Option<BootstrapInfo>,
    /// The roles this node serves, reachable in process (see [`Node::client_as`]).
    local: BTreeMap<Role, Transport>,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Node {
    /// Starts serving on the public `listener` only (every role it needs is
    /// in process or remote); returns once the node accepts requests.
    pub async fn start(listener: TcpListener, opts: NodeOptions) -> anyhow::Result<Node> {
        Self::start_with(listener, None, opts).await
    }

    /// Starts serving on the public `listener` and, when given, the
    /// `internal` one (mutual TLS, for the other roles of the mesh).
    pub async fn start_with(listener: TcpListener, internal: Option<TcpListener>, opts: NodeOptions) -> anyhow::Result<Node> {
        let addr = listener.local_addr()?;
        let internal_addr = internal.as_ref().map(TcpListener::local_addr).transpose()?;
        let mesh = opts.mesh.as_ref();
        if internal.is_some() && mesh.is_none() {
            bail!("the internal listener needs this process's mesh certificate: set [mesh] ca, cert and key in the config");
        }
        if let Some(m) = mesh
            && let Some(missing) = opts.roles.iter().find(|r| !m.roles.is(**r))
        {
            bail!("this process plays the {missing} role but its mesh certificate does not name it ({})", missing.mesh_name());
        }
        let shutdown = CancellationToken::new();
        let mut assembly = Assembly::new(&opts, shutdown.clone()).await?;
        for play in roles::TABLE.iter().filter(|p| opts.roles.contains(&p.role())) {
            play.start(&mut assembly).await.with_context(|| format!("starting the {} role", play.role()))?;
            for role in play.waits_on() {
                assembly.wait_on(*role)?;
            }
        }
        let Started { readiness, grpc, local, background, bootstrap, api } = assembly.finish();

        // The public listener: the REST/SSE API and health, nothing internal.
        let app = match api {
            Some(api) => checkfu_gateway::finish(api.merge(health::router(readiness))),
            None => health::router(readiness),
        };
        let app = app.layer(axum::middleware::from_fn(health::track));
        health::prometheus();

        let mut tasks = vec![];
        let stop = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            use axum::serve::ListenerExt;
            // Small gRPC frames and SSE lines must not wait for Nagle.
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            // `into_make_service` settles the router's state once; serving
            // the `Router` itself would deep-copy every route per connection
            // (and free it all again when the connection ends), which made
            // a thousand SSE clients leaving cost a third of a CPU-second.
            // With the peer's address, for throttling invalid keys per client.
            let served = axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "the listener failed");
            }
        }));
        if let Some(internal) = internal {
            let (tls, stop) = (mesh.cloned().context("mesh identity")?, shutdown.clone());
            tasks.push(tokio::spawn(async move {
                if let Err(e) = crate::mesh::serve(internal, &tls, grpc, stop).await {
                    tracing::error!(error = %format!("{e:#}"), "the internal listener failed");
                }
            }));
        }
        for task in background {
            tasks.push(tokio::spawn(task));
        }
        if opts.embedded
            && let Some(b) = &bootstrap
            && let Some(t) = local.get(&Role::ModelGateway)
        {
            cma_default_route(transport::acting_as(t.clone(), Role::Gateway), &b.environment_id).await?;
        }
        Ok(Node { addr, internal_addr, bootstrap, local, shutdown, tasks })
    }

    /// A client transport into a role this node serves, calling as
    /// `caller` — for tests that play a role by hand (a runner, say). It
    /// exists only in process; nothing internal listens publicly.
    pub fn client_as(&self, caller: Role, callee: Role) -> Option<Transport> {
        self.local.get(&callee).map(|t| transport::acting_as(t.clone(), caller))
    }

    /// Stops accepting work, drains in-flight requests and waits.
    pub async fn stop(self) {
        self.shutdown.cancel();
        for t in self.tasks {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), t).await;
        }
    }

    /// A token that stops the node when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Waits until every task of the node ended (after shutdown).
    pub async fn wait(self) {
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// The embedded installation routes every CMA model name to the scripted
/// model (`cma:*`, docs/cma.md), so an SDK client's first agent runs.
async fn cma_default_route(t: Transport, environment_id: &str) -> anyhow::Result<()> {
    use checkfu_proto::modelgateway::v1 as mg;
    let candidates =
        vec![mg::Candidate { provider: "scripted".into(), model: "scripted-1".into(), effort: "medium".into(), ..Default::default() }];
    let req = mg::CreateRoutingProfileRequest { environment_id: environment_id.into(), name: "cma:*".into(), candidates };
    mg::model_gateway_service_client::ModelGatewayServiceClient::new(t)
        .create_routing_profile(req)
        .await
        .context("routing cma:* to the scripted model")?;
    Ok(())
}
