//! The `checkfu` binary itself: `up` bootstraps, prints where things are,
//! serves, and exits cleanly on SIGTERM.
#![cfg(test)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn up_bootstraps_serves_and_drains_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["up", "--data-dir", data.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first.split("API base URL ").nth(1).unwrap().trim().to_string();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/v1"), "{first}");
    let second = lines.next().unwrap().unwrap();
    let key_file = data.join("admin.key");
    assert!(second.contains(key_file.to_str().unwrap()), "{second}");
    let key = std::fs::read_to_string(&key_file).unwrap();
    assert!(key.trim().starts_with("ck_"));
    assert!(!first.contains(key.trim()) && !second.contains(key.trim()), "the key is never printed");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let base = url.trim_end_matches("/v1").to_string();
    let ready = http_status(&format!("{base}/readyz"));
    assert_eq!(ready, 200);

    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "exits cleanly: {status}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A second start on the same data keeps the installation and the key.
    let mut again = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["up", "--data-dir", data.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(again.stdout.take().unwrap()).lines();
    lines.next().unwrap().unwrap();
    let second = lines.next().unwrap().unwrap();
    assert!(second.starts_with("Existing installation"), "{second}");
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), key);
    again.kill().unwrap();
    again.wait().unwrap();
}

/// A bare HTTP/1.1 GET, to keep this test free of client dependencies.
fn http_status(url: &str) -> u16 {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').map(|(h, p)| (h, format!("/{p}"))).unwrap();
    for _ in 0..100 {
        if let Ok(mut s) = std::net::TcpStream::connect(host) {
            write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
            let mut buf = String::new();
            s.read_to_string(&mut buf).unwrap();
            return buf.split_whitespace().nth(1).unwrap().parse().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{url} never answered");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn up(data: &std::path::Path, port: u16) -> std::process::Child {
    let child = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["up", "--data-dir", data.to_str().unwrap(), "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert_eq!(http_status(&format!("http://127.0.0.1:{port}/readyz")), 200);
    child
}

fn cli(port: u16, key: &str, args: &[&str]) -> Command {
    command(port, key, "session", args)
}

fn command(port: u16, key: &str, group: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_checkfu"));
    c.args([group, "--server", &format!("http://127.0.0.1:{port}"), "--key", key]).args(args);
    c
}

/// Creates an agent, deploys it with the scripted model and opens a Session.
async fn session(base: &str, key: &str) -> String {
    session_with(base, key, serde_json::json!({}), serde_json::json!([])).await
}

/// Like [`session`], with an agent draft and initial events.
async fn session_with(base: &str, key: &str, draft: serde_json::Value, initial_events: serde_json::Value) -> String {
    let http = reqwest::Client::new();
    let post = |path: &str, body: serde_json::Value| {
        let rb = http.post(format!("{base}{path}")).bearer_auth(key).json(&body);
        async move { rb.send().await.unwrap().json::<serde_json::Value>().await.unwrap() }
    };
    let envs: serde_json::Value = http.get(format!("{base}/v1/environments")).bearer_auth(key).send().await.unwrap().json().await.unwrap();
    let env = envs["data"][0]["id"].as_str().unwrap().to_string();
    let agent = post("/v1/agents", serde_json::json!({"environment_id": env, "name": "cli", "draft": draft})).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    post(&format!("/v1/agents/{agent}/versions"), serde_json::json!({})).await;
    let sbp = post("/v1/sandbox-profiles", serde_json::json!({"environment_id": env, "name": format!("s-{agent}"), "image": "debian"}))
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mrp = post(
        "/v1/model-routing-profiles",
        serde_json::json!({"environment_id": env, "name": format!("m-{agent}"), "candidates": [{"provider": "scripted", "model": "s"}]}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let dep = post(
        "/v1/agent-deployments",
        serde_json::json!({"environment_id": env, "key": format!("cli-{agent}"), "agent_id": agent, "agent_version": 1, "model_routing_profile_id": mrp, "sandbox_profile_id": sbp}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    post("/v1/sessions", serde_json::json!({"agent_deployment_id": dep, "initial_events": initial_events})).await["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn seqs(out: &str) -> Vec<i64> {
    out.lines().filter_map(|l| l.split_whitespace().next()?.parse().ok()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn session_send_and_follow_resume_after_a_dropped_connection() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = free_port();
    let mut server = up(&data, port);
    let key = std::fs::read_to_string(data.join("admin.key")).unwrap().trim().to_string();
    let sid = session(&format!("http://127.0.0.1:{port}"), &key).await;

    let sent = cli(port, &key, &["send", &sid, "hello cli"]).output().unwrap();
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    assert!(String::from_utf8_lossy(&sent.stdout).contains("user.message") && String::from_utf8_lossy(&sent.stdout).contains("hello cli"));
    let json_out = cli(port, &key, &["follow", &sid, "--exit-on-idle", "--json"]).output().unwrap();
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&json_out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.last().unwrap()["type"], "session.status_idle");
    assert!(lines.iter().any(|e| e["type"] == "agent.message" && e["payload"]["content"][0]["text"] == "echo: hello cli"));
    let last = lines.last().unwrap()["seq"].as_i64().unwrap();

    // An idle Session followed with --exit-on-idle: everything so far is
    // printed and it stops at once, at the current idle.
    let now = cli(port, &key, &["follow", &sid, "--exit-on-idle"]).output().unwrap();
    assert!(now.status.success());
    assert_eq!(seqs(&String::from_utf8_lossy(&now.stdout)), (1..=last).collect::<Vec<_>>());

    // Follow on from the current end (no --exit-on-idle: it waits for
    // more); drop the connection by restarting the server.
    let mut follower =
        cli(port, &key, &["follow", &sid, "--after-seq", &last.to_string()]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = follower.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap().success());
    server.wait().unwrap();
    server = up(&data, port);
    let resent = cli(port, &key, &["send", &sid, "after the restart"]).output().unwrap();
    assert!(resent.status.success(), "{}", String::from_utf8_lossy(&resent.stderr));
    let mut text = String::new();
    while !text.trim_end().ends_with("end_turn") {
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("the follower stalled after:\n{text}"));
        text.push_str(&line);
        text.push('\n');
    }
    follower.kill().unwrap();
    follower.wait().unwrap();
    let got = seqs(&text);
    assert_eq!(got, (last + 1..=last + got.len() as i64).collect::<Vec<_>>(), "resumed with no gap and no repeat:\n{text}");
    assert!(text.contains("echo: after the restart"), "{text}");

    let bad = cli(port, &key, &["send", "sess_01m8n5w2381sjtydkyxnv11e90", "x"]).output().unwrap();
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("not_found"));
    server.kill().unwrap();
    server.wait().unwrap();
}

async fn stop_reason(base: &str, key: &str, sid: &str) -> String {
    let http = reqwest::Client::new();
    for _ in 0..200 {
        let s: serde_json::Value =
            http.get(format!("{base}/v1/sessions/{sid}")).bearer_auth(key).send().await.unwrap().json().await.unwrap();
        if s["status"] == "idle" {
            return s["stop_reason"]["type"].as_str().unwrap().to_string();
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("session {sid} never settled");
}

#[tokio::test(flavor = "multi_thread")]
async fn approvals_are_listed_and_answered_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut server = up(&data, port);
    let key = std::fs::read_to_string(data.join("admin.key")).unwrap().trim().to_string();
    let draft = serde_json::json!({"tools": [{"type": "builtin", "name": "write"}]});
    let me: serde_json::Value =
        reqwest::Client::new().get(format!("{base}/v1/principals")).bearer_auth(&key).send().await.unwrap().json().await.unwrap();
    let admin = me["data"][0]["id"].as_str().unwrap().to_string();
    let ask = |path: &str| {
        serde_json::json!([{"type": "user.message", "payload": {"content": [{"type": "text", "text": format!("call write {{\"path\": \"{path}\", \"content\": \"y\"}}")}]},
            "authored_by": admin, "caused_by": {"kind": "principal", "id": admin}}])
    };
    let sid = session_with(&base, &key, draft.clone(), ask("yes.txt")).await;
    assert_eq!(stop_reason(&base, &key, &sid).await, "requires_action");

    let listed = command(port, &key, "approvals", &["list", "--json"]).output().unwrap();
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&listed.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0]["status"].as_str(), rows[0]["frozen"]["tool"].as_str()), (Some("pending"), Some("write")));
    let aid = rows[0]["id"].as_str().unwrap().to_string();

    let approved = command(port, &key, "approvals", &["approve", &aid, "--json"]).output().unwrap();
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    let v: serde_json::Value = serde_json::from_slice(&approved.stdout).unwrap();
    assert_eq!(v["status"], "approved");
    assert_eq!(stop_reason(&base, &key, &sid).await, "end_turn");
    assert_eq!(std::fs::read_to_string(data.join("workspaces").join(&sid).join("yes.txt")).unwrap(), "y");
    let again = command(port, &key, "approvals", &["approve", &aid]).output().unwrap();
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("not pending"));

    let sid2 = session_with(&base, &key, draft, ask("no.txt")).await;
    assert_eq!(stop_reason(&base, &key, &sid2).await, "requires_action");
    let text = command(port, &key, "approvals", &["list", "--session", &sid2]).output().unwrap();
    let out = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(out.contains("pending") && out.contains("write") && out.contains(&sid2), "{out}");
    let aid2 = out.split_whitespace().next().unwrap().to_string();
    let denied = command(port, &key, "approvals", &["deny", &aid2]).output().unwrap();
    assert!(denied.status.success() && String::from_utf8_lossy(&denied.stdout).contains("denied"));
    assert_eq!(stop_reason(&base, &key, &sid2).await, "end_turn");
    assert!(!data.join("workspaces").join(&sid2).join("no.txt").exists());
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn up_names_each_missing_optional_dependency_once_with_its_install_command() {
    let dir = tempfile::tempdir().unwrap();
    let (port, log) = (free_port(), dir.path().join("up.log"));
    // An empty PATH: a host without bubblewrap (or setpriv).
    let mut child = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["up", "--data-dir", dir.path().join("data").to_str().unwrap(), "--listen", &format!("127.0.0.1:{port}")])
        .env("PATH", dir.path())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    assert_eq!(http_status(&format!("http://127.0.0.1:{port}/readyz")), 200, "starts without them");
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("bubblewrap is missing")).collect();
    assert_eq!(lines.len(), 1, "named once:\n{text}");
    assert!(lines[0].contains("apt-get install bubblewrap") && lines[0].contains("bash tool is refused"), "{}", lines[0]);
}

#[test]
fn config_prints_the_effective_configuration_and_refuses_a_bad_one() {
    let out = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["config", "--mode", "serve", "--listen", "127.0.0.1:9"])
        .env("CHECKFU_OPENAI_API_KEY", "sk-do-not-print")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("listen = \"127.0.0.1:9\"") && text.contains("listen <- --listen"), "{text}");
    assert!(text.contains("openai_api_key = \"<redacted>\"") && !text.contains("sk-do-not-print"), "{text}");

    let bad = Command::new(env!("CARGO_BIN_EXE_checkfu"))
        .args(["config"])
        .env("CHECKFU_RUN_LEASE_MS", "soon")
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8(bad.stderr).unwrap();
    assert_eq!(
        err.trim(),
        "error: configuration key `timing.run_lease_ms` (from $CHECKFU_RUN_LEASE_MS): must be a whole number, got \"soon\""
    );
}
