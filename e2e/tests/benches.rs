//! The benchmarks run here for a few seconds each, so a change that breaks
//! one fails CI instead of being found months later: `bench` embedded and
//! against the split topology `e2e/bench/split-up` starts from nothing
//! (its own PostgreSQL, Redis and broker), each printing what a unit of
//! work costs by process, and `fanout` with one gateway and with two, and
//! against a `checkfu up` of its own. The
//! figures themselves are not checked: this is the debug build on a busy
//! machine.
#![cfg(test)]

use checkfu_e2e::procs::binary;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bench(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bench")).args(args).output().expect("bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "bench {args:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// The total of the `cpu-ms per {unit}:` line, and its parts by name.
fn cost(out: &str, unit: &str) -> (f64, Vec<(String, f64)>) {
    let prefix = format!("cpu-ms per {unit}: ");
    let line = out.lines().map(str::trim).find_map(|l| l.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {prefix:?} line in:\n{out}"));
    let (total, parts) = line.split_once("  (").unwrap_or_else(|| panic!("{line}"));
    let parts = parts
        .trim_end_matches(')')
        .split(", ")
        .map(|p| {
            let (name, v) = p.rsplit_once(' ').unwrap_or_else(|| panic!("{p}"));
            (name.to_string(), v.parse().unwrap_or_else(|_| panic!("{p}")))
        })
        .collect();
    (total.parse().unwrap_or_else(|_| panic!("{line}")), parts)
}

const QUICK: [&str; 6] = ["--seconds", "0.5", "--turns", "4", "--clients", "1"];

#[test]
fn the_cma_figure_measures_the_projection_against_native() {
    let out = bench(&["--only", "cma", "--seconds", "0.5", "--clients", "1", "--cma-samples", "10"]);
    let line = out.lines().find(|l| l.starts_with("cma session creates/s")).unwrap_or_else(|| panic!("no cma creates line:\n{out}"));
    let rate: f64 = line.split_whitespace().nth(4).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{line}"));
    assert!(rate > 0.0 && !line.contains("refused"), "every create through /cma answered 2xx: {line}");
    assert!(cost(&out, "session").0 > 0.0, "{out}");
    assert!(out.contains("the projection adds"), "{out}");
}

#[test]
fn the_embedded_bench_prints_rates_and_their_cost() {
    let out = bench(&QUICK);
    for figure in ["session creates/s", "accepted user.message/s", "turn round trip"] {
        assert!(out.contains(figure), "{figure} in:\n{out}");
    }
    for unit in ["session", "message", "turn"] {
        let (total, parts) = cost(&out, unit);
        assert!(total > 0.0, "the embedded installation spends CPU per {unit}:\n{out}");
        assert_eq!(parts.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["checkfu"], "{out}");
    }
    assert!(out.contains("cpu-ms per message, the machine's busy time less the bench's:"), "{out}");
}

#[test]
fn the_fanout_bench_runs_with_one_gateway_and_with_two() {
    let out = Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(["--subscribers", "20", "--messages", "4", "--interval-ms", "50", "--warmup", "1"])
        .output()
        .expect("fanout runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "fanout failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for mode in ["embedded, one gateway", "two gateway replicas"] {
        let line = stdout.lines().find(|l| l.contains(mode)).unwrap_or_else(|| panic!("{mode} in:\n{stdout}"));
        let frames: u64 = line.split("frames=").nth(1).and_then(|r| r.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap_or(0);
        assert!(frames > 0, "every subscriber reads frames with {mode}: {line}");
    }
}

/// The soft and hard "Max open files" of a process, from `/proc`.
fn open_file_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("an open-files line");
    let mut v = line.trim_start_matches("Max open files").split_whitespace();
    (v.next().expect("soft").to_string(), v.next().expect("hard").to_string())
}

#[test]
fn the_fanout_bench_drives_a_running_installation_whose_gateway_may_open_every_descriptor_it_is_allowed() {
    // Start it as a shell's default would: a low soft limit under a higher
    // hard one (children inherit both).
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let hard = getrlimit(Resource::Nofile).maximum;
    assert!(hard.is_none_or(|h| h > 512), "a hard limit above 512 to raise toward: {hard:?}");
    setrlimit(Resource::Nofile, Rlimit { current: Some(512), maximum: hard }).expect("lowering this test's soft limit");
    let dir = tempfile::tempdir().expect("dir");
    let (up, base) = checkfu_e2e::procs::up_with(
        dir.path(),
        &[],
        &[("CHECKFU_MAX_STREAMS_PER_PRINCIPAL", "100000"), ("CHECKFU_RATE_LIMIT_PER_SECOND", "1000000")],
    );
    // Each SSE subscriber holds a descriptor in the gateway: the server
    // lifts its soft limit to the hard one rather than refusing streams
    // past the usual default of 1,024.
    let (soft, hard) = open_file_limits(up.0.id());
    assert_ne!(soft, "512", "checkfu up raised its soft open-file limit");
    assert_eq!(soft, hard, "checkfu up raised its soft open-file limit to the hard one");
    let key = dir.path().join("admin.key");
    let out = Command::new(env!("CARGO_BIN_EXE_fanout"))
        .args(["--subscribers", "20", "--messages", "4", "--interval-ms", "50", "--warmup", "1"])
        .args(["--target", &base, "--key", key.to_str().expect("utf-8")])
        .output()
        .expect("fanout runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "fanout failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().find(|l| l.contains("target, one gateway")).unwrap_or_else(|| panic!("a target line in:\n{stdout}"));
    let frames: u64 = line.split("frames=").nth(1).and_then(|r| r.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap_or(0);
    // Three counted turns of at least a message, a running and an idle
    // status each, for every one of the 20 subscribers.
    assert!(frames >= 20 * 3 * 3, "every subscriber read every counted turn's frames: {line}");
    assert!(!stdout.contains("embedded"), "only the target was measured:\n{stdout}");
}

/// Thirteen free ports in a row, below Linux's ephemeral range (32768 and
/// up): a port in that range that is free now can be taken a moment later
/// as the local port of any test's outgoing connection, and split-up's
/// server then cannot bind it. Where the scan starts varies by process, so
/// concurrent runs do not reach for the same block.
fn free_ports() -> u16 {
    let spread = (std::process::id() as usize * 7_919) % 900;
    for i in 0..900 {
        let base = 20_000 + ((spread + i) % 900) as u16 * 13;
        if (base..base + 13).all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return base;
        }
    }
    panic!("no thirteen free ports in a row below 31,700");
}

/// The last lines of each log split-up's processes wrote, for a failure.
fn log_tails(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "log" || x == "out") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(8).collect();
            out.push_str(&format!("\n--- {}\n{}", path.display(), tail.into_iter().rev().collect::<Vec<_>>().join("\n")));
        }
    }
    out
}

/// split-up, stopped with SIGTERM when dropped (its trap then stops what
/// it started; a SIGKILL would leave PostgreSQL and the rest running).
struct Split(std::process::Child);

impl Drop for Split {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let _ = self.0.wait();
    }
}

fn pid_alive(pid: &str) -> bool {
    Path::new(&format!("/proc/{}", pid.trim())).exists()
}

#[test]
fn split_up_starts_the_mesh_from_nothing_and_the_bench_costs_every_process() {
    let pg = std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|mut d| d.next().is_some());
    let redis = Command::new("sh").args(["-c", "command -v redis-server"]).output().is_ok_and(|o| o.status.success());
    let tansu = std::env::var("CHECKFU_TANSU_BIN").is_ok_and(|b| Path::new(&b).exists());
    if !(pg && redis && tansu) {
        checkfu_core::testing::skip(
            "split-up",
            &format!("PostgreSQL {pg}, redis-server {redis}, CHECKFU_TANSU_BIN {tansu}: split-up starts each itself"),
        );
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let port = free_ports();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/split-up");
    let mut child = Command::new("bash")
        .arg(&script)
        .arg(dir.path())
        .env("CHECKFU_BIN", binary())
        .env("SPLIT_PORT", port.to_string())
        .env_remove("CHECKFU_DATABASE_URL")
        .env_remove("CHECKFU_REDIS_URL")
        .env_remove("CHECKFU_KAFKA_BROKERS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("split-up starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut split = Split(child);
    let started = Instant::now();
    let ready = loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(line) if line.starts_with("Checkfu split over 4 processes") => break true,
            Ok(_) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) if started.elapsed() < Duration::from_secs(180) => {
                if !matches!(split.0.try_wait(), Ok(None)) {
                    break false;
                }
            }
            _ => break false,
        }
    };
    if !ready {
        let mut err = String::new();
        if let Some(mut e) = split.0.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        panic!("split-up never came up: {err}{}", log_tails(dir.path()));
    }
    let procs = dir.path().join("procs");
    let names: Vec<String> = {
        let mut n: Vec<String> = std::fs::read_dir(&procs)
            .expect("procs")
            .flatten()
            .filter_map(|e| e.path().file_stem().and_then(|s| s.to_str()).map(String::from))
            .collect();
        n.sort();
        n
    };
    assert_eq!(names, ["broker", "control", "gateway", "postgres", "redis", "runner", "sessions"], "a pid file for every process");
    let target = format!("http://127.0.0.1:{}", port + 6);
    let key = dir.path().join("admin.key");
    let mut args = vec!["--target", &target, "--key", key.to_str().expect("utf-8"), "--procs-from", procs.to_str().expect("utf-8")];
    args.extend(QUICK);
    let out = bench(&args);
    for unit in ["session", "message", "turn"] {
        let (total, parts) = cost(&out, unit);
        assert!(total > 0.0, "the split installation spends CPU per {unit}:\n{out}");
        let named: Vec<&str> = parts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(named, ["broker", "control", "gateway", "postgres", "redis", "runner", "sessions"], "{out}");
        // A few turns may fall inside one clock tick of a process; the
        // throughput figures run long enough to show the busy ones.
        let spent = |n: &str| parts.iter().find(|(p, _)| p == n).map_or(0.0, |(_, v)| *v);
        if unit != "turn" {
            assert!(spent("gateway") > 0.0 && spent("sessions") > 0.0 && spent("postgres") > 0.0, "the busy processes show:\n{out}");
        }
    }
    // SIGTERM stops everything it started, PostgreSQL included.
    let pids: Vec<String> = names.iter().map(|n| std::fs::read_to_string(procs.join(format!("{n}.pid"))).expect("pid")).collect();
    drop(split);
    let deadline = Instant::now() + Duration::from_secs(30);
    while pids.iter().any(|p| pid_alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<(&String, &String)> = names.iter().zip(&pids).filter(|(_, p)| pid_alive(p)).collect();
    assert!(left.is_empty(), "still running after split-up stopped: {left:?}");
}
