//! The sandbox through the API, as an attacking agent would use it: no
//! escape next to the installation's files, and no way to exhaust the
//! server — its RSS stays within a stated bound and `/readyz` keeps
//! answering while the agent runs a fork bomb, `cat /dev/zero` and fills
//! `/tmp`.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The stated bound: what a tool call may add to the server's memory
/// (1 MiB of output kept, plus what serving the turn costs).
const RSS_BOUND_BYTES: u64 = 64 * 1024 * 1024;

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_cannot_escape_or_exhaust_the_server() {
    if !checkfu_runner::sandbox::isolation_available() {
        checkfu_core::testing::skip("attacking the sandbox", "bubblewrap is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let tools =
        json!({"tools": [{"type": "builtin", "name": "bash"}, {"type": "builtin", "name": "write"}, {"type": "builtin", "name": "read"}]});
    let d = deploy_allowing_tools(a, &p.env_id, tools).await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    let sid = id(&s.1);

    // Readiness is polled all along; the worst answer time is kept.
    let stop = Arc::new(AtomicBool::new(false));
    let worst_ms = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let peak_rss = Arc::new(AtomicU64::new(0));
    let base_rss = rss_bytes();
    let poller = {
        let (stop, worst_ms, failures, peak_rss, base) =
            (stop.clone(), worst_ms.clone(), failures.clone(), peak_rss.clone(), p.base.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().unwrap();
            while !stop.load(Ordering::Relaxed) {
                let t = std::time::Instant::now();
                let ok = client.get(format!("{base}/readyz")).send().await.is_ok_and(|r| r.status() == 200);
                if !ok {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
                worst_ms.fetch_max(t.elapsed().as_millis() as u64, Ordering::Relaxed);
                peak_rss.fetch_max(rss_bytes(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let turn = |text: String| {
        let (a, sid, me) = (a.clone(), sid.clone(), me.clone());
        async move {
            expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&me, &text)).await, 201, None);
            settle(&a, &sid).await
        }
    };
    // 1. A dangling link made by bash, then written through.
    turn("call bash {\"command\": \"ln -s ../../admin.key.planted p && ln -s ../../admin.key k\"}\ncall write {\"path\": \"p\", \"content\": \"owned\"}\ncall read {\"path\": \"k\"}".into()).await;
    // 2. The exhaustions.
    turn("call bash {\"command\": \"cat /dev/zero\"}".into()).await;
    turn("call bash {\"command\": \"for i in $(seq 1 40); do head -c 8M /dev/zero > /tmp/f$i; done; du -sb /tmp\"}".into()).await;
    turn("call bash {\"command\": \"b() { b | b & }; b; sleep 3\"}".into()).await;
    stop.store(true, Ordering::Relaxed);
    poller.await.unwrap();

    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    let results: Vec<&serde_json::Value> = evs.iter().filter(|e| e["type"] == "agent.tool_result").collect();
    assert_eq!(results.len(), 6, "every call was answered");
    assert!(!dir.path().join("admin.key.planted").exists(), "write followed a link out of the workspace");
    let key = std::fs::read_to_string(dir.path().join("admin.key")).unwrap();
    let read = results[2]["payload"]["content"].to_string();
    assert!(results[2]["payload"]["is_error"] == true && !read.contains(key.trim()), "read followed a link to the admin key");
    // cat /dev/zero: cut at 1 MiB, the command stopped, an error.
    let cut = &results[3]["payload"];
    let chars = cut["content"]["original_chars"].as_u64().unwrap_or(u64::MAX);
    assert!(cut["is_error"] == true && chars <= 1024 * 1024 + 100, "cat /dev/zero gave {chars} characters");
    let tmp = results[4]["payload"]["content"].to_string();
    let used: u64 = tmp.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse().ok()).max().unwrap_or(u64::MAX);
    assert!(used <= 65 * 1024 * 1024, "/tmp grew to {used} bytes");

    let (worst, failed, peak) = (worst_ms.load(Ordering::Relaxed), failures.load(Ordering::Relaxed), peak_rss.load(Ordering::Relaxed));
    println!("readyz worst {worst} ms, {failed} failures; RSS {} -> peak {} MiB", base_rss >> 20, peak >> 20);
    assert_eq!(failed, 0, "/readyz failed during the attack");
    assert!(worst < 2000, "/readyz took {worst} ms");
    assert!(peak.saturating_sub(base_rss) < RSS_BOUND_BYTES, "the server grew by {} MiB", (peak - base_rss) >> 20);
    p.stop().await;
}
