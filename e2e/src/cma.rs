//! The CMA contract (api.md §17.15): `e2e/fixtures/cma/contract.py` drives
//! an embedded installation through the official Anthropic Python SDK
//! (PyPI `anthropic`, pinned there). `.ci/run` installs the SDK; without it
//! the tests skip (or fail, under `CHECKFU_REQUIRE_SERVICES=1`).

use crate::{Api, id};
use serde_json::json;
use std::process::Command;

/// The SDK version the contract pins (`PINNED` in contract.py).
pub const SDK_VERSION: &str = "2.14.0";

/// Whether the pinned SDK is importable; a different version is not
/// skipped over: the contract's `surface` check reports it.
pub fn sdk_present(what: &str) -> bool {
    let ok = Command::new("python3").args(["-c", "import anthropic"]).status().is_ok_and(|s| s.success());
    if !ok {
        checkfu_core::testing::skip(what, &format!("the Anthropic Python SDK (pip install anthropic=={SDK_VERSION}) is not installed"));
    }
    ok
}

/// Runs one check of the contract against the installation at `base`
/// (`http://host:port`) as the holder of `key`; panics with the script's
/// output when it fails.
pub fn check(name: &str, base: &str, key: &str) {
    check_with(name, base, key, &[]);
}

/// [`check`] with more arguments (`--mcp URL` for the vault check).
pub fn check_with(name: &str, base: &str, key: &str, extra: &[&str]) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/cma/contract.py");
    let out = Command::new("python3")
        .arg(script)
        .args([name, "--base", base, "--key", key])
        .args(extra)
        .output()
        .expect("python3 runs the contract");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the CMA contract check {name} failed:\n{text}");
    assert!(text.contains(&format!("ok {name}")), "the check {name} reported nothing:\n{text}");
}

/// Routes every CMA model name (`cma:*`) in the default workspace to the
/// scripted model, as an embedded installation does from its start; a mesh
/// starts with no route, and the projection refuses an agent whose model
/// nothing routes.
pub async fn route_models(admin: &Api) {
    let envs = admin.get("/v1/environments").await.1;
    let default = envs["data"].as_array().into_iter().flatten().find(|e| e["name"] == "default").expect("a default workspace");
    let route = json!({"environment_id": id(default), "name": "cma:*", "candidates": [{"provider": "scripted", "model": "scripted-1", "effort": "low"}]});
    let r = admin.post("/v1/model-routing-profiles", route).await;
    assert!(r.0.is_success() || r.0.as_u16() == 409, "routing CMA model names: {}", r.1);
}
