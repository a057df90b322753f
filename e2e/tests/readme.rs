//! The README's walk-through, run as written: its commands between the
//! `walkthrough` markers, in bash, with `checkfu` on the PATH (this build's
//! debug binary), in a directory where `checkfu up` keeps `.checkfu` — only
//! the server's address comes from `CHECKFU_SERVER`, as a reader on another
//! port would set it.
#![cfg(test)]

use checkfu_e2e::procs;
use std::process::Command;

fn walkthrough() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let start = readme.find("<!-- walkthrough:begin -->").expect("the README marks its walk-through");
    let end = readme.find("<!-- walkthrough:end -->").unwrap();
    let block = &readme[start..end];
    let body = block.split("```sh\n").nth(1).and_then(|b| b.split("\n```").next()).expect("a sh block");
    body.to_string()
}

#[test]
fn the_readme_walkthrough_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join(".checkfu");
    std::fs::create_dir_all(&data).unwrap();
    let (_up, base) = procs::up(&data);
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(procs::binary(), bin.join("checkfu")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &walkthrough()])
        .current_dir(dir.path())
        .env("PATH", path)
        .env("CHECKFU_SERVER", &base)
        .env_remove("CHECKFU_API_KEY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = format!("{stdout}\n--- stderr ---\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the walk-through failed:\n{text}");
    // Step 4: the first Session answered, and follow stopped at its idle.
    assert!(stdout.contains("agent.message              echo: hello"), "{text}");
    // Step 5: followed to the *current* idle (its second turn), the refusal
    // explained with the agent's version and the fix.
    assert!(stdout.contains(r#"policy.denied              denied: "read" is not a tool this agent declares"#), "{text}");
    assert!(stdout.contains(r#"why: agent "helper" version 1 declares no tools"#), "{text}");
    assert!(stdout.contains(r#"fix: add {"type":"builtin","name":"read"}"#), "{text}");
    // Step 6: the diff, and the new Session's read allowed and run.
    assert!(stdout.contains(r#"+ /tools/0: {"name":"read","type":"builtin"}"#), "{text}");
    assert!(stdout.contains(r#"read {"path":"notes.txt"} [allow]"#), "{text}");
    assert!(stdout.contains("agent.tool_result"), "{text}");
}
