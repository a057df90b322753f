//! The `Runner` reconciler: self-hosted runner pods for one Environment and
//! pool, each with a credential of its own.
//!
//! - A Deployment keeps the pods. Each reads its credential from
//!   `/var/run/checkfu/credentials/<its pod name>`, a key of the Secret
//!   `<runner>-credentials` that only the operator writes (never the CR or
//!   its status).
//! - For each new pod the operator mints a pairing code with the Runner's
//!   installation API key and redeems it, then adds the pod's key.
//! - When a pod goes (scaled down, replaced, rotated), its Runner is
//!   revoked and its key removed.
//! - Rotation: a new `spec.rotation` changes the pod template, so the
//!   Deployment rolls every pod; the new pods are paired afresh and the old
//!   ones' Runners are revoked as they go.
//! - Deleting the Runner revokes every Runner it paired (under the
//!   finalizer); the Deployment and Secret go with it (owner references).

use crate::context::{Context, MANAGER, apply_status, condition, retry_later, under_finalizer};
use crate::error::Error;
use crate::installation::{PairRequest, Paired};
use checkfu_operator_api::crd::{Runner, RunnerStatus};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodSecurityContext, PodSpec,
    PodTemplateSpec, ResourceRequirements, SeccompProfile, Secret, SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

const CONTROLLER: &str = "runner";
/// The label naming a runner pod's `Runner`.
pub const RUNNER_LABEL: &str = "checkfu.dev/runner";
/// The pod template annotation carrying `spec.rotation`.
pub const ROTATION: &str = "checkfu.dev/rotation";
/// Where a runner pod finds the credentials Secret.
const CREDENTIALS_DIR: &str = "/var/run/checkfu/credentials";
const RECHECK: Duration = Duration::from_secs(60);

/// The Deployment's name.
pub fn deployment_name(r: &Runner) -> String {
    format!("{}-runner", r.name_any())
}

/// The credentials Secret's name.
pub fn secret_name(r: &Runner) -> String {
    format!("{}-credentials", r.name_any())
}

pub async fn reconcile(runner: Arc<Runner>, ctx: Arc<Context>) -> Result<Action, Error> {
    under_finalizer(CONTROLLER, runner, &ctx, async |r| apply(&r, &ctx).await, async |r| cleanup(&r, &ctx).await).await
}

pub fn error_policy(runner: Arc<Runner>, error: &Error, ctx: Arc<Context>) -> Action {
    retry_later(CONTROLLER, runner.as_ref(), error, &ctx)
}

fn labels(r: &Runner) -> BTreeMap<String, String> {
    BTreeMap::from([
        (RUNNER_LABEL.to_string(), r.name_any()),
        ("app.kubernetes.io/component".to_string(), "runner".to_string()),
        ("app.kubernetes.io/managed-by".to_string(), MANAGER.to_string()),
    ])
}

/// The runner pods' Deployment.
pub fn deployment(r: &Runner, default_image: &str) -> Deployment {
    let s = &r.spec;
    let mut annotations = BTreeMap::new();
    annotations.insert(ROTATION.to_string(), s.rotation.clone().unwrap_or_default());
    let resources = s.resources.as_ref().map(|r| {
        let q = BTreeMap::from([
            ("cpu".to_string(), Quantity(format!("{}m", r.cpu_millis))),
            ("memory".to_string(), Quantity(format!("{}Mi", r.memory_mib))),
            ("ephemeral-storage".to_string(), Quantity(format!("{}Mi", r.disk_mib))),
        ]);
        ResourceRequirements { limits: Some(q.clone()), requests: Some(q), ..ResourceRequirements::default() }
    });
    let container = Container {
        name: "runner".into(),
        image: Some(s.image.clone().unwrap_or_else(|| default_image.to_string())),
        args: Some(vec![
            "runner".into(),
            "--server".into(),
            s.server.clone(),
            "--pool".into(),
            s.pool.clone(),
            "--credential-file".into(),
            format!("{CREDENTIALS_DIR}/$(POD_NAME)"),
            "--data-dir".into(),
            "/var/lib/checkfu-runner".into(),
        ]),
        env: Some(vec![EnvVar {
            name: "POD_NAME".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path: "metadata.name".into(), api_version: None }),
                ..EnvVarSource::default()
            }),
            value: None,
        }]),
        resources,
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(vec![
            VolumeMount { name: "credentials".into(), mount_path: CREDENTIALS_DIR.into(), read_only: Some(true), ..VolumeMount::default() },
            VolumeMount { name: "data".into(), mount_path: "/var/lib/checkfu-runner".into(), ..VolumeMount::default() },
            VolumeMount { name: "tmp".into(), mount_path: "/tmp".into(), ..VolumeMount::default() },
        ]),
        ..Container::default()
    };
    let empty = |name: &str| Volume { name: name.into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Volume::default() };
    Deployment {
        metadata: ObjectMeta {
            name: Some(deployment_name(r)),
            namespace: r.namespace(),
            labels: Some(labels(r)),
            owner_references: r.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: DeploymentSpec {
            replicas: Some(s.replicas as i32),
            selector: LabelSelector { match_labels: Some(labels(r)), match_expressions: None },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels(r)), annotations: Some(annotations), ..ObjectMeta::default() }),
                spec: Some(PodSpec {
                    automount_service_account_token: Some(false),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(10_001),
                        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
                        ..PodSecurityContext::default()
                    }),
                    containers: vec![container],
                    volumes: Some(vec![
                        Volume {
                            name: "credentials".into(),
                            secret: Some(SecretVolumeSource {
                                secret_name: Some(secret_name(r)),
                                default_mode: Some(0o400),
                                ..SecretVolumeSource::default()
                            }),
                            ..Volume::default()
                        },
                        empty("data"),
                        empty("tmp"),
                    ]),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        status: None,
    }
}

/// The installation API key the Runner names.
async fn api_key(r: &Runner, ctx: &Context) -> Result<String, Error> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &r.namespace().unwrap_or_default());
    let want = &r.spec.credential_secret;
    let secret = secrets
        .get_opt(&want.name)
        .await?
        .ok_or_else(|| Error::Invalid(format!("credentialSecret: Secret {:?} does not exist", want.name)))?;
    let bytes = secret
        .data
        .unwrap_or_default()
        .get(&want.key)
        .cloned()
        .ok_or_else(|| Error::Invalid(format!("credentialSecret: Secret {:?} has no key {:?}", want.name, want.key)))?;
    String::from_utf8(bytes.0).map(|s| s.trim().to_string()).map_err(|_| Error::Invalid("credentialSecret: the key is not UTF-8".into()))
}

/// The pods' credentials: pod name → what it was paired as.
/// `create`: make the (empty) Secret if it is missing.
async fn credentials(r: &Runner, ctx: &Context, create: bool) -> Result<BTreeMap<String, Paired>, Error> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &r.namespace().unwrap_or_default());
    let Some(secret) = secrets.get_opt(&secret_name(r)).await? else {
        if !create {
            return Ok(BTreeMap::new());
        }
        let empty = Secret {
            metadata: ObjectMeta {
                name: Some(secret_name(r)),
                namespace: r.namespace(),
                labels: Some(labels(r)),
                owner_references: r.controller_owner_ref(&()).map(|o| vec![o]),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".into()),
            ..Secret::default()
        };
        secrets.create(&PostParams::default(), &empty).await?;
        return Ok(BTreeMap::new());
    };
    Ok(secret.data.unwrap_or_default().into_iter().filter_map(|(k, v)| Some((k, serde_json::from_slice(&v.0).ok()?))).collect())
}

/// Adds (`Some`) and removes (`None`) pods' keys.
async fn write_credentials(r: &Runner, ctx: &Context, changes: BTreeMap<String, Option<Paired>>) -> Result<(), Error> {
    if changes.is_empty() {
        return Ok(());
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &r.namespace().unwrap_or_default());
    let mut data = serde_json::Map::new();
    for (pod, paired) in changes {
        let value = match paired {
            Some(p) => json!(ByteString(serde_json::to_vec(&p).map_err(|e| Error::Invalid(e.to_string()))?)),
            None => serde_json::Value::Null,
        };
        data.insert(pod, value);
    }
    secrets.patch(&secret_name(r), &PatchParams::default(), &Patch::Merge(json!({"data": data}))).await?;
    Ok(())
}

async fn apply(r: &Runner, ctx: &Context) -> Result<Action, Error> {
    let ns = r.namespace().unwrap_or_default();
    let key = match api_key(r, ctx).await {
        Ok(k) => k,
        Err(Error::Invalid(why)) => {
            report(r, ctx, 0, 0, false, "CredentialSecretMissing", why).await?;
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
        Err(e) => return Err(e),
    };
    let mut held = credentials(r, ctx, true).await?;
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let d = deployments.patch(&deployment_name(r), &PatchParams::apply(MANAGER).force(), &Patch::Apply(deployment(r, &ctx.image))).await?;

    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let selector = format!("{RUNNER_LABEL}={}", r.name_any());
    let live: Vec<Pod> = pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let names: BTreeSet<String> = live.iter().map(|p| p.name_any()).collect();
    let rotation = r.spec.rotation.clone().unwrap_or_default();

    // Revoke first what no pod holds any more: a removed pod's credential
    // must stop working even if pairing the new ones fails.
    let mut changes = BTreeMap::new();
    for (pod, paired) in held.iter().filter(|(pod, _)| !names.contains(*pod)) {
        ctx.installation.revoke(&r.spec.server, &key, &paired.runner_id).await?;
        ctx.event(r, false, "Revoked", format!("Runner {} of removed pod {pod} is revoked", paired.runner_id)).await;
        changes.insert(pod.clone(), None);
    }
    held.retain(|pod, _| names.contains(pod));
    write_credentials(r, ctx, std::mem::take(&mut changes)).await?;

    for pod in &live {
        let current = pod.annotations().get(ROTATION).cloned().unwrap_or_default() == rotation;
        let name = pod.name_any();
        if !current || held.contains_key(&name) {
            continue;
        }
        let req = PairRequest {
            server: r.spec.server.clone(),
            api_key: key.clone(),
            environment_id: r.spec.environment_id.clone(),
            principal_id: r.spec.principal_id.clone(),
            pool: r.spec.pool.clone(),
            name: name.clone(),
        };
        let paired = ctx.installation.pair(&req).await?;
        // Recorded at once: a credential no Secret holds would be a Runner
        // no one can revoke.
        if let Err(e) = write_credentials(r, ctx, BTreeMap::from([(name.clone(), Some(paired.clone()))])).await {
            let _ = ctx.installation.revoke(&r.spec.server, &key, &paired.runner_id).await;
            return Err(e);
        }
        ctx.event(r, false, "Paired", format!("pod {name} is paired as Runner {}", paired.runner_id)).await;
        held.insert(name, paired);
    }

    let ready = d.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0).max(0) as u32;
    let paired = held.len() as u32;
    let all = paired >= r.spec.replicas && ready >= r.spec.replicas;
    let message = format!("{ready}/{} ready, {paired} paired", r.spec.replicas);
    report(r, ctx, ready, paired, all, if all { "Ready" } else { "Progressing" }, message).await?;
    Ok(Action::requeue(RECHECK))
}

async fn cleanup(r: &Runner, ctx: &Context) -> Result<Action, Error> {
    let held = credentials(r, ctx, false).await?;
    if held.is_empty() {
        return Ok(Action::await_change());
    }
    match api_key(r, ctx).await {
        Ok(key) => {
            for paired in held.values() {
                ctx.installation.revoke(&r.spec.server, &key, &paired.runner_id).await?;
            }
            ctx.event(r, false, "Revoked", format!("the {} Runners of this Runner are revoked", held.len())).await;
        }
        // Without the key nothing can be revoked; deletion must not hang on it.
        Err(Error::Invalid(why)) => {
            let ids: Vec<&str> = held.values().map(|p| p.runner_id.as_str()).collect();
            ctx.event(r, true, "NotRevoked", format!("{why}; revoke these Runners by hand: {}", ids.join(", "))).await;
        }
        Err(e) => return Err(e),
    }
    Ok(Action::await_change())
}

async fn report(r: &Runner, ctx: &Context, ready: u32, paired: u32, ok: bool, reason: &str, message: String) -> Result<(), Error> {
    let previous = r.status.clone().unwrap_or_default();
    let generation = r.meta().generation;
    let status = RunnerStatus {
        observed_generation: generation,
        ready_replicas: ready,
        paired_runners: paired,
        conditions: vec![condition(&previous.conditions, "Ready", ok, reason, message.clone(), generation)],
    };
    if status == previous {
        return Ok(());
    }
    apply_status(ctx, r, &status).await?;
    let was = previous.conditions.first().map(|c| c.reason.clone()).unwrap_or_default();
    if was != reason {
        ctx.event(r, reason == "CredentialSecretMissing", reason, message).await;
    }
    Ok(())
}

/// A pod's Runner, for the controller's watch of pods.
pub fn runner_of(pod: &Pod) -> Option<String> {
    pod.labels().get(RUNNER_LABEL).cloned()
}
