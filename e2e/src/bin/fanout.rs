//! SSE fan-out bench: many concurrent subscribers on one Session, and how
//! long each persisted event takes from its commit (`created_at`, stamped by
//! the committing transaction) to arriving as a frame at every subscriber.
//! Runs embedded (all roles in this process, SQLite, scripted model), then
//! with a second gateway replica in this process reaching the first over
//! gRPC, the subscribers split between the two.
//!
//! ```sh
//! cargo run --release -p checkfu-e2e --bin fanout -- --subscribers 1000 --messages 40 --warmup 2
//! ```
//!
//! With `--target URL[,URL…] --key FILE` it drives a running installation
//! instead, the subscribers in this process and the gateways in theirs: a
//! process holds a limited number of descriptors, and ten thousand
//! subscribers with their gateway in one process need twice as many.
//!
//! The first `--warmup` turns (2 by default) are not counted: they include
//! the connections' first writes and cold caches.
#![allow(clippy::unwrap_used, reason = "test harness: a failed step panics, failing the test or the benchmark")]

use checkfu_e2e::*;
use checkfu_node::{Node, NodeOptions, Role};
use futures_util::StreamExt;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(clap::Parser)]
#[command(about = "SSE fan-out: many subscribers on one Session, commit-to-frame latency")]
struct Args {
    /// Concurrent subscribers, spread round robin over the gateways.
    #[arg(long, default_value_t = 1000)]
    subscribers: usize,
    /// Turns posted to the Session, one at a time.
    #[arg(long, default_value_t = 40)]
    messages: usize,
    /// Pause between turns.
    #[arg(long, default_value_t = 100)]
    interval_ms: u64,
    /// Turns at the start whose frames are not counted (connections and
    /// caches warming up).
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Drive a running installation instead of one in this process: the
    /// base URLs of its gateways, comma-separated (one run, the subscribers
    /// spread over them). Give it enough open streams per principal and a
    /// high rate limit (`CHECKFU_MAX_STREAMS_PER_PRINCIPAL`,
    /// `CHECKFU_RATE_LIMIT_PER_SECOND`).
    #[arg(long, value_delimiter = ',', requires = "key")]
    target: Vec<String>,
    /// The file holding the target's bootstrap admin API key.
    #[arg(long, requires = "target")]
    key: Option<std::path::PathBuf>,
}

fn now_ms() -> i64 {
    checkfu_core::time::now_ms()
}

fn created_ms(s: &str) -> i64 {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).unwrap();
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

/// The value after `key` in `text`, up to `end`.
fn after<'a>(text: &'a [u8], key: &[u8], end: u8) -> Option<&'a [u8]> {
    let start = memchr::memmem::find(text, key)? + key.len();
    let len = memchr::memchr(end, &text[start..])?;
    Some(&text[start..start + len])
}

/// A frame's arrival time and its `created_at` as sent (RFC 3339, parsed
/// after the run so the subscriber's hot loop stays cheap).
struct Arrival {
    at: i64,
    created: [u8; 40],
    len: u8,
}

/// Every subscriber holds a descriptor in this process, and a second one
/// when the gateway runs here too (the server's side of its socket): the
/// soft limit is raised toward the hard one, and a run that still could not
/// open them all stops here with what to do — past the limit, the gateway
/// cannot accept the last connections and the run would wait for them
/// forever.
fn enough_files(subscribers: usize, per_subscriber: u64) {
    let need = subscribers as u64 * per_subscriber + 1024;
    let now = checkfu_node::open_files::raise_soft_limit(Some(need));
    assert!(
        now.is_none_or(|n| n >= need),
        "{subscribers} subscribers need about {need} open files in this process; the limit is {now:?}: \
         raise it (`ulimit -n {need}`; as root, `ulimit -Hn {need}` first), or run the installation in a \
         process of its own and pass it with --target"
    );
}

/// One subscriber: records commit-to-frame latency (ms) of every persisted
/// event until the stream has shown `idles` idle statuses. It works on the
/// raw bytes, reads only what it needs and parses timestamps afterwards, so
/// the bench's own work costs little next to the server's (they share the
/// machine).
#[allow(clippy::too_many_arguments)]
async fn subscribe(
    client: reqwest::Client,
    base: String,
    key: String,
    sid: String,
    idles: usize,
    warmup: usize,
    ready: Arc<AtomicUsize>,
    done: Arc<tokio::sync::Barrier>,
    out: Arc<Mutex<Vec<i64>>>,
) {
    let resp = client.get(format!("{base}/v1/sessions/{sid}/events/stream")).bearer_auth(&key).send().await;
    let resp = resp.unwrap_or_else(|e| panic!("opening a stream: {e}"));
    assert_eq!(resp.status(), 200, "opening a stream");
    ready.fetch_add(1, Ordering::SeqCst);
    let mut body = resp.bytes_stream();
    let mut buf: Vec<u8> = Vec::with_capacity(4 * 1024);
    let mut seen_idle = 0;
    let mut mine: Vec<Arrival> = Vec::with_capacity(idles * 8);
    let frame_end = memchr::memmem::Finder::new(b"\n\n");
    while let Some(Ok(chunk)) = body.next().await {
        let at = now_ms();
        buf.extend_from_slice(&chunk);
        let mut start = 0;
        while let Some(end) = frame_end.find(&buf[start..]) {
            let frame = &buf[start..start + end];
            start += end + 2;
            // Persisted frames only (`id:`), after the history replay.
            let Some(seq) = frame.strip_prefix(b"id: ").and_then(|r| r.split(|b| *b == b'\n').next()) else { continue };
            let seq: i64 = std::str::from_utf8(seq).unwrap().parse().unwrap();
            if seq <= 1 {
                continue;
            }
            if seen_idle >= warmup {
                let created = after(frame, b"\"created_at\":\"", b'"').unwrap();
                let mut a = Arrival { at, created: [0; 40], len: created.len() as u8 };
                a.created[..created.len()].copy_from_slice(created);
                mine.push(a);
            }
            if after(frame, b"event: ", b'\n') == Some(b"session.status_idle") {
                seen_idle += 1;
            }
        }
        buf.drain(..start);
        if seen_idle >= idles {
            break;
        }
    }
    let lat = mine.iter().map(|a| a.at - created_ms(std::str::from_utf8(&a.created[..a.len as usize]).unwrap()));
    out.lock().unwrap().extend(lat);
    // Stay connected until every subscriber has seen the last turn: the run
    // measures delivery to `--subscribers` connected clients, not a
    // thousand disconnects racing the last frames to the others.
    done.wait().await;
}

fn report(label: &str, subscribers: usize, lat: &mut [i64]) {
    lat.sort_unstable();
    let p = |q: f64| lat.get(((lat.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0);
    println!(
        "sse fan-out  {label:<26} subscribers={subscribers:<5} frames={:<8} p50 {:>3} ms  p99 {:>3} ms  max {:>4} ms",
        lat.len(),
        p(0.5),
        p(0.99),
        p(1.0)
    );
}

/// Posts `messages` turns to one Session while `subscribers` streams follow
/// it through `bases` (round robin); returns every frame's latency.
async fn run(p: &Installation, bases: &[String], a: &Args) -> Vec<i64> {
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let s = p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    let sid = id(&s.1);
    let ready = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(tokio::sync::Barrier::new(a.subscribers));
    let out = Arc::new(Mutex::new(Vec::new()));
    // One client, one connection per subscriber (HTTP/1.1 streams cannot
    // share one): the client's own setup is not what is measured.
    let client = reqwest::Client::new();
    let mut tasks = vec![];
    for i in 0..a.subscribers {
        let base = bases[i % bases.len()].clone();
        tasks.push(tokio::spawn(subscribe(
            client.clone(),
            base,
            p.admin.key.clone(),
            sid.clone(),
            a.messages,
            a.warmup,
            ready.clone(),
            done.clone(),
            out.clone(),
        )));
    }
    // A subscriber that failed to connect never becomes ready: surface its
    // error instead of waiting for it forever, and show progress (ten
    // thousand connections take a while).
    let mut shown = Instant::now();
    while ready.load(Ordering::SeqCst) < a.subscribers {
        if let Some(i) = tasks.iter().position(tokio::task::JoinHandle::is_finished) {
            tasks.swap_remove(i).await.expect("a subscriber failed before its stream opened");
            panic!("a subscriber ended before its stream opened");
        }
        if shown.elapsed() > Duration::from_secs(5) {
            eprintln!("fanout: {} of {} subscribers connected", ready.load(Ordering::SeqCst), a.subscribers);
            shown = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    for n in 0..a.messages {
        let r = p.admin.post(&format!("/v1/sessions/{sid}/events"), message(&p.admin_id, &format!("fan out {n}"))).await;
        assert_eq!(r.0, 201);
        settle(&p.admin, &sid).await;
        tokio::time::sleep(Duration::from_millis(a.interval_ms)).await;
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t).await.expect("every subscriber saw every turn").unwrap();
    }
    Arc::try_unwrap(out).unwrap().into_inner().unwrap()
}

#[tokio::main]
async fn main() {
    let a = <Args as clap::Parser>::parse();
    let intro = |where_: &str| {
        println!(
            "checkfu fan-out bench: {} subscribers on one Session{where_}, {} turns {} ms apart (the first {} not counted); \
             latency = frame arrival - event created_at",
            a.subscribers, a.messages, a.interval_ms, a.warmup
        )
    };
    if let Some(key_file) = &a.key {
        enough_files(a.subscribers, 1);
        let key = std::fs::read_to_string(key_file).unwrap_or_else(|e| panic!("reading {}: {e}", key_file.display()));
        let bases: Vec<String> = a.target.iter().map(|u| api_base(u)).collect();
        for b in &bases {
            wait_ready(b).await;
        }
        let i = Installation::discover(&bases[0], key.trim()).await;
        intro(&format!(" of the installation at {}", bases.join(", ")));
        let mut lat = run(&i, &bases, &a).await;
        let label = match bases.len() {
            1 => "target, one gateway".to_string(),
            n => format!("target, {n} gateways"),
        };
        report(&label, a.subscribers, &mut lat);
        return;
    }
    enough_files(a.subscribers, 2);
    let dir = tempfile::tempdir().unwrap();
    let tuning = Tuning { rate_limit_per_second: 1_000_000, max_streams_per_principal: 1_000_000, mesh: true, ..Default::default() };
    let p = Platform::start_timed(dir.path(), tuning).await;
    let i = p.installation();
    intro("");
    let mut lat = run(&i, std::slice::from_ref(&p.base), &a).await;
    report("embedded, one gateway", a.subscribers, &mut lat);
    // A second gateway replica in this process, reaching the first node's
    // roles over the mutual-TLS mesh like a separate Deployment would.
    let second_dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let internal = p.internal_base.clone().unwrap();
    // Every role the gateway calls, which is every other role.
    let remotes: BTreeMap<Role, String> = Role::ALL.into_iter().filter(|r| *r != Role::Gateway).map(|r| (r, internal.clone())).collect();
    let base = checkfu_e2e::embedded_options(second_dir.path(), &checkfu_e2e::Tuning::default());
    let opts = NodeOptions {
        roles: [Role::Gateway].into_iter().collect(),
        storage: checkfu_store::Location::SqliteDir(second_dir.path().to_path_buf()),
        remotes,
        mesh: Some(mesh_identity(&mesh_dir(&p.data_dir), "second-gateway", &[Role::Gateway])),
        embedded: false,
        gateway: checkfu_node::GatewayOptions {
            rate_limit_per_second: 1_000_000,
            max_streams_per_principal: 1_000_000,
            ..base.gateway.clone()
        },
        governance: checkfu_node::GovernanceOptions { bootstrap_key_file: None, ..base.governance.clone() },
        ..base
    };
    let second = Node::start(listener, opts).await.unwrap();
    let second_base = format!("http://{}", second.addr);
    wait_ready(&second_base).await;
    let mut lat = run(&i, &[p.base.clone(), second_base], &a).await;
    report("two gateway replicas", a.subscribers, &mut lat);
    second.stop().await;
    p.stop().await;
}
