//! Many clients on one Session share the gateway's one live feed, and each
//! still gets exactly its own stream: everything after its `Last-Event-ID`,
//! in order, once — including clients that join mid-turn.
#![cfg(test)]

use checkfu_e2e::sse::Stream;
use checkfu_e2e::*;
use serde_json::json;
use std::time::Duration;

async fn seqs_until_idles(mut s: Stream, idles: usize) -> Vec<i64> {
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let frames = s
        .until(Duration::from_secs(30), |f| {
            if f.event == "session.status_idle" {
                seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            seen.load(std::sync::atomic::Ordering::Relaxed) >= idles
        })
        .await;
    frames.iter().filter_map(|f| f.id.as_ref()).map(|i| i.parse().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_client_gets_its_own_gapless_stream_from_the_shared_feed() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let d = deploy(a, &p.env_id, json!({})).await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&p.admin_id, "one")]})).await;
    let sid = id(&s.1);
    settle(a, &sid).await;
    let history = events(a, &sid).await.len() as i64;
    let path = format!("/v1/sessions/{sid}/events/stream");
    // Clients starting from different points of the history.
    let mut followers = vec![];
    for start in [0, 1, history / 2, history] {
        for _ in 0..5 {
            let stream = Stream::open(&p.base, &a.key, &path, Some(start)).await;
            followers.push((start, tokio::spawn(seqs_until_idles(stream, if start < history { 3 } else { 2 }))));
        }
    }
    // Two more turns; a client joins while the second one runs.
    a.post(&format!("/v1/sessions/{sid}/events"), message(&p.admin_id, "two")).await;
    settle(a, &sid).await;
    a.post(&format!("/v1/sessions/{sid}/events"), message(&p.admin_id, "three")).await;
    let late = Stream::open(&p.base, &a.key, &path, Some(2)).await;
    let late = tokio::spawn(seqs_until_idles(late, 3));
    settle(a, &sid).await;
    let total = events(a, &sid).await.len() as i64;
    for (start, f) in followers {
        let got = f.await.unwrap();
        assert_eq!(got, ((start + 1)..=total).collect::<Vec<_>>(), "a client from {start} sees every later event once, in order");
    }
    assert_eq!(late.await.unwrap(), (3..=total).collect::<Vec<_>>());
    p.stop().await;
}
