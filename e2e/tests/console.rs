//! The web console (`console/`, served at `/console/`) tested the way people
//! use it: its own tests drive a real headless Chromium (the distribution's
//! package, through playwright-core) against live `checkfu up` processes of
//! this build, saving screenshots into docs/console/. The committed
//! `console/dist` must be exactly what its sources build. `.ci/run`
//! installs Node, Chromium and the console's dev dependencies; without
//! them the test skips (or fails, under `CHECKFU_REQUIRE_SERVICES=1`).
#![cfg(test)]

use std::path::PathBuf;
use std::process::Command;

fn console_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../console"))
}

fn runs(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok_and(|o| o.status.success())
}

fn chromium() -> String {
    std::env::var("CHECKFU_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into())
}

/// Installs the console's pinned dev dependencies when missing; false
/// (after reporting the skip) when that is not possible.
fn ready(what: &str) -> bool {
    if !runs("node") || !runs("npm") {
        checkfu_core::testing::skip(what, "Node.js and npm are not installed");
        return false;
    }
    let dir = console_dir();
    if !dir.join("node_modules/playwright-core").exists() {
        let ci = Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&dir).output().unwrap();
        if !ci.status.success() {
            checkfu_core::testing::skip(what, &format!("npm ci failed: {}", String::from_utf8_lossy(&ci.stderr)));
            return false;
        }
    }
    true
}

#[test]
fn the_committed_console_is_what_its_sources_build() {
    if !ready("the console's build check") {
        return;
    }
    let out = Command::new("node").args(["scripts/build.mjs", "--check"]).current_dir(console_dir()).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
}

#[test]
fn the_console_passes_its_browser_tests_against_a_live_server() {
    if !ready("the console's browser tests") {
        return;
    }
    if !runs(&chromium()) {
        checkfu_core::testing::skip("the console's browser tests", &format!("no Chromium at {} (apt-get install chromium)", chromium()));
        return;
    }
    let out = Command::new("npm")
        .arg("test")
        .current_dir(console_dir())
        .env("CHECKFU_BIN", checkfu_e2e::procs::binary())
        .env("CHECKFU_CHROMIUM", chromium())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the console's tests failed:\n{text}");
    assert!(text.contains("# fail 0"), "the console's tests reported no result:\n{text}");
}
