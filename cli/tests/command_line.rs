//! The command line's shape: clap's own consistency checks, and no
//! subcommand argument sharing an id with a global one (`--key`, `--json`,
//! ...), which clap would silently merge — a deployment's KEY read as the
//! API key.

use clap::{CommandFactory, Parser};

#[derive(Parser)]
#[command(name = "checkfu")]
struct Cli {
    #[command(subcommand)]
    command: checkfu_cli::Command,
}

fn walk(cmd: &clap::Command, path: &str, globals: &[String], found: &mut Vec<String>) {
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str().to_string();
        if globals.contains(&id) && !arg.is_global_set() {
            found.push(format!("{path}: {id}"));
        }
    }
    for sub in cmd.get_subcommands() {
        walk(sub, &format!("{path} {}", sub.get_name()), globals, found);
    }
}

#[test]
fn the_command_line_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn no_argument_shadows_a_global_one() {
    let cmd = Cli::command();
    let globals = ["server", "key", "key_file", "json"].map(String::from);
    let mut found = vec![];
    walk(&cmd, "checkfu", &globals, &mut found);
    assert!(found.is_empty(), "arguments sharing a global's id: {found:?}");
}

#[test]
fn every_create_takes_an_idempotency_key() {
    fn creates(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for sub in cmd.get_subcommands() {
            let p = format!("{path} {}", sub.get_name());
            if ["create", "publish", "pair", "upload", "push"].contains(&sub.get_name())
                && !sub.get_arguments().any(|a| a.get_id() == "idempotency_key")
            {
                missing.push(p.clone());
            }
            creates(sub, &p, missing);
        }
    }
    let mut missing = vec![];
    creates(&Cli::command(), "checkfu", &mut missing);
    assert!(missing.is_empty(), "creates without --idempotency-key: {missing:?}");
}

#[test]
fn every_command_says_what_it_does() {
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let p = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() {
                missing.push(p.clone());
            }
            walk(sub, &p, missing);
        }
    }
    let mut missing = vec![];
    walk(&Cli::command(), "checkfu", &mut missing);
    assert!(missing.is_empty(), "commands without a description: {missing:?}");
}

/// docs/cli.md names every command (`checkfu agents publish`), so the
/// reference cannot fall behind the command line.
#[test]
fn docs_cli_lists_every_command() {
    fn leaves(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        let subs: Vec<_> = cmd.get_subcommands().filter(|s| s.get_name() != "help").collect();
        if subs.is_empty() {
            out.push(path.to_string());
        }
        for sub in subs {
            leaves(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cli.md")).unwrap();
    let mut all = vec![];
    leaves(&Cli::command(), "checkfu", &mut all);
    let missing: Vec<_> = all.iter().filter(|c| !docs.contains(&format!("`{c}"))).collect();
    assert!(missing.is_empty(), "docs/cli.md does not list: {missing:?}");
}
