//! The Kubernetes managed plane's sandboxes: each Session's sandbox is a
//! `Sandbox` resource the runner creates through the API server, which the
//! operator turns into a pod of the pinned SandboxProfile image; the tools
//! run there, through the in-pod agent (`agent.rs`).
//!
//! - The Sandbox is named for its Session and carries the sandbox's expiry;
//!   its agent token is 256 random bits in a Secret owned by the Sandbox,
//!   so both go together.
//! - A tool call waits for the pod to be ready (bounded): when the operator
//!   is down, sandboxes that exist keep serving and new ones wait.
//! - A sandbox the control plane calls fresh (new, or its old one expired)
//!   replaces any Sandbox left from before.
//! - [`KubeSandboxes::sweep`] deletes the Sandboxes of Sessions that ended.

use crate::agent::RemoteSandbox;
use crate::sandbox::Limits;
use checkfu_operator::crd::{Resources, Sandbox, SandboxSpec};
use checkfu_operator::pod::TOKEN_KEY;
use checkfu_proto::runner::v1 as pb;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

/// The label marking the Sandboxes a runner made.
pub const LABEL: &str = "checkfu.dev/sandbox-of";

/// Where and how the runner makes Sandboxes.
#[derive(Clone)]
pub struct KubeSettings {
    pub namespace: String,
    pub storage_class: Option<String>,
    /// How long a tool call waits for a new sandbox pod.
    pub ready_within: Duration,
    /// How often the Sandboxes of ended Sessions are deleted.
    pub sweep_every: Duration,
    /// A client to use (tests); `None`: in-cluster, or from `KUBECONFIG`.
    pub client: Option<kube::Client>,
}

impl std::fmt::Debug for KubeSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSettings")
            .field("namespace", &self.namespace)
            .field("storage_class", &self.storage_class)
            .field("ready_within", &self.ready_within)
            .field("sweep_every", &self.sweep_every)
            .finish_non_exhaustive()
    }
}

impl KubeSettings {
    /// In `namespace`, with the defaults: a pod has five minutes to be
    /// ready, and ended Sessions' Sandboxes go within 30 s.
    pub fn new(namespace: &str) -> KubeSettings {
        KubeSettings {
            namespace: namespace.into(),
            storage_class: None,
            ready_within: Duration::from_secs(300),
            sweep_every: Duration::from_secs(30),
            client: None,
        }
    }
}

pub struct KubeSandboxes {
    client: kube::Client,
    settings: KubeSettings,
    /// Sandbox name → agent token (read back from its Secret after a restart).
    tokens: Mutex<HashMap<String, String>>,
}

/// The Sandbox's name: the Session id as a DNS label (`sess_01J...` →
/// `sess-01j...`).
pub fn sandbox_name(session_id: &str) -> String {
    session_id.to_ascii_lowercase().replace('_', "-").chars().take(63).collect()
}

fn agent_secret(name: &str) -> String {
    format!("{name}-agent")
}

type Result<T> = std::result::Result<T, String>;

fn kube_err(what: &str) -> impl Fn(kube::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// What the control plane says of the Run's sandbox.
struct Wanted {
    spec: SandboxSpec,
    fresh: bool,
}

fn wanted(work: &pb::WorkItem, settings: &KubeSettings, name: &str) -> Result<Wanted> {
    let sandbox: Value = serde_json::from_str(&work.sandbox_json).map_err(|_| "the Run carries no sandbox description".to_string())?;
    let profile = &sandbox["profile"];
    let image = profile["image"].as_str().filter(|i| !i.is_empty()).ok_or("the SandboxProfile names no image")?.to_string();
    let r = &profile["resources"];
    let n = |k: &str, d: u64| r[k].as_u64().unwrap_or(d).min(u64::from(u32::MAX)) as u32;
    let expires_ms = sandbox["expires_at_ms"].as_i64().ok_or("the sandbox has no expiry")?;
    let expires = Timestamp::from_millisecond(expires_ms).map_err(|e| format!("the sandbox expiry is out of range: {e}"))?;
    Ok(Wanted {
        spec: SandboxSpec {
            session_id: work.session_id.clone(),
            environment_id: work.environment_id.clone(),
            image,
            resources: Resources { cpu_millis: n("cpu_millis", 1000), memory_mib: n("memory_mib", 1024), disk_mib: n("disk_mib", 4096) },
            expires_at: expires.to_string(),
            storage_class: settings.storage_class.clone(),
            agent_secret: agent_secret(name),
        },
        fresh: sandbox["fresh"].as_bool() == Some(true),
    })
}

impl KubeSandboxes {
    /// With the settings' client, or in-cluster (or from `KUBECONFIG`).
    pub async fn connect(settings: KubeSettings) -> Result<KubeSandboxes> {
        let client = match &settings.client {
            Some(c) => c.clone(),
            None => kube::Client::try_default().await.map_err(kube_err("reaching the Kubernetes API"))?,
        };
        Ok(KubeSandboxes { client, settings, tokens: Mutex::default() })
    }

    pub fn settings(&self) -> &KubeSettings {
        &self.settings
    }

    fn sandboxes(&self) -> Api<Sandbox> {
        Api::namespaced(self.client.clone(), &self.settings.namespace)
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.settings.namespace)
    }

    /// The Run's sandbox, ready for tool calls.
    pub async fn open(&self, work: &pb::WorkItem, limits: Limits) -> Result<RemoteSandbox> {
        let name = sandbox_name(&work.session_id);
        let want = wanted(work, &self.settings, &name)?;
        let token = self.ensure(&name, want).await?;
        let (address, uid) = self.ready(&name).await?;
        Ok(RemoteSandbox::new(&address, &token, limits)?.with_identity(&uid))
    }

    /// Creates the Sandbox (and its token) unless a current one exists;
    /// returns the token.
    async fn ensure(&self, name: &str, want: Wanted) -> Result<String> {
        let api = self.sandboxes();
        if let Some(existing) = api.get_opt(name).await.map_err(kube_err("reading the Sandbox"))? {
            let expired = existing.status.as_ref().is_some_and(|s| s.phase == "Expired");
            let replaced = want.fresh && existing.spec.expires_at != want.spec.expires_at;
            if !(expired || replaced) && existing.meta().deletion_timestamp.is_none() {
                if existing.spec.expires_at != want.spec.expires_at {
                    let patch = serde_json::json!({"spec": {"expiresAt": want.spec.expires_at}});
                    api.patch(name, &PatchParams::default(), &Patch::Merge(patch)).await.map_err(kube_err("extending the Sandbox"))?;
                }
                return self.token(name).await;
            }
            // Left from an older sandbox: it goes, with its pod and token.
            api.delete(name, &DeleteParams::foreground()).await.map_err(kube_err("replacing the Sandbox"))?;
            self.tokens.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
            self.gone(name).await?;
        }
        let mut sb = Sandbox::new(name, want.spec);
        sb.metadata.labels = Some(BTreeMap::from([(LABEL.to_string(), "runner".to_string())]));
        let sb = api.create(&PostParams::default(), &sb).await.map_err(kube_err("creating the Sandbox"))?;
        let token = checkfu_core::new_secret("");
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(agent_secret(name)),
                namespace: Some(self.settings.namespace.clone()),
                owner_references: sb.controller_owner_ref(&()).map(|o| vec![o]),
                labels: Some(BTreeMap::from([(LABEL.to_string(), "runner".to_string())])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(TOKEN_KEY.to_string(), ByteString(token.clone().into_bytes()))])),
            type_: Some("Opaque".into()),
            ..Secret::default()
        };
        self.secrets().create(&PostParams::default(), &secret).await.map_err(kube_err("storing the sandbox token"))?;
        self.tokens.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), token.clone());
        Ok(token)
    }

    async fn token(&self, name: &str) -> Result<String> {
        if let Some(t) = self.tokens.lock().unwrap_or_else(|p| p.into_inner()).get(name) {
            return Ok(t.clone());
        }
        let secret = self.secrets().get(&agent_secret(name)).await.map_err(kube_err("reading the sandbox token"))?;
        let bytes = secret.data.unwrap_or_default().remove(TOKEN_KEY).ok_or("the sandbox token Secret is empty")?;
        let token = String::from_utf8(bytes.0).map_err(|_| "the sandbox token is not text".to_string())?;
        self.tokens.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), token.clone());
        Ok(token)
    }

    /// Waits for a deleted Sandbox to be gone (its finalizer run).
    async fn gone(&self, name: &str) -> Result<()> {
        let deadline = tokio::time::Instant::now() + self.settings.ready_within;
        while self.sandboxes().get_opt(name).await.map_err(kube_err("reading the Sandbox"))?.is_some() {
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("the old sandbox {name} is still being deleted (is the operator running?)"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Ok(())
    }

    /// Waits for the pod to be ready; its agent's address and the
    /// Sandbox's uid.
    async fn ready(&self, name: &str) -> Result<(String, String)> {
        let deadline = tokio::time::Instant::now() + self.settings.ready_within;
        loop {
            let sb = self.sandboxes().get(name).await.map_err(kube_err("reading the Sandbox"))?;
            let uid = sb.metadata.uid.clone().unwrap_or_default();
            let status = sb.status.unwrap_or_default();
            match (status.phase.as_str(), status.address) {
                ("Ready", Some(a)) => return Ok((a, uid)),
                ("Failed" | "Expired", _) => {
                    let why = status.conditions.first().map(|c| c.message.clone()).unwrap_or_default();
                    return Err(format!("the sandbox pod is {}: {why}", status.phase.to_lowercase()));
                }
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "the sandbox pod was not ready within {} s (is the operator running? `kubectl describe sandbox {name}`)",
                    self.settings.ready_within.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Deletes the Sandboxes of Sessions whose sandbox ended; how many.
    pub async fn sweep(&self, runs: &mut crate::RunsClient) -> Result<usize> {
        let list = self.sandboxes().list(&ListParams::default().labels(LABEL)).await.map_err(kube_err("listing Sandboxes"))?;
        let by_session: HashMap<String, String> = list.items.iter().map(|s| (s.spec.session_id.clone(), s.name_any())).collect();
        let mut deleted = 0;
        let ids: Vec<String> = by_session.keys().cloned().collect();
        for chunk in ids.chunks(500) {
            let req = pb::EndedSandboxesRequest { session_ids: chunk.to_vec() };
            let ended = runs.ended_sandboxes(req).await.map_err(|s| format!("asking which sandboxes ended: {}", s.message()))?.into_inner();
            for session in ended.ended {
                let Some(name) = by_session.get(&session) else { continue };
                match self.sandboxes().delete(name, &DeleteParams::background()).await {
                    Ok(_) => deleted += 1,
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(format!("deleting Sandbox {name}: {e}")),
                }
                self.tokens.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
            }
        }
        Ok(deleted)
    }
}
