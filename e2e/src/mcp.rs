//! A real MCP server for tests: `e2e/fixtures/mcp_server.py`, from the
//! official MCP Python SDK (PyPI `mcp`), over streamable HTTP on a local
//! port. `.ci/run` installs the SDK; without it the tests that need the
//! server skip (or fail, under `CHECKFU_REQUIRE_SERVICES=1`).

use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct McpFixture {
    /// The MCP endpoint: `http://127.0.0.1:P/mcp`.
    pub url: String,
    /// `http://127.0.0.1:P`: the token endpoint is `{base}/token`.
    pub base: String,
    child: Child,
}

impl Drop for McpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the MCP Python SDK is importable.
pub fn sdk_present(what: &str) -> bool {
    let ok = Command::new("python3").args(["-c", "import mcp, uvicorn"]).status().is_ok_and(|s| s.success());
    if !ok {
        checkfu_core::testing::skip(what, "the MCP Python SDK (pip install mcp) is not installed");
    }
    ok
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("addr").port()
}

impl McpFixture {
    /// Starts the server accepting `Bearer <token>` (and the access tokens
    /// its own token endpoint issues); `extra` are more flags
    /// (`--refresh-token`, `--client-secret`, `--token-ttl`). `None` when
    /// the SDK is missing (and skipping is allowed).
    pub async fn start(what: &str, token: &str, extra: &[&str]) -> Option<McpFixture> {
        if !sdk_present(what) {
            return None;
        }
        let port = free_port();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/mcp_server.py");
        let child = Command::new("python3")
            .arg(script)
            .args(["--port", &port.to_string(), "--token", token])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs the MCP fixture");
        let base = format!("http://127.0.0.1:{port}");
        let f = McpFixture { url: format!("{base}/mcp"), base, child };
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return Some(f);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the MCP fixture never listened on {port}");
    }

    /// `{mcp_requests, refreshes, tool_calls}` so far.
    pub async fn stats(&self) -> Value {
        reqwest::get(format!("{}/control/stats", self.base)).await.expect("stats").json().await.expect("json")
    }

    /// Every later refresh answers `invalid_grant`.
    pub async fn deny_refreshes(&self) {
        reqwest::Client::new().post(format!("{}/control/deny", self.base)).send().await.expect("deny");
    }
}
