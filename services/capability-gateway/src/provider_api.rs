//! A provider adapter's REST call (api.md §18.9), served to the scheduler:
//! registering, checking and removing a webhook at a provider such as
//! GitHub goes through an `http` Connection of the Automation's
//! Environment, so the provider's token stays here — injected into the
//! request, redacted from the answer, never sent back over the mesh.
//!
//! The request goes only to the Connection's own URL (the path is appended
//! to it, never a host of the caller's choosing), through the same target
//! checks as every outbound call (public addresses unless the installation
//! allows private ones, no redirects followed).

use crate::connections::ReachService;
use crate::model::*;
use checkfu_core::id::ConnectionId;
use checkfu_core::net;
use serde_json::Value;
use std::time::Duration;

/// How long one provider call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// The largest answer read; a larger one comes back without its body.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;
const MAX_PATH_BYTES: usize = 2048;

/// One call, as the adapter asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderCall {
    pub environment_id: String,
    pub connection_id: String,
    pub method: String,
    pub path: String,
    pub body: Option<Value>,
}

/// How it went: an HTTP answer, or why there was none and whether the
/// request may have arrived anyway.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderAnswer {
    /// `answered`, `not_sent` or `indeterminate`.
    pub outcome: &'static str,
    pub status: u16,
    /// The answer's JSON (secrets redacted), `None` when it was not JSON.
    pub body: Option<Value>,
    pub code: String,
    pub message: String,
}

impl ProviderAnswer {
    fn not_sent(code: &str, message: impl Into<String>) -> Self {
        ProviderAnswer { outcome: "not_sent", status: 0, body: None, code: code.into(), message: message.into() }
    }
}

/// A path the adapter may append: `/`-rooted, printable, no `..`
/// segment, no fragment, within the length limit.
fn path_allowed(path: &str) -> bool {
    path.starts_with('/')
        && !path.starts_with("//")
        && path.len() <= MAX_PATH_BYTES
        && !path.contains('#')
        && !path.chars().any(|c| c.is_control() || c.is_whitespace())
        && !path.split(['/', '?']).any(|seg| seg == "..")
}

impl ReachService {
    pub async fn call_provider_api(&self, c: ProviderCall) -> ProviderAnswer {
        let method = match c.method.as_str() {
            "GET" => reqwest::Method::GET,
            "POST" => reqwest::Method::POST,
            "PATCH" => reqwest::Method::PATCH,
            "DELETE" => reqwest::Method::DELETE,
            other => return ProviderAnswer::not_sent("provider.request_invalid", format!("{other:?} is not GET, POST, PATCH or DELETE")),
        };
        if !path_allowed(&c.path) {
            return ProviderAnswer::not_sent("provider.request_invalid", "the path must start with / and hold no .. segment");
        }
        let Ok(connection_id) = ConnectionId::parse("connection_id", &c.connection_id) else {
            return ProviderAnswer::not_sent("connection.unavailable", format!("{:?} is not a Connection id", c.connection_id));
        };
        let connection = match self.store.get_connection(&connection_id).await {
            Ok(Some(x)) if x.environment_id.as_str() == c.environment_id => x,
            Ok(_) => {
                return ProviderAnswer::not_sent(
                    "connection.unavailable",
                    format!("connection {} is not in this Environment", c.connection_id),
                );
            }
            Err(e) => return ProviderAnswer::not_sent("connection.unavailable", e.message),
        };
        if connection.kind != ConnectionKind::Http {
            return ProviderAnswer::not_sent("connection.kind_mismatch", "a provider is reached through an http Connection");
        }
        if connection.status != ConnectionStatus::Active {
            return ProviderAnswer::not_sent("connection.unavailable", format!("connection {} is disabled or revoked", connection.id));
        }
        let (up, secrets) = match self.upstream(&connection, false).await {
            Ok(u) => u,
            Err(f) => return ProviderAnswer::not_sent(&f.code, f.message),
        };
        let url = format!("{}{}", up.url.trim_end_matches('/'), c.path);
        let Ok(parsed) = reqwest::Url::parse(&url) else {
            return ProviderAnswer::not_sent("provider.request_invalid", "the Connection's URL and the path do not make a URL");
        };
        let target = match net::http_target(&parsed) {
            Ok(t) => t,
            Err(e) => return ProviderAnswer::not_sent("provider.unreachable", e.message),
        };
        let addr = match net::resolve_target(&target.0, target.1, up.allow_private).await {
            Ok(a) => a,
            Err(e) => return ProviderAnswer::not_sent("provider.unreachable", e.message),
        };
        let client = crate::targets::pinned_client(&target.0, addr)
            .default_headers(up.headers.clone())
            .connect_timeout(Duration::from_secs(10))
            .timeout(CALL_TIMEOUT)
            .user_agent(concat!("checkfu/", env!("CARGO_PKG_VERSION")))
            .build();
        let Ok(client) = client else { return ProviderAnswer::not_sent("provider.unreachable", "no HTTP client could be made") };
        let mut req = client.request(method, parsed).header(http::header::ACCEPT, "application/json");
        if let Some(b) = &c.body {
            req = req.json(b);
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() => return ProviderAnswer::not_sent("provider.unreachable", "the provider could not be reached"),
            Err(e) => {
                let code = if e.is_timeout() { "provider.timeout" } else { "provider.transport" };
                return ProviderAnswer {
                    outcome: "indeterminate",
                    status: 0,
                    body: None,
                    code: code.into(),
                    message: "the request may have reached the provider; no answer came back".into(),
                };
            }
        };
        let status = resp.status().as_u16();
        let body = read_json(resp, &secrets).await;
        ProviderAnswer { outcome: "answered", status, body, code: String::new(), message: String::new() }
    }
}

/// The answer's body as JSON with every secret redacted; `None` when it is
/// not JSON, is empty, or exceeds the limit.
async fn read_json(mut resp: reqwest::Response, secrets: &[String]) -> Option<Value> {
    let mut bytes = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
            return None;
        }
        bytes.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(bytes).ok()?;
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    serde_json::from_str(&redact(&text, &secrets)).ok()
}

#[cfg(test)]
mod tests {
    use super::path_allowed;

    #[test]
    fn only_a_rooted_path_without_climbing_is_appended() {
        assert!(path_allowed("/repos/o/r/hooks"));
        assert!(path_allowed("/repos/o/r/hooks/12?per_page=1"));
        for bad in ["repos/o", "//evil.example/x", "/a/../b", "/a/..?x", "/a b", "/a#frag", "/a\n"] {
            assert!(!path_allowed(bad), "{bad:?}");
        }
    }
}
