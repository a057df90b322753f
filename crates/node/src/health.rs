//! `/healthz`, `/readyz` and `/metrics` on every role, without auth.

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::future::BoxFuture;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::json;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// One named dependency check for readiness.
pub type Check = Arc<dyn Fn() -> BoxFuture<'static, bool> + Send + Sync>;

#[derive(Clone, Default)]
pub struct Readiness {
    pub checks: Vec<(String, Check)>,
}

/// The process-wide Prometheus recorder (installed once, shared by every
/// node a test process starts).
pub fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        // Another recorder may already be installed (embedding programs);
        // then this handle simply renders nothing of theirs.
        let _ = metrics::set_global_recorder(recorder);
        handle
    })
}

async fn healthz() -> impl IntoResponse {
    axum::Json(json!({"status": "ok"}))
}

async fn readyz(State(r): State<Readiness>) -> Response {
    let mut failed = vec![];
    for (name, check) in &r.checks {
        let ok = tokio::time::timeout(std::time::Duration::from_secs(2), check()).await.unwrap_or(false);
        if !ok {
            failed.push(name.clone());
        }
    }
    if failed.is_empty() {
        (StatusCode::OK, axum::Json(json!({"status": "ready"}))).into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, axum::Json(json!({"status": "not_ready", "failing": failed}))).into_response()
    }
}

async fn metrics_text() -> impl IntoResponse {
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], prometheus().render())
}

pub fn router(readiness: Readiness) -> Router {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz)).route("/metrics", get(metrics_text)).with_state(readiness)
}

/// Counts requests and times them per route template and status.
pub async fn track(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_string()).unwrap_or_else(|| {
        let p = req.uri().path();
        // gRPC paths are already templates; anything else unmatched is one bucket.
        if p.starts_with("/checkfu.") || p.starts_with("/grpc.") { p.to_string() } else { "unmatched".into() }
    });
    let method = req.method().to_string();
    // Every request is a span that continues the caller's trace (W3C
    // `traceparent`), so one turn is one trace across the roles.
    let span = tracing::info_span!("request", otel.name = %format!("{method} {route}"), otel.kind = "server",
        checkfu.role = checkfu_telemetry::role_of(req.uri().path()));
    checkfu_telemetry::adopt(&span, req.headers());
    let resp = tracing::Instrument::instrument(next.run(req), span).await;
    let status = resp.status().as_u16().to_string();
    metrics::counter!("checkfu_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status).increment(1);
    metrics::histogram!("checkfu_request_duration_seconds", "method" => method, "route" => route).record(start.elapsed().as_secs_f64());
    resp
}
