//! `checkfu files upload PATH` and `checkfu skills push DIR`, run as the
//! built binary against an installation, each with `--json`: uploads report
//! their progress on standard error, and a second push of a bundle makes
//! the skill's next version.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::Value;
use std::process::Command;

/// Runs `checkfu ARGS --server BASE --key KEY --json`: the JSON lines it
/// printed and its stderr, or its stderr when it failed.
fn checkfu(base: &str, key: &str, args: &[String]) -> Result<(Vec<Value>, String), String> {
    let out = Command::new(procs::binary()).args(args).args(["--server", base, "--key", key, "--json"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if !out.status.success() {
        return Err(stderr);
    }
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    Ok((text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}"))).collect(), stderr))
}

#[tokio::test(flavor = "multi_thread")]
async fn files_and_skills_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning::default()).await;
    let key = std::fs::read_to_string(dir.path().join("admin.key")).unwrap().trim().to_string();
    let (base, env) = (p.base.clone(), p.env_id.clone());
    let run = move |args: Vec<String>| {
        let (base, key) = (base.clone(), key.clone());
        async move { tokio::task::spawn_blocking(move || checkfu(&base, &key, &args)).await.unwrap() }
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    // A 3 MiB file: the bytes arrive whole, and progress is reported as they leave.
    let work = tempfile::tempdir().unwrap();
    let path = work.path().join("report.csv");
    let bytes: Vec<u8> = (0..3 * 1024 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
    std::fs::write(&path, &bytes).unwrap();
    let (out, progress) = run(s(&["files", "upload", path.to_str().unwrap(), "--environment", &env])).await.unwrap();
    let file = &out[0];
    assert_eq!((file["filename"].as_str(), file["media_type"].as_str()), (Some("report.csv"), Some("text/csv")));
    assert_eq!(file["size_bytes"], bytes.len());
    assert!(progress.contains("uploading report.csv: 100%"), "{progress}");
    assert!(progress.lines().count() >= 5, "a line per tenth on a pipe: {progress}");
    let (_, got, _) = p.admin.get_bytes(&format!("/v1/files/{}/content?length=8388608", id(file))).await;
    assert_eq!(got, bytes);
    let (listed, _) = run(s(&["files", "list", "--environment", &env])).await.unwrap();
    assert_eq!(listed.iter().map(id).collect::<Vec<_>>(), vec![id(file)]);
    let missing = run(s(&["files", "upload", "/nonexistent/x", "--environment", &env])).await.unwrap_err();
    assert!(missing.contains("/nonexistent/x"), "{missing}");
    let (deleted, _) = run(s(&["files", "delete", &id(file)])).await.unwrap();
    assert_eq!(deleted[0]["deleted"], true);

    // A bundle directory: pushed once (version 1), edited and pushed again (version 2).
    let bundle = work.path().join("greeting");
    std::fs::create_dir_all(bundle.join("scripts")).unwrap();
    std::fs::create_dir_all(bundle.join(".git")).unwrap();
    std::fs::write(bundle.join(".git/HEAD"), "ref").unwrap();
    std::fs::write(bundle.join("SKILL.md"), "---\nname: greeting\ndescription: Says hello\n---\n# v1\n").unwrap();
    std::fs::write(bundle.join("scripts/hi.sh"), "echo hi\n").unwrap();
    let (pushed, progress) = run(s(&["skills", "push", bundle.to_str().unwrap(), "--environment", &env])).await.unwrap();
    assert_eq!((pushed[0]["name"].as_str(), pushed[0]["latest_version"].as_i64()), (Some("greeting"), Some(1)));
    assert!(progress.contains("(2 files): 100%"), "{progress}");
    let skill = id(&pushed[0]);
    let v1 = p.admin.get(&format!("/v1/skills/{skill}/versions/1")).await;
    let paths: Vec<&str> = v1.1["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["SKILL.md", "scripts/hi.sh"], "hidden entries stay behind");
    std::fs::write(bundle.join("SKILL.md"), "---\nname: greeting\ndescription: Says hello twice\n---\n# v2\n").unwrap();
    let (again, _) = run(s(&["skills", "push", bundle.to_str().unwrap(), "--environment", &env])).await.unwrap();
    assert_eq!((again[0]["skill_id"].as_str(), again[0]["version"].as_i64()), (Some(skill.as_str()), Some(2)));
    let (skills, _) = run(s(&["skills", "list", "--environment", &env])).await.unwrap();
    assert_eq!(skills[0]["latest_version"], 2);
    let (archived, _) = run(s(&["skills", "archive", &skill])).await.unwrap();
    assert_eq!(archived[0]["status"], "archived");
    let refused = run(s(&["skills", "push", bundle.to_str().unwrap(), "--environment", &env, "--skill", &skill])).await.unwrap_err();
    assert!(refused.contains("409") && refused.contains("archived"), "{refused}");
    let empty = work.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let refused = run(s(&["skills", "push", empty.to_str().unwrap(), "--environment", &env])).await.unwrap_err();
    assert!(refused.contains("SKILL.md"), "{refused}");
    p.stop().await;
}
