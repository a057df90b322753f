//! The runner edge: the gRPC a self-hosted Runner speaks, on the gateway's
//! public port, so a Runner needs nothing but outbound access to it.
//!
//! Only these paths are served, each forwarded as the gateway's own call
//! to the service behind it, with a fresh request that carries only the
//! gRPC headers, the trace context and the Runner's own two headers:
//!
//! - `checkfu.runner.v1.RunnerService/*` → sessions, which authenticates the
//!   Runner credential (`authorization: Bearer crr_...`) on every call but
//!   `Redeem`, and fences it by its leases;
//! - `ModelGatewayService/Generate`, `CapabilityGatewayService/WebFetch`,
//!   `OfferedTools`, `CallTool` and `GetConnectionStatus`, and governance's `EvaluateAction`, `RequestApproval` and
//!   `GetActionApproval` → only once sessions has confirmed that the call's
//!   capability token (`x-checkfu-capability`) is for a lease still held by
//!   the Runner whose credential came with it. Each service then checks the
//!   token's scope against the call itself.
//!
//! Everything else on the mesh stays off the public port.

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use checkfu_core::capability::METADATA;
use checkfu_proto::sessions::v1 as ss;
use checkfu_proto::sessions::v1::sessions_service_client::SessionsServiceClient;
use checkfu_proto::transport::Transport;
use tower::ServiceExt;

/// The services behind the edge.
#[derive(Clone)]
pub struct RunnerEdge {
    pub sessions: SessionsServiceClient<Transport>,
    /// The runner protocol (served by the sessions role).
    pub runner: Transport,
    pub models: Transport,
    pub governance: Transport,
    pub capabilities: Transport,
}

/// Headers a forwarded call keeps; everything else the client sent is dropped.
const KEPT: &[&str] = &["content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding", "traceparent", "tracestate"];

fn status(s: tonic::Status) -> Response {
    s.into_http::<axum::body::Body>().into_response()
}

fn header<'a>(req: &'a Request, name: &str) -> &'a str {
    req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

/// `req` rebuilt for `path` on the mesh, with only the kept headers (and
/// `extra` of the client's), then sent through `to`.
async fn forward(to: Transport, path: &str, req: Request, extra: &[&str]) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(uri) = path.parse::<http::Uri>() else { return status(tonic::Status::not_found("no such method")) };
    let mut out = http::Request::builder().method(http::Method::POST).uri(uri).version(http::Version::HTTP_2);
    for name in KEPT.iter().chain(extra) {
        for v in parts.headers.get_all(*name) {
            out = out.header(*name, v);
        }
    }
    let Ok(out) = out.body(tonic::body::Body::new(body)) else { return status(tonic::Status::invalid_argument("malformed request")) };
    match to.oneshot(out).await {
        Ok(resp) => resp.map(axum::body::Body::new),
        Err(e) => status(tonic::Status::unavailable(format!("the service is unreachable: {e}"))),
    }
}

async fn runner_protocol(State(edge): State<RunnerEdge>, Path(method): Path<String>, req: Request) -> Response {
    const METHODS: &[&str] = &[
        "Redeem",
        "Claim",
        "Heartbeat",
        "ReadEvents",
        "AppendEvents",
        "PublishDeltas",
        "Complete",
        "Release",
        "PlanFiles",
        "RecordFiles",
        "PutBlob",
        "MissingBlobs",
        "GetBlob",
        "RecordSnapshot",
        "WritebackMemory",
        "DecideThreadTool",
        "CallThreadTool",
    ];
    if !METHODS.contains(&method.as_str()) {
        return status(tonic::Status::unimplemented("no such method"));
    }
    forward(edge.runner, &format!("/checkfu.runner.v1.RunnerService/{method}"), req, &["authorization"]).await
}

/// Forwards a call made for a Run once its token is confirmed.
async fn scoped(edge: &RunnerEdge, to: Transport, path: &str, req: Request) -> Response {
    let credential = header(&req, "authorization").strip_prefix("Bearer ").unwrap_or_default().trim().to_string();
    if credential.is_empty() {
        return status(tonic::Status::unauthenticated("the runner credential is missing (authorization: Bearer crr_...)"));
    }
    let check = ss::VerifyCapabilityRequest { token: header(&req, METADATA).to_string(), runner_credential: credential };
    if let Err(s) = edge.sessions.clone().verify_capability(check).await {
        return status(s);
    }
    forward(to, path, req, &[METADATA]).await
}

async fn generate(State(edge): State<RunnerEdge>, req: Request) -> Response {
    let to = edge.models.clone();
    scoped(&edge, to, "/checkfu.modelgateway.v1.ModelGatewayService/Generate", req).await
}

async fn capabilities(State(edge): State<RunnerEdge>, Path(method): Path<String>, req: Request) -> Response {
    if !["WebFetch", "OfferedTools", "CallTool", "GetConnectionStatus"].contains(&method.as_str()) {
        return status(tonic::Status::unimplemented("no such method"));
    }
    let to = edge.capabilities.clone();
    scoped(&edge, to, &format!("/checkfu.capability.v1.CapabilityGatewayService/{method}"), req).await
}

async fn governance(State(edge): State<RunnerEdge>, Path(method): Path<String>, req: Request) -> Response {
    if !["EvaluateAction", "RequestApproval", "GetActionApproval"].contains(&method.as_str()) {
        return status(tonic::Status::unimplemented("no such method"));
    }
    let to = edge.governance.clone();
    scoped(&edge, to, &format!("/checkfu.governance.v1.GovernanceService/{method}"), req).await
}

/// The edge's routes, merged into the public router.
pub fn routes(edge: RunnerEdge) -> Router {
    use axum::routing::post;
    Router::new()
        .route("/checkfu.runner.v1.RunnerService/{method}", post(runner_protocol))
        .route("/checkfu.modelgateway.v1.ModelGatewayService/Generate", post(generate))
        .route("/checkfu.capability.v1.CapabilityGatewayService/{method}", post(capabilities))
        .route("/checkfu.governance.v1.GovernanceService/{method}", post(governance))
        .with_state(edge)
}
