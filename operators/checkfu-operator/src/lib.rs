//! The Kubernetes operator for self-hosted Runners and sandbox pods.
//!
//! - the `Runner` and `Sandbox` resources are `checkfu_operator_api::crd`
//!   (the runner creates Sandboxes from the same types).
//! - `sandboxes.rs`: a Sandbox's pod, workspace claim and network policy
//!   (`pod.rs` builds them), kept until the Sandbox goes or expires.
//! - `runners.rs`: a Runner's Deployment of runner pods, each paired with
//!   the installation through `installation.rs`.
//! - `leader.rs`: only the replica holding the Lease reconciles.
//! - `context.rs`: what every reconcile shares (events, backoff, metrics).
//!
//! [`run`] puts them together; `checkfu operator` calls it.

pub mod context;
pub mod error;
pub mod installation;
pub mod leader;
pub mod pod;
pub mod runners;
pub mod sandboxes;

use crate::context::Context;
use checkfu_operator_api::crd::{Runner, Sandbox};
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How the operator runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Watch only this namespace (`None`: every namespace the RBAC allows).
    pub namespace: Option<String>,
    /// Checkfu's image (the sandbox agent's source, the runners' default).
    pub image: String,
    /// This replica's name (its pod name), for the Lease and Events.
    pub identity: String,
    /// Where the leader Lease lives.
    pub lease_namespace: String,
    pub lease_duration: Duration,
}

fn api<K>(client: &kube::Client, namespace: &Option<String>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Waits to lead, then reconciles until `shutdown` (giving the Lease up)
/// or until the Lease is lost (an error: the process exits and starts over).
pub async fn run(
    client: kube::Client,
    opts: Options,
    installation: Arc<dyn installation::Installation>,
    shutdown: CancellationToken,
) -> Result<(), error::Error> {
    let elector = leader::Elector::new(client.clone(), &opts.lease_namespace, "checkfu-operator", &opts.identity, opts.lease_duration);
    tracing::info!(identity = %opts.identity, "waiting to lead");
    if !elector.acquire(&shutdown).await {
        return Ok(());
    }
    tracing::info!(identity = %opts.identity, "leading: reconciling Runners and Sandboxes");
    metrics::gauge!("checkfu_operator_leader").set(1.0);
    let ctx = Arc::new(Context::new(client.clone(), opts.image.clone(), opts.identity.clone(), installation));
    let stop = CancellationToken::new();
    let work = controllers(client, &opts.namespace, ctx, stop.clone());
    tokio::pin!(work);
    tokio::select! {
        _ = elector.hold(&shutdown) => {}
        _ = &mut work => {}
    }
    stop.cancel();
    work.await;
    metrics::gauge!("checkfu_operator_leader").set(0.0);
    if shutdown.is_cancelled() { Ok(()) } else { Err(error::Error::Invalid("the leader lease was lost".into())) }
}

/// Both controllers, until `stop`.
async fn controllers(client: kube::Client, ns: &Option<String>, ctx: Arc<Context>, stop: CancellationToken) {
    let ours = watcher::Config::default().labels("app.kubernetes.io/managed-by=checkfu-operator");
    let sandboxes = Controller::new(api::<Sandbox>(&client, ns), watcher::Config::default())
        .owns(api::<Pod>(&client, ns), ours.clone())
        .owns(api::<PersistentVolumeClaim>(&client, ns), ours.clone())
        .owns(api::<NetworkPolicy>(&client, ns), ours.clone())
        .graceful_shutdown_on(stop.clone().cancelled_owned())
        .run(sandboxes::reconcile, sandboxes::error_policy, ctx.clone())
        .for_each(|_| futures_util::future::ready(()));
    // Runner pods belong to a ReplicaSet, not the Runner: they are mapped
    // to it by label.
    let runners = Controller::new(api::<Runner>(&client, ns), watcher::Config::default())
        .owns(api::<Deployment>(&client, ns), ours.clone())
        .watches(api::<Pod>(&client, ns), watcher::Config::default().labels(runners::RUNNER_LABEL), |pod: Pod| {
            let ns = kube::ResourceExt::namespace(&pod).unwrap_or_default();
            runners::runner_of(&pod).map(|name| ObjectRef::<Runner>::new(&name).within(&ns))
        })
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(runners::reconcile, runners::error_policy, ctx)
        .for_each(|_| futures_util::future::ready(()));
    futures_util::future::join(sandboxes, runners).await;
}
