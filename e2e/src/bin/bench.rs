//! The load generator: drives a Checkfu installation over its public API
//! like any client and prints
//!
//! - session creates per second,
//! - accepted `user.message` events per second (each answered 201, so
//!   durable),
//! - the scripted turn round trip (post a message, see
//!   `session.status_idle` on the SSE stream) at the 50th and 99th
//!   percentile,
//!
//! each at every `--clients` level (1 and 16 by default), each with its
//! cost: the CPU-ms the installation spent per accepted call or turn, in
//! all and by process (`cpu.rs`), and the machine's busy CPU less the
//! bench's own as a second reading; and with
//! `--only firings` the firing lag of scheduled Automations: `--automations`
//! of them (10,000 by default), each on a 6-field cron firing once a minute
//! at its own second, so the installation fires every second; the lag of
//! each firing is its child Session's `created_at` minus its
//! `scheduled_for`, at the 50th and 99th percentile; with `--only programs`
//! the same for `--automations` graph Automations mixing a Check, a
//! for-each and a join, fired by signed ingest at the same rate (the lag
//! from each firing's creation to its first child's,
//! `program_firings.rs`); with `--only memory`
//! the latency of a MemoryStore document read, a compare-and-set write and
//! a list page (10 documents) in a store of 10 documents and in one of
//! `--documents` (10,000 by default), at the 50th and 99th percentile; with
//! `--only cma` session creates through the CMA projection (`/cma`) at each
//! `--clients` level, and one client's create through `/cma` against the
//! native create (p50 of `--cma-samples` each, alternated).
//!
//! By default it boots an embedded installation in this process (every
//! role, SQLite in a temporary directory, the scripted model). With
//! `--target URL --key FILE` it drives a running installation instead —
//! `checkfu serve` on PostgreSQL, Kafka and Redis, say (see
//! docs/benchmarks.md and `e2e/bench/split-up`); `--procs-from DIR` (the
//! `*.pid` files split-up writes) or `--pids name=pid,…` name the processes
//! whose CPU it counts, each with its children (PostgreSQL's backends).
//! Embedded, it counts its own process less its load-generating threads.
//! Run it optimised:
//!
//! ```sh
//! cargo run --release -p checkfu-e2e --bin bench -- --help
//! cargo run --release -p checkfu-e2e --bin bench -- --seconds 5 --turns 400
//! cargo run --release -p checkfu-e2e --bin bench -- --target http://127.0.0.1:7420 --key /tmp/split/admin.key
//! ```
#![allow(clippy::unwrap_used, reason = "test harness: a failed step panics, failing the benchmark")]

use checkfu_e2e::cpu;
use checkfu_e2e::program_firings::{ms_of, session_times};
use checkfu_e2e::sse::Stream;
use checkfu_e2e::*;
use clap::Parser;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Parser)]
#[command(name = "bench", about = "Checkfu's load generator: session creates, accepted messages and turn latency over the public API")]
struct Args {
    /// Seconds each throughput figure runs for.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Turns timed for each latency figure.
    #[arg(long, default_value_t = 200)]
    turns: usize,
    /// Turns before a client starts a new Session: every turn re-sends the
    /// conversation to the model, so latency grows with history.
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u64).range(1..))]
    session_turns: u64,
    /// Concurrent clients, a figure for each (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    clients: Vec<usize>,
    /// The figures to take (comma-separated).
    #[arg(long, value_delimiter = ',', value_enum, default_value = "creates,messages,turns")]
    only: Vec<Figure>,
    /// Drive the installation at this base URL (`http://host:port`) instead
    /// of an embedded one.
    #[arg(long, requires = "key")]
    target: Option<String>,
    /// The file holding the target's bootstrap admin API key.
    #[arg(long, requires = "target")]
    key: Option<PathBuf>,
    /// The target's processes whose CPU is counted, with their children:
    /// `name=pid` (or a bare pid), comma-separated.
    #[arg(long, requires = "target", conflicts_with = "procs_from")]
    pids: Option<String>,
    /// A directory of `*.pid` files naming the target's processes (one pid,
    /// or `name=pid` lines), as `e2e/bench/split-up` writes them.
    #[arg(long, requires = "target")]
    procs_from: Option<PathBuf>,
    /// Time one HTTP call with no internal hop against one with two, then exit.
    #[arg(long)]
    probe: bool,
    /// Scheduled Automations for the firing-lag figure.
    #[arg(long, default_value_t = 10_000)]
    automations: usize,
    /// Seconds of firings timed once every Automation exists.
    #[arg(long, default_value_t = 60)]
    firing_seconds: u64,
    /// Documents in the large store of the memory figure.
    #[arg(long, default_value_t = 10_000)]
    documents: usize,
    /// Calls timed per memory operation and store.
    #[arg(long, default_value_t = 500)]
    memory_calls: usize,
    /// Creates timed each way (native, `/cma`) for the projection's overhead.
    #[arg(long, default_value_t = 200)]
    cma_samples: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Figure {
    Creates,
    Messages,
    Turns,
    Firings,
    Memory,
    /// Session creates through the CMA projection (`/cma`), and their
    /// overhead over the native create.
    Cma,
    /// The firing lag of `--automations` graphs mixing a Check, a
    /// for-each and a join, fired by signed ingest.
    Programs,
}

/// Calls answered 201 per second, and how many got another answer (a
/// figure with refusals measured a limit, not the platform), with what the
/// installation spent on them.
struct Rate {
    per_second: f64,
    done: u64,
    refused: u64,
    cost: Option<Cost>,
}

/// The CPU an installation used over a figure, by process, and the
/// machine's busy CPU less the bench's own over the same time.
struct Cost {
    by_process: cpu::Sample,
    machine: Duration,
}

impl Cost {
    /// Starts measuring; [`Cost::end`] takes the difference.
    fn start(watched: Option<&cpu::Watched>) -> Option<(cpu::Sample, Duration)> {
        watched.map(|w| (w.sample(), w.machine_less_bench()))
    }

    fn end(watched: Option<&cpu::Watched>, start: Option<(cpu::Sample, Duration)>) -> Option<Cost> {
        let (w, (sample, machine)) = (watched?, start?);
        Some(Cost { by_process: w.sample().since(&sample), machine: w.machine_less_bench().saturating_sub(machine) })
    }

    /// Two indented lines: CPU-ms per `unit` by process, and the machine's.
    fn lines(&self, units: u64, unit: &str) -> String {
        let machine = if units == 0 { 0.0 } else { self.machine.as_secs_f64() * 1e3 / units as f64 };
        format!(
            "    {}
    cpu-ms per {unit}, the machine's busy time less the bench's: {machine:.3}",
            self.by_process.per(units, unit)
        )
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:>8.0}", self.per_second)?;
        if self.refused > 0 {
            write!(f, "  ({} calls refused: a limit, not the platform, set this figure)", self.refused)?;
        }
        Ok(())
    }
}

/// Runs `op` (an HTTP status back) from `clients` tasks until `seconds`
/// pass; a 2xx counts as done.
async fn throughput<F, Fut>(watched: Option<&cpu::Watched>, clients: usize, seconds: f64, op: F) -> Rate
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = u16> + Send,
{
    let op = Arc::new(op);
    let done = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let cost = Cost::start(watched);
    let mut tasks = vec![];
    for c in 0..clients {
        let (op, done, refused) = (op.clone(), done.clone(), refused.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let counter = if (200..300).contains(&op(c).await) { &done } else { &refused };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let cost = Cost::end(watched, cost);
    let done = done.load(Ordering::Relaxed);
    Rate { per_second: done as f64 / start.elapsed().as_secs_f64(), done, refused: refused.load(Ordering::Relaxed), cost }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `POST /v1/sessions` from `clients` clients.
async fn creates(i: &Installation, watched: Option<&cpu::Watched>, deployment: &str, clients: usize, seconds: f64) -> Rate {
    let (api, dep, me) = (Arc::new(i.admin.clone()), deployment.to_string(), i.admin_id.clone());
    throughput(watched, clients, seconds, move |_| {
        let (api, dep, me) = (api.clone(), dep.clone(), me.clone());
        async move { api.post("/v1/sessions", json!({"agent_deployment_id": dep, "principal_id": me})).await.0.as_u16() }
    })
    .await
}

/// What a CMA client sends besides its key.
const CMA_HEADERS: [(&str, &str); 1] = [("anthropic-beta", "managed-agents-2026-04-01")];

/// An Agent and an environment made through `/cma`, for its creates.
async fn cma_agent(i: &Installation) -> (String, String) {
    checkfu_e2e::cma::route_models(&i.admin).await;
    let agent = i.admin.post_with("/cma/v1/agents", json!({"name": "bench", "model": "claude-sonnet-4-6"}), &CMA_HEADERS).await;
    assert!(agent.0.is_success(), "a CMA agent: {}", agent.1);
    let name = format!("bench-{}", checkfu_core::id::new_id("x"));
    let env = i.admin.post_with("/cma/v1/environments", json!({"name": name, "config": {"type": "cloud"}}), &CMA_HEADERS).await;
    assert!(env.0.is_success(), "a CMA environment: {}", env.1);
    (id(&agent.1), id(&env.1))
}

/// `POST /cma/v1/sessions` from `clients` clients.
async fn cma_creates(i: &Installation, watched: Option<&cpu::Watched>, agent_env: &(String, String), clients: usize, seconds: f64) -> Rate {
    let (api, body) = (Arc::new(i.admin.clone()), json!({"agent": agent_env.0, "environment_id": agent_env.1}));
    throughput(watched, clients, seconds, move |_| {
        let (api, body) = (api.clone(), body.clone());
        async move { api.post_with("/cma/v1/sessions", body, &CMA_HEADERS).await.0.as_u16() }
    })
    .await
}

/// One client's create latency, native and through `/cma` alternately,
/// `n` of each after 20 of each to warm up: p50s in milliseconds.
async fn cma_overhead(i: &Installation, deployment: &str, agent_env: &(String, String), n: usize) -> (f64, f64) {
    let (mut native, mut cma) = (vec![], vec![]);
    let native_body = json!({"agent_deployment_id": deployment, "principal_id": i.admin_id});
    let cma_body = json!({"agent": agent_env.0, "environment_id": agent_env.1});
    for k in 0..n + 20 {
        let t = Instant::now();
        let r = i.admin.post("/v1/sessions", native_body.clone()).await;
        let took = t.elapsed();
        assert_eq!(r.0.as_u16(), 201, "{}", r.1);
        let t = Instant::now();
        let c = i.admin.post_with("/cma/v1/sessions", cma_body.clone(), &CMA_HEADERS).await;
        let took_cma = t.elapsed();
        assert!(c.0.is_success(), "{}", c.1);
        // The first creates warm connections and caches.
        if k >= 20 {
            native.push(took);
            cma.push(took_cma);
        }
    }
    native.sort();
    cma.sort();
    (ms(percentile(&native, 0.5)), ms(percentile(&cma, 0.5)))
}

/// `user.message`s accepted, each client posting to a Session of its own
/// while the runner works the Runs they start.
async fn messages(i: &Installation, watched: Option<&cpu::Watched>, deployment: &str, clients: usize, seconds: f64) -> Rate {
    let api = Arc::new(i.admin.clone());
    let mut sessions = vec![];
    for _ in 0..clients {
        sessions.push(id(&api.post("/v1/sessions", json!({"agent_deployment_id": deployment, "principal_id": i.admin_id})).await.1));
    }
    let (sessions, me) = (Arc::new(sessions), i.admin_id.clone());
    throughput(watched, clients, seconds, move |c| {
        let (api, me, sessions) = (api.clone(), me.clone(), sessions.clone());
        async move { api.post(&format!("/v1/sessions/{}/events", sessions[c]), message(&me, "load")).await.0.as_u16() }
    })
    .await
}

/// Turn round trips (and the POST alone) over `turns` turns.
async fn turns(i: &Installation, deployment: &str, clients: usize, turns: usize, session_turns: usize) -> (Vec<Duration>, Vec<Duration>) {
    let per_client = turns.div_ceil(clients);
    let mut tasks = vec![];
    for _ in 0..clients {
        let (api, dep, me) = (i.admin.clone(), deployment.to_string(), i.admin_id.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::with_capacity(per_client);
            let mut n = 0;
            while n < per_client {
                let sid = id(&api.post("/v1/sessions", json!({"agent_deployment_id": dep, "principal_id": me})).await.1);
                let mut stream = Stream::open(&api.base, &api.key, &format!("/v1/sessions/{sid}/events/stream"), None).await;
                stream.until(Duration::from_secs(10), |f| f.event == "session.created").await;
                for _ in 0..session_turns.min(per_client - n) {
                    let t = Instant::now();
                    let r = api.post(&format!("/v1/sessions/{sid}/events"), message(&me, &format!("turn {n}"))).await;
                    assert_eq!(r.0.as_u16(), 201, "{}", r.1);
                    let accepted = t.elapsed();
                    stream.until(Duration::from_secs(10), |f| f.event == "session.status_idle").await;
                    out.push((t.elapsed(), accepted));
                    n += 1;
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
    (all, accepted)
}

async fn probe(i: &Installation) {
    let client = reqwest::Client::new();
    for (name, path) in
        [("GET /healthz (no hop)", "/healthz".to_string()), ("GET /v1/principals/{me} (2 hops)", format!("/v1/principals/{}", i.admin_id))]
    {
        let mut v = vec![];
        for _ in 0..500 {
            let t = Instant::now();
            let r = client.get(format!("{}{path}", i.admin.base)).bearer_auth(&i.admin.key).send().await.unwrap();
            r.bytes().await.unwrap();
            v.push(t.elapsed());
        }
        v.sort();
        println!("{name:<40} p50 {:.3} ms", ms(percentile(&v, 0.5)));
    }
}

/// Runs `op` over `items` with `clients` at a time.
async fn each<T, F, Fut, R>(items: Vec<T>, clients: usize, op: F) -> Vec<R>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = R> + Send,
{
    use futures_util::StreamExt;
    let op = Arc::new(op);
    futures_util::stream::iter(items).map(|t| (op.clone())(t)).buffer_unordered(clients).collect().await
}

/// Read, compare-and-set write and list latency in stores of each size in
/// `sizes` (documents `/d/00000.md`…, filled 16 writes at a time): `calls`
/// of each, one at a time, on documents spread over the store.
async fn memory(i: &Installation, sizes: &[usize], calls: usize) {
    println!("memory store latency ({calls} calls each, one client; ms)");
    println!(
        "{:>10}  {:>9} {:>9}  {:>9} {:>9}  {:>9} {:>9}",
        "documents", "read p50", "read p99", "write p50", "write p99", "list p50", "list p99"
    );
    for &n in sizes {
        let s = i
            .admin
            .post(
                "/v1/memory-stores",
                json!({"environment_id": i.env_id, "name": format!("bench-{n}"), "owner": {"kind": "principal", "id": i.admin_id}}),
            )
            .await;
        assert_eq!(s.0.as_u16(), 201, "{}", s.1);
        let store = id(&s.1);
        let api = Arc::new(i.admin.clone());
        let path = |k: usize| format!("/d/{k:05}.md");
        let fill: Vec<usize> = (0..n).collect();
        let (a, st) = (api.clone(), store.clone());
        each(fill, 16, move |k| {
            let (a, st) = (a.clone(), st.clone());
            async move {
                let body = json!({"path": format!("/d/{k:05}.md"), "content": format!("document {k}\n"), "expected_sha256": null});
                let r = a.post(&format!("/v1/memory-stores/{st}/document"), body).await;
                assert_eq!(r.0.as_u16(), 200, "{}", r.1);
            }
        })
        .await;
        let (mut reads, mut writes, mut lists) = (vec![], vec![], vec![]);
        for c in 0..calls {
            let k = (c * 7919) % n;
            let t = Instant::now();
            let r = api.get(&format!("/v1/memory-stores/{store}/document?path={}", path(k))).await;
            reads.push(t.elapsed());
            assert_eq!(r.0.as_u16(), 200, "{}", r.1);
            let sha = r.1["document"]["content_sha256"].as_str().unwrap().to_string();
            let body = json!({"path": path(k), "content": format!("document {k} call {c}\n"), "expected_sha256": sha});
            let t = Instant::now();
            let w = api.post(&format!("/v1/memory-stores/{store}/document"), body).await;
            writes.push(t.elapsed());
            assert_eq!(w.0.as_u16(), 200, "{}", w.1);
            // A full page of 10 in either store: from the start of the
            // small one, from anywhere in the large one.
            let at = (c * 7919) % (n.saturating_sub(10) + 1);
            let page = if at == 0 { String::new() } else { format!("&page={}", checkfu_core::page::encode_token(&path(at - 1))) };
            let t = Instant::now();
            let l = api.get(&format!("/v1/memory-stores/{store}/documents?limit=10{page}")).await;
            lists.push(t.elapsed());
            assert_eq!(l.0.as_u16(), 200, "{}", l.1);
            assert_eq!(l.1["data"].as_array().map(Vec::len), Some(10.min(n)), "a full page");
        }
        for v in [&mut reads, &mut writes, &mut lists] {
            v.sort();
        }
        let f = |v: &[Duration], p: f64| ms(percentile(v, p));
        println!(
            "{n:>10}  {:>9.2} {:>9.2}  {:>9.2} {:>9.2}  {:>9.2} {:>9.2}",
            f(&reads, 0.5),
            f(&reads, 0.99),
            f(&writes, 0.5),
            f(&writes, 0.99),
            f(&lists, 0.5),
            f(&lists, 0.99)
        );
    }
}

/// The firing lag of `n` scheduled Automations (`S * * * * *`, S = i mod
/// 60: once a minute each, the installation firing every second), timed
/// over `seconds` once all exist: child Session created minus
/// `scheduled_for`, per firing. Prints p50/p99 and the counts.
async fn firings(i: &Installation, deployment: &Deployed, n: usize, seconds: u64) {
    let api = Arc::new(i.admin.clone());
    let svc = id(&api.post("/v1/principals", json!({"kind": "service", "name": "bench-scheduler"})).await.1);
    let g = json!({"subject": {"kind": "principal", "id": svc}, "permission": "invoke", "resource": {"kind": "agent", "id": deployment.agent_id}});
    assert_eq!(api.post("/v1/permission-assignments", g).await.0.as_u16(), 201);
    let t = Instant::now();
    let (env, dep) = (i.env_id.clone(), deployment.deployment_id.clone());
    let ids: Vec<String> = each((0..n).collect(), 16, {
        let api = api.clone();
        move |k| {
            let (api, env, dep, svc) = (api.clone(), env.clone(), dep.clone(), svc.clone());
            async move {
                let body = json!({"name": format!("bench-{k}"), "environment_id": env, "service_principal_id": svc,
                    "trigger": {"kind": "schedule", "cron": format!("{} * * * * *", k % 60), "timezone": "UTC"},
                    "target": {"kind": "agent", "agent_deployment_id": dep, "prompt": "tick"}});
                let r = api.post("/v1/automations", body).await;
                assert_eq!(r.0.as_u16(), 201, "{}", r.1);
                id(&r.1)
            }
        }
    })
    .await;
    println!("created {n} scheduled Automations in {:.1} s; timing {seconds} s of firings", t.elapsed().as_secs_f64());
    let from = checkfu_core::time::now_ms() + 1_000;
    tokio::time::sleep(Duration::from_secs(seconds + 1)).await;
    let to = from + seconds as i64 * 1_000;
    // Let the last second's firings finish their children before reading.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let fired: Vec<Vec<serde_json::Value>> = each(ids, 32, {
        let api = api.clone();
        move |auto| {
            let api = api.clone();
            async move {
                let r = api.get(&format!("/v1/automations/{auto}/firings?limit=100")).await;
                r.1["data"].as_array().cloned().unwrap_or_default()
            }
        }
    })
    .await;
    let window: Vec<serde_json::Value> = fired.into_iter().flatten().filter(|f| (from..to).contains(&ms_of(f, "scheduled_for"))).collect();
    let created = session_times(&api, &deployment.deployment_id).await;
    let mut lags = vec![];
    let mut without_child = 0;
    for f in &window {
        match f["child_session_ids"][0].as_str().and_then(|c| created.get(c)) {
            Some(c) => lags.push(Duration::from_millis(u64::try_from(c - ms_of(f, "scheduled_for")).unwrap_or(0))),
            None => without_child += 1,
        }
    }
    lags.sort();
    let expected = n as u64 * seconds / 60;
    println!(
        "firing lag (scheduled_for → child created)  automations={n}  p50 {:>7.1} ms  p99 {:>7.1} ms  max {:>7.1} ms  ({} firings in {seconds} s, {expected} due; {without_child} without a child)",
        ms(percentile(&lags, 0.50)),
        ms(percentile(&lags, 0.99)),
        ms(lags.last().copied().unwrap_or_default()),
        lags.len(),
    );
}

fn main() {
    let a = Args::parse();
    // The load runs on threads of its own name, and an embedded
    // installation on a runtime of its own, so the installation's CPU can be
    // told from the load's (`cpu.rs`).
    let client = tokio::runtime::Builder::new_multi_thread().thread_name(cpu::CLIENT_THREAD).enable_all().build().unwrap();
    let node = tokio::runtime::Builder::new_multi_thread().thread_name("checkfu-node").enable_all().build().unwrap();
    client.block_on(run(a, node.handle().clone()));
}

async fn run(a: Args, node: tokio::runtime::Handle) {
    let dir = tempfile::tempdir().unwrap();
    let (embedded, installation, what, watched) = match (&a.target, &a.key) {
        (Some(url), Some(key_file)) => {
            let key = std::fs::read_to_string(key_file).unwrap_or_else(|e| panic!("reading {}: {e}", key_file.display()));
            let url = api_base(url);
            let watched = match (&a.pids, &a.procs_from) {
                (Some(list), _) => Some(cpu::Watched::from_list(list).unwrap_or_else(|e| panic!("--pids: {e}"))),
                (None, Some(d)) => Some(cpu::Watched::from_dir(d).unwrap_or_else(|e| panic!("--procs-from {}: {e}", d.display()))),
                (None, None) => None,
            };
            wait_ready(&url).await;
            (None, Installation::discover(&url, key.trim()).await, format!("the installation at {url}"), watched)
        }
        _ => {
            // The per-principal rate limit (2,000 calls/s by default) would
            // cap the figures: the bench measures the platform, not a quota.
            let path = dir.path().to_path_buf();
            let tuning = Tuning { rate_limit_per_second: 1_000_000, ..Default::default() };
            let p = node.spawn(async move { Platform::start_timed(&path, tuning).await }).await.unwrap();
            let i = p.installation();
            (Some(p), i, "embedded (SQLite, in-process bus)".to_string(), Some(cpu::Watched::Embedded))
        }
    };
    let watched = watched.as_ref();
    if a.probe {
        probe(&installation).await;
        return;
    }
    let d = deploy(&installation.admin, &installation.env_id, json!({"instructions": "Be brief."})).await;
    let dep = d.deployment_id.as_str();
    println!(
        "checkfu bench: {what}, scripted model; {} s per throughput figure, {} turns per latency figure in sessions of {} turns",
        a.seconds, a.turns, a.session_turns
    );
    if a.only.contains(&Figure::Creates) {
        for &clients in &a.clients {
            let rate = creates(&installation, watched, dep, clients, a.seconds).await;
            println!("session creates/s        clients={clients:<2}  {rate}");
            if let Some(c) = &rate.cost {
                println!("{}", c.lines(rate.done, "session"));
            }
        }
    }
    if a.only.contains(&Figure::Messages) {
        for &clients in &a.clients {
            let rate = messages(&installation, watched, dep, clients, a.seconds).await;
            println!("accepted user.message/s  clients={clients:<2}  {rate}");
            if let Some(c) = &rate.cost {
                println!("{}", c.lines(rate.done, "message"));
            }
        }
    }
    if a.only.contains(&Figure::Turns) {
        for &clients in &a.clients {
            let cost = Cost::start(watched);
            let (all, accepted) = turns(&installation, dep, clients, a.turns, a.session_turns as usize).await;
            let cost = Cost::end(watched, cost);
            println!(
                "turn round trip          clients={clients:<2}  p50 {:>6.2} ms  p99 {:>6.2} ms  ({} turns; the POST alone: p50 {:.2} ms)",
                ms(percentile(&all, 0.50)),
                ms(percentile(&all, 0.99)),
                all.len(),
                ms(percentile(&accepted, 0.50))
            );
            if let Some(c) = &cost {
                println!("{}", c.lines(all.len() as u64, "turn"));
            }
        }
    }
    if a.only.contains(&Figure::Cma) {
        let agent_env = cma_agent(&installation).await;
        for &clients in &a.clients {
            let rate = cma_creates(&installation, watched, &agent_env, clients, a.seconds).await;
            println!("cma session creates/s    clients={clients:<2}  {rate}");
            if let Some(c) = &rate.cost {
                println!("{}", c.lines(rate.done, "session"));
            }
        }
        let (native, cma) = cma_overhead(&installation, dep, &agent_env, a.cma_samples).await;
        println!(
            "session create, 1 client  native p50 {native:.2} ms  cma p50 {cma:.2} ms  (the projection adds {:.0}%)",
            (cma / native - 1.0) * 100.0
        );
    }
    if a.only.contains(&Figure::Firings) {
        firings(&installation, &d, a.automations, a.firing_seconds).await;
    }
    if a.only.contains(&Figure::Programs) {
        let r = checkfu_e2e::program_firings::run(&installation, &d, a.automations, a.firing_seconds).await;
        println!(
            "created {} graph Automations (check, for-each of 2, join) in {:.1} s; {} firings by signed ingest over {} s: {:?}",
            r.automations,
            r.created_in.as_secs_f64(),
            r.fired,
            a.firing_seconds,
            r.by_state
        );
        println!(
            "program firing lag (firing created → first child created)  p50 {:>7.1} ms  p99 {:>7.1} ms  max {:>7.1} ms  ({} without a child)",
            ms(percentile(&r.lags, 0.50)),
            ms(percentile(&r.lags, 0.99)),
            ms(r.lags.last().copied().unwrap_or_default()),
            r.without_child
        );
        println!(
            "program settled (firing created → settled)                 p50 {:>7.1} ms  p99 {:>7.1} ms  ({} settled)",
            ms(percentile(&r.settles, 0.50)),
            ms(percentile(&r.settles, 0.99)),
            r.settles.len()
        );
    }
    if a.only.contains(&Figure::Memory) {
        memory(&installation, &[10, a.documents, 10], a.memory_calls).await;
    }
    if let Some(p) = embedded {
        node.spawn(async move { p.stop().await }).await.unwrap();
    }
}
