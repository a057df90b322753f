//! Load generator against an embedded Checkfu (all roles in this process,
//! SQLite in a temporary directory, the scripted model):
//!
//! - session creates per second,
//! - accepted `user.message` events per second,
//! - the scripted turn round trip (post a message, see `session.status_idle`
//!   on the SSE stream) at the 50th and 99th percentile,
//!
//! each at 1 and 16 concurrent clients. Run it optimised:
//!
//! ```sh
//! cargo run --release -p checkfu-e2e --bin bench            # default durations
//! cargo run --release -p checkfu-e2e --bin bench -- --seconds 5 --turns 400 --session-turns 25
//! ```
//!
//! Turn latency is measured in sessions of `--session-turns` turns (25 by
//! default): each turn sends the whole conversation to the model, so a
//! longer history costs more per turn — `--session-turns 400` shows that.
#![allow(clippy::unwrap_used, reason = "test harness: a failed step panics, failing the test or the benchmark")]

use checkfu_e2e::sse::Stream;
use checkfu_e2e::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

struct Args {
    seconds: f64,
    turns: usize,
    /// Turns before a client starts a new session; every turn re-sends the
    /// conversation to the model, so latency grows with history.
    session_turns: usize,
}

fn args() -> Args {
    let mut a = Args { seconds: 3.0, turns: 200, session_turns: 25 };
    let v: Vec<String> = std::env::args().collect();
    for w in v.windows(2) {
        match w[0].as_str() {
            "--seconds" => a.seconds = w[1].parse().unwrap(),
            "--turns" => a.turns = w[1].parse().unwrap(),
            "--session-turns" => a.session_turns = w[1].parse::<usize>().unwrap().max(1),
            _ => {}
        }
    }
    a
}

/// Runs `op` from `clients` tasks until `seconds` pass; returns ops/s.
async fn throughput<F, Fut>(clients: usize, seconds: f64, op: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let op = Arc::new(op);
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut tasks = vec![];
    for c in 0..clients {
        let (op, done) = (op.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                if op(c).await {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::main]
async fn main() {
    let a = args();
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({"instructions": "Be brief."})).await;
    let me = p.admin_id.clone();
    let api = Arc::new(p.admin.clone());
    if std::env::args().any(|a| a == "--probe") {
        let client = reqwest::Client::new();
        for (name, path) in
            [("GET /healthz (no hop)", "/healthz".to_string()), ("GET /v1/principals/{me} (2 hops)", format!("/v1/principals/{me}"))]
        {
            let mut v = vec![];
            for _ in 0..500 {
                let t = Instant::now();
                let r = client.get(format!("{}{path}", p.base)).bearer_auth(&api.key).send().await.unwrap();
                r.bytes().await.unwrap();
                v.push(t.elapsed());
            }
            v.sort();
            println!("{name:<40} p50 {:.3} ms", percentile(&v, 0.5).as_secs_f64() * 1e3);
        }
        return;
    }
    println!(
        "checkfu bench: embedded, SQLite, scripted model; {} s per throughput figure, {} turns per latency figure in sessions of {} turns",
        a.seconds, a.turns, a.session_turns
    );

    for clients in [1usize, 16] {
        let (api2, dep, me2) = (api.clone(), d.deployment_id.clone(), me.clone());
        let creates = throughput(clients, a.seconds, move |_| {
            let (api, dep, me) = (api2.clone(), dep.clone(), me2.clone());
            async move { api.post("/v1/sessions", json!({"agent_deployment_id": dep, "principal_id": me})).await.0.as_u16() == 201 }
        })
        .await;
        println!("session creates/s        clients={clients:<2}  {creates:>8.0}");
    }

    for clients in [1usize, 16] {
        let mut sessions = vec![];
        for _ in 0..clients {
            sessions.push(id(&api.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": me})).await.1));
        }
        let sessions = Arc::new(sessions);
        let (api2, me2) = (api.clone(), me.clone());
        let accepted = throughput(clients, a.seconds, move |c| {
            let (api, me, sessions) = (api2.clone(), me2.clone(), sessions.clone());
            async move { api.post(&format!("/v1/sessions/{}/events", sessions[c]), message(&me, "load")).await.0.as_u16() == 201 }
        })
        .await;
        println!("accepted user.message/s  clients={clients:<2}  {accepted:>8.0}");
    }

    for clients in [1usize, 16] {
        let per_client = a.turns.div_ceil(clients);
        let mut tasks = vec![];
        for _ in 0..clients {
            let (api, dep, me, base) = (api.clone(), d.deployment_id.clone(), me.clone(), p.base.clone());
            let session_turns = a.session_turns;
            tasks.push(tokio::spawn(async move {
                let mut out = Vec::with_capacity(per_client);
                let mut i = 0;
                while i < per_client {
                    let sid = id(&api.post("/v1/sessions", json!({"agent_deployment_id": dep, "principal_id": me})).await.1);
                    let mut stream = Stream::open(&base, &api.key, &format!("/v1/sessions/{sid}/events/stream"), None).await;
                    stream.until(Duration::from_secs(10), |f| f.event == "session.created").await;
                    for _ in 0..session_turns.min(per_client - i) {
                        let t = Instant::now();
                        let r = api.post(&format!("/v1/sessions/{sid}/events"), message(&me, &format!("turn {i}"))).await;
                        assert_eq!(r.0.as_u16(), 201);
                        let accepted = t.elapsed();
                        stream.until(Duration::from_secs(10), |f| f.event == "session.status_idle").await;
                        out.push((t.elapsed(), accepted));
                        i += 1;
                    }
                }
                out
            }));
        }
        let (mut all, mut accepted) = (vec![], vec![]);
        for t in tasks {
            for (turn, post) in t.await.unwrap() {
                all.push(turn);
                accepted.push(post);
            }
        }
        all.sort();
        accepted.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (p50, p99) = (percentile(&all, 0.50), percentile(&all, 0.99));
        println!(
            "turn round trip          clients={clients:<2}  p50 {:>6.2} ms  p99 {:>6.2} ms  ({} turns; the POST alone: p50 {:.2} ms)",
            ms(p50),
            ms(p99),
            all.len(),
            ms(percentile(&accepted, 0.50))
        );
    }
    p.stop().await;
}
