//! An idle SSE stream gets `: ping` comments, so proxies keep it open.
#![allow(clippy::unwrap_used)]

use checkfu_e2e::sse::Stream;
use checkfu_e2e::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn idle_streams_are_kept_alive_with_ping_comments() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_with(dir.path(), checkfu::Role::ALL.into_iter().collect(), Duration::from_secs(1)).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let sid = id(&p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await.1);
    let mut s = Stream::open(&p.base, &p.admin.key, &format!("/v1/sessions/{sid}/events/stream"), None).await;
    let first = s.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!(first.id.as_deref(), Some("1"));
    let ping = s.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!((ping.comments.clone(), ping.id.clone()), (vec!["ping".to_string()], None), "{ping:?}");
    p.stop().await;
}
