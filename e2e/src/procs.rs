//! Separate `checkfu serve` processes for the multi-process e2e tests, and
//! the real services they run against.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The `checkfu` binary next to the test's directory (built by the
/// workspace test build: `bin/checkfu` has integration tests).
pub fn binary() -> PathBuf {
    let bin = binary_path();
    assert!(bin.exists(), "{} is missing: run the workspace tests (cargo nextest run --workspace), which build it", bin.display());
    bin
}

/// Where [`binary`] is expected, whether or not it was built.
pub fn binary_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent().and_then(Path::parent).map(|d| d.join("checkfu")).unwrap_or_default()
}

/// A child process, killed when dropped.
pub struct Proc(pub Child);

impl Proc {
    /// SIGKILL: the process dies without draining anything.
    pub fn kill_hard(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill").args([&format!("-{sig}"), &self.0.id().to_string()]).status().map(|s| s.success()).unwrap_or(false);
        assert!(ok, "kill -{sig} failed");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where a `checkfu serve` process listens.
#[derive(Debug, Clone)]
pub struct Addrs {
    /// The public listener (`http://...`): the API with the gateway role,
    /// health and metrics.
    pub public: String,
    /// The internal mesh listener (`https://...`), for roles others call.
    pub internal: Option<String>,
}

impl Addrs {
    /// The internal address, for another process's `[endpoints]`.
    pub fn mesh(&self) -> &str {
        self.internal.as_deref().expect("this process serves roles on the mesh")
    }
}

/// Starts `checkfu up --data-dir DIR` on a free loopback port; returns it
/// with its base URL (`http://...`). Its log is `DIR/up.log` (appended).
pub fn up(dir: &Path) -> (Proc, String) {
    up_with(dir, &[], &[])
}

/// [`up`] with more flags and environment variables.
pub fn up_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Proc, String) {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("up.log")).unwrap();
    let mut child = Command::new(binary())
        .args(["up", "--data-dir", dir.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().and_then(Result::ok).unwrap_or_else(|| {
        let text = std::fs::read_to_string(dir.join("up.log")).unwrap_or_default();
        panic!("checkfu up exited before listening; its log:\n{text}")
    });
    let base = line.rsplit("API base URL ").next().unwrap().trim().trim_end_matches("/v1").to_string();
    std::thread::spawn(move || for _ in lines {});
    (Proc(child), base)
}

/// Makes the certificate (`checkfu certs`) of a process playing `roles`,
/// issued by the test's CA in `DIR/mesh`; returns the `[mesh]` table.
pub fn mesh_table(dir: &Path, name: &str, roles: &str) -> String {
    let out = dir.join("mesh");
    let ok = Command::new(binary())
        .args(["certs", "--out", out.to_str().unwrap(), "--name", name, "--roles", roles, "--days", "1"])
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "checkfu certs failed");
    let at = |f: &str| out.join(f).display().to_string();
    format!(
        "\n[mesh]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n",
        at("ca.pem"),
        at(&format!("{name}.pem")),
        at(&format!("{name}-key.pem"))
    )
}

/// Starts `checkfu serve --roles ROLES` with `config` (TOML, to which the
/// process's `[mesh]` identity is added) and `env`; returns it with its
/// addresses. Its log is `DIR/NAME.log`.
pub fn serve(dir: &Path, name: &str, roles: &str, config: &str, env: &[(&str, &str)]) -> (Proc, Addrs) {
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, format!("{config}{}", mesh_table(dir, name, roles))).unwrap();
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let mut child = Command::new(binary())
        .args(["serve", "--roles", roles, "--config", cfg.to_str().unwrap(), "--listen", "127.0.0.1:0", "--internal-listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir.join(name))
        .env("CHECKFU_SECRETS_KEY", "the e2e installation's secrets key, 32+ chars")
        // Several processes share this host: the egress proxy on any port.
        .env("CHECKFU_EGRESS_LISTEN", "127.0.0.1:0")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines
        .next()
        .unwrap_or_else(|| {
            // The directory goes with the failing test: show the log here.
            let text = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect();
            panic!("{name} exited before listening; the end of its log:\n{}", tail.join("\n"))
        })
        .unwrap();
    let public = line.rsplit("public on ").next().unwrap().trim().to_string();
    let internal =
        line.split_once("mesh (mutual TLS) on ").and_then(|(_, rest)| rest.split(';').next()).map(|a| format!("https://{}", a.trim()));
    std::thread::spawn(move || for _ in lines {});
    (Proc(child), Addrs { public: format!("http://{public}"), internal })
}

/// A fresh database on the server of `base_url`; returns its URL.
pub async fn fresh_database(base_url: &str, tag: &str) -> String {
    sqlx::any::install_default_drivers();
    let name = format!("checkfu_{tag}_{}", std::process::id());
    let pool = sqlx::AnyPool::connect(base_url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name}"))).execute(&pool).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&pool).await.unwrap();
    pool.close().await;
    let (prefix, _) = base_url.rsplit_once('/').unwrap();
    format!("{prefix}/{name}")
}

/// A private tansu broker on a free port (from `CHECKFU_TANSU_BIN`, or
/// `tansu` on the PATH); `None` when there is no binary or it never listens.
pub fn broker(dir: &Path) -> Option<(Proc, String)> {
    let bin = std::env::var("CHECKFU_TANSU_BIN").unwrap_or_else(|_| "tansu".into());
    // The port is found free and then handed to tansu: another process may
    // take it in between (tests start servers in parallel), and a connect
    // would then reach that process instead. So a broker counts only if it
    // is still running once its port answers; otherwise try another port.
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let url = format!("tcp://127.0.0.1:{port}");
        let log = std::fs::File::create(dir.join("tansu.log")).ok()?;
        let child = Command::new(&bin)
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url, "--storage-engine", "memory://tansu/"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .ok()?;
        let mut proc = Proc(child);
        if proc.listens_on(port) {
            return Some((proc, format!("127.0.0.1:{port}")));
        }
    }
    None
}

impl Proc {
    /// Whether this process listens on `port`: the port answers and the
    /// process is still running a moment later (one that lost the port to
    /// another process exits on failing to bind it).
    fn listens_on(&mut self, port: u16) -> bool {
        let running = |p: &mut Proc| matches!(p.0.try_wait(), Ok(None));
        for _ in 0..100 {
            if !running(self) {
                return false;
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                std::thread::sleep(std::time::Duration::from_millis(300));
                return running(self);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        false
    }
}
