//! A node while its roles start: what they add (gRPC services, routes,
//! readiness checks, background work) and how one role reaches another.

use crate::health::{Check, Readiness};
use crate::options::{BootstrapInfo, NodeOptions};
use anyhow::{Context, bail};
use checkfu_core::Role;
use checkfu_proto::mesh::Authorized;
use checkfu_proto::transport::{self, Transport};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

type Background = Pin<Box<dyn Future<Output = ()> + Send>>;
type GrpcRequest = http::Request<tonic::body::Body>;
type GrpcResponse = http::Response<tonic::body::Body>;

/// What the roles of a node share while they start, and what they add.
pub struct Assembly<'a> {
    pub opts: &'a NodeOptions,
    pub shutdown: CancellationToken,
    /// Durable events: Kafka, or the in-process bus.
    pub bus: Arc<dyn checkfu_bus::Bus>,
    /// Live fan-out and shared limits, when configured.
    pub redis: Option<checkfu_ephemeral::redis_impl::Redis>,
    /// Where governance announces changes to keys and grants and the
    /// gateways' decision caches read them: Redis when configured; in
    /// process when this process is the whole of governance (it plays the
    /// role on its own SQLite store); else none, and nothing is cached.
    pub epochs: Option<Arc<dyn checkfu_ephemeral::Epochs>>,
    /// What bootstrap made on this start (the governance role).
    pub bootstrap: Option<BootstrapInfo>,
    /// The public REST/SSE routes (the gateway role).
    pub api: Option<axum::Router>,
    readiness: Readiness,
    grpc: tonic::service::Routes,
    /// Roles played here, called in process.
    local: BTreeMap<Role, Transport>,
    /// Roles played here that an earlier role reaches ([`Self::reach_later`]),
    /// filled when every role has started.
    slots: BTreeMap<Role, Arc<std::sync::OnceLock<Transport>>>,
    background: Vec<Background>,
}

/// A node's parts once every role started.
pub struct Started {
    pub readiness: Readiness,
    pub grpc: tonic::service::Routes,
    pub local: BTreeMap<Role, Transport>,
    pub background: Vec<Background>,
    pub bootstrap: Option<BootstrapInfo>,
    pub api: Option<axum::Router>,
}

impl<'a> Assembly<'a> {
    /// Connects what every role shares: the bus, Redis, the health service.
    pub async fn new(opts: &'a NodeOptions, shutdown: CancellationToken) -> anyhow::Result<Assembly<'a>> {
        let redis = match &opts.redis_url {
            Some(url) => Some(checkfu_ephemeral::redis_impl::Redis::connect(url).await.context("connecting to Redis")?),
            None => None,
        };
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
        let epochs: Option<Arc<dyn checkfu_ephemeral::Epochs>> = match &redis {
            Some(r) => Some(Arc::new(r.clone())),
            None if opts.roles.contains(&Role::Governance) && matches!(opts.storage, checkfu_store::Location::SqliteDir(_)) => {
                Some(Arc::new(checkfu_ephemeral::memory::MemoryEpochs::default()))
            }
            None => None,
        };
        let (health, health_service) = tonic_health::server::health_reporter();
        health.set_service_status("", tonic_health::ServingStatus::Serving).await;
        Ok(Assembly {
            opts,
            shutdown,
            bus,
            redis,
            epochs,
            bootstrap: None,
            api: None,
            readiness: Readiness::default(),
            grpc: tonic::service::Routes::new(Authorized::new(health_service)),
            local: BTreeMap::new(),
            slots: BTreeMap::new(),
            background: vec![],
        })
    }

    /// Serves `role`'s gRPC service: to the mesh, and in process to the
    /// roles of this node; every call authorized by its caller.
    pub fn serve<S>(&mut self, role: Role, service: S)
    where
        S: tower::Service<GrpcRequest, Response = GrpcResponse, Error = Infallible>
            + tonic::server::NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        let server = Authorized::new(service);
        let mine = transport::local(server.clone());
        let local = match self.local.remove(&role) {
            Some(rest) => transport::either(S::NAME, mine, rest),
            None => mine,
        };
        self.local.insert(role, local);
        self.grpc = std::mem::take(&mut self.grpc).add_service(server);
    }

    /// Readiness includes `ready(svc)` under `name`.
    pub fn ready<S, F, Fut>(&mut self, name: &str, svc: S, ready: F)
    where
        S: Clone + Send + Sync + 'static,
        F: Fn(S) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = bool> + Send + 'static,
    {
        let check: Check = Arc::new(move || Box::pin(ready(svc.clone())));
        self.readiness.checks.push((name.to_string(), check));
    }

    /// Runs `work` once the node listens, until shutdown.
    pub fn spawn(&mut self, work: impl Future<Output = ()> + Send + 'static) {
        self.background.push(Box::pin(work));
    }

    /// How `caller` reaches `callee`: in process (as `caller`) when this
    /// node plays it, else over the mesh (as the roles this process's
    /// certificate names).
    pub fn reach(&self, caller: Role, callee: Role) -> anyhow::Result<Transport> {
        Ok(match self.local.get(&callee) {
            Some(t) => transport::acting_as(t.clone(), caller),
            None => transport::remote(self.channel(callee)?),
        })
    }

    /// Like [`Self::reach`], for a role this node plays that starts after
    /// `caller` (two roles that call each other): its calls reach `callee`
    /// once every role has started.
    pub fn reach_later(&mut self, caller: Role, callee: Role) -> anyhow::Result<Transport> {
        if self.local.contains_key(&serving(callee)) || !self.opts.roles.contains(&callee) {
            return self.reach(caller, callee);
        }
        let slot = self.slots.entry(serving(callee)).or_default().clone();
        Ok(transport::acting_as(transport::later(slot), caller))
    }

    /// Readiness includes the health of `role` when another process plays it.
    pub fn wait_on(&mut self, role: Role) -> anyhow::Result<()> {
        if !self.local.contains_key(&serving(role)) {
            let check = remote_ready(self.channel(role)?);
            self.readiness.checks.push((role.name().into(), check));
        }
        Ok(())
    }

    pub fn finish(self) -> Started {
        for (role, slot) in &self.slots {
            if let Some(t) = self.local.get(role) {
                let _ = slot.set(t.clone());
            }
        }
        Started {
            readiness: self.readiness,
            grpc: self.grpc,
            local: self.local,
            background: self.background,
            bootstrap: self.bootstrap,
            api: self.api,
        }
    }

    /// A mesh channel to a role this node does not play.
    fn channel(&self, role: Role) -> anyhow::Result<Channel> {
        let Some(url) = self.opts.remotes.get(&serving(role)) else {
            bail!("this node needs the {role} role: play it (--roles) or give its address in the config's [endpoints]")
        };
        let Some(mesh) = &self.opts.mesh else {
            bail!("reaching the {role} role at {url} needs this process's mesh certificate: set [mesh] ca, cert and key in the config")
        };
        mesh.channel(url, serving(role))
    }
}

/// The role that serves `role`'s gRPC service: the runner protocol is
/// served by the sessions role.
fn serving(role: Role) -> Role {
    if role == Role::Runner { Role::Sessions } else { role }
}

/// Readiness of a remote role: its gRPC health service answers SERVING.
fn remote_ready(ch: Channel) -> Check {
    Arc::new(move || {
        let mut client = tonic_health::pb::health_client::HealthClient::new(ch.clone());
        Box::pin(async move {
            client
                .check(tonic_health::pb::HealthCheckRequest { service: String::new() })
                .await
                .is_ok_and(|r| r.into_inner().status == tonic_health::pb::health_check_response::ServingStatus::Serving as i32)
        })
    })
}
