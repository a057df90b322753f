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
use crate::options::{BootstrapInfo, NodeOptions};
use crate::roles::{self, Assembly, Started};
use anyhow::{Context, bail};
use checkfu_core::Role;
use checkfu_proto::transport::{self, Transport};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

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
    pub async fn start_with(listener: TcpListener, internal: Option<TcpListener>, mut opts: NodeOptions) -> anyhow::Result<Node> {
        let addr = listener.local_addr()?;
        // One process on its own listener: providers call back to it.
        if opts.embedded && opts.scheduler.public_url.is_empty() {
            opts.scheduler.public_url = format!("http://{addr}");
        }
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
