//! The TypeScript SDK (`sdk/typescript`, `@checkfu/sdk`) tested the way its
//! users run it: its own tests, with Node's test runner, against live
//! `checkfu up` processes of this build. They type-check under `tsc
//! --strict`, and fail when the committed generated types differ from what
//! the served OpenAPI document generates. `.ci/run` installs Node and the
//! package's dev dependencies (`npm ci`); without Node the test skips (or
//! fails, under `CHECKFU_REQUIRE_SERVICES=1`).
#![cfg(test)]

use std::path::PathBuf;
use std::process::Command;

fn sdk_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk/typescript"))
}

fn runs(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok_and(|o| o.status.success())
}

#[test]
fn the_typescript_sdk_passes_its_tests_against_a_live_server() {
    if !runs("node") || !runs("npm") {
        checkfu_core::testing::skip("the TypeScript SDK's tests", "Node.js and npm are not installed");
        return;
    }
    let dir = sdk_dir();
    if !dir.join("node_modules/typescript").exists() {
        // The lock file pins every dev dependency; nothing is needed at run time.
        let ci = Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&dir).output().unwrap();
        if !ci.status.success() {
            checkfu_core::testing::skip("the TypeScript SDK's tests", &format!("npm ci failed: {}", String::from_utf8_lossy(&ci.stderr)));
            return;
        }
    }
    let out = Command::new("npm").arg("test").current_dir(&dir).env("CHECKFU_BIN", checkfu_e2e::procs::binary()).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the SDK's tests failed:\n{text}");
    assert!(text.contains("# fail 0"), "the SDK's tests reported no result:\n{text}");
}
