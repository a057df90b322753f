//! One turn is one trace: spans from the gateway, sessions, the runner and
//! the model gateway share a trace id, exported over OTLP to a collector
//! served in this test process. (This test binary installs the global
//! tracing subscriber, so it holds this one test.)
#![cfg(test)]

use checkfu_e2e::*;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// (trace id, span name, checkfu.role) of one span received.
type Received = (Vec<u8>, String, String);

#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<Received>>>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        r: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut seen = self.0.lock().unwrap();
        for rs in r.into_inner().resource_spans {
            for ss in rs.scope_spans {
                for s in ss.spans {
                    let role = s
                        .attributes
                        .iter()
                        .find(|a| a.key == "checkfu.role")
                        .and_then(|a| a.value.as_ref()?.value.as_ref())
                        .map(|v| match v {
                            AnyValue::StringValue(s) => s.clone(),
                            other => format!("{other:?}"),
                        })
                        .unwrap_or_default();
                    seen.push((s.trace_id, s.name, role));
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_turn_is_one_trace_across_the_roles() {
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let server = collector.clone();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(server))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .unwrap();
    });
    let telemetry = checkfu_telemetry::init_with("checkfu", Some(&endpoint), false);

    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let s = p
        .admin
        .post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&p.admin_id, "trace me")]}))
        .await;
    let sid = id(&s.1);
    assert_eq!(settle(&p.admin, &sid).await["stop_reason"]["type"], "end_turn");
    // Let the Run's completion span close, then export everything.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let telemetry = tokio::task::spawn_blocking(move || {
        telemetry.flush();
        telemetry
    })
    .await
    .unwrap();

    let mut traces: BTreeMap<Vec<u8>, BTreeSet<(String, String)>> = BTreeMap::new();
    for (trace, name, role) in collector.0.lock().unwrap().iter() {
        traces.entry(trace.clone()).or_default().insert((role.clone(), name.clone()));
    }
    let turn = traces
        .values()
        .find(|spans| spans.iter().any(|(_, n)| n == "POST /v1/sessions"))
        .unwrap_or_else(|| panic!("no trace for the create request: {traces:?}"));
    let roles: BTreeSet<&str> = turn.iter().map(|(r, _)| r.as_str()).collect();
    for role in ["gateway", "sessions", "runner", "model-gateway"] {
        assert!(roles.contains(role), "the turn's trace reaches {role}: {turn:?}");
    }
    assert!(turn.iter().any(|(_, n)| n == "/checkfu.modelgateway.v1.ModelGatewayService/Generate"), "{turn:?}");
    assert!(turn.iter().any(|(_, n)| n == "run"), "{turn:?}");
    p.stop().await;
    tokio::task::spawn_blocking(move || telemetry.shutdown()).await.unwrap();
}
