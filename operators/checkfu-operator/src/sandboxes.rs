//! The `Sandbox` reconciler: keeps a live Sandbox's pod, workspace claim
//! and network policy (server-side applied, so a deleted or edited child
//! comes back as it should be), reports the pod's phase and address, and
//! takes the children away at `expiresAt` or when the Sandbox is deleted
//! (the runner deletes it when the Session's sandbox ends).
//!
//! A pod's spec is mostly immutable: when the Sandbox's image or resources
//! change, the old pod is deleted and the next pass creates the new one.

use crate::context::{Context, MANAGER, apply_status, condition, retry_later, under_finalizer};
use crate::error::{Error, is_not_found};
use crate::pod::{AGENT_PORT, name, network_policy, sandbox_pod, workspace_claim};
use checkfu_operator_api::crd::{Sandbox, SandboxStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use std::sync::Arc;
use std::time::Duration;

const CONTROLLER: &str = "sandbox";
/// How often a pending sandbox is looked at again (besides its pod's
/// events, which the controller also watches).
const PENDING_RECHECK: Duration = Duration::from_secs(5);
/// How often a ready one is.
const READY_RECHECK: Duration = Duration::from_secs(300);

pub async fn reconcile(sb: Arc<Sandbox>, ctx: Arc<Context>) -> Result<Action, Error> {
    under_finalizer(CONTROLLER, sb, &ctx, async |s| apply(&s, &ctx).await, async |s| cleanup(&s, &ctx).await).await
}

pub fn error_policy(sb: Arc<Sandbox>, error: &Error, ctx: Arc<Context>) -> Action {
    retry_later(CONTROLLER, sb.as_ref(), error, &ctx)
}

fn children(sb: &Sandbox, ctx: &Context) -> (Api<Pod>, Api<PersistentVolumeClaim>, Api<NetworkPolicy>) {
    let ns = sb.namespace().unwrap_or_default();
    (Api::namespaced(ctx.client.clone(), &ns), Api::namespaced(ctx.client.clone(), &ns), Api::namespaced(ctx.client.clone(), &ns))
}

async fn apply(sb: &Sandbox, ctx: &Context) -> Result<Action, Error> {
    let expires: Timestamp = match sb.spec.expires_at.parse() {
        Ok(t) => t,
        Err(e) => {
            let why = format!("expiresAt {:?} is not an RFC 3339 time: {e}", sb.spec.expires_at);
            report(sb, ctx, "Failed", None, None, false, "InvalidSpec", why).await?;
            return Ok(Action::await_change());
        }
    };
    let now = Timestamp::now();
    if now >= expires {
        remove_children(sb, ctx).await?;
        report(sb, ctx, "Expired", None, None, false, "Expired", format!("the sandbox expired at {expires}")).await?;
        return Ok(Action::await_change());
    }
    let (pods, claims, policies) = children(sb, ctx);
    let pp = PatchParams::apply(MANAGER).force();
    let child = name(sb);
    // The policy first: the pod never runs without it.
    policies.patch(&child, &pp, &Patch::Apply(network_policy(sb))).await?;
    claims.patch(&child, &pp, &Patch::Apply(workspace_claim(sb))).await?;
    let desired = sandbox_pod(sb, &ctx.image);
    let pod = match pods.get_opt(&child).await? {
        Some(p) if p.metadata.deletion_timestamp.is_some() => p,
        Some(p) if !same_pod(&p, &desired) => {
            match pods.delete(&child, &DeleteParams::default()).await {
                Err(e) if !is_not_found(&e) => return Err(e.into()),
                _ => {}
            }
            ctx.event(sb, false, "PodReplaced", format!("pod {child} is replaced: the Sandbox's image or resources changed")).await;
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        Some(_) => pods.patch(&child, &pp, &Patch::Apply(desired)).await?,
        None => {
            let p = pods.patch(&child, &pp, &Patch::Apply(desired)).await?;
            ctx.event(sb, false, "PodCreated", format!("pod {child} for session {}", sb.spec.session_id)).await;
            p
        }
    };
    let status = pod.status.clone().unwrap_or_default();
    let pod_phase = status.phase.clone();
    let ready = status.conditions.unwrap_or_default().iter().any(|c| c.type_ == "Ready" && c.status == "True");
    let address = status.pod_ip.filter(|_| ready).map(|ip| format!("{ip}:{AGENT_PORT}"));
    let (phase, reason, message) = match (pod_phase.as_deref(), &address) {
        (Some("Failed"), _) => ("Failed", "PodFailed", format!("pod {child} failed")),
        (_, Some(a)) => ("Ready", "PodReady", format!("the agent is at {a}")),
        _ => ("Pending", "PodPending", format!("waiting for pod {child} to be ready")),
    };
    report(sb, ctx, phase, pod_phase, address, phase == "Ready", reason, message).await?;
    let until_expiry = (expires.as_second() - now.as_second()).max(1) as u64;
    let recheck = if phase == "Ready" { READY_RECHECK } else { PENDING_RECHECK };
    Ok(Action::requeue(recheck.min(Duration::from_secs(until_expiry))))
}

/// Whether the live pod runs what the Sandbox asks (the fields a pod
/// cannot change in place).
fn same_pod(live: &Pod, desired: &Pod) -> bool {
    let main = |p: &Pod| p.spec.as_ref().and_then(|s| s.containers.first()).map(|c| (c.image.clone(), c.resources.clone()));
    main(live) == main(desired)
}

async fn remove_children(sb: &Sandbox, ctx: &Context) -> Result<bool, Error> {
    let (pods, claims, policies) = children(sb, ctx);
    let child = name(sb);
    let dp = DeleteParams::background();
    let mut removed = false;
    for result in [
        pods.delete(&child, &dp).await.map(|_| ()),
        claims.delete(&child, &dp).await.map(|_| ()),
        policies.delete(&child, &dp).await.map(|_| ()),
    ] {
        match result {
            Ok(()) => removed = true,
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(removed)
}

async fn cleanup(sb: &Sandbox, ctx: &Context) -> Result<Action, Error> {
    if remove_children(sb, ctx).await? {
        ctx.event(sb, false, "Deleted", format!("the pod, workspace and network policy of session {} are deleted", sb.spec.session_id))
            .await;
    }
    Ok(Action::await_change())
}

/// Writes the status (server-side apply of the status subresource) and
/// records an Event when the phase changes.
#[allow(clippy::too_many_arguments)]
async fn report(
    sb: &Sandbox,
    ctx: &Context,
    phase: &str,
    pod_phase: Option<String>,
    address: Option<String>,
    ready: bool,
    reason: &str,
    message: String,
) -> Result<(), Error> {
    let previous = sb.status.clone().unwrap_or_default();
    let generation = sb.meta().generation;
    let status = SandboxStatus {
        observed_generation: generation,
        phase: phase.into(),
        pod_phase,
        address,
        conditions: vec![condition(&previous.conditions, "Ready", ready, reason, message.clone(), generation)],
    };
    if status == previous {
        return Ok(());
    }
    apply_status(ctx, sb, &status).await?;
    if previous.phase != phase {
        ctx.event(sb, phase == "Failed", phase, message).await;
    }
    Ok(())
}
