//! The CPU time an installation spends, read from `/proc`, so the bench can
//! print what a unit of work costs and not only how fast it goes.
//!
//! A process is counted with its whole tree: PostgreSQL's postmaster with
//! every backend, a broker with its workers. Each process in the tree adds
//! its own user and system time and its reaped children's, so a backend
//! that exits between two samples moves its time into its parent's without
//! being lost or counted twice.
//!
//! The embedded installation runs inside the bench. Its CPU is the bench
//! process's minus the load generator's threads (named
//! [`CLIENT_THREAD`]), which `/proc/self/task` tells apart.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The name of every thread of the bench's load-generating runtime.
pub const CLIENT_THREAD: &str = "bench-client";

/// Linux reports process times in clock ticks of `USER_HZ`, which is 100
/// on every architecture the kernel supports today (`getconf CLK_TCK`).
const TICKS_PER_SECOND: u64 = 100;

/// What the bench measures the CPU of: named process trees, or the
/// embedded installation in its own process.
#[derive(Debug, Clone)]
pub enum Watched {
    Trees(Vec<(String, u32)>),
    Embedded,
}

/// CPU time used so far, by name.
#[derive(Debug, Clone, Default)]
pub struct Sample(pub BTreeMap<String, Duration>);

/// The fields of `/proc/<pid>/stat` the bench reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    ppid: u32,
    /// utime + stime + cutime + cstime, in ticks.
    ticks: u64,
    /// utime + stime only (a thread's own).
    own: u64,
}

/// Parses a `stat` line. The command name is in parentheses and may hold
/// spaces or parentheses itself, so fields are counted after the last `)`.
fn parse_stat(line: &str) -> Option<(String, Stat)> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let comm = line.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = line.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state): field n is rest[n - 3].
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let (utime, stime, cutime, cstime) = (field(14)?, field(15)?, field(16)?, field(17)?);
    let ppid = u32::try_from(field(4)?).ok()?;
    Some((comm, Stat { ppid, ticks: utime + stime + cutime + cstime, own: utime + stime }))
}

fn read_stat(path: &Path) -> Option<(String, Stat)> {
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

fn ticks(t: u64) -> Duration {
    Duration::from_millis(t * 1000 / TICKS_PER_SECOND)
}

/// Every live process: its parent and its times.
fn processes() -> BTreeMap<u32, Stat> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if let Some((_, s)) = read_stat(&entry.path().join("stat")) {
            out.insert(pid, s);
        }
    }
    out
}

/// The ticks of `root` and all its descendants.
fn tree_ticks(all: &BTreeMap<u32, Stat>, root: u32) -> u64 {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (&pid, s) in all {
        children.entry(s.ppid).or_default().push(pid);
    }
    let (mut total, mut stack) = (0, vec![root]);
    while let Some(p) = stack.pop() {
        if let Some(s) = all.get(&p) {
            total += s.ticks;
        }
        stack.extend(children.get(&p).into_iter().flatten());
    }
    total
}

/// The embedded installation's ticks: the whole process's (which keeps the
/// time of threads that exited) less the load generator's threads and the
/// main thread that waits on it.
fn embedded_ticks() -> u64 {
    let me = std::process::id();
    let total = read_stat(Path::new("/proc/self/stat")).map_or(0, |(_, s)| s.own);
    let mut client = 0;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            let tid = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok());
            if let Some((comm, s)) = read_stat(&t.path().join("stat"))
                && (comm.starts_with(CLIENT_THREAD) || tid == Some(me))
            {
                client += s.own;
            }
        }
    }
    total.saturating_sub(client)
}

/// The load generator's own ticks: its client threads and main thread
/// when the installation is embedded, else the whole bench process.
fn bench_ticks(embedded: bool) -> u64 {
    let total = read_stat(Path::new("/proc/self/stat")).map_or(0, |(_, s)| s.own);
    if embedded { total.saturating_sub(embedded_ticks()) } else { total }
}

/// The machine's busy time so far over every core (user, nice, system,
/// irq, softirq, steal from `/proc/stat`), in ticks.
fn machine_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(cpu) = stat.lines().find(|l| l.starts_with("cpu ")) else { return 0 };
    let v: Vec<u64> = cpu.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal …
    [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| v.get(i)).sum()
}

impl Watched {
    /// The CPU each watched thing has used so far.
    pub fn sample(&self) -> Sample {
        match self {
            Watched::Embedded => Sample(BTreeMap::from([("checkfu".to_string(), ticks(embedded_ticks()))])),
            Watched::Trees(trees) => {
                let all = processes();
                Sample(trees.iter().map(|(name, pid)| (name.clone(), ticks(tree_ticks(&all, *pid)))).collect())
            }
        }
    }

    /// The machine's busy CPU less the bench's own, so far: the same figure
    /// [`Watched::sample`] adds up, taken a second way (it also holds
    /// whatever else the machine runs).
    pub fn machine_less_bench(&self) -> Duration {
        ticks(machine_ticks().saturating_sub(bench_ticks(matches!(self, Watched::Embedded))))
    }

    /// Reads `name=pid` lines of every `*.pid` file in `dir` (the name is
    /// the file's stem when a file holds only the pid), as `split-up` writes
    /// them.
    pub fn from_dir(dir: &Path) -> std::io::Result<Watched> {
        let mut out = vec![];
        for entry in std::fs::read_dir(dir)?.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "pid") {
                continue;
            }
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
            for line in std::fs::read_to_string(&path)?.lines().map(str::trim).filter(|l| !l.is_empty()) {
                let (name, pid) = line.split_once('=').unwrap_or((&stem, line));
                let pid = pid.trim().parse().map_err(|_| std::io::Error::other(format!("{}: {line:?} is not a pid", path.display())))?;
                out.push((name.trim().to_string(), pid));
            }
        }
        out.sort();
        Ok(Watched::Trees(out))
    }

    /// `name=pid` (or a bare pid, named for itself), comma-separated.
    pub fn from_list(list: &str) -> Result<Watched, String> {
        let mut out = vec![];
        for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, pid) = item.split_once('=').unwrap_or((item, item));
            out.push((name.to_string(), pid.parse().map_err(|_| format!("{item:?}: expected name=pid or a pid"))?));
        }
        Ok(Watched::Trees(out))
    }
}

impl Sample {
    /// What was used since `before`, by name.
    pub fn since(&self, before: &Sample) -> Sample {
        Sample(self.0.iter().map(|(k, v)| (k.clone(), v.saturating_sub(before.0.get(k).copied().unwrap_or_default()))).collect())
    }

    pub fn total(&self) -> Duration {
        self.0.values().sum()
    }

    /// "CPU-ms per `unit`": the total and each part, for `units` units.
    pub fn per(&self, units: u64, unit: &str) -> String {
        if units == 0 {
            return format!("cpu-ms per {unit}: no {unit} accepted");
        }
        let per = |d: &Duration| d.as_secs_f64() * 1e3 / units as f64;
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k} {:.3}", per(v))).collect();
        format!("cpu-ms per {unit}: {:.3}  ({})", per(&self.total()), parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_past_a_command_with_spaces_and_parentheses() {
        let line = "4242 (tokio (rt) worker) S 17 4242 4242 0 -1 4194560 500 0 0 0 120 30 7 3 20 0 9 0 100 0 0";
        let (comm, s) = parse_stat(line).expect("parsed");
        assert_eq!(comm, "tokio (rt) worker");
        assert_eq!(s, Stat { ppid: 17, ticks: 120 + 30 + 7 + 3, own: 150 });
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn a_tree_counts_every_descendant_once() {
        let s = |ppid, ticks| Stat { ppid, ticks, own: ticks };
        let all = BTreeMap::from([(1, s(0, 1000)), (10, s(1, 5)), (11, s(10, 7)), (12, s(10, 11)), (20, s(1, 13))]);
        assert_eq!(tree_ticks(&all, 10), 5 + 7 + 11);
        assert_eq!(tree_ticks(&all, 20), 13);
        assert_eq!(tree_ticks(&all, 99), 0, "a process that is gone used nothing more");
    }

    #[test]
    fn this_process_is_seen_using_cpu() {
        let me = Watched::Trees(vec![("me".into(), std::process::id())]);
        let before = me.sample();
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let used = me.sample().since(&before).total();
        assert!(used >= Duration::from_millis(100), "300 ms of spinning shows: {used:?}");
    }

    #[test]
    fn pids_are_read_from_a_list_and_a_directory() {
        let Watched::Trees(t) = Watched::from_list("gateway=10, 11").expect("list") else { panic!("trees") };
        assert_eq!(t, vec![("gateway".to_string(), 10), ("11".to_string(), 11)]);
        assert!(Watched::from_list("gateway=x").is_err());
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("postgres.pid"), "42\n").expect("write");
        std::fs::write(dir.path().join("checkfu.pid"), "gateway=7\nsessions=8\n").expect("write");
        std::fs::write(dir.path().join("notes.txt"), "ignored").expect("write");
        let Watched::Trees(t) = Watched::from_dir(dir.path()).expect("dir") else { panic!("trees") };
        assert_eq!(t, vec![("gateway".to_string(), 7), ("postgres".to_string(), 42), ("sessions".to_string(), 8)]);
    }
}
