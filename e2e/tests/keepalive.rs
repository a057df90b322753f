//! An idle SSE stream gets `: ping` comments, so proxies keep it open.
#![cfg(test)]

use checkfu_e2e::sse::Stream;
use checkfu_e2e::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn idle_streams_are_kept_alive_with_ping_comments() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_with(dir.path(), checkfu_node::Role::ALL.into_iter().collect(), Duration::from_secs(1)).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let sid = id(&p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await.1);
    let mut s = Stream::open(&p.base, &p.admin.key, &format!("/v1/sessions/{sid}/events/stream"), None).await;
    let first = s.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!(first.id.as_deref(), Some("1"));
    let ping = s.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!((ping.comments.clone(), ping.id.clone()), (vec!["ping".to_string()], None), "{ping:?}");
    p.stop().await;
}

/// The value of an unlabelled gauge on a node's `/metrics`, if present.
async fn gauge(base: &str, name: &str) -> Option<f64> {
    let text = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// A gateway follows a Session live (one upstream subscription shared by
/// its clients) only while somebody reads it: a quiet Session's feed ends
/// within a ping interval or two of its last client leaving.
#[tokio::test(flavor = "multi_thread")]
async fn a_quiet_sessions_live_feed_ends_when_its_last_client_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_with(dir.path(), checkfu_node::Role::ALL.into_iter().collect(), Duration::from_millis(300)).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let sid = id(&p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await.1);
    let path = format!("/v1/sessions/{sid}/events/stream");
    let mut a = Stream::open(&p.base, &p.admin.key, &path, None).await;
    let mut b = Stream::open(&p.base, &p.admin.key, &path, None).await;
    assert_eq!(a.next(Duration::from_secs(5)).await.unwrap().id.as_deref(), Some("1"));
    assert_eq!(b.next(Duration::from_secs(5)).await.unwrap().id.as_deref(), Some("1"));
    assert_eq!(gauge(&p.base, "checkfu_gateway_live_feeds").await, Some(1.0), "two clients of one Session share one feed");
    drop(a);
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(gauge(&p.base, "checkfu_gateway_live_feeds").await, Some(1.0), "one client still follows it");
    drop(b);
    let mut left = None;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = gauge(&p.base, "checkfu_gateway_live_feeds").await;
        if left == Some(0.0) {
            break;
        }
    }
    assert_eq!(left, Some(0.0), "nobody follows the quiet Session any more, so its feed ended");
    p.stop().await;
}
