//! The mesh as separate `checkfu serve` processes against PostgreSQL — one
//! process for governance + model-gateway (+ the roles without behaviour),
//! one for sessions + runner + capability-gateway, one for the gateway —
//! passes the journey.
//! Runs when `CHECKFU_TEST_POSTGRES_URL` is set (CI sets it).
#![allow(clippy::unwrap_used)]

use checkfu_e2e::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The `checkfu` binary next to this test's directory (built by the
/// workspace test build: `crates/checkfu` has integration tests).
fn binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let bin = dir.join("checkfu");
    assert!(bin.exists(), "{} is missing: run the workspace tests (cargo nextest run --workspace), which build it", bin.display());
    bin
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `checkfu serve` and returns it with its address (`http://...`).
fn serve(dir: &Path, name: &str, roles: &str, config: &str) -> (Proc, String) {
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, config).unwrap();
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let mut child = Command::new(binary())
        .args(["serve", "--roles", roles, "--config", cfg.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap_or_else(|| panic!("{name} exited; see {}", dir.join(format!("{name}.log")).display())).unwrap();
    let addr = line.rsplit(" on ").next().unwrap().trim().to_string();
    std::thread::spawn(move || for _ in lines {});
    (Proc(child), format!("http://{addr}"))
}

async fn fresh_database(base_url: &str) -> String {
    sqlx::any::install_default_drivers();
    let name = format!("checkfu_e2e_{}", std::process::id());
    let pool = sqlx::AnyPool::connect(base_url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name}"))).execute(&pool).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&pool).await.unwrap();
    pool.close().await;
    let (prefix, _) = base_url.rsplit_once('/').unwrap();
    format!("{prefix}/{name}")
}

#[tokio::test(flavor = "multi_thread")]
async fn separate_serve_processes_on_postgres_pass_the_journey() {
    let Ok(pg) = std::env::var("CHECKFU_TEST_POSTGRES_URL") else {
        eprintln!("CHECKFU_TEST_POSTGRES_URL is not set; skipping the multi-process PostgreSQL journey");
        return;
    };
    let db = fresh_database(&pg).await;
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("admin.key");
    let (_control, control) = serve(
        dir.path(),
        "control",
        "governance,model-gateway,scheduler,webhooks,memory",
        &format!("storage = \"{db}\"\nbootstrap_key_file = \"{}\"\n", key_file.display()),
    );
    let (_sessions, sessions) = serve(
        dir.path(),
        "sessions",
        "sessions,runner,capability-gateway",
        &format!("storage = \"{db}\"\n[endpoints]\nmodel-gateway = \"{control}\"\ngovernance = \"{control}\"\n"),
    );
    let (_gateway, gateway) = serve(
        dir.path(),
        "gateway",
        "gateway",
        &format!(
            "storage = \"{db}\"\n[endpoints]\ngovernance = \"{control}\"\nmodel-gateway = \"{control}\"\nsessions = \"{sessions}\"\nwebhooks = \"{control}\"\n"
        ),
    );
    wait_ready(&gateway).await;
    let admin = Api::new(&gateway, std::fs::read_to_string(&key_file).unwrap().trim());
    let envs = admin.get("/v1/environments").await;
    expect(&envs, 200, None);
    let env_id = id(&envs.1["data"][0]);
    run_journey(&gateway, &admin, &env_id).await;

    // Every role answers its own health and metrics.
    for base in [&control, &sessions, &gateway] {
        assert_eq!(reqwest::get(format!("{base}/healthz")).await.unwrap().status(), 200);
        let m = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
        assert!(m.contains("checkfu_requests_total"), "{base} exposes request metrics");
    }
}
