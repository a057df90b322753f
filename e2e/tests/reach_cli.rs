//! The Reach command line: `checkfu connections`, `checkfu tool-sources`
//! and `checkfu credentials rewrap`, run as the built binary against an
//! installation, each with `--json`. A credential goes in from a file or
//! standard input and never comes back out.
#![cfg(test)]

use checkfu_e2e::mcp::McpFixture;
use checkfu_e2e::*;
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

const S: &str = "s3cret-XYZ-cli-77";

/// Runs `checkfu ARGS --server BASE --key KEY --json`, feeding `stdin`;
/// the JSON lines it printed, or its stderr when it failed.
fn checkfu(base: &str, key: &str, args: &[&str], stdin: &str) -> Result<Vec<Value>, String> {
    let mut child = Command::new(procs::binary())
        .args(args)
        .args(["--server", base, "--key", key, "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!text.contains(S), "the secret was printed: {text}");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).to_string());
    }
    Ok(text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}"))).collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_and_tool_sources_from_the_command_line() {
    let Some(mcp) = McpFixture::start("the reach CLI", S, &[]).await else { return };
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let key = std::fs::read_to_string(dir.path().join("admin.key")).unwrap().trim().to_string();
    let (base, env) = (p.base.clone(), p.env_id.clone());
    let run = move |args: Vec<String>, stdin: String| {
        let (base, key) = (base.clone(), key.clone());
        async move {
            tokio::task::spawn_blocking(move || checkfu(&base, &key, &args.iter().map(String::as_str).collect::<Vec<_>>(), &stdin))
                .await
                .unwrap()
        }
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    let credential = format!(r#"{{"type":"static_bearer","token":"{S}"}}"#);
    let created = run(
        s(&["connections", "create", "--environment", &env, "--name", "fixture", "--url", &mcp.url, "--credential-file", "-"]),
        credential.clone(),
    )
    .await
    .unwrap();
    let conn = id(&created[0]);
    assert_eq!(created[0]["credential"]["state"], "ok");
    let listed = run(s(&["connections", "list", "--environment", &env]), String::new()).await.unwrap();
    assert_eq!(listed.iter().map(id).collect::<Vec<_>>(), std::slice::from_ref(&conn));
    let bad = run(s(&["connections", "set-credential", &conn, "-"]), "not json".into()).await.unwrap_err();
    assert!(bad.contains("not a JSON object"), "{bad}");

    let t = p
        .admin
        .post(
            "/v1/tool-sources",
            serde_json::json!({"environment_id": env, "name": "T", "connection_id": conn, "default_config": {"enabled": false}}),
        )
        .await;
    let source = id(&t.1);
    let synced = run(s(&["tool-sources", "sync", &source]), String::new()).await.unwrap();
    assert_eq!(synced[0]["sync_status"], "ok");
    let set = run(s(&["tool-sources", "set-tool", &source, "add", "true"]), String::new()).await.unwrap();
    let add = set[0]["tools"].as_array().unwrap().iter().find(|x| x["name"] == "add").cloned().unwrap();
    assert_eq!(add["offered"], true);

    // A wrong credential: the sync fails, and the command says so (exit 1).
    run(s(&["connections", "set-credential", &conn, "-"]), r#"{"type":"static_bearer","token":"wrong"}"#.into()).await.unwrap();
    let failed = run(s(&["tool-sources", "sync", &source]), String::new()).await.unwrap_err();
    assert!(failed.contains("the sync failed"), "{failed}");

    let revoked = run(s(&["connections", "revoke", &conn]), String::new()).await.unwrap();
    assert_eq!(revoked[0]["status"], "revoked");
    p.stop().await;

    // Rewrap runs beside the store and key file.
    let out = Command::new(procs::binary())
        .args(["credentials", "--data-dir", dir.path().to_str().unwrap(), "rewrap", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(done["unreadable"], 0, "{done}");
}
