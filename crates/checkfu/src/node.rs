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

use crate::health::{self, Check, Readiness};
use crate::mesh::MeshTls;
use anyhow::{Context, bail};
use checkfu_core::Role;
use checkfu_proto::mesh::Authorized;
use checkfu_proto::transport::{self, Transport};
use checkfu_store::Location;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

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
    /// Outbound fetches may reach private, loopback and link-local
    /// addresses (local development and tests; production refuses them).
    pub allow_private_targets: bool,
    /// Kafka bootstrap servers; `None` keeps durable events on the
    /// in-process bus (the embedded installation).
    pub kafka_brokers: Option<String>,
    /// Redis for live fan-out across replicas and shared rate limits;
    /// `None` keeps both in process.
    pub redis_url: Option<String>,
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
}

/// A positive number from the environment variable `name`, else `default`
/// (unset, unparsable or zero).
fn positive_from_env<T: std::str::FromStr + PartialOrd + Default>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|n| *n > T::default()).unwrap_or(default)
}

/// The per-principal limit: 2,000 requests per second, or
/// `CHECKFU_RATE_LIMIT_PER_SECOND`.
pub fn rate_limit_from_env() -> u32 {
    positive_from_env("CHECKFU_RATE_LIMIT_PER_SECOND", 2_000)
}

/// Open SSE streams per principal per gateway: 500, or
/// `CHECKFU_MAX_STREAMS_PER_PRINCIPAL`.
pub fn max_streams_from_env() -> usize {
    positive_from_env("CHECKFU_MAX_STREAMS_PER_PRINCIPAL", checkfu_gateway::streams::DEFAULT_MAX_PER_PRINCIPAL)
}

/// Invalid keys per client address per 10 s: 20, or
/// `CHECKFU_AUTH_FAILURES_PER_WINDOW`.
pub fn auth_failures_from_env() -> u32 {
    positive_from_env("CHECKFU_AUTH_FAILURES_PER_WINDOW", checkfu_gateway::auth::AUTH_FAILURES_PER_WINDOW)
}

/// The sealer of `CHECKFU_SECRETS_KEY` (32+ characters), when it is set.
pub fn sealer_from_env() -> anyhow::Result<Option<checkfu_store::sealed::Sealer>> {
    std::env::var("CHECKFU_SECRETS_KEY")
        .ok()
        .filter(|k| !k.is_empty())
        .map(|k| checkfu_store::sealed::Sealer::from_key(&k).map_err(|e| anyhow::anyhow!("CHECKFU_SECRETS_KEY: {}", e.message)))
        .transpose()
}

/// `CHECKFU_ALLOW_PRIVATE_TARGETS=true`.
pub fn private_targets_from_env() -> bool {
    std::env::var("CHECKFU_ALLOW_PRIVATE_TARGETS").is_ok_and(|v| v == "true" || v == "1")
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

impl ApprovalTiming {
    /// The defaults (1 h TTL), or `CHECKFU_APPROVAL_TTL_SECONDS`.
    pub fn from_env() -> Self {
        let ttl = std::env::var("CHECKFU_APPROVAL_TTL_SECONDS").ok().and_then(|v| v.parse().ok()).filter(|s| *s > 0);
        ApprovalTiming { ttl: ttl.map(std::time::Duration::from_secs).unwrap_or(ApprovalTiming::default().ttl), ..Default::default() }
    }
}

/// The SSE keep-alive interval: 15 s, or `CHECKFU_SSE_PING_SECONDS`.
pub fn sse_ping_from_env() -> std::time::Duration {
    std::time::Duration::from_secs(
        std::env::var("CHECKFU_SSE_PING_SECONDS").ok().and_then(|v| v.parse().ok()).filter(|s| *s > 0).unwrap_or(15),
    )
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

fn check<F, Fut>(f: F) -> Check
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send + 'static,
{
    Arc::new(move || Box::pin(f()))
}

/// Readiness of a remote role: its gRPC health service answers SERVING.
fn remote_ready(ch: Channel) -> Check {
    check(move || {
        let mut client = tonic_health::pb::health_client::HealthClient::new(ch.clone());
        async move {
            client
                .check(tonic_health::pb::HealthCheckRequest { service: String::new() })
                .await
                .is_ok_and(|r| r.into_inner().status == tonic_health::pb::health_check_response::ServingStatus::Serving as i32)
        }
    })
}

/// Where a role this node does not play is reached.
fn remote_url(remotes: &BTreeMap<Role, String>, role: Role) -> anyhow::Result<String> {
    match remotes.get(&role) {
        Some(u) => Ok(u.clone()),
        None => bail!("this node needs the {role} role: play it (--roles) or give its address in the config's [endpoints]"),
    }
}

/// The role that serves `role`'s gRPC service: the runner protocol is
/// served by the sessions role.
fn serving(role: Role) -> Role {
    if role == Role::Runner { Role::Sessions } else { role }
}

/// A mesh channel to a role this node does not play.
fn mesh_channel(mesh: Option<&MeshTls>, remotes: &BTreeMap<Role, String>, role: Role) -> anyhow::Result<Channel> {
    let url = remote_url(remotes, serving(role))?;
    let Some(mesh) = mesh else {
        bail!("reaching the {role} role at {url} needs this process's mesh certificate: set [mesh] ca, cert and key in the config")
    };
    mesh.channel(&url, serving(role))
}

/// How `caller` reaches `callee`: in process (as `caller`) when this node
/// plays it, else over the mesh (as the roles this process's certificate
/// names).
fn reach(
    local: &BTreeMap<Role, Transport>,
    mesh: Option<&MeshTls>,
    remotes: &BTreeMap<Role, String>,
    caller: Role,
    callee: Role,
) -> anyhow::Result<Transport> {
    Ok(match local.get(&callee) {
        Some(t) => transport::acting_as(t.clone(), caller),
        None => transport::remote(mesh_channel(mesh, remotes, callee)?),
    })
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
        let has = |r: Role| opts.roles.contains(&r);
        let shutdown = CancellationToken::new();
        let mut readiness = Readiness::default();
        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_service_status("", tonic_health::ServingStatus::Serving).await;
        let mut grpc = tonic::service::Routes::new(Authorized::new(health_service));
        let mut bootstrap = None;
        // Roles this node plays are called in process; the rest over HTTP/2.
        let mut local: BTreeMap<Role, Transport> = BTreeMap::new();
        let mut sweepers = vec![];
        let mut relays: Vec<checkfu_bus::outbox::Relay> = vec![];
        let redis = match &opts.redis_url {
            Some(url) => Some(checkfu_ephemeral::redis_impl::Redis::connect(url).await.context("connecting to Redis")?),
            None => None,
        };
        let mut background: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>> = vec![];
        let bus: Arc<dyn checkfu_bus::Bus> = match &opts.kafka_brokers {
            Some(brokers) => {
                let k = checkfu_bus::kafka::KafkaBus::new(brokers)?;
                if let Err(e) = k.ensure_topics(checkfu_bus::TOPICS).await {
                    // The outbox holds events until the broker is reachable.
                    tracing::warn!(error = %e, "could not ensure the Kafka topics yet");
                }
                Arc::new(k)
            }
            None => Arc::new(checkfu_bus::memory::MemoryBus::new()),
        };

        if has(Role::Governance) {
            let (svc, db) = checkfu_governance::open(&opts.storage).await.context("opening the governance store")?;
            let svc = svc.with_approval_ttl_ms(opts.approvals.ttl.as_millis() as i64);
            relays.push(checkfu_bus::outbox::Relay::new(db, bus.clone(), "governance"));
            let path = opts.bootstrap_key_file.clone().unwrap_or_else(|| PathBuf::from("admin.key"));
            let key_file = crate::key_file::KeyFile::new(path.clone());
            let b = svc.bootstrap(|secret| key_file.place(secret).map_err(|e| checkfu_core::Error::internal(format!("{e:#}")))).await;
            match &b {
                Ok(b) if b.created => key_file.keep(),
                // Another replica bootstrapped, or the commit failed: what
                // this one placed is not a key of the installation.
                _ => key_file.discard(),
            }
            let b = b.context("bootstrapping the installation")?;
            if b.created {
                bootstrap =
                    Some(BootstrapInfo { admin_principal_id: b.admin_principal_id, environment_id: b.environment_id, key_file: path });
            }
            let s = svc.clone();
            readiness.checks.push((
                "governance".into(),
                check(move || {
                    let s = s.clone();
                    async move { s.ready().await }
                }),
            ));
            let server = Authorized::new(checkfu_governance::server(svc));
            local.insert(Role::Governance, transport::local(server.clone()));
            grpc = grpc.add_service(server);
        }
        if has(Role::ModelGateway) {
            let mut endpoints = opts.model_endpoints.clone();
            endpoints.allow_private |= opts.allow_private_targets;
            let svc = checkfu_model_gateway::open(&opts.storage, endpoints).await.context("opening the model-gateway store")?;
            let s = svc.clone();
            readiness.checks.push((
                "model-gateway".into(),
                check(move || {
                    let s = s.clone();
                    async move { s.ready().await }
                }),
            ));
            let server = Authorized::new(checkfu_model_gateway::server(svc));
            local.insert(Role::ModelGateway, transport::local(server.clone()));
            grpc = grpc.add_service(server);
        }
        if has(Role::Sessions) {
            let governance = reach(&local, mesh, &opts.remotes, Role::Sessions, Role::Governance)?;
            let (svc, db) = checkfu_sessions::open(&opts.storage).await.context("opening the sessions store")?;
            let relay = checkfu_bus::outbox::Relay::new(db, bus.clone(), "sessions");
            let mut svc = svc.with_governance(governance).with_outbox_wake(relay.wake.clone());
            // A shorter lease hands a dead replica's Runs over sooner (tests).
            if let Some(ms) = std::env::var("CHECKFU_RUN_LEASE_MS").ok().and_then(|v| v.parse::<i64>().ok()).filter(|m| *m >= 1000) {
                svc = svc.with_lease_ms(ms);
            }
            if let Some(r) = &redis {
                svc = svc.with_fanout(Arc::new(r.clone())).await.context("subscribing to the live fan-out")?;
            }
            relays.push(relay);
            sweepers.push(svc.clone());
            if opts.embedded {
                let n = svc.release_orphaned_leases().await?;
                if n > 0 {
                    tracing::info!(runs = n, "resuming runs interrupted by the previous shutdown");
                }
            }
            let s = svc.clone();
            readiness.checks.push((
                "sessions".into(),
                check(move || {
                    let s = s.clone();
                    async move { s.ready().await }
                }),
            ));
            let (server, runner_server) =
                (Authorized::new(checkfu_sessions::server(svc.clone())), Authorized::new(checkfu_sessions::runner_server(svc)));
            local.insert(Role::Sessions, transport::local(server.clone()));
            local.insert(Role::Runner, transport::local(runner_server.clone()));
            grpc = grpc.add_service(server).add_service(runner_server);
        }
        if has(Role::CapabilityGateway) {
            let sessions = reach(&local, mesh, &opts.remotes, Role::CapabilityGateway, Role::Sessions)?;
            let server = Authorized::new(checkfu_capability_gateway::server(sessions, opts.allow_private_targets));
            local.insert(Role::CapabilityGateway, transport::local(server.clone()));
            grpc = grpc.add_service(server);
        }
        if has(Role::Scheduler) {
            grpc = grpc.add_service(Authorized::new(checkfu_scheduler::server()));
        }
        if has(Role::Webhooks) {
            let sealer = match (&opts.sealer, &opts.storage) {
                (Some(s), _) => s.clone(),
                (None, Location::SqliteDir(dir)) => checkfu_store::sealed::Sealer::load_or_create(&dir.join("secrets.key"))
                    .map_err(|e| anyhow::anyhow!("the secrets key: {}", e.message))?,
                (None, _) => bail!("the webhooks role seals signing secrets at rest: set CHECKFU_SECRETS_KEY (32+ characters)"),
            };
            let svc =
                checkfu_webhooks::open(&opts.storage, opts.allow_private_targets, sealer).await.context("opening the webhooks store")?;
            for topic in [checkfu_bus::SESSION_EVENTS, checkfu_bus::RESOURCE_EVENTS] {
                background.push(Box::pin(checkfu_webhooks::consume(svc.clone(), bus.clone(), topic, shutdown.clone())));
            }
            background.push(Box::pin(checkfu_webhooks::deliver(svc.clone(), std::time::Duration::from_millis(250), shutdown.clone())));
            let server = Authorized::new(checkfu_webhooks::server(svc));
            local.insert(Role::Webhooks, transport::local(server.clone()));
            grpc = grpc.add_service(server);
        }
        if has(Role::Memory) {
            grpc = grpc.add_service(Authorized::new(checkfu_memory::server()));
        }

        let upstream = |caller: Role, callee: Role| reach(&local, mesh, &opts.remotes, caller, callee);
        // The public listener: the REST/SSE API and health, nothing internal.
        let mut app = axum::Router::new();
        if has(Role::Gateway) {
            let up = checkfu_gateway::Upstreams {
                governance: upstream(Role::Gateway, Role::Governance)?,
                sessions: upstream(Role::Gateway, Role::Sessions)?,
                model_gateway: upstream(Role::Gateway, Role::ModelGateway)?,
                webhooks: upstream(Role::Gateway, Role::Webhooks)?,
            };
            for role in [Role::Governance, Role::Sessions, Role::ModelGateway] {
                if !has(role) {
                    readiness.checks.push((role.name().into(), remote_ready(mesh_channel(mesh, &opts.remotes, role)?)));
                }
            }
            let limiter: Arc<dyn checkfu_ephemeral::RateLimiter> = match &redis {
                Some(r) => Arc::new(r.clone()),
                None => Arc::new(checkfu_ephemeral::memory::MemoryLimiter::default()),
            };
            let mut limits = checkfu_gateway::RateLimits::new(limiter, opts.rate_limit_per_second);
            limits.max_streams_per_principal = opts.max_streams_per_principal;
            limits.auth_failures_per_window = opts.auth_failures_per_window;
            let state = checkfu_gateway::AppState::open(&opts.storage, up, shutdown.clone(), opts.sse_ping, limits)
                .await
                .context("opening the gateway store")?;
            let idem = state.idem.clone();
            readiness.checks.push((
                "gateway".into(),
                check(move || {
                    let i = idem.clone();
                    async move { i.ready().await }
                }),
            ));
            app = app.merge(checkfu_gateway::router(state));
        }
        let mut app = app.merge(health::router(readiness));
        if has(Role::Gateway) {
            app = checkfu_gateway::finish(app);
        }
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
        for relay in relays {
            tasks.push(tokio::spawn(relay.run(std::time::Duration::from_millis(500), shutdown.clone())));
        }
        for svc in sweepers {
            tasks.push(tokio::spawn(svc.run_approval_sweeper(opts.approvals.sweep_every, shutdown.clone())));
        }
        if has(Role::Runner) {
            let runner = checkfu_runner::Runner::new(
                upstream(Role::Runner, Role::Runner)?,
                upstream(Role::Runner, Role::ModelGateway)?,
                upstream(Role::Runner, Role::Governance)?,
                upstream(Role::Runner, Role::CapabilityGateway)?,
                opts.runner.clone(),
            );
            let stop = shutdown.clone();
            tasks.push(tokio::spawn(runner.serve(stop)));
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
