//! `checkfu sandbox-agent`, the in-pod agent, driven by the runner's side
//! of its channel as a local process: the conformance suite every sandbox
//! passes, its token, and the init container's `--install`.
#![cfg(test)]

use checkfu_runner::agent::RemoteSandbox;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the agent on `workspace`, returning it and the address it listens on.
fn agent(workspace: &std::path::Path, token: &str) -> (Killed, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["sandbox-agent", "--workspace", workspace.to_str().expect("utf-8"), "--listen", "127.0.0.1:0"])
        .env("CHECKFU_SANDBOX_AGENT_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the agent");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().expect("a line").expect("utf-8");
    let addr = first.split("listening on ").nth(1).and_then(|r| r.split(' ').next()).expect("an address").to_string();
    (Killed(child), addr)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_process_passes_the_sandbox_conformance_suite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ws, outside) = (dir.path().join("ws"), dir.path().join("outside"));
    std::fs::create_dir(&outside).expect("mkdir");
    let token = "a".repeat(20) + &"b".repeat(23);
    let (_agent, addr) = agent(&ws, &token);

    let wrong = RemoteSandbox::new(&addr, &"c".repeat(43), checkfu_runner::conformance::limits()).expect("client");
    let r = wrong.run("bash", &serde_json::json!({"command": "touch planted"})).await;
    assert!(r.is_error && r.content.contains("token"), "{r:?}");
    assert!(!ws.join("planted").exists(), "a wrong token runs nothing");

    let sb = RemoteSandbox::new(&addr, &token, checkfu_runner::conformance::limits()).expect("client");
    checkfu_runner::conformance::run(&sb, &ws, &outside, true).await;
    let r = sb.run("bash", &serde_json::json!({"command": "env"})).await;
    assert!(!r.content.contains(&token), "commands never see the agent token");
}

#[test]
fn the_agent_refuses_to_start_without_a_token_and_installs_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["sandbox-agent", "--workspace", dir.path().to_str().expect("utf-8"), "--listen", "127.0.0.1:0"])
        .env_remove("CHECKFU_SANDBOX_AGENT_TOKEN")
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CHECKFU_SANDBOX_AGENT_TOKEN"));
    let out = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["sandbox-agent", "--listen", "127.0.0.1:0"])
        .env("CHECKFU_SANDBOX_AGENT_TOKEN", "short")
        .output()
        .expect("run");
    assert!(!out.status.success(), "a short token is refused");

    let out = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["sandbox-agent", "--install", dir.path().to_str().expect("utf-8")])
        .output()
        .expect("install");
    assert!(out.status.success());
    let installed = dir.path().join("checkfu");
    let help = Command::new(&installed).args(["sandbox-agent", "--help"]).output().expect("the copy runs");
    assert!(help.status.success() && String::from_utf8_lossy(&help.stdout).contains("--workspace"));
}
