//! The e2e harness: boots Checkfu in-process on a pre-bound port-0 listener
//! (or as separate `checkfu serve` processes) and drives it only through the
//! public HTTP API, as an outside client would.
#![allow(clippy::unwrap_used, reason = "test harness: a failed step panics, failing the test or the benchmark")]

use checkfu_node::{Node, NodeOptions, Role};
use checkfu_store::Location;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod automation;
pub mod catalog_changes;
pub mod cma;
pub mod cpu;
pub mod github;
pub mod mcp;
pub mod procs;
pub mod program_firings;
pub mod revocation;
pub mod sse;

/// Timings a test may shorten.
#[derive(Debug, Clone)]
pub struct Tuning {
    pub sse_ping: Duration,
    pub approval_ttl: Duration,
    pub approval_sweep: Duration,
    pub allow_private_targets: bool,
    pub rate_limit_per_second: u32,
    pub max_streams_per_principal: usize,
    /// Holds the runner between reading the log and calling the model.
    pub hold_before_model: Option<std::sync::Arc<checkfu_runner::ModelHold>>,
    /// Provider endpoints beyond the defaults.
    pub model_endpoints: Vec<checkfu_model_gateway::endpoints::Endpoint>,
    /// Also open the internal mesh listener (mutual TLS, certificates in
    /// `DIR/mesh`), so other nodes can reach this one's roles.
    pub mesh: bool,
    /// The credential key file; `None` keeps one in the data directory.
    pub credential_key_file: Option<PathBuf>,
    /// Features switched off (`files`, `skills`, ...).
    pub features_disabled: Vec<String>,
    /// Runs the managed runner works at once (`None`: its default).
    pub runner_concurrency: Option<usize>,
    /// Offer the `fake` provider (§18.9).
    pub test_providers: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            sse_ping: Duration::from_secs(15),
            approval_ttl: Duration::from_secs(3600),
            approval_sweep: Duration::from_millis(250),
            allow_private_targets: false,
            rate_limit_per_second: 2_000,
            max_streams_per_principal: 500,
            model_endpoints: vec![],
            hold_before_model: None,
            mesh: false,
            credential_key_file: None,
            features_disabled: vec![],
            runner_concurrency: None,
            test_providers: false,
        }
    }
}

/// A running embedded installation.
pub struct Platform {
    pub base: String,
    pub admin: Api,
    pub admin_id: String,
    pub env_id: String,
    pub data_dir: PathBuf,
    /// The internal mesh listener (`https://...`), with `Tuning::mesh`.
    pub internal_base: Option<String>,
    node: Option<Node>,
}

impl Platform {
    /// This installation as its bootstrap admin sees it.
    pub fn installation(&self) -> Installation {
        Installation { admin: self.admin.clone(), admin_id: self.admin_id.clone(), env_id: self.env_id.clone() }
    }
}

/// An embedded installation's options on `dir` (every role, no mesh).
pub fn embedded_options(dir: &Path, tuning: &Tuning) -> NodeOptions {
    NodeOptions {
        roles: Role::ALL.into_iter().collect(),
        storage: Location::SqliteDir(dir.to_path_buf()),
        remotes: BTreeMap::new(),
        mesh: None,
        embedded: true,
        kafka_brokers: None,
        redis_url: None,
        sealer: None,
        blob_store: dir.join("blobs").display().to_string(),
        features_disabled: checkfu_core::features::Disabled::parse(&tuning.features_disabled.join(",")).unwrap(),
        allow_private_targets: tuning.allow_private_targets,
        gateway: checkfu_node::GatewayOptions {
            sse_ping: tuning.sse_ping,
            cma_prefix: "/cma".into(),
            rate_limit_per_second: tuning.rate_limit_per_second,
            max_streams_per_principal: tuning.max_streams_per_principal,
            auth_failures_per_window: 20,
        },
        governance: checkfu_node::GovernanceOptions { bootstrap_key_file: Some(dir.join("admin.key")), approval_ttl: tuning.approval_ttl },
        sessions: checkfu_node::SessionsOptions {
            run_lease: Duration::from_millis(checkfu_node::config::Config::defaults(checkfu_node::config::Mode::Up).timing.run_lease_ms),
            approval_sweep_every: tuning.approval_sweep,
            allow_unrestricted_network: true,
            files_retention_days: 30,
        },
        capability_gateway: checkfu_node::CapabilityGatewayOptions {
            credential_key_file: tuning.credential_key_file.clone(),
            egress_listen: Some("127.0.0.1:0".into()),
            egress_advertise: None,
        },
        model_gateway: checkfu_node::ModelGatewayOptions {
            endpoints: checkfu_model_gateway::endpoints::Endpoints::new(None, None, tuning.model_endpoints.clone(), false).unwrap(),
        },
        scheduler: checkfu_node::SchedulerOptions { public_url: String::new(), test_providers: tuning.test_providers },
        runner: checkfu_runner::RunnerConfig {
            claim_wait: Duration::from_secs(2),
            workspaces: dir.join("workspaces"),
            hold_before_model: tuning.hold_before_model.clone(),
            // The built `checkfu` binary relays bash's traffic to the egress proxy.
            egress_relay: Some(procs::binary_path()).filter(|p| p.exists()),
            concurrency: tuning.runner_concurrency.unwrap_or(checkfu_runner::RunnerConfig::default().concurrency),
            ..Default::default()
        },
    }
}

/// Where a test installation's mesh certificates live.
pub fn mesh_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("mesh")
}

/// A mesh identity for `roles`, issued by the CA in `dir` (made on first use).
pub fn mesh_identity(dir: &Path, name: &str, roles: &[Role]) -> checkfu_node::mesh::MeshTls {
    let roles: BTreeSet<Role> = roles.iter().copied().collect();
    let issued = checkfu_node::certs::issue(dir, name, &roles, 1).unwrap();
    checkfu_node::mesh::MeshTls::load(&checkfu_node::mesh::MeshFiles { ca: issued.ca, cert: issued.cert, key: issued.key }).unwrap()
}

impl Platform {
    /// Every role, embedded, in a fresh data directory.
    pub async fn start(dir: &Path) -> Platform {
        Self::start_roles(dir, Role::ALL.into_iter().collect()).await
    }

    /// The given roles, embedded, on `dir` (fresh or reused across restarts).
    pub async fn start_roles(dir: &Path, roles: BTreeSet<Role>) -> Platform {
        Self::start_with(dir, roles, Duration::from_secs(15)).await
    }

    /// With a chosen SSE keep-alive interval.
    pub async fn start_with(dir: &Path, roles: BTreeSet<Role>, sse_ping: Duration) -> Platform {
        Self::start_tuned(dir, roles, Tuning { sse_ping, ..Default::default() }).await
    }

    /// Every role, with chosen timings.
    pub async fn start_timed(dir: &Path, tuning: Tuning) -> Platform {
        Self::start_tuned(dir, Role::ALL.into_iter().collect(), tuning).await
    }

    /// With options made by hand (start from [`embedded_options`]).
    pub async fn start_with_options(dir: &Path, opts: NodeOptions) -> Platform {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let node = Node::start_with(listener, None, opts).await.unwrap();
        let base = format!("http://{}", node.addr);
        let key = std::fs::read_to_string(dir.join("admin.key")).unwrap().trim().to_string();
        wait_ready(&base).await;
        let Installation { admin, admin_id, env_id } = Installation::discover(&base, &key).await;
        Platform { base, admin, admin_id, env_id, data_dir: dir.to_path_buf(), internal_base: None, node: Some(node) }
    }

    async fn start_tuned(dir: &Path, roles: BTreeSet<Role>, tuning: Tuning) -> Platform {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let key_file = dir.join("admin.key");
        let (internal, mesh) = if tuning.mesh {
            let all: Vec<Role> = roles.iter().copied().collect();
            (Some(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()), Some(mesh_identity(&mesh_dir(dir), "platform", &all)))
        } else {
            (None, None)
        };
        let opts = NodeOptions { roles, mesh, ..embedded_options(dir, &tuning) };
        let node = Node::start_with(listener, internal, opts).await.unwrap();
        let base = format!("http://{}", node.addr);
        let internal_base = node.internal_addr.map(|a| format!("https://{a}"));
        let key = std::fs::read_to_string(&key_file).unwrap().trim().to_string();
        wait_ready(&base).await;
        let Installation { admin, admin_id, env_id } = Installation::discover(&base, &key).await;
        Platform { base, admin, admin_id, env_id, data_dir: dir.to_path_buf(), internal_base, node: Some(node) }
    }

    /// A client transport into the installation's `callee` role, calling as
    /// `caller` — to play an internal role by hand (a runner, say). It
    /// exists only in this process: nothing internal listens publicly.
    pub fn internal(&self, caller: Role, callee: Role) -> checkfu_proto::transport::Transport {
        self.node.as_ref().and_then(|n| n.client_as(caller, callee)).expect("the installation serves that role in process")
    }

    pub async fn stop(mut self) {
        if let Some(n) = self.node.take() {
            n.stop().await;
        }
    }
}

pub async fn wait_ready(base: &str) {
    let client = reqwest::Client::new();
    for _ in 0..200 {
        if let Ok(r) = client.get(format!("{base}/readyz")).send().await
            && r.status() == StatusCode::OK
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{base} never became ready");
}

/// A running installation as its bootstrap admin sees it.
#[derive(Clone)]
pub struct Installation {
    pub admin: Api,
    pub admin_id: String,
    /// The `default` Environment.
    pub env_id: String,
}

impl Installation {
    /// Finds the admin principal and the default Environment of the
    /// installation at `base`, as the holder of the admin `key`.
    pub async fn discover(base: &str, key: &str) -> Installation {
        let admin = Api::new(base, key);
        let (status, envs, _) = admin.get("/v1/environments").await;
        assert_eq!(status, 200, "listing environments at {base}: {envs}");
        let env_id = envs["data"].as_array().unwrap().iter().find(|e| e["name"] == "default").map(id).expect("a default environment");
        let (_, principals, _) = admin.get("/v1/principals?limit=100").await;
        let admin_id = principals["data"].as_array().unwrap().iter().find(|p| p["name"] == "admin").map(id).expect("the admin principal");
        Installation { admin, admin_id, env_id }
    }
}

/// An installation's base URL as given on a command line (`http://host:port`,
/// with or without a trailing `/` or `/v1`), as [`Api`] takes it.
pub fn api_base(url: &str) -> String {
    url.trim_end_matches('/').trim_end_matches("/v1").to_string()
}

/// A client holding one API key.
#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub key: String,
    pub client: reqwest::Client,
}

pub type Reply = (StatusCode, Value, HeaderMap);

impl Api {
    pub fn new(base: &str, key: &str) -> Api {
        Api { base: base.into(), key: key.into(), client: reqwest::Client::new() }
    }

    async fn send(&self, rb: reqwest::RequestBuilder) -> Reply {
        let r = rb.bearer_auth(&self.key).send().await.unwrap();
        let status = r.status();
        let headers = r.headers().clone();
        let text = r.text().await.unwrap();
        let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, v, headers)
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.client.get(format!("{}{path}", self.base))).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(self.client.post(format!("{}{path}", self.base)).json(&body)).await
    }

    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>, headers: &[(&str, &str)]) -> Reply {
        let mut rb = self.client.post(format!("{}{path}", self.base)).header("content-type", "application/json").body(body);
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        self.send(rb).await
    }

    pub async fn post_with(&self, path: &str, body: Value, headers: &[(&str, &str)]) -> Reply {
        self.post_raw(path, body.to_string(), headers).await
    }

    /// A multipart form of `parts` (`(name, filename, content type, bytes)`)
    /// with `boundary`, and extra headers.
    pub async fn post_form(&self, path: &str, parts: &[FormPart<'_>], boundary: &str, headers: &[(&str, &str)]) -> Reply {
        let mut rb = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", format!("multipart/form-data; boundary={boundary}"))
            .body(form_body(parts, boundary));
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        self.send(rb).await
    }

    /// A response's bytes, not JSON.
    pub async fn get_bytes(&self, path: &str) -> (StatusCode, Vec<u8>, HeaderMap) {
        let r = self.client.get(format!("{}{path}", self.base)).bearer_auth(&self.key).send().await.unwrap();
        let (status, headers) = (r.status(), r.headers().clone());
        (status, r.bytes().await.unwrap().to_vec(), headers)
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send(self.client.delete(format!("{}{path}", self.base))).await
    }
}

/// One part of a multipart form: name, filename, content type, bytes.
pub type FormPart<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a [u8]);

/// A multipart form's body, written out by hand (a client's bytes).
pub fn form_body(parts: &[FormPart<'_>], boundary: &str) -> Vec<u8> {
    let mut out = vec![];
    for (name, filename, content_type, bytes) in parts {
        out.extend(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"").as_bytes());
        if let Some(f) = filename {
            out.extend(format!("; filename=\"{f}\"").as_bytes());
        }
        out.extend(b"\r\n");
        if let Some(t) = content_type {
            out.extend(format!("Content-Type: {t}\r\n").as_bytes());
        }
        out.extend(b"\r\n");
        out.extend(*bytes);
        out.extend(b"\r\n");
    }
    out.extend(format!("--{boundary}--\r\n").as_bytes());
    out
}

/// Asserts a status and, for errors, the envelope's type and request id.
#[track_caller]
pub fn expect(r: &Reply, status: u16, error_type: Option<&str>) {
    assert_eq!(r.0.as_u16(), status, "unexpected status; body: {}", r.1);
    assert!(r.2.contains_key("request-id"), "every response carries a request-id header");
    if let Some(t) = error_type {
        assert_eq!(r.1["error"]["type"], t, "body: {}", r.1);
        assert!(r.1["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(r.1["request_id"].as_str().is_some_and(|m| m.starts_with("req_")));
        assert_eq!(r.1["request_id"].as_str(), r.2.get("request-id").and_then(|h| h.to_str().ok()));
    }
}

pub fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_else(|| panic!("no id in {v}")).to_string()
}

/// An agent published and deployed with the scripted model.
pub struct Deployed {
    pub agent_id: String,
    pub deployment_id: String,
    pub routing_profile_id: String,
    pub sandbox_profile_id: String,
}

pub async fn deploy(api: &Api, env: &str, draft: Value) -> Deployed {
    deploy_with_network(api, env, draft, json!({})).await
}

/// Like [`deploy`], with the SandboxProfile's `network` section.
pub async fn deploy_with_network(api: &Api, env: &str, draft: Value, network: Value) -> Deployed {
    deploy_on(api, env, draft, network, Value::Null).await
}

/// Like [`deploy_with_network`], pinned to an execution plane
/// (`{"kind": "runner", "pool": ...}`; null for the managed plane).
pub async fn deploy_on(api: &Api, env: &str, draft: Value, network: Value, execution: Value) -> Deployed {
    let a = api.post("/v1/agents", json!({"environment_id": env, "name": "helper", "draft": draft})).await;
    expect(&a, 201, None);
    let agent_id = id(&a.1);
    expect(&api.post(&format!("/v1/agents/{agent_id}/versions"), json!({})).await, 201, None);
    let sbp = api
        .post(
            "/v1/sandbox-profiles",
            json!({"environment_id": env, "name": format!("sbp-{agent_id}"), "image": "debian:12", "network": network}),
        )
        .await;
    expect(&sbp, 201, None);
    let mrp = api
        .post("/v1/model-routing-profiles", json!({"environment_id": env, "name": format!("mrp-{agent_id}"), "candidates": [{"provider": "scripted", "model": "scripted-1", "effort": "low"}]}))
        .await;
    expect(&mrp, 201, None);
    let dep = api
        .post(
            "/v1/agent-deployments",
            json!({"environment_id": env, "key": format!("k-{agent_id}"), "agent_id": agent_id, "agent_version": 1, "model_routing_profile_id": id(&mrp.1), "sandbox_profile_id": id(&sbp.1), "execution": execution}),
        )
        .await;
    expect(&dep, 201, None);
    Deployed { agent_id, deployment_id: id(&dep.1), routing_profile_id: id(&mrp.1), sandbox_profile_id: id(&sbp.1) }
}

/// An input event of `kind` authored (and caused) by `who`.
/// An ActionPolicy allowing the Agent every tool, with `tools` its draft's
/// (`{"tools": [...]}`): the deployment, ready for tool calls.
pub async fn deploy_allowing_tools(api: &Api, env: &str, tools: Value) -> Deployed {
    let d = deploy(api, env, tools).await;
    let allow = json!({"environment_id": env, "name": "all-tools", "rules": [
        {"subject": {"kind": "agent_definition", "id_glob": d.agent_id}, "resource": {"kind": "tool", "id_glob": "*"}, "permission_glob": "invoke", "disposition": "allow"}
    ]});
    expect(&api.post("/v1/action-policies", allow).await, 201, None);
    d
}

pub fn input(who: &str, kind: &str, payload: Value) -> Value {
    json!({"type": kind, "payload": payload, "authored_by": who, "caused_by": {"kind": "principal", "id": who}})
}

/// A `user.message` input authored by `who`.
pub fn message(who: &str, text: &str) -> Value {
    input(who, "user.message", json!({"content": [{"type": "text", "text": text}]}))
}

/// A `user.interrupt` input authored by `who`.
pub fn interrupt(who: &str) -> Value {
    input(who, "user.interrupt", json!({}))
}

/// Every persisted event of a session, in seq order.
pub async fn events(api: &Api, session: &str) -> Vec<Value> {
    let mut out = vec![];
    let mut after = 0;
    loop {
        let r = api.get(&format!("/v1/sessions/{session}/events?after_seq={after}&limit=1000")).await;
        expect(&r, 200, None);
        let batch = r.1["data"].as_array().unwrap().clone();
        if batch.is_empty() {
            return out;
        }
        after = batch.last().unwrap()["seq"].as_i64().unwrap();
        out.extend(batch);
    }
}

/// Polls until the session is idle (or terminated) and returns it, for up
/// to 30 s (a busy 2-core CI machine runs many sandboxes at once).
pub async fn settle(api: &Api, session: &str) -> Value {
    for _ in 0..1200 {
        let r = api.get(&format!("/v1/sessions/{session}")).await;
        let status = r.1["status"].as_str().unwrap_or_default().to_string();
        if status == "idle" || status == "terminated" {
            return r.1;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("session {session} never settled");
}

/// Asserts seq is 1..=n with no gap or duplicate.
#[track_caller]
pub fn assert_gapless(events: &[Value]) {
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>(), "seq must be gapless from 1");
}

pub fn types(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["type"].as_str().unwrap().to_string()).collect()
}

/// The quick-start journey as any client would run it against any
/// installation: deploy, a service principal with a key and `invoke`, a
/// session acting as it, a streamed turn, a resumed stream, a gapless log.
/// Requests go through `base`; the live stream is read through
/// `stream_base` (another gateway replica, or the same one).
pub async fn run_journey(base: &str, stream_base: &str, admin: &Api, env_id: &str) {
    use sse::Stream;
    let d = deploy(admin, env_id, json!({"instructions": "Be brief."})).await;
    let bot = admin.post("/v1/principals", json!({"kind": "service", "name": "journey-bot"})).await;
    expect(&bot, 201, None);
    let bot_id = id(&bot.1);
    let secret =
        admin.post(&format!("/v1/principals/{bot_id}/api-keys"), json!({"name": "k"})).await.1["secret"].as_str().unwrap().to_string();
    let bot_api = Api::new(base, &secret);
    expect(
        &bot_api.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": bot_id})).await,
        403,
        Some("permission.denied"),
    );
    let grant =
        json!({"subject": {"kind": "principal", "id": bot_id}, "permission": "invoke", "resource": {"kind": "agent", "id": d.agent_id}});
    expect(&admin.post("/v1/permission-assignments", grant).await, 201, None);
    let s = bot_api.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": bot_id})).await;
    expect(&s, 201, None);
    let sid = id(&s.1);
    let mut stream =
        Stream::open(stream_base, &secret, &format!("/v1/sessions/{sid}/events/stream?event_deltas=agent.message"), None).await;
    expect(&bot_api.post(&format!("/v1/sessions/{sid}/events"), message(&bot_id, "hello mesh")).await, 201, None);
    let frames = stream.until(Duration::from_secs(20), |f| f.event == "session.status_idle").await;
    let ids: Vec<i64> = frames.iter().filter_map(|f| f.id.as_ref()).map(|i| i.parse().unwrap()).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>());
    assert!(frames.iter().any(|f| f.event == "event_delta"), "previews reach the stream");
    let reply = frames.iter().find(|f| f.event == "agent.message").unwrap().json();
    assert_eq!(reply["payload"]["content"][0]["text"], "echo: hello mesh");
    let mut resumed = Stream::open(stream_base, &secret, &format!("/v1/sessions/{sid}/events/stream"), Some(3)).await;
    let first = resumed.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!(first.id.as_deref(), Some("4"));
    let all = events(&bot_api, &sid).await;
    assert_gapless(&all);
    assert_eq!(all.len() as i64, *ids.last().unwrap());
}

/// Webhook bodies a test receiver got.
pub type Deliveries = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// A local webhook receiver: its URL, and every body POSTed to it.
pub async fn hook_receiver() -> (Deliveries, String) {
    use axum::routing::post;
    let seen: Deliveries = Default::default();
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        post(move |body: String| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push(body);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}/hook", listener.local_addr().unwrap().port());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (seen, url)
}

/// The public port as a gRPC channel (what a Runner on another network
/// dials).
pub fn public(base: &str) -> tonic::transport::Channel {
    tonic::transport::Channel::from_shared(base.to_string()).unwrap().connect_lazy()
}

/// A pairing code for a Runner of `pool`, acting as `principal`.
pub async fn pairing(a: &Api, env: &str, principal: &str, pool: &str) -> String {
    let r =
        a.post("/v1/runner-pairings", json!({"environment_id": env, "principal_id": principal, "pool": pool, "ttl_seconds": 300})).await;
    expect(&r, 201, None);
    assert!(r.1["id"].as_str().unwrap().starts_with("rpair_"));
    r.1["code"].as_str().unwrap().to_string()
}

/// Redeems a pairing code for a Runner credential, as `checkfu runner` does.
pub async fn redeem(base: &str, code: &str) -> checkfu_proto::runner::v1::RedeemResponse {
    let mut c = checkfu_proto::runner::v1::runner_service_client::RunnerServiceClient::new(public(base));
    c.redeem(checkfu_proto::runner::v1::RedeemRequest { pairing_code: code.into(), name: "test".into() }).await.unwrap().into_inner()
}
