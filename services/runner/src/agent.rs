//! The in-pod sandbox agent (`checkfu sandbox-agent`) and the runner's side
//! of its channel.
//!
//! On the Kubernetes managed plane a Session's sandbox is a pod of its own
//! (the operator's `Sandbox`), running the pinned SandboxProfile image. The
//! agent is copied into that pod by an init container, so any image works,
//! and serves the sandbox tools over gRPC on the pod's port. The runner that
//! holds the Session's Run calls it:
//!
//! - **Authenticated**: every call carries the Sandbox's agent token (256
//!   random bits the runner put in a Secret the pod reads); the agent
//!   compares digests, so the comparison takes the same time however much of
//!   a wrong token matches. The pod's NetworkPolicy also admits only runner
//!   pods.
//! - **The same tools**: the agent runs [`Workspace`] in
//!   [`Isolation::Container`] mode, so confinement of paths, output and
//!   wall-clock limits are the local plane's, checked by the one conformance
//!   suite (`conformance.rs`).

use crate::sandbox::{Isolation, Limits, Outcome, Workspace};
use checkfu_proto::runner::v1 as pb;
use pb::sandbox_agent_client::SandboxAgentClient;
use pb::sandbox_agent_server::{SandboxAgent, SandboxAgentServer};
use serde_json::Value;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;
use tonic::{Request, Response, Status};

/// The port the agent listens on in a sandbox pod.
pub const PORT: u16 = 7070;
/// The largest message either side accepts: a file `write` (8 MiB) with
/// its JSON framing.
const MAX_MESSAGE: usize = 12 * 1024 * 1024;
/// The shortest token the agent accepts.
pub const MIN_TOKEN: usize = 32;
/// The most any call may ask for (the pod's own limits bound it anyway).
const MOST: Limits = Limits {
    cpu_seconds: 3_600,
    wall: Duration::from_secs(3_600),
    memory_mib: 65_536,
    processes: 4_096,
    tmp_mib: 64,
    file_mib: 1_048_576,
    cpu_millis: None,
    cgroup: None,
};

/// Where a Session's sandbox tools run: a workspace on this host or a
/// sandbox pod's agent. The conformance suite takes either.
pub trait ToolHost: Send + Sync {
    fn run_tool<'a>(&'a self, tool: &'a str, input: &'a Value) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;
}

impl ToolHost for Workspace {
    fn run_tool<'a>(&'a self, tool: &'a str, input: &'a Value) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'a>> {
        Box::pin(self.run(tool, input))
    }
}

fn digest(token: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes()).into()
}

/// The agent: one workspace, one token.
pub struct Agent {
    root: PathBuf,
    token: [u8; 32],
}

impl Agent {
    /// Refuses a token shorter than [`MIN_TOKEN`].
    pub fn new(root: PathBuf, token: &str) -> Result<Agent, String> {
        if token.len() < MIN_TOKEN {
            return Err(format!("the agent token must be at least {MIN_TOKEN} characters"));
        }
        Ok(Agent { root, token: digest(token) })
    }

    /// Serves until `shutdown`.
    pub async fn serve(self, listener: tokio::net::TcpListener, shutdown: tokio_util::sync::CancellationToken) -> Result<(), String> {
        let svc = SandboxAgentServer::new(self).max_decoding_message_size(MAX_MESSAGE).max_encoding_message_size(MAX_MESSAGE);
        tonic::transport::Server::builder()
            .concurrency_limit_per_connection(64)
            .add_service(svc)
            .serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(listener), shutdown.cancelled_owned())
            .await
            .map_err(|e| e.to_string())
    }

    fn check<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let given = req.metadata().get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        match given {
            Some(t) if digest(t) == self.token => Ok(()),
            _ => Err(Status::unauthenticated("a valid sandbox agent token is required")),
        }
    }
}

/// The call's limits, each within [`MOST`] (zero: the default).
fn limits(l: Option<pb::ToolLimits>) -> Limits {
    let d = Limits::default();
    let Some(l) = l else { return d };
    let pick = |v: u64, default: u64, most: u64| if v == 0 { default } else { v.min(most) };
    Limits {
        cpu_seconds: pick(l.cpu_seconds, d.cpu_seconds, MOST.cpu_seconds),
        wall: Duration::from_millis(pick(l.wall_ms, d.wall.as_millis() as u64, MOST.wall.as_millis() as u64)),
        memory_mib: pick(l.memory_mib, d.memory_mib, MOST.memory_mib),
        file_mib: pick(l.file_mib, d.file_mib, MOST.file_mib),
        processes: pick(l.processes, d.processes, MOST.processes),
        ..d
    }
}

#[tonic::async_trait]
impl SandboxAgent for Agent {
    async fn run_tool(&self, req: Request<pb::RunToolRequest>) -> Result<Response<pb::RunToolResponse>, Status> {
        self.check(&req)?;
        let r = req.into_inner();
        let input: Value =
            serde_json::from_str(&r.input_json).map_err(|e| Status::invalid_argument(format!("input_json is not JSON: {e}")))?;
        let ws = Workspace::open(&self.root, Isolation::Container, limits(r.limits))
            .map_err(|e| Status::unavailable(format!("the workspace is unavailable: {e}")))?;
        let out = ws.run(&r.tool, &input).await;
        Ok(Response::new(pb::RunToolResponse { content: out.content, is_error: out.is_error }))
    }
}

/// The runner's side: a sandbox pod's agent, with the Run's limits.
#[derive(Clone)]
pub struct RemoteSandbox {
    client: SandboxAgentClient<tonic::transport::Channel>,
    token: tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
    limits: Limits,
}

impl RemoteSandbox {
    /// A channel to the agent at `address` (`host:port`), connected on
    /// first use.
    pub fn new(address: &str, token: &str, limits: Limits) -> Result<RemoteSandbox, String> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .map_err(|e| format!("the sandbox address {address:?} is invalid: {e}"))?
            .connect_timeout(Duration::from_secs(10))
            .connect_lazy();
        let client = SandboxAgentClient::new(channel).max_decoding_message_size(MAX_MESSAGE).max_encoding_message_size(MAX_MESSAGE);
        let token = format!("Bearer {token}").parse().map_err(|_| "the sandbox agent token is malformed".to_string())?;
        Ok(RemoteSandbox { client, token, limits })
    }

    /// Runs a sandbox tool in the pod; a failed call is an error result.
    pub async fn run(&self, tool: &str, input: &Value) -> Outcome {
        let l = &self.limits;
        let wire = pb::ToolLimits {
            cpu_seconds: l.cpu_seconds,
            wall_ms: l.wall.as_millis() as u64,
            memory_mib: l.memory_mib,
            file_mib: l.file_mib,
            processes: l.processes,
        };
        let mut req = Request::new(pb::RunToolRequest { tool: tool.into(), input_json: input.to_string(), limits: Some(wire) });
        req.metadata_mut().insert("authorization", self.token.clone());
        // The command's own wall clock, and then some for the channel.
        req.set_timeout(l.wall + Duration::from_secs(30));
        match self.client.clone().run_tool(req).await {
            Ok(r) => {
                let r = r.into_inner();
                Outcome { content: r.content, is_error: r.is_error }
            }
            Err(s) => Outcome { content: format!("the sandbox pod could not run {tool}: {}", s.message()), is_error: true },
        }
    }
}

impl ToolHost for RemoteSandbox {
    fn run_tool<'a>(&'a self, tool: &'a str, input: &'a Value) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'a>> {
        Box::pin(self.run(tool, input))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_come_from_the_call_within_bounds() {
        let l = limits(Some(pb::ToolLimits { cpu_seconds: 0, wall_ms: 500, memory_mib: u64::MAX, file_mib: 3, processes: 0 }));
        assert_eq!(l.wall, Duration::from_millis(500));
        assert_eq!(l.memory_mib, MOST.memory_mib, "capped");
        assert_eq!(l.file_mib, 3);
        assert_eq!(l.cpu_seconds, Limits::default().cpu_seconds, "zero is the default");
        assert!(Agent::new("/tmp".into(), "short").is_err());
    }

    /// The agent over its channel passes the suite every sandbox passes,
    /// and answers nothing without its token.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_agent_over_its_channel_passes_the_conformance_suite() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (ws, outside) = (dir.path().join("ws"), dir.path().join("outside"));
        std::fs::create_dir_all(&ws).expect("mkdir");
        std::fs::create_dir(&outside).expect("mkdir");
        let token = "t".repeat(43);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let stop = tokio_util::sync::CancellationToken::new();
        let agent = Agent::new(ws.clone(), &token).expect("agent");
        let served = tokio::spawn(agent.serve(listener, stop.clone()));

        let stranger = RemoteSandbox::new(&addr, &"x".repeat(43), crate::conformance::limits()).expect("client");
        let r = stranger.run("write", &serde_json::json!({"path": "planted", "content": "x"})).await;
        assert!(r.is_error && r.content.contains("token"), "{r:?}");
        assert!(!ws.join("planted").exists(), "a wrong token runs nothing");

        let sb = RemoteSandbox::new(&addr, &token, crate::conformance::limits()).expect("client");
        crate::conformance::run(&sb, &ws, &outside, true).await;
        stop.cancel();
        served.await.expect("join").expect("served");
    }
}
