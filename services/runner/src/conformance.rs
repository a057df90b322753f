//! The conformance suite every place a Session's sandbox tools run passes:
//! the local workspace (bubblewrap) and the in-pod agent reached over its
//! channel. Every tool, path confinement and the limits.
//!
//! What only bubblewrap provides on the local plane (no network, read-only
//! system directories, a small `/tmp`, a minimal `/etc`) is the pod's own
//! security context and NetworkPolicy on the Kubernetes plane, and is
//! tested where each is built.

use crate::agent::ToolHost;
use crate::sandbox::{Limits, MAX_OUTPUT_BYTES, Outcome};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// The limits a sandbox under test must be made with: a 3 s wall clock and
/// a 1 MiB file size limit (so the suite checks both quickly).
pub fn limits() -> Limits {
    Limits { cpu_seconds: 5, wall: Duration::from_secs(3), file_mib: 1, ..Limits::default() }
}

fn ok(content: &str) -> Outcome {
    Outcome { content: content.into(), is_error: false }
}

/// Runs every check. `workspace` is the sandbox's workspace as this host
/// sees it (empty at the start); `outside` a directory beside it that the
/// sandbox must never read or write. `bash`: whether this sandbox runs
/// commands (a host without bubblewrap refuses them, which is checked).
pub async fn run(sb: &dyn ToolHost, workspace: &Path, outside: &Path, bash: bool) {
    file_tools(sb).await;
    mounts_are_read_only(sb, workspace).await;
    confinement(sb, workspace, outside).await;
    if !bash {
        let r = sb.run_tool("bash", &json!({"command": "echo hi"})).await;
        assert!(r.is_error && r.content.contains("cannot isolate"), "{r:?}");
        return;
    }
    commands(sb, workspace, outside).await;
    limits_hold(sb).await;
}

async fn file_tools(sb: &dyn ToolHost) {
    assert!(!sb.run_tool("write", &json!({"path": "notes/a.txt", "content": "hello\nworld\n"})).await.is_error);
    assert_eq!(sb.run_tool("read", &json!({"path": "notes/a.txt"})).await, ok("hello\nworld\n"));
    assert_eq!(sb.run_tool("read", &json!({"path": "/workspace/notes/a.txt"})).await.content, "hello\nworld\n");
    assert!(!sb.run_tool("edit", &json!({"path": "notes/a.txt", "old": "world", "new": "there"})).await.is_error);
    assert_eq!(sb.run_tool("read", &json!({"path": "notes/a.txt"})).await, ok("hello\nthere\n"));
    assert!(sb.run_tool("edit", &json!({"path": "notes/a.txt", "old": "absent", "new": "x"})).await.is_error);
    assert!(!sb.run_tool("write", &json!({"path": "b.md", "content": "hello again"})).await.is_error);
    assert_eq!(sb.run_tool("glob", &json!({"pattern": "*.txt"})).await.content, "notes/a.txt");
    assert_eq!(sb.run_tool("grep", &json!({"pattern": "^hel+o$"})).await.content, "notes/a.txt:1:hello");
    assert_eq!(sb.run_tool("grep", &json!({"pattern": "^hel+o again$"})).await.content, "b.md:1:hello again");
    assert!(sb.run_tool("grep", &json!({"pattern": "("})).await.is_error, "an invalid pattern is an error result");
    assert!(sb.run_tool("teleport", &json!({})).await.is_error, "an unknown tool is an error result");
    assert!(sb.run_tool("read", &json!({})).await.is_error, "missing arguments are an error result, not a panic");
    let big = "x".repeat(9 * 1024 * 1024);
    assert!(sb.run_tool("write", &json!({"path": "big.txt", "content": big})).await.is_error, "past the file limit");
}

/// The mount folders (the Session's skills and Files, written by the runner)
/// are read by the file tools and never written or edited by them.
async fn mounts_are_read_only(sb: &dyn ToolHost, workspace: &Path) {
    for dir in crate::mounts::MOUNT_DIRS {
        let host = workspace.join(dir).join("m");
        std::fs::create_dir_all(&host).expect("mount folder");
        std::fs::write(host.join("f.md"), "mounted").expect("mounted file");
        let path = format!("{dir}/m/f.md");
        assert_eq!(sb.run_tool("read", &json!({"path": path})).await, ok("mounted"));
        let w = sb.run_tool("write", &json!({"path": path, "content": "x"})).await;
        assert!(w.is_error && w.content.contains("read-only"), "{w:?}");
        let w = sb.run_tool("write", &json!({"path": format!("/workspace/{dir}/new.txt"), "content": "x"})).await;
        assert!(w.is_error, "nothing new either: {w:?}");
        let e = sb.run_tool("edit", &json!({"path": path, "old": "mounted", "new": "changed"})).await;
        assert!(e.is_error && e.content.contains("read-only"), "{e:?}");
        assert_eq!(std::fs::read_to_string(host.join("f.md")).expect("kept"), "mounted");
        std::fs::remove_dir_all(workspace.join(dir)).expect("clean up");
    }
    // A folder merely named like one is not a mount.
    assert!(!sb.run_tool("write", &json!({"path": "skillset/a.txt", "content": "x"})).await.is_error);
}

async fn confinement(sb: &dyn ToolHost, workspace: &Path, outside: &Path) {
    std::fs::write(outside.join("secret"), "s3cret").expect("plant a secret outside");
    let up = format!("{}/secret", outside.display());
    for path in ["../secret", "/etc/passwd", "notes/../../secret", "/workspace/../secret", up.as_str()] {
        let r = sb.run_tool("read", &json!({"path": path})).await;
        assert!(r.is_error && !r.content.contains("s3cret") && !r.content.contains("root:"), "{path}: {r:?}");
    }
    assert!(sb.run_tool("write", &json!({"path": "../escape", "content": "x"})).await.is_error);
    assert!(!outside.join("escape").exists() && !workspace.parent().is_some_and(|p| p.join("escape").exists()));
    std::os::unix::fs::symlink(outside, workspace.join("link")).expect("symlink");
    let r = sb.run_tool("read", &json!({"path": "link/secret"})).await;
    assert!(r.is_error && !r.content.contains("s3cret"), "symlinks do not lead out: {r:?}");
    assert!(sb.run_tool("write", &json!({"path": "link/planted", "content": "x"})).await.is_error);
    assert!(!outside.join("planted").exists());
    let r = sb.run_tool("grep", &json!({"pattern": "s3cret"})).await;
    assert!(!r.content.contains("s3cret"), "grep does not follow links out: {r:?}");
    std::fs::remove_file(workspace.join("link")).expect("unlink");
}

async fn commands(sb: &dyn ToolHost, workspace: &Path, outside: &Path) {
    let r = sb.run_tool("bash", &json!({"command": "echo hi > out.txt && cat out.txt"})).await;
    assert_eq!(r, ok("hi\n"));
    assert!(workspace.join("out.txt").exists(), "the workspace is shared with the file tools");
    assert_eq!(sb.run_tool("read", &json!({"path": "out.txt"})).await, ok("hi\n"));
    assert!(!sb.run_tool("write", &json!({"path": "deep/new.txt", "content": "from-tools"})).await.is_error);
    assert_eq!(sb.run_tool("bash", &json!({"command": "cat deep/new.txt"})).await, ok("from-tools"));
    let r = sb.run_tool("bash", &json!({"command": "exit 3"})).await;
    assert!(r.is_error && r.content.contains("exit status 3"), "{r:?}");
    let r = sb.run_tool("bash", &json!({"command": "echo oops >&2; false"})).await;
    assert!(r.is_error && r.content.contains("oops"), "stderr is part of the result: {r:?}");
    assert!(sb.run_tool("bash", &json!({})).await.is_error);

    // A link made by a command does not lead a file tool out.
    let link = format!("ln -s {}/secret s && ln -s ../../planted p && echo ok", outside.display());
    assert_eq!(sb.run_tool("bash", &json!({"command": link})).await, ok("ok\n"));
    let r = sb.run_tool("read", &json!({"path": "s"})).await;
    assert!(r.is_error && !r.content.contains("s3cret"), "{r:?}");
    assert!(sb.run_tool("write", &json!({"path": "p", "content": "x"})).await.is_error);
    assert!(sb.run_tool("edit", &json!({"path": "s", "old": "s3cret", "new": "x"})).await.is_error);
    assert_eq!(std::fs::read_to_string(outside.join("secret")).expect("secret"), "s3cret");

    // A FIFO blocks no file tool.
    assert!(!sb.run_tool("bash", &json!({"command": "mkfifo fifo"})).await.is_error);
    let started = Instant::now();
    assert!(sb.run_tool("read", &json!({"path": "fifo"})).await.is_error);
    assert!(sb.run_tool("edit", &json!({"path": "fifo", "old": "a", "new": "b"})).await.is_error);
    assert!(!sb.run_tool("grep", &json!({"pattern": "x"})).await.is_error);
    assert!(started.elapsed() < Duration::from_secs(2), "a FIFO blocked a file tool");
    assert!(!sb.run_tool("bash", &json!({"command": "rm fifo s p"})).await.is_error);
}

async fn limits_hold(sb: &dyn ToolHost) {
    // Long output is cut; endless output stops the command.
    let r = sb.run_tool("bash", &json!({"command": "yes | head -c 1200000"})).await;
    assert!(r.content.len() <= MAX_OUTPUT_BYTES + 60 && r.content.contains("[output truncated"), "{}", r.content.len());
    let started = Instant::now();
    let r = sb.run_tool("bash", &json!({"command": "cat /dev/zero"})).await;
    assert!(r.is_error && r.content.contains("[output truncated"));
    assert!(r.content.len() <= MAX_OUTPUT_BYTES + 100);
    assert!(started.elapsed() < Duration::from_secs(5), "cat /dev/zero ran on");

    // The wall clock stops a command, and what it left running.
    let started = Instant::now();
    let r = sb.run_tool("bash", &json!({"command": "(sleep 5; echo late > late.txt) & sleep 30"})).await;
    assert!(r.is_error && r.content.contains("longer than"), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let r = sb.run_tool("read", &json!({"path": "late.txt"})).await;
    assert!(r.is_error, "a background job outlived the command: {r:?}");

    // A command writes no file past the profile's disk.
    let r = sb.run_tool("bash", &json!({"command": "head -c 3000000 /dev/zero > big.bin; stat -c %s big.bin"})).await;
    let size: u64 = r.content.lines().rev().find_map(|l| l.trim().parse().ok()).unwrap_or(u64::MAX);
    assert!(size <= 1024 * 1024, "a file grew to {size} bytes: {r:?}");
}
