//! The execution plane. A [`Runner`] claims Runs over the runner protocol,
//! keeps their leases alive, runs the agent loop against the model gateway
//! and writes every step back as events. It holds no state of its own: the
//! event log is re-read after each step, so any runner can resume any Run.
//! The same code runs in-process under `checkfu up` and as a self-hosted or
//! Kubernetes runner.

pub mod agent;
pub mod agent_loop;
pub mod cache;
pub mod cgroup;
pub mod chunks;
pub mod confined;
pub mod conformance;
pub mod egress;
pub mod files;
pub mod kubernetes;
pub mod model;
pub mod mounts;
pub mod sandbox;
pub mod specs;
pub mod sync;
pub mod tools;
pub mod transcript;
pub mod tree;
pub mod work_sandbox;

use checkfu_proto::capability::v1::capability_gateway_service_client::CapabilityGatewayServiceClient;
use checkfu_proto::governance::v1::governance_service_client::GovernanceServiceClient;
use checkfu_proto::modelgateway::v1::model_gateway_service_client::ModelGatewayServiceClient;
use checkfu_proto::runner::v1::ClaimRequest;
use checkfu_proto::runner::v1::runner_service_client::RunnerServiceClient;
use checkfu_proto::transport::Transport;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The runner protocol's client.
pub type RunsClient = RunnerServiceClient<Transport>;

#[derive(Debug, Clone)]
pub struct RunnerConfig {
    pub runner_id: String,
    /// Runs executed at once by this runner.
    pub concurrency: usize,
    /// How long one Claim long-poll waits for work.
    pub claim_wait: Duration,
    /// How often a held lease is renewed.
    pub heartbeat_every: Duration,
    /// Where Session workspaces live (one directory per Session).
    pub workspaces: std::path::PathBuf,
    /// A test hook: holds the runner between reading the log and calling
    /// the model (races are driven through it). `None` in production.
    pub hold_before_model: Option<Arc<ModelHold>>,
    /// A delegated cgroup v2 directory: each sandboxed command then runs in
    /// a child cgroup with memory and process limits (see `cgroup.rs`).
    pub sandbox_cgroup: Option<std::path::PathBuf>,
    /// The Kubernetes managed plane: Sessions' sandboxes are pods kept by
    /// the operator (`None`: workspaces on this host, under bubblewrap).
    pub kubernetes: Option<kubernetes::KubeSettings>,
    /// The `checkfu` binary, run inside bubblewrap as `sandbox-relay` to
    /// reach the egress proxy; `None`: sandboxes get no network at all.
    pub egress_relay: Option<std::path::PathBuf>,
}

/// Holds the next model call until released: the runner signals `reached`,
/// then waits for `release`. Armed once per [`ModelHold::arm`].
#[derive(Debug, Default)]
pub struct ModelHold {
    armed: std::sync::atomic::AtomicBool,
    pub reached: tokio::sync::Notify,
    pub release: tokio::sync::Notify,
}

impl ModelHold {
    /// Holds the next model call.
    pub fn arm(&self) {
        self.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) async fn wait(&self) {
        if self.armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            self.reached.notify_one();
            self.release.notified().await;
        }
    }
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            runner_id: checkfu_core::id::new_id("rnr"),
            concurrency: 16,
            claim_wait: Duration::from_secs(10),
            heartbeat_every: Duration::from_secs(4),
            workspaces: std::env::temp_dir().join("checkfu-workspaces"),
            hold_before_model: None,
            sandbox_cgroup: None,
            kubernetes: None,
            // This process, when it is the `checkfu` binary (it has the
            // `sandbox-relay` command); tests name the built one.
            egress_relay: std::env::current_exe().ok().filter(|p| p.file_name().is_some_and(|n| n == "checkfu")),
        }
    }
}

/// How long a stopping runner waits for its Runs to be handed back.
const HAND_BACK_WAIT: Duration = Duration::from_secs(10);

/// Why [`Runner::serve`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    Shutdown,
    /// The server refused this runner's credential (it was revoked).
    Refused(String),
}

#[derive(Clone)]
pub struct Runner {
    pub(crate) runs: RunnerServiceClient<Transport>,
    pub(crate) models: ModelGatewayServiceClient<Transport>,
    pub(crate) governance: GovernanceServiceClient<Transport>,
    pub(crate) capabilities: CapabilityGatewayServiceClient<Transport>,
    pub(crate) cfg: Arc<RunnerConfig>,
    /// What this host lacks for isolating `bash` (probed once; empty when
    /// it can).
    pub(crate) missing: Arc<[sandbox::Missing]>,
    pub(crate) transcripts: Arc<cache::TranscriptCache>,
    /// The newest capability token of each Run in progress (heartbeats
    /// renew it with the lease).
    pub(crate) tokens: Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
    /// On the Kubernetes managed plane: where Sessions' sandboxes are pods
    /// (`None`: workspaces on this host).
    pub(crate) kubernetes: Option<Arc<kubernetes::KubeSandboxes>>,
    /// Runs whose sandbox pod was used (and restored) here, with the pod as
    /// last opened: captured from it when they settle.
    pub(crate) pods_opened: Arc<std::sync::Mutex<std::collections::HashMap<String, agent::RemoteSandbox>>>,
    /// Runs in progress here per Session: a coordinator's threads share one
    /// sandbox, which the first to start materializes and the last to
    /// settle writes back (api.md §15.5).
    pub(crate) in_flight: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
    /// `concurrency` slots: a Run holds one while it works. One waiting for
    /// an external_tools worker (api.md §17.13) gives its slot back for
    /// the wait, which costs no sandbox, model call or CPU.
    pub(crate) slots: Arc<Semaphore>,
    /// The slot each Run in progress holds, by Run id.
    pub(crate) held: Arc<std::sync::Mutex<std::collections::HashMap<String, tokio::sync::OwnedSemaphorePermit>>>,
}

impl Runner {
    /// `control` reaches the runner protocol (the sessions service, or the
    /// gateway's public port); `models` the model gateway; `governance`
    /// decides every tool call; `capabilities` runs tools needing reach
    /// the sandbox lacks (`web_fetch`).
    pub fn new(control: Transport, models: Transport, governance: Transport, capabilities: Transport, cfg: RunnerConfig) -> Runner {
        let slots = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
        Runner {
            slots,
            held: Arc::default(),
            runs: RunnerServiceClient::new(control).max_decoding_message_size(64 * 1024 * 1024),
            models: ModelGatewayServiceClient::new(models).max_decoding_message_size(64 * 1024 * 1024),
            governance: GovernanceServiceClient::new(governance),
            capabilities: CapabilityGatewayServiceClient::new(capabilities).max_decoding_message_size(8 * 1024 * 1024),
            cfg: Arc::new(cfg),
            missing: sandbox::missing_prerequisites().into(),
            transcripts: Arc::new(cache::TranscriptCache::new(1024)),
            tokens: Arc::default(),
            kubernetes: None,
            pods_opened: Arc::default(),
            in_flight: Arc::default(),
        }
    }

    /// Runs the sandbox tools in sandbox pods (the Kubernetes plane).
    pub fn with_kubernetes(mut self, sandboxes: Arc<kubernetes::KubeSandboxes>) -> Runner {
        self.kubernetes = Some(sandboxes);
        self
    }

    /// Deletes the Sandboxes of Sessions whose sandbox ended (the
    /// Kubernetes plane; nothing to do otherwise); how many.
    pub async fn sweep_sandboxes(&self) -> Result<usize, String> {
        match &self.kubernetes {
            Some(k) => k.sweep(&mut self.runs.clone()).await,
            None => Ok(0),
        }
    }

    /// The newest capability token for `work`'s Run.
    pub(crate) fn token(&self, work: &checkfu_proto::runner::v1::WorkItem) -> String {
        let tokens = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        tokens.get(&work.run_id).cloned().unwrap_or_else(|| work.capability_token.clone())
    }

    /// What confines `bash` on this host.
    pub(crate) fn isolation(&self) -> sandbox::Isolation {
        if self.missing.is_empty() { sandbox::Isolation::Bubblewrap } else { sandbox::Isolation::Unavailable }
    }

    /// Claims and executes Runs until `shutdown`. Runs still in flight then
    /// are handed back (queued again at once for another runner) before it
    /// returns. Ends early, with the reason, if the server refuses this
    /// runner's credential (a revoked self-hosted Runner).
    pub async fn serve(self, shutdown: CancellationToken) -> Ended {
        for m in self.missing.iter() {
            tracing::warn!("{} is missing: {}; to fix it: {}", m.program, m.effect, m.install);
        }
        let ended = self.claim_loop(&shutdown).await;
        shutdown.cancel();
        // Wait for every Run to finish or be handed back (one waiting for
        // a worker holds no slot: its lease lapses if it is not handed
        // back in time, and another runner resumes it).
        let all = u32::try_from(self.cfg.concurrency.max(1)).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(HAND_BACK_WAIT, self.slots.acquire_many(all)).await;
        ended
    }

    /// Gives a Run's slot back while it waits on something that costs no
    /// work here.
    pub(crate) fn release_slot(&self, run_id: &str) {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).remove(run_id);
    }

    /// Takes a slot for a Run again, once one is free.
    pub(crate) async fn retake_slot(&self, run_id: &str) {
        if let Ok(p) = self.slots.clone().acquire_owned().await {
            self.held.lock().unwrap_or_else(|p| p.into_inner()).insert(run_id.to_string(), p);
        }
    }

    async fn claim_loop(&self, shutdown: &CancellationToken) -> Ended {
        loop {
            let permit = tokio::select! {
                p = self.slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return Ended::Shutdown },
                () = shutdown.cancelled() => return Ended::Shutdown,
            };
            let mut client = self.runs.clone();
            let req = ClaimRequest { runner_id: self.cfg.runner_id.clone(), wait_ms: self.cfg.claim_wait.as_millis() as u32 };
            let claimed = tokio::select! {
                r = client.claim(req) => r,
                () = shutdown.cancelled() => return Ended::Shutdown,
            };
            match claimed {
                Ok(resp) => {
                    if let Some(work) = resp.into_inner().work {
                        let this = self.clone();
                        let stop = shutdown.child_token();
                        let run_id = work.run_id.clone();
                        self.held.lock().unwrap_or_else(|p| p.into_inner()).insert(run_id.clone(), permit);
                        tokio::spawn(async move {
                            this.execute(work, stop).await;
                            this.release_slot(&run_id);
                        });
                    }
                }
                Err(status) if status.code() == tonic::Code::Unauthenticated => {
                    return Ended::Refused(status.message().to_string());
                }
                Err(status) => {
                    tracing::warn!(%status, "claim failed; backing off");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(500)) => {}
                        () = shutdown.cancelled() => return Ended::Shutdown,
                    }
                }
            }
        }
    }
}
