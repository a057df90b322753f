//! What every reconcile shares: the client, the event recorder, the
//! per-object failure counts behind the backoff, and the metrics.

use crate::error::Error;
use checkfu_operator_api::crd::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The field manager of everything the operator applies.
pub const MANAGER: &str = "checkfu-operator";
/// The finalizer on every resource the operator reconciles.
pub const FINALIZER: &str = "checkfu.dev/cleanup";
/// The first retry after a failure; doubled each time, up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

pub struct Context {
    pub client: kube::Client,
    /// Checkfu's image: the sandbox pods' init container copies the agent
    /// from it, and it is the runner pods' default image.
    pub image: String,
    recorder: Recorder,
    failures: Mutex<HashMap<String, u32>>,
    /// Calls to the Checkfu installation (pairing, revoking Runners).
    pub installation: Arc<dyn crate::installation::Installation>,
}

impl Context {
    pub fn new(client: kube::Client, image: String, instance: String, installation: Arc<dyn crate::installation::Installation>) -> Context {
        let recorder = Recorder::new(client.clone(), Reporter { controller: MANAGER.into(), instance: Some(instance) });
        Context { client, image, recorder, failures: Mutex::default(), installation }
    }

    /// Records a Kubernetes Event on `obj` (a failure to record is logged,
    /// never fatal: events are for people).
    pub async fn event<K: Resource<DynamicType = ()>>(&self, obj: &K, warning: bool, reason: &str, note: String) {
        let ev = Event {
            type_: if warning { EventType::Warning } else { EventType::Normal },
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &obj.object_ref(&())).await {
            tracing::warn!(error = %e, reason, "recording an event failed");
        }
    }

    /// A success: the object's backoff starts over.
    pub fn succeeded(&self, key: &str) {
        self.failures.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }

    /// A failure: retry after 1 s, 2 s, 4 s ... up to 5 minutes.
    pub fn failed(&self, key: &str) -> Duration {
        let mut f = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = f.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        FIRST_BACKOFF.saturating_mul(1u32 << (*n - 1).min(16)).min(MAX_BACKOFF)
    }
}

/// One reconcile of `obj` under the finalizer: `apply` while it lives,
/// `cleanup` once it is being deleted (the finalizer comes off only when
/// that succeeds); measured, and its backoff started over on success.
pub async fn under_finalizer<K, FA, FC>(
    controller: &'static str,
    obj: Arc<K>,
    ctx: &Context,
    apply: FA,
    cleanup: FC,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    FA: AsyncFnOnce(Arc<K>) -> Result<Action, Error>,
    FC: AsyncFnOnce(Arc<K>) -> Result<Action, Error>,
{
    use kube::runtime::finalizer::{Error as F, Event as E, finalizer};
    let started = std::time::Instant::now();
    let ns = obj.meta().namespace.clone().ok_or_else(|| Error::Invalid(format!("a {controller} resource is namespaced")))?;
    let api: kube::Api<K> = kube::Api::namespaced(ctx.client.clone(), &ns);
    let result = finalizer(&api, FINALIZER, obj.clone(), |event| async move {
        match event {
            E::Apply(o) => apply(o).await,
            E::Cleanup(o) => cleanup(o).await,
        }
    })
    .await
    .map_err(|e| match e {
        F::ApplyFailed(e) | F::CleanupFailed(e) => e,
        F::AddFinalizer(e) | F::RemoveFinalizer(e) => Error::Kube(e),
        other => Error::Invalid(other.to_string()),
    });
    measured(controller, started, result.is_ok());
    if result.is_ok() {
        ctx.succeeded(&key(obj.as_ref()));
    }
    result
}

/// Writes `status` as `obj`'s status: server-side apply of the status
/// subresource, as the operator's field manager.
pub async fn apply_status<K>(ctx: &Context, obj: &K, status: impl serde::Serialize) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let meta = obj.meta();
    let api: kube::Api<K> = kube::Api::namespaced(ctx.client.clone(), meta.namespace.as_deref().unwrap_or_default());
    let patch = serde_json::json!({"apiVersion": K::api_version(&()), "kind": K::kind(&()), "status": status});
    let pp = kube::api::PatchParams::apply(MANAGER).force();
    api.patch_status(meta.name.as_deref().unwrap_or_default(), &pp, &kube::api::Patch::Apply(patch)).await?;
    Ok(())
}

/// `namespace/name`, the backoff's key.
pub fn key<K: Resource>(obj: &K) -> String {
    format!("{}/{}", obj.meta().namespace.as_deref().unwrap_or_default(), obj.meta().name.as_deref().unwrap_or_default())
}

/// The shared `error_policy`: counted, logged and retried with backoff.
pub fn retry_later<K: Resource>(controller: &'static str, obj: &K, error: &Error, ctx: &Context) -> Action {
    let wait = ctx.failed(&key(obj));
    metrics::counter!("checkfu_operator_reconcile_errors_total", "controller" => controller, "kind" => error.kind()).increment(1);
    tracing::warn!(controller, object = %key(obj), error = %error, retry_in_s = wait.as_secs(), "reconcile failed");
    Action::requeue(wait)
}

/// Records one reconcile's outcome and duration.
fn measured(controller: &'static str, started: std::time::Instant, ok: bool) {
    let result = if ok { "ok" } else { "error" };
    metrics::counter!("checkfu_operator_reconciliations_total", "controller" => controller, "result" => result).increment(1);
    metrics::histogram!("checkfu_operator_reconcile_seconds", "controller" => controller).record(started.elapsed().as_secs_f64());
}

/// A condition, keeping its transition time while its status holds.
pub fn condition(previous: &[Condition], kind: &str, ok: bool, reason: &str, message: String, generation: Option<i64>) -> Condition {
    let status = if ok { "True" } else { "False" };
    let since = previous
        .iter()
        .find(|c| c.kind == kind && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Timestamp::now().to_string());
    Condition {
        kind: kind.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: since,
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_ceiling_and_starts_over_on_success() {
        let (api, client) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt")
            .block_on(async { checkfu_operator_api::mock_api::MockApi::start() });
        let _ = api;
        let ctx = Context::new(client, "img".into(), "test".into(), Arc::new(crate::installation::Unconfigured));
        let waits: Vec<u64> = (0..11).map(|_| ctx.failed("ns/a").as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(ctx.failed("ns/b").as_secs(), 1, "per object");
        ctx.succeeded("ns/a");
        assert_eq!(ctx.failed("ns/a").as_secs(), 1);
    }
}
