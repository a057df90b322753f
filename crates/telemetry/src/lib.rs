//! Observability plumbing shared by every role: the `tracing` subscriber,
//! OTLP export of spans when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, and W3C
//! trace context (`traceparent`) carried across every hop — gRPC metadata
//! (local and remote transports alike), Kafka headers, and from a request
//! to the Run it admits — so one turn is one trace from the gateway through
//! sessions and the runner to the model gateway.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::{Layer as _, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// Keeps the exporter alive; flush it before exit.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Exports what is buffered. Blocks: call it from a blocking context.
    pub fn flush(&self) {
        if let Some(p) = &self.provider
            && let Err(e) = p.force_flush()
        {
            eprintln!("flushing spans failed: {e}");
        }
    }

    pub fn shutdown(self) {
        if let Some(p) = self.provider {
            let _ = p.shutdown();
        }
    }
}

/// Builds the OTLP exporter for `endpoint` (gRPC). Must run inside a Tokio
/// runtime.
pub fn otlp_provider(endpoint: &str, service_name: &str) -> Result<SdkTracerProvider, String> {
    use opentelemetry_otlp::WithExportConfig;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| format!("OTLP exporter: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder().with_service_name(service_name.to_string()).build();
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
}

/// Whether a record may be logged or exported at all, whatever `RUST_LOG`
/// asks. The MCP client's debug and trace records carry what an upstream
/// server sent before the capability gateway redacted it (a server may
/// echo a credential): nothing of it below info ever leaves the process.
fn recordable(m: &tracing::Metadata<'_>) -> bool {
    !(m.target().starts_with("rmcp") && *m.level() > tracing::Level::INFO)
}

/// Installs the global subscriber: logs to stderr filtered by `RUST_LOG`
/// (when `logs`), and spans to the OTLP/gRPC collector at `endpoint`. Must
/// run inside a Tokio runtime.
pub fn init_with(service_name: &str, endpoint: Option<&str>, logs: bool) -> Telemetry {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,sqlx=warn,h2=warn,tower=warn".into());
    let fmt = logs.then(|| {
        tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(tracing_subscriber::filter::filter_fn(recordable))
    });
    let provider = match endpoint.map(|e| otlp_provider(e, service_name)) {
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            eprintln!("tracing export disabled: {e}");
            None
        }
        None => None,
    };
    let otel = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer().with_tracer(p.tracer("checkfu")).with_filter(tracing_subscriber::filter::filter_fn(recordable))
    });
    let _ = tracing_subscriber::registry().with(filter).with(fmt).with(otel).try_init();
    Telemetry { provider }
}

struct HeaderInjector<'a>(&'a mut http::HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (http::header::HeaderName::from_bytes(key.as_bytes()), http::HeaderValue::from_str(&value)) {
            self.0.insert(k, v);
        }
    }
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Writes the current span's context into outgoing headers.
pub fn inject(headers: &mut http::HeaderMap) {
    let cx = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(headers));
}

/// Makes `span` a child of the context carried by incoming headers (if any).
pub fn adopt(span: &tracing::Span, headers: &http::HeaderMap) {
    if headers.contains_key("traceparent") {
        let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
        let _ = span.set_parent(cx);
    }
}

/// The current span's context as a `traceparent` value ("" when there is
/// none), for carrying it where headers do not go (a Run, a Kafka record).
pub fn current_traceparent() -> String {
    let mut h = http::HeaderMap::new();
    inject(&mut h);
    h.get("traceparent").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

/// Makes `span` a child of a stored `traceparent`.
pub fn adopt_traceparent(span: &tracing::Span, traceparent: &str) {
    if let Ok(v) = http::HeaderValue::from_str(traceparent)
        && !traceparent.is_empty()
    {
        let mut h = http::HeaderMap::new();
        h.insert("traceparent", v);
        adopt(span, &h);
    }
}

/// The role a gRPC path belongs to (`/checkfu.sessions.v1.SessionsService/X`
/// → `sessions`), for span attributes.
pub fn role_of(path: &str) -> &'static str {
    let pkg = path.trim_start_matches('/').split('.').nth(1).unwrap_or_default();
    match pkg {
        "sessions" => "sessions",
        "runner" => "sessions",
        "governance" => "governance",
        "modelgateway" => "model-gateway",
        "capability" => "capability-gateway",
        "webhooks" => "webhooks",
        "scheduler" => "scheduler",
        "memory" => "memory",
        _ => "gateway",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_paths_name_their_role() {
        assert_eq!(role_of("/checkfu.sessions.v1.SessionsService/AppendUserEvent"), "sessions");
        assert_eq!(role_of("/checkfu.modelgateway.v1.ModelGatewayService/Generate"), "model-gateway");
        assert_eq!(role_of("/v1/sessions"), "gateway");
    }
}
