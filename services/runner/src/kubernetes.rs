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
use checkfu_operator_api::TOKEN_KEY;
use checkfu_operator_api::crd::{Resources, Sandbox, SandboxSpec};
use checkfu_proto::runner::v1 as pb;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
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
    /// The namespace of the installation's own pods (this runner's), for
    /// the sandbox pods' network policy when they live elsewhere.
    pub platform_namespace: Option<String>,
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
            platform_namespace: None,
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
    let sandbox = crate::work_sandbox::of(work);
    let profile = sandbox.profile.ok_or("the Run carries no sandbox description")?;
    let image = Some(profile.image).filter(|i| !i.is_empty()).ok_or("the SandboxProfile names no image")?;
    let r = profile.resources.unwrap_or_default();
    let n = |v: Option<i64>, d: u32| v.map_or(d, |v| v.clamp(0, i64::from(u32::MAX)) as u32);
    let expires_ms = Some(sandbox.expires_at_ms).filter(|&ms| ms > 0).ok_or("the sandbox has no expiry")?;
    let expires = Timestamp::from_millisecond(expires_ms).map_err(|e| format!("the sandbox expiry is out of range: {e}"))?;
    Ok(Wanted {
        spec: SandboxSpec {
            session_id: work.session_id.clone(),
            environment_id: work.environment_id.clone(),
            image,
            resources: Resources { cpu_millis: n(r.cpu_millis, 1000), memory_mib: n(r.memory_mib, 1024), disk_mib: n(r.disk_mib, 4096) },
            expires_at: expires.to_string(),
            storage_class: settings.storage_class.clone(),
            agent_secret: agent_secret(name),
            platform_namespace: settings.platform_namespace.clone(),
        },
        fresh: sandbox.fresh,
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
                if let Some(token) = self.token(name).await? {
                    return Ok(token);
                }
                // Its token is lost (the runner stopped between making the
                // Sandbox and its Secret, or the Secret was deleted): its
                // pod could not be called, so it is made again.
            }
            // Left from an older sandbox: it goes, with its pod and token.
            api.delete(name, &DeleteParams::foreground()).await.map_err(kube_err("replacing the Sandbox"))?;
            self.tokens.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
            self.gone(name).await?;
        }
        let mut sb = Sandbox::new(name, want.spec);
        sb.metadata.labels = Some(BTreeMap::from([(LABEL.to_string(), "runner".to_string())]));
        let sb = api.create(&PostParams::default(), &sb).await.map_err(kube_err("creating the Sandbox"))?;
        let token = self.store_token(&sb, name).await?;
        self.tokens.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), token.clone());
        Ok(token)
    }

    /// A new agent token in the Sandbox's Secret (owned by it).
    async fn store_token(&self, sb: &Sandbox, name: &str) -> Result<String> {
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
        Ok(token)
    }

    /// The Sandbox's agent token; `None` when its Secret is gone.
    async fn token(&self, name: &str) -> Result<Option<String>> {
        if let Some(t) = self.tokens.lock().unwrap_or_else(|p| p.into_inner()).get(name) {
            return Ok(Some(t.clone()));
        }
        let secret = self.secrets().get_opt(&agent_secret(name)).await.map_err(kube_err("reading the sandbox token"))?;
        let token = secret.and_then(|s| s.data).and_then(|mut d| d.remove(TOKEN_KEY)).and_then(|b| String::from_utf8(b.0).ok());
        if let Some(t) = &token {
            self.tokens.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), t.clone());
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_operator_api::mock_api::MockApi;
    use serde_json::json;

    const NS: &str = "agents";

    fn work(fresh: bool, expires_ms: i64) -> pb::WorkItem {
        let profile = checkfu_proto::sessions::v1::SandboxSpec {
            image: "python:3.12-slim".into(),
            resources: Some(checkfu_proto::sessions::v1::SandboxResources {
                cpu_millis: Some(750),
                memory_mib: Some(640),
                disk_mib: Some(2048),
            }),
            ..Default::default()
        };
        pb::WorkItem {
            session_id: "sess_01ABC".into(),
            environment_id: "env_1".into(),
            sandbox: Some(pb::WorkSandbox { fresh, expires_at_ms: expires_ms, profile: Some(profile), ..Default::default() }),
            ..Default::default()
        }
    }

    /// The operator's and the kubelet's part, briefly: every Sandbox is
    /// soon Ready at an address of its own.
    fn ready_soon(mock: &MockApi) -> tokio::task::JoinHandle<()> {
        let mock = mock.clone();
        tokio::spawn(async move {
            loop {
                for mut sb in mock.list("apis/checkfu.dev/v1alpha1", NS, "sandboxes") {
                    if sb["status"].is_null() {
                        sb["status"] = json!({"phase": "Ready", "address": "127.0.0.1:7070"});
                        mock.put("apis/checkfu.dev/v1alpha1", NS, "sandboxes", sb);
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    }

    fn pods(client: kube::Client) -> KubeSandboxes {
        KubeSandboxes {
            client,
            settings: KubeSettings {
                ready_within: Duration::from_secs(5),
                platform_namespace: Some("checkfu".into()),
                storage_class: Some("fast".into()),
                ..KubeSettings::new(NS)
            },
            tokens: Mutex::default(),
        }
    }

    #[tokio::test]
    async fn a_sandbox_is_made_once_extended_replaced_when_stale_and_its_token_kept_apart() {
        let (mock, client) = MockApi::start();
        let _ready = ready_soon(&mock);
        let k = pods(client);
        let day = 86_400_000;
        let now = Timestamp::now().as_millisecond();

        let first = k.open(&work(true, now + day), Limits::default()).await.expect("open");
        let sb = mock.get("apis/checkfu.dev/v1alpha1", NS, "sandboxes", "sess-01abc").expect("the Sandbox");
        assert_eq!(sb["spec"]["image"], "python:3.12-slim");
        assert_eq!(sb["spec"]["resources"], json!({"cpuMillis": 750, "memoryMib": 640, "diskMib": 2048}));
        assert_eq!(sb["spec"]["sessionId"], "sess_01ABC");
        assert_eq!(sb["spec"]["agentSecret"], "sess-01abc-agent");
        assert_eq!(sb["spec"]["platformNamespace"], "checkfu");
        assert_eq!(sb["spec"]["storageClass"], "fast");
        assert_eq!(sb["spec"]["expiresAt"], Timestamp::from_millisecond(now + day).expect("ts").to_string());
        let secret = mock.get("api/v1", NS, "secrets", "sess-01abc-agent").expect("the token's Secret");
        assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], sb["metadata"]["uid"], "owned by the Sandbox");
        assert!(!sb.to_string().contains(&secret["data"]["token"].as_str().expect("token")[..20]), "no token in the Sandbox");
        assert_eq!(first.identity(), sb["metadata"]["uid"].as_str().expect("uid"));

        // The same sandbox for the next call (fresh only once: same expiry).
        let again = k.open(&work(true, now + day), Limits::default()).await.expect("open");
        assert_eq!(again.identity(), first.identity());
        // A later expiry extends it in place.
        let later = k.open(&work(false, now + 2 * day), Limits::default()).await.expect("open");
        assert_eq!(later.identity(), first.identity());
        let sb = mock.get("apis/checkfu.dev/v1alpha1", NS, "sandboxes", "sess-01abc").expect("sandbox");
        assert_eq!(sb["spec"]["expiresAt"], Timestamp::from_millisecond(now + 2 * day).expect("ts").to_string());

        // A fresh sandbox (the old one expired) replaces it.
        let fresh = k.open(&work(true, now + 3 * day), Limits::default()).await.expect("open");
        assert_ne!(fresh.identity(), first.identity());

        // Its token lost, a Sandbox is made again (its pod could not be called).
        mock.delete("api/v1", NS, "secrets", "sess-01abc-agent");
        let k2 = pods(k.client.clone());
        let remade = k2.open(&work(false, now + 3 * day), Limits::default()).await.expect("open");
        assert_ne!(remade.identity(), fresh.identity());
        assert!(mock.get("api/v1", NS, "secrets", "sess-01abc-agent").is_some());

        // An expired one is replaced too.
        let mut sb = mock.get("apis/checkfu.dev/v1alpha1", NS, "sandboxes", "sess-01abc").expect("sandbox");
        sb["status"] = json!({"phase": "Expired"});
        mock.put("apis/checkfu.dev/v1alpha1", NS, "sandboxes", sb);
        let renewed = k2.open(&work(false, now + 3 * day), Limits::default()).await.expect("open");
        assert_ne!(renewed.identity(), remade.identity());
    }

    #[tokio::test]
    async fn a_pod_that_is_never_ready_is_an_error_in_bounded_time() {
        let (_mock, client) = MockApi::start();
        let mut k = pods(client);
        k.settings.ready_within = Duration::from_millis(600);
        let started = std::time::Instant::now();
        let e = k.open(&work(true, Timestamp::now().as_millisecond() + 60_000), Limits::default()).await.err().expect("not ready");
        assert!(e.contains("not ready") && e.contains("operator"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(3));
        let mut bad = work(true, 0);
        bad.sandbox = Some(pb::WorkSandbox { profile: Some(Default::default()), ..Default::default() });
        assert!(k.open(&bad, Limits::default()).await.err().expect("no image").contains("image"));
    }
}
