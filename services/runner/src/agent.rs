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

use crate::chunks::{Chunks, Found, chunks_of, sha256_of, walk, write_to};
use crate::confined::Root;
use crate::sandbox::{Isolation, Limits, Outcome, Workspace};
use checkfu_proto::runner::v1 as pb;
use futures_util::StreamExt;
use pb::sandbox_agent_client::SandboxAgentClient;
use pb::sandbox_agent_server::{SandboxAgent, SandboxAgentServer};
use serde_json::Value;
use std::future::Future;
use std::path::{Path, PathBuf};
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

/// The agent: one workspace, one token.
pub struct Agent {
    root: PathBuf,
    /// The token's SHA-256 (hex).
    token: String,
}

impl Agent {
    /// Refuses a token shorter than [`MIN_TOKEN`].
    pub fn new(root: PathBuf, token: &str) -> Result<Agent, String> {
        if token.len() < MIN_TOKEN {
            return Err(format!("the agent token must be at least {MIN_TOKEN} characters"));
        }
        Ok(Agent { root, token: checkfu_core::sha256_hex(token) })
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
            Some(t) if checkfu_core::sha256_hex(t) == self.token => Ok(()),
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

impl Agent {
    /// The workspace's confined root (made when missing).
    fn files(&self) -> Result<Root, Status> {
        std::fs::create_dir_all(&self.root).map_err(|e| Status::unavailable(format!("the workspace is unavailable: {e}")))?;
        Root::open(&self.root, None).map_err(|e| Status::unavailable(format!("the workspace is unavailable: {e}")))
    }
}

fn file_error(path: &str) -> impl Fn(std::io::Error) -> Status + '_ {
    move |e| match e.kind() {
        std::io::ErrorKind::NotFound => Status::not_found(format!("{path}: no such file")),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::InvalidInput => Status::invalid_argument(format!("{path}: {e}")),
        _ => Status::internal(format!("{path}: {e}")),
    }
}

type FileStream = Pin<Box<dyn futures_util::Stream<Item = Result<pb::FileChunk, Status>> + Send>>;

#[tonic::async_trait]
impl SandboxAgent for Agent {
    async fn run_tool(&self, req: Request<pb::RunToolRequest>) -> Result<Response<pb::RunToolResponse>, Status> {
        self.check(&req)?;
        let r = req.into_inner();
        let input: Value =
            serde_json::from_str(&r.input_json).map_err(|e| Status::invalid_argument(format!("input_json is not JSON: {e}")))?;
        let ws = Workspace::open(&self.root, Isolation::Container, limits(r.limits))
            .map_err(|e| Status::unavailable(format!("the workspace is unavailable: {e}")))?
            .with_proxy((!r.proxy_url.is_empty()).then_some(r.proxy_url))
            .with_writable_mounts(r.writable_mounts);
        let out = ws.run(&r.tool, &input).await;
        Ok(Response::new(pb::RunToolResponse { content: out.content, is_error: out.is_error }))
    }

    async fn list_files(&self, req: Request<pb::ListFilesRequest>) -> Result<Response<pb::ListFilesResponse>, Status> {
        self.check(&req)?;
        let limit = (req.into_inner().limit as usize).clamp(1, 100_000);
        let root = self.root.clone();
        let found = tokio::task::spawn_blocking(move || walk(&root, limit)).await.map_err(|e| Status::internal(e.to_string()))?;
        let files = found
            .into_iter()
            .map(|f| pb::FileEntry { path: f.rel, size: f.size, mode: f.mode, mtime_ns: f.mtime_ns.clamp(0, i128::from(i64::MAX)) as i64 })
            .collect();
        Ok(Response::new(pb::ListFilesResponse { files }))
    }

    async fn hash_file(&self, req: Request<pb::FileRef>) -> Result<Response<pb::HashFileResponse>, Status> {
        self.check(&req)?;
        let path = req.into_inner().path;
        let root = self.files()?;
        let sha256 = tokio::task::spawn_blocking(move || sha256_of(&root, Path::new(&path)).map_err(file_error(&path)))
            .await
            .map_err(|e| Status::internal(e.to_string()))??;
        Ok(Response::new(pb::HashFileResponse { sha256 }))
    }

    type ReadFileStream = FileStream;

    async fn read_file(&self, req: Request<pb::FileRef>) -> Result<Response<FileStream>, Status> {
        self.check(&req)?;
        let path = req.into_inner().path;
        let file = self.files()?.open_file(Path::new(&path)).map_err(file_error(&path))?;
        let chunks = chunks_of(file).map(|c| c.map(|data| pb::FileChunk { data, ..Default::default() }));
        Ok(Response::new(Box::pin(chunks)))
    }

    async fn write_file(&self, req: Request<tonic::Streaming<pb::FileChunk>>) -> Result<Response<pb::WriteFileResponse>, Status> {
        self.check(&req)?;
        let mut stream = req.into_inner();
        let head = stream.message().await?.ok_or_else(|| Status::invalid_argument("the first chunk names the file"))?;
        if head.path.is_empty() {
            return Err(Status::invalid_argument("the first chunk names the file"));
        }
        let first = futures_util::stream::iter([Ok(head.data)]);
        let rest = stream.map(|c| c.map(|c| c.data));
        let root = self.files()?;
        let (size, mtime) = write_to(&root, Path::new(&head.path), head.mode, Box::pin(first.chain(rest))).await?;
        Ok(Response::new(pb::WriteFileResponse { size, mtime_ns: mtime.clamp(0, i128::from(i64::MAX)) as i64 }))
    }

    async fn remove_file(&self, req: Request<pb::FileRef>) -> Result<Response<pb::RemoveFileResponse>, Status> {
        self.check(&req)?;
        let path = req.into_inner().path;
        self.files()?.remove(Path::new(&path)).map_err(file_error(&path))?;
        Ok(Response::new(pb::RemoveFileResponse {}))
    }
}

/// The runner's side: a sandbox pod's agent, with the Run's limits.
#[derive(Clone)]
pub struct RemoteSandbox {
    client: SandboxAgentClient<tonic::transport::Channel>,
    token: tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
    limits: Limits,
    /// Which sandbox this is (its Sandbox's uid): what the runner remembers
    /// of a workspace holds only for the same one.
    identity: String,
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
        Ok(RemoteSandbox { client, token, limits, identity: String::new() })
    }

    /// Names the sandbox (its Sandbox's uid).
    pub fn with_identity(mut self, identity: &str) -> RemoteSandbox {
        self.identity = identity.into();
        self
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Runs a sandbox tool in the pod; a failed call is an error result.
    pub async fn run(&self, tool: &str, input: &Value) -> Outcome {
        self.run_via(tool, input, String::new(), vec![]).await
    }

    /// Like [`Self::run`], giving `bash` the egress proxy at `proxy_url`.
    pub async fn run_via(&self, tool: &str, input: &Value, proxy_url: String, writable_mounts: Vec<String>) -> Outcome {
        let l = &self.limits;
        let wire = pb::ToolLimits {
            cpu_seconds: l.cpu_seconds,
            wall_ms: l.wall.as_millis() as u64,
            memory_mib: l.memory_mib,
            file_mib: l.file_mib,
            processes: l.processes,
        };
        let mut req = Request::new(pb::RunToolRequest {
            tool: tool.into(),
            input_json: input.to_string(),
            limits: Some(wire),
            proxy_url,
            writable_mounts,
        });
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

impl RemoteSandbox {
    fn authorized<T>(&self, msg: T) -> Request<T> {
        let mut req = Request::new(msg);
        req.metadata_mut().insert("authorization", self.token.clone());
        req
    }

    pub async fn list_files(&self, limit: usize) -> Result<Vec<Found>, Status> {
        let req = self.authorized(pb::ListFilesRequest { limit: limit.min(u32::MAX as usize) as u32 });
        let files = self.client.clone().list_files(req).await?.into_inner().files;
        Ok(files.into_iter().map(|f| Found { rel: f.path, size: f.size, mode: f.mode, mtime_ns: i128::from(f.mtime_ns) }).collect())
    }

    pub async fn hash_file(&self, path: &str) -> Result<String, Status> {
        Ok(self.client.clone().hash_file(self.authorized(pb::FileRef { path: path.into() })).await?.into_inner().sha256)
    }

    pub async fn read_file(&self, path: &str) -> Result<Chunks, Status> {
        let stream = self.client.clone().read_file(self.authorized(pb::FileRef { path: path.into() })).await?.into_inner();
        Ok(Box::pin(stream.map(|c| c.map(|c| c.data))))
    }

    /// Writes a file in the pod; its size and modification time there.
    pub async fn write_file(&self, path: &str, mode: u32, chunks: Chunks) -> Result<(u64, i128), Status> {
        let head = pb::FileChunk { path: path.into(), mode, data: vec![] };
        // A chunk that fails ends the stream: the file is left short, and
        // the next restore finds it differs.
        let body = crate::chunks::until_error(chunks, |data| pb::FileChunk { data, ..Default::default() });
        let stream = futures_util::stream::iter(vec![head]).chain(body);
        let req = self.authorized(stream);
        let r = self.client.clone().write_file(req).await?.into_inner();
        Ok((r.size, i128::from(r.mtime_ns)))
    }

    pub async fn remove_file(&self, path: &str) -> Result<(), Status> {
        self.client.clone().remove_file(self.authorized(pb::FileRef { path: path.into() })).await?;
        Ok(())
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

        assert_eq!(stranger.list_files(10).await.expect_err("refused").code(), tonic::Code::Unauthenticated);
        assert_eq!(stranger.hash_file("x").await.expect_err("refused").code(), tonic::Code::Unauthenticated);

        let sb = RemoteSandbox::new(&addr, &token, crate::conformance::limits()).expect("client");
        crate::conformance::run(&sb, &ws, &outside, true).await;

        // The file calls the runner's snapshots use: confined like the tools.
        let bytes = |b: &'static [u8]| -> crate::chunks::Chunks { Box::pin(futures_util::stream::iter([Ok(b.to_vec())])) };
        let (size, _) = sb.write_file("snap/a.txt", 0o640, bytes(b"restored")).await.expect("write");
        assert_eq!(size, 8);
        assert_eq!(std::fs::read(ws.join("snap/a.txt")).expect("on disk"), b"restored");
        let listed = sb.list_files(1000).await.expect("list");
        let a = listed.iter().find(|f| f.rel == "snap/a.txt").expect("listed");
        assert_eq!((a.size, a.mode), (8, 0o640));
        assert_eq!(sb.hash_file("snap/a.txt").await.expect("hash"), checkfu_core::sha256_hex(b"restored"));
        let mut read = vec![];
        let mut chunks = sb.read_file("snap/a.txt").await.expect("read");
        while let Some(c) = chunks.next().await {
            read.extend(c.expect("chunk"));
        }
        assert_eq!(read, b"restored");
        std::fs::write(outside.join("secret"), "s3cret").expect("plant");
        std::os::unix::fs::symlink(&outside, ws.join("out")).expect("link");
        assert!(sb.write_file("../escape", 0o644, bytes(b"x")).await.is_err());
        assert!(sb.write_file("out/planted", 0o644, bytes(b"x")).await.is_err());
        assert!(!outside.join("planted").exists() && !dir.path().join("escape").exists());
        assert!(sb.hash_file("out/secret").await.is_err(), "no hashing through a link out");
        assert!(sb.read_file("out/secret").await.is_err(), "no reading through a link out");
        assert!(sb.remove_file("out/secret").await.is_err(), "no removing through a link out");
        assert!(outside.join("secret").exists());
        let listed = sb.list_files(1000).await.expect("list");
        assert!(!listed.iter().any(|f| f.rel.starts_with("out/")), "a link is not followed");
        sb.remove_file("snap/a.txt").await.expect("remove");
        assert!(!ws.join("snap/a.txt").exists());
        stop.cancel();
        served.await.expect("join").expect("served");
    }
}
