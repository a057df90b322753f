//! The CLI run as a person runs it — the `checkfu` process against a live
//! `checkfu up` — over every resource family it manages, with its
//! conventions: names or ids (ambiguous → exit 2 listing them), the only
//! visible Environment by default, `--json`, `--quiet`, `--idempotency-key`,
//! and exit codes 0 / 1 (the API's error type on stderr) / 2.
#![cfg(test)]

use checkfu_e2e::procs;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn ok(self) -> String {
        assert_eq!(self.code, 0, "stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self.stdout
    }

    fn json(self) -> Value {
        let text = self.ok();
        serde_json::from_str(text.lines().next().unwrap_or_default()).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    fn json_lines(self) -> Vec<Value> {
        self.ok().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

struct Cli {
    base: String,
    key: String,
    cwd: std::path::PathBuf,
}

impl Cli {
    fn run_as(&self, key: &str, args: &[&str]) -> Out {
        let o =
            Command::new(procs::binary()).args(args).args(["--server", &self.base, "--key", key]).current_dir(&self.cwd).output().unwrap();
        Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into(),
            stderr: String::from_utf8_lossy(&o.stderr).into(),
        }
    }

    fn run(&self, args: &[&str]) -> Out {
        self.run_as(&self.key, args)
    }

    fn id(&self, args: &[&str]) -> String {
        let mut a = args.to_vec();
        a.push("-q");
        let out = self.run(&a).ok();
        let id = out.lines().next().unwrap_or_default().trim().to_string();
        assert!(id.contains('_'), "{args:?} printed no id: {out}");
        id
    }
}

fn start(dir: &Path) -> (procs::Proc, Cli) {
    let data = dir.join(".checkfu");
    std::fs::create_dir_all(&data).unwrap();
    let (up, base) = procs::up_with(&data, &["--allow-private-targets"], &[]);
    let key = std::fs::read_to_string(data.join("admin.key")).unwrap().trim().to_string();
    (up, Cli { base, key, cwd: dir.to_path_buf() })
}

/// An agent deployed on the scripted model: (agent name, deployment key).
fn deploy(cli: &Cli, name: &str) {
    cli.run(&["agents", "create", "--name", name, "--instructions", "Be brief."]).ok();
    cli.run(&["agents", "publish", name]).ok();
    cli.run(&["profiles", "sandbox", "create", "--name", &format!("{name}-sbx"), "--image", "debian:12"]).ok();
    cli.run(&["profiles", "routing", "create", "--name", &format!("{name}-route"), "--candidate", "scripted:scripted-1:low"]).ok();
    cli.run(&["deployments", "create", name, "--agent", name, "--route", &format!("{name}-route"), "--sandbox", &format!("{name}-sbx")])
        .ok();
}

#[test]
fn conventions_names_environments_exit_codes_idempotency() {
    let dir = tempfile::tempdir().unwrap();
    let (_up, cli) = start(dir.path());

    // The key file in the working directory is read by default.
    assert_eq!(
        Command::new(procs::binary())
            .args(["environments", "list", "-q", "--server", &cli.base])
            .current_dir(dir.path())
            .output()
            .unwrap()
            .status
            .code(),
        Some(0)
    );

    // The same --idempotency-key answers the first agent.
    let first = cli.run(&["agents", "create", "--name", "once", "--idempotency-key", "k-1", "--json"]).json();
    let again = cli.run(&["agents", "create", "--name", "once", "--idempotency-key", "k-1", "--json"]).json();
    assert_eq!(first["id"], again["id"]);
    assert_eq!(cli.run(&["agents", "list", "-q"]).ok().lines().count(), 1);
    // The same key with another request is refused: exit 1, the type on stderr.
    let reused = cli.run(&["agents", "create", "--name", "other", "--idempotency-key", "k-1"]);
    assert_eq!(reused.code, 1);
    assert!(reused.stderr.contains("409 idempotency.key_reused"), "{}", reused.stderr);

    // Names or ids: both reach the same agent.
    let by_name = cli.run(&["agents", "get", "once", "--json"]).json();
    let by_id = cli.run(&["agents", "get", first["id"].as_str().unwrap(), "--json"]).json();
    assert_eq!(by_name, by_id);
    let missing = cli.run(&["agents", "get", "nosuch"]);
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("not_found"), "{}", missing.stderr);

    // A second Environment: creating without --environment is a usage
    // error naming both; a name used in both is ambiguous, listing the ids.
    cli.run(&["environments", "create", "--name", "staging"]).ok();
    let which = cli.run(&["agents", "create", "--name", "twin"]);
    assert_eq!(which.code, 2, "{}", which.stderr);
    assert!(which.stderr.contains("default") && which.stderr.contains("staging"), "{}", which.stderr);
    let a = cli.id(&["agents", "create", "--name", "twin", "--environment", "default"]);
    let b = cli.id(&["agents", "create", "--name", "twin", "--environment", "staging"]);
    let ambiguous = cli.run(&["agents", "get", "twin"]);
    assert_eq!(ambiguous.code, 2);
    assert!(ambiguous.stderr.contains(&a) && ambiguous.stderr.contains(&b), "{}", ambiguous.stderr);
    assert_eq!(
        cli.run(&["agents", "get", &b, "--json"]).json()["environment_id"],
        cli.run(&["environments", "get", "staging", "--json"]).json()["id"]
    );
    // Disable and enable an Environment by name.
    assert_eq!(cli.run(&["environments", "disable", "staging", "--json"]).json()["disabled"], true);
    assert_eq!(cli.run(&["environments", "enable", "staging", "--json"]).json()["disabled"], false);

    // A usage error of clap's own is exit 2 too.
    assert_eq!(cli.run(&["agents", "create", "--nope"]).code, 2);
    // A key that is not valid: exit 1 with the API's type.
    let bad = cli.run_as("ck_not_a_key", &["agents", "list"]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("401 auth.invalid_key"), "{}", bad.stderr);
}

#[test]
fn identity_and_governance_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_up, cli) = start(dir.path());
    deploy(&cli, "helper");

    // Principals, Groups, keys.
    let bot = cli.id(&["principals", "create", "--name", "bot"]);
    assert!(cli.run(&["principals", "list"]).ok().contains("service  bot"));
    assert_eq!(cli.run(&["principals", "disable", "bot", "--json"]).json()["disabled"], true);
    assert_eq!(cli.run(&["principals", "enable", "bot", "--json"]).json()["disabled"], false);
    cli.run(&["groups", "create", "--name", "ops"]).ok();
    cli.run(&["groups", "add", "ops", "bot"]).ok();
    assert_eq!(cli.run(&["groups", "get", "ops", "--json"]).json()["member_ids"], serde_json::json!([bot]));
    cli.run(&["groups", "remove", "ops", "bot"]).ok();
    assert_eq!(cli.run(&["groups", "list", "--json"]).json()["member_ids"], serde_json::json!([]));
    let made = cli.run(&["keys", "create", "bot", "--name", "ci"]).ok();
    let secret = made.lines().find_map(|l| l.strip_prefix("secret (shown once; keep it): ")).unwrap().to_string();
    assert!(secret.starts_with("ck_"));
    let key_id = made.split_whitespace().next().unwrap().to_string();
    assert!(cli.run(&["keys", "list", "bot"]).ok().contains(&key_id));
    assert!(!cli.run(&["keys", "list", "bot", "--json"]).ok().contains(&secret), "a list never shows a secret");

    // The bot may not create an agent: refused, exit 1 (it cannot even read
    // the Environment, so it is named by id).
    let env = cli.run(&["environments", "list", "-q"]).ok().trim().to_string();
    let refused = cli.run_as(&secret, &["agents", "create", "--name", "x", "--environment", &env]);
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("403 permission.denied"), "{}", refused.stderr);

    // Grants, read as sentences; revoking takes effect.
    let grant = cli.run(&["grants", "create", "--subject", "principal:bot", "--permission", "invoke", "--resource", "agent:helper"]).ok();
    assert!(grant.contains("principal bot  may invoke  on agent helper"), "{grant}");
    let pa = grant.split_whitespace().next().unwrap().to_string();
    assert!(cli.run(&["grants", "list", "--subject", "principal:bot"]).ok().contains(&pa));
    assert_eq!(cli.run(&["grants", "get", &pa, "--json"]).json()["permission"], "invoke");
    let session = cli.id(&["session", "create", "helper", "--principal", "bot"]);
    assert!(session.starts_with("sess_"));
    cli.run(&["grants", "revoke", &pa]).ok();
    let denied = cli.run(&["session", "create", "helper", "--principal", "bot"]);
    assert_eq!(denied.code, 1);
    assert!(denied.stderr.contains("permission.denied"), "{}", denied.stderr);

    // Policies and the dry run.
    let policy = cli.run(&["policies", "create", "--name", "no-bash", "--rule", "principal:* tool:bash invoke deny", "--json"]).json();
    assert_eq!(policy["rules"].as_array().unwrap().len(), 1);
    let verdict = cli.run(&["policies", "evaluate", "--subject", "principal:bot", "--tool", "bash"]).ok();
    assert!(verdict.starts_with("deny"), "{verdict}");
    cli.run(&["policies", "update", "no-bash", "--rule", "principal:* tool:bash invoke allow"]).ok();
    assert!(cli.run(&["policies", "evaluate", "--subject", "principal:bot", "--tool", "bash"]).ok().starts_with("allow"));
    cli.run(&["policies", "delete", "no-bash"]).ok();
    assert_eq!(cli.run(&["policies", "list", "-q"]).ok(), "");

    // The audit log: by resource (an id, or kind:name), by actor, bounded.
    let about_bot = cli.run(&["audit", "list", "--resource", "principal:bot", "--limit", "0"]).ok();
    assert!(about_bot.contains("principal.created") && about_bot.contains(&bot), "{about_bot}");
    let about_grant = cli.run(&["audit", "list", "--resource", &pa]).ok();
    assert!(about_grant.contains("permission_assignment.created"), "{about_grant}");
    assert_eq!(about_grant.lines().count(), 2, "created and revoked: {about_grant}");
    assert_eq!(cli.run(&["audit", "list", "--actor", "admin", "--limit", "3"]).ok().lines().count(), 3);

    // Revoking the key ends it.
    cli.run(&["keys", "revoke", &key_id]).ok();
    assert!(cli.run_as(&secret, &["agents", "list"]).stderr.contains("auth.invalid_key"));
    assert_eq!(cli.run(&["keys", "revoke", "bot"]).code, 2, "a key is named by its id");
}

#[test]
fn agents_deployments_profiles_sessions_and_budgets() {
    let dir = tempfile::tempdir().unwrap();
    let (_up, cli) = start(dir.path());
    deploy(&cli, "helper");

    // Draft from a file, publish, versions, diff.
    std::fs::write(dir.path().join("draft.json"), r#"{"instructions": "Be terse.", "tools": [{"type": "builtin", "name": "bash"}]}"#)
        .unwrap();
    cli.run(&["agents", "edit", "helper", "--draft-file", "draft.json"]).ok();
    assert!(cli.run(&["agents", "draft", "helper"]).ok().contains("Be terse."));
    assert!(cli.run(&["agents", "publish", "helper"]).ok().starts_with("v2"));
    assert_eq!(cli.run(&["agents", "versions", "helper", "-q"]).ok().lines().count(), 0, "versions have no id");
    assert_eq!(cli.run(&["agents", "versions", "helper"]).ok().lines().count(), 2);
    let diff = cli.run(&["agents", "diff", "helper", "1", "2"]).ok();
    assert!(diff.contains(r#"~ /instructions: "Be brief." → "Be terse.""#), "{diff}");
    assert!(diff.contains(r#"+ /tools/0: {"name":"bash","type":"builtin"}"#), "{diff}");
    let patch = cli.run(&["agents", "diff", "helper", "1", "2", "--json"]).json();
    assert!(patch.as_array().unwrap().iter().any(|op| op["path"] == "/instructions"));
    assert!(cli.run(&["agents", "diff", "helper", "2"]).ok().contains("(no difference)"), "v2 is the draft");
    assert_eq!(cli.run(&["agents", "version", "helper", "2", "--json"]).json()["version"], 2);

    // Deployments re-pinned; profiles revised and listed.
    let dep = cli.run(&["deployments", "revise", "helper", "--agent-version", "latest", "--json"]).json();
    assert_eq!((dep["revision"].as_i64(), dep["pins"]["agent_version"].as_i64()), (Some(2), Some(2)));
    assert!(cli.run(&["deployments", "list"]).ok().contains("helper  r2"));
    let rev =
        cli.run(&["profiles", "sandbox", "revise", "helper-sbx", "--image", "debian:13", "--allow-host", "example.com", "--json"]).json();
    assert_eq!(rev["revision"], 2);
    assert_eq!(cli.run(&["profiles", "sandbox", "revision", "helper-sbx", "2", "--json"]).json()["image"], "debian:13");
    assert!(cli.run(&["profiles", "routing", "list"]).ok().contains("scripted:scripted-1:low"));
    assert!(cli.run(&["profiles", "routing", "endpoints"]).ok().contains("openai"));
    assert!(cli.run(&["profiles", "sandbox", "get", "helper-sbx"]).ok().contains("debian:13"));

    // Sessions: create with a message, list, follow to idle, threads,
    // follow one thread, interrupt, archive.
    let s = cli.id(&["session", "create", "helper", "--message", "hello", "--title", "first"]);
    let events = cli.run(&["session", "follow", &s, "--exit-on-idle", "--json"]).json_lines();
    assert_eq!(events.last().unwrap()["type"], "session.status_idle");
    assert!(events.iter().any(|e| e["type"] == "agent.message"));
    assert_eq!(cli.run(&["session", "get", "first", "--json"]).json()["id"], s.as_str(), "a Session is named by its title");
    assert!(cli.run(&["session", "list", "--deployment", "helper"]).ok().contains(&s));
    let threads = cli.run(&["session", "threads", &s, "--json"]).json_lines();
    assert_eq!(threads.len(), 1);
    let primary = threads[0]["id"].as_str().unwrap();
    let one = cli.run(&["session", "follow", &s, "--exit-on-idle", "--thread", primary]).ok();
    assert!(one.contains("echo: hello") && one.trim_end().ends_with("end_turn"), "{one}");
    let no_thread = cli.run(&["session", "follow", &s, "--thread", "sthr_00000000000000000000000000"]);
    assert_eq!(no_thread.code, 2, "{}", no_thread.stderr);
    let interrupt = cli.run(&["session", "interrupt", &s, "--json"]).json();
    assert_eq!(interrupt["type"], "user.interrupt");

    // Budgets on the Session.
    let bud = cli.run(&["budgets", "create", "--session", &s, "--limit", "1000000", "--json"]).json();
    let b = bud["id"].as_str().unwrap();
    assert_eq!(cli.run(&["budgets", "raise", b, "--limit", "2000000", "--json"]).json()["limit"], 2000000);
    assert_eq!(cli.run(&["budgets", "pause", b, "--json"]).json()["status"], "paused");
    assert_eq!(cli.run(&["budgets", "resume", b, "--json"]).json()["status"], "active");
    assert!(cli.run(&["budgets", "list"]).ok().contains(b));
    cli.run(&["budgets", "detach", b]).ok();

    assert_eq!(cli.run(&["session", "archive", &s, "--json"]).json()["status"], "terminated");
    let late = cli.run(&["session", "send", &s, "too late"]);
    assert_eq!(late.code, 1);
    assert!(late.stderr.contains("409"), "{}", late.stderr);
    cli.run(&["agents", "archive", "helper"]).ok();
    assert!(cli.run(&["agents", "list"]).ok().contains("archived"));
    cli.run(&["profiles", "sandbox", "archive", "helper-sbx"]).ok();
}

#[test]
fn webhooks_runners_vaults_and_standing_approvals() {
    let dir = tempfile::tempdir().unwrap();
    let (_up, cli) = start(dir.path());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());

    let made = cli.run(&["webhooks", "create", "--url", &url, "--event-type", "session.status_idle"]).ok();
    assert!(made.contains("signing secret (shown once; keep it): whsec_"), "{made}");
    let w = made.split_whitespace().next().unwrap().to_string();
    assert!(!cli.run(&["webhooks", "get", &w]).ok().contains("whsec_"), "never shown again");
    assert_eq!(cli.run(&["webhooks", "update", &url, "--disabled", "true", "--json"]).json()["disabled"], true, "named by its URL");
    assert!(cli.run(&["webhooks", "rotate-secret", &w]).ok().contains("whsec_"));
    assert_eq!(cli.run(&["webhooks", "deliveries", &w]).ok(), "");
    assert!(cli.run(&["webhooks", "list"]).ok().contains(&w));
    cli.run(&["webhooks", "delete", &w]).ok();
    assert_eq!(cli.run(&["webhooks", "list"]).ok(), "");

    // A pairing code; redeemed, the Runner is listed, then revoked.
    cli.run(&["principals", "create", "--name", "edge-bot"]).ok();
    let pair = cli.run(&["runners", "pair", "--principal", "edge-bot", "--pool", "edge"]).ok();
    let code = pair.lines().next().unwrap().rsplit(' ').next().unwrap().to_string();
    assert!(pair.contains(&format!("checkfu runner --server {} --pairing-code {code} --pool edge", cli.base)), "{pair}");
    let redeemed = Command::new(procs::binary())
        .args(["runner", "redeem", "--server", &cli.base, "--pairing-code", &code, "--print-credential"])
        .output()
        .unwrap();
    assert!(redeemed.status.success(), "{}", String::from_utf8_lossy(&redeemed.stderr));
    let runners = cli.run(&["runners", "list", "--json"]).json_lines();
    assert_eq!(runners.len(), 1);
    let r = runners[0]["id"].as_str().unwrap();
    assert_eq!(cli.run(&["runners", "get", r, "--json"]).json()["pool"], "edge");
    assert_eq!(cli.run(&["runners", "revoke", r, "--json"]).json()["status"], "revoked");

    // Vaults of Connections, granted to a principal.
    cli.run(&["connections", "create", "--name", "mcp", "--url", &format!("http://{}/mcp", listener.local_addr().unwrap())]).ok();
    let v = cli.run(&["vaults", "create", "--name", "team", "--connection", "mcp", "--grantee", "principal:edge-bot", "--json"]).json();
    assert_eq!(v["connection_ids"].as_array().unwrap().len(), 1);
    assert!(cli.run(&["vaults", "list"]).ok().contains("team"));
    assert_eq!(cli.run(&["vaults", "archive", "team", "--json"]).json()["status"], "archived");
    assert_eq!(cli.run(&["approvals", "standing"]).ok(), "");
    assert_eq!(cli.run(&["approvals", "revoke-standing", "team"]).code, 2);
}
