//! Sandbox egress (api.md §16.5) on the local (bubblewrap) plane: every
//! byte that leaves `bash` goes through the capability gateway's egress
//! proxy, which admits only the Session's allowlisted hosts; everything
//! else fails, and a refusal is an `egress.denied` event and an audit
//! record. A real HTTP server (`python3 -m http.server`) stands on an
//! allowed name (`localhost`) and a refused one (`127.0.0.1`).
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};

/// The server, its port, and the directory it serves (kept while it runs).
struct Site {
    child: Child,
    port: u16,
    _root: tempfile::TempDir,
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `python3 -m http.server Q` serving `hello`.
async fn site() -> Site {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "hello").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new("python3")
        .args(["-m", "http.server", &port.to_string(), "--bind", "127.0.0.1"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Dropped (killed and waited for) on every path from here.
    let site = Site { child, port, _root: dir };
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return site;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("http.server never listened");
}

fn bwrap_present() -> bool {
    let ok = Command::new("bwrap").args(["--unshare-net", "--ro-bind", "/", "/", "true"]).status().is_ok_and(|s| s.success());
    if !ok {
        checkfu_core::testing::skip("sandbox egress", "bubblewrap cannot make a sandbox here");
        return false;
    }
    // The relay runs inside the sandbox from the built binary.
    assert!(checkfu_e2e::procs::binary_path().exists(), "the checkfu binary is built by the workspace test build");
    true
}

/// Runs `commands` (one bash call each) in a Session allowing `hosts`.
async fn bash(p: &Platform, hosts: Value, commands: &[String]) -> (String, Vec<Value>) {
    let a = &p.admin;
    let d =
        deploy_with_network(a, &p.env_id, json!({"tools": [{"type": "builtin", "name": "bash"}]}), json!({"allowed_hosts": hosts})).await;
    let allow = json!({"environment_id": p.env_id, "name": format!("bash-{}", d.agent_id), "rules": [
        {"subject": {"kind": "agent_definition", "id_glob": d.agent_id}, "resource": {"kind": "tool", "id_glob": "bash"}, "disposition": "allow"}]});
    expect(&a.post("/v1/action-policies", allow).await, 201, None);
    let text: Vec<String> = commands.iter().map(|c| format!("call bash {}", json!({"command": c}))).collect();
    let s = a
        .post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&p.admin_id, &text.join("\n"))]}))
        .await;
    let sid = id(&s.1);
    for _ in 0..400 {
        if a.get(&format!("/v1/sessions/{sid}")).await.1["status"] == "idle" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    (sid.clone(), events(a, &sid).await)
}

fn results(evs: &[Value]) -> Vec<String> {
    evs.iter()
        .filter(|e| e["type"] == "agent.tool_result")
        .map(|e| e["payload"]["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn bash_reaches_allowlisted_hosts_through_the_proxy_and_nothing_else() {
    if !bwrap_present() {
        return;
    }
    let site = site().await;
    let q = site.port;
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let caps = p.admin.get("/v1/capabilities").await;
    let egress = caps.1["data"].as_array().unwrap().iter().find(|c| c["name"] == "sandbox_egress").cloned().unwrap();
    assert_eq!(egress["available"], true, "{egress}");

    let commands = [
        format!("curl -s http://localhost:{q}/"),
        format!("curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{q}/"),
        format!("curl -s -D - -o /dev/null http://127.0.0.1:{q}/ | grep -i checkfu-egress"),
        format!("curl -s --max-time 5 --noproxy '*' http://localhost:{q}/ || echo direct-failed"),
        format!("curl -s -x '' --max-time 5 http://127.0.0.1:{q}/ || echo no-route"),
        "env | grep -c '_PROXY=http://egress:\\|_proxy=http://egress:'; env | grep -ci '^no_proxy=$'".to_string(),
    ];
    let (sid, evs) = bash(&p, json!(["localhost"]), &commands).await;
    let out = results(&evs);
    assert_eq!(out.len(), commands.len(), "{evs:?}");
    assert_eq!(out[0], "hello", "an allowlisted host answers through the proxy");
    assert_eq!(out[1], "403", "another name for the same server is refused");
    assert!(out[2].to_ascii_lowercase().contains("checkfu-egress: denied; reason=not_allowlisted"), "{}", out[2]);
    assert!(out[3].contains("direct-failed"), "--noproxy finds no route: {}", out[3]);
    assert!(out[4].contains("no-route"), "no proxy, no network: {}", out[4]);
    assert_eq!(
        out[5].split_whitespace().collect::<Vec<_>>(),
        ["6", "2"],
        "HTTP(S)_PROXY, http(s)_proxy, ALL_PROXY, all_proxy; NO_PROXY empty: {}",
        out[5]
    );

    // The first refusal per host and port: one event, one audit record.
    let denied: Vec<&Value> = evs.iter().filter(|e| e["type"] == "egress.denied").collect();
    assert_eq!(denied.len(), 1, "{evs:?}");
    assert_eq!(denied[0]["payload"], json!({"host": "127.0.0.1", "port": q, "reason": "not_allowlisted"}));
    let audit = p.admin.get(&format!("/v1/audit-events?resource_id={sid}")).await.1["data"].as_array().unwrap().clone();
    let rec = audit.iter().find(|e| e["action"] == "egress.denied").unwrap_or_else(|| panic!("{audit:?}"));
    assert_eq!((rec["details"]["host"].as_str(), rec["details"]["port"].as_u64()), (Some("127.0.0.1"), Some(u64::from(q))));
    assert_gapless(&evs);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_allowlist_refuses_everything_and_a_disabled_proxy_leaves_no_network() {
    if !bwrap_present() {
        return;
    }
    let site = site().await;
    let q = site.port;
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let (_, evs) = bash(&p, json!([]), &[format!("curl -s -o /dev/null -w '%{{http_code}}' http://localhost:{q}/")]).await;
    assert_eq!(results(&evs), ["403"]);
    p.stop().await;

    // sandbox_egress switched off: no proxy, no route, no proxy variables.
    let dir = tempfile::tempdir().unwrap();
    let tuning = Tuning { allow_private_targets: true, features_disabled: vec!["sandbox_egress".into()], ..Default::default() };
    let p = Platform::start_timed(dir.path(), tuning).await;
    let caps = p.admin.get("/v1/capabilities").await;
    let egress = caps.1["data"].as_array().unwrap().iter().find(|c| c["name"] == "sandbox_egress").cloned().unwrap();
    assert_eq!(egress["reason"], "feature_disabled");
    let cmd = format!("env | grep -ci _proxy; curl -s --max-time 5 http://localhost:{q}/ || echo no-network");
    let (_, evs) = bash(&p, json!(["localhost"]), &[cmd]).await;
    let out = results(&evs);
    assert!(out[0].starts_with('0') && out[0].contains("no-network"), "{out:?}");
    p.stop().await;
}
