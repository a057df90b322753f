//! The MCP client (the official Rust SDK, `rmcp`, over streamable HTTP):
//! discovery (`initialize`, paginated `tools/list`) and one `tools/call`.
//!
//! Each use opens its own MCP session and closes it, so no two Sessions
//! (and no two calls) ever share one. The credential travels only as
//! default headers of the HTTP client built for that use (marked
//! sensitive), never through rmcp's own configuration. The host is
//! resolved and checked here (public unless private targets are allowed)
//! and the connection pinned to that address; redirects are not followed.
//!
//! Results and protocol types are read as JSON (`serde_json::Value`), so
//! the formatting of a result depends on the wire format, not on the SDK's
//! Rust types.

use checkfu_core::net;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{ClientInitializeError, RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{StreamableHttpClientTransportConfig, StreamableHttpError};
use serde_json::{Value, json};
use std::time::Duration;

/// A response body (or SSE event) larger than this is refused.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// Discovery (connect, initialize and every `tools/list` page) gives up
/// after this long.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a call goes and with what.
#[derive(Clone)]
pub struct Upstream {
    pub url: String,
    /// The credential's headers (sensitive), or none.
    pub headers: http::HeaderMap,
    pub allow_private: bool,
}

/// How a use of an MCP server failed. `Display` is the `is_error` text's
/// code; messages are the platform's own words, never upstream text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpFailure {
    Timeout,
    Unreachable,
    Http(u16),
    AuthenticationFailed,
    Protocol,
    /// A JSON-RPC error answer: its message (upstream text, redacted by
    /// the caller before it goes anywhere).
    JsonRpc(String),
    TooLarge,
}

impl McpFailure {
    /// The code an `is_error` result starts with.
    pub fn code(&self) -> String {
        match self {
            McpFailure::Timeout => "mcp.timeout".into(),
            McpFailure::Unreachable => "mcp.unreachable".into(),
            McpFailure::Http(s) => format!("mcp.http_{s}"),
            McpFailure::AuthenticationFailed => "mcp.authentication_failed".into(),
            McpFailure::Protocol => "mcp.protocol_error".into(),
            McpFailure::JsonRpc(_) => "mcp.error".into(),
            McpFailure::TooLarge => "mcp.response_too_large".into(),
        }
    }

    /// A sync error's `type`.
    pub fn sync_type(&self) -> &'static str {
        match self {
            McpFailure::Timeout => "timeout",
            McpFailure::Unreachable => "unreachable",
            McpFailure::AuthenticationFailed | McpFailure::Http(401 | 403) => "authentication_failed",
            _ => "protocol_error",
        }
    }

    pub fn message(&self) -> String {
        match self {
            McpFailure::Timeout => "the MCP server did not answer in time".into(),
            McpFailure::Unreachable => "the MCP server could not be reached".into(),
            McpFailure::Http(s) => format!("the MCP server answered HTTP {s}"),
            McpFailure::AuthenticationFailed => "the MCP server refused the Connection's credential".into(),
            McpFailure::Protocol => "the MCP server's answer did not follow the protocol".into(),
            McpFailure::JsonRpc(m) => format!("the MCP server answered with an error: {m}"),
            McpFailure::TooLarge => format!("the MCP server's answer is larger than {} MiB", MAX_RESPONSE_BYTES / (1024 * 1024)),
        }
    }
}

/// The leading status of rmcp's `UnexpectedServerResponse("HTTP 401 ...")`.
fn status_in(text: &str) -> Option<u16> {
    text.strip_prefix("HTTP ")?.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Classifies an error by walking its sources: the first one known decides.
fn classify(e: &(dyn std::error::Error + 'static)) -> McpFailure {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            return match h {
                StreamableHttpError::AuthRequired(_) => McpFailure::AuthenticationFailed,
                StreamableHttpError::InsufficientScope(_) => McpFailure::Http(403),
                StreamableHttpError::HttpStatus(s) => McpFailure::Http(s.status),
                StreamableHttpError::UnexpectedServerResponse(text) => match status_in(text) {
                    Some(401) => McpFailure::AuthenticationFailed,
                    Some(s) => McpFailure::Http(s),
                    None => McpFailure::Protocol,
                },
                StreamableHttpError::ResponseBodyTooLarge { .. } => McpFailure::TooLarge,
                StreamableHttpError::Client(r) => reqwest_failure(r),
                StreamableHttpError::Io(_) | StreamableHttpError::TransportChannelClosed => McpFailure::Unreachable,
                StreamableHttpError::Sse(s) if s.to_string().contains("exceed") => McpFailure::TooLarge,
                StreamableHttpError::SessionExpired => McpFailure::Http(404),
                _ => McpFailure::Protocol,
            };
        }
        if let Some(r) = err.downcast_ref::<reqwest::Error>() {
            return reqwest_failure(r);
        }
        // Its transport error is not a `source()`: follow it by hand.
        if let Some(i) = err.downcast_ref::<ClientInitializeError>() {
            return match i {
                ClientInitializeError::TransportError { error, .. } => classify(error.error.as_ref()),
                ClientInitializeError::JsonRpcError(d) => McpFailure::JsonRpc(d.message.to_string()),
                ClientInitializeError::ConnectionClosed(_) => McpFailure::Unreachable,
                _ => McpFailure::Protocol,
            };
        }
        if let Some(t) = err.downcast_ref::<rmcp::transport::DynamicTransportError>() {
            return classify(t.error.as_ref());
        }
        if let Some(s) = err.downcast_ref::<ServiceError>() {
            match s {
                ServiceError::McpError(d) => return McpFailure::JsonRpc(d.message.to_string()),
                ServiceError::Timeout { .. } => return McpFailure::Timeout,
                ServiceError::TransportClosed => return McpFailure::Unreachable,
                _ => {}
            }
        }
        cur = err.source();
    }
    McpFailure::Protocol
}

fn reqwest_failure(r: &reqwest::Error) -> McpFailure {
    if r.is_timeout() {
        McpFailure::Timeout
    } else if let Some(s) = r.status() {
        if s.as_u16() == 401 { McpFailure::AuthenticationFailed } else { McpFailure::Http(s.as_u16()) }
    } else if r.is_decode() || r.is_body() {
        McpFailure::Protocol
    } else {
        McpFailure::Unreachable
    }
}

type Session = RunningService<RoleClient, ClientConfig>;

/// Opens an MCP session: resolve and check the host, pin the connection to
/// that address, `initialize`.
async fn open(up: &Upstream) -> Result<Session, McpFailure> {
    let url = reqwest::Url::parse(&up.url).map_err(|_| McpFailure::Unreachable)?;
    let (host, port) = net::http_target(&url).map_err(|_| McpFailure::Unreachable)?;
    let addr = net::resolve_target(&host, port, up.allow_private).await.map_err(|_| McpFailure::Unreachable)?;
    let client = crate::targets::pinned_client(&host, addr)
        .default_headers(up.headers.clone())
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|_| McpFailure::Unreachable)?;
    let config = StreamableHttpClientTransportConfig::with_uri(up.url.clone())
        .max_json_response_size(MAX_RESPONSE_BYTES)
        .max_sse_event_size(MAX_RESPONSE_BYTES)
        .reinit_on_expired_session(false);
    let transport = StreamableHttpClientTransport::with_client(client, config);
    let mut info = ClientConfig::default();
    info.client_info.name = "checkfu".into();
    info.client_info.version = env!("CARGO_PKG_VERSION").into();
    info.serve(transport).await.map_err(|e| classify(&e))
}

/// `initialize` then every page of `tools/list`, within [`SYNC_TIMEOUT`].
/// Each tool as the wire gives it (`name`, `description`, `inputSchema`,
/// `annotations`).
pub async fn list_tools(up: &Upstream) -> Result<Vec<Value>, McpFailure> {
    let work = async {
        let session = open(up).await?;
        let listed = session.peer().list_all_tools().await.map_err(|e| classify(&e));
        let _ = session.cancel().await;
        let tools = listed?;
        tools.into_iter().map(|t| serde_json::to_value(t).map_err(|_| McpFailure::Protocol)).collect()
    };
    tokio::time::timeout(SYNC_TIMEOUT, work).await.unwrap_or(Err(McpFailure::Timeout))
}

/// A `tools/call`'s answer: the formatted text, whether it is an error,
/// and its `structuredContent` (if any).
#[derive(Debug, Clone, PartialEq)]
pub struct Called {
    pub text: String,
    pub is_error: bool,
    pub structured: Option<Value>,
}

/// One `tools/call` within `timeout` (connecting and initializing
/// included), with `meta` as its `_meta`. Never retried: it may have
/// reached the server. `sent` is set just before the request is written,
/// so a failure while it is unset is known not to have reached the tool.
pub async fn call_tool(
    up: &Upstream,
    name: &str,
    arguments: Value,
    meta: Option<Value>,
    timeout: Duration,
    sent: &std::sync::atomic::AtomicBool,
) -> Result<Called, McpFailure> {
    let work = async {
        let session = open(up).await?;
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        let params: CallToolRequestParams = serde_json::from_value(params).map_err(|_| McpFailure::Protocol)?;
        sent.store(true, std::sync::atomic::Ordering::SeqCst);
        let answered = session.peer().call_tool(params).await.map_err(|e| classify(&e));
        let _ = session.cancel().await;
        let result = serde_json::to_value(answered?).map_err(|_| McpFailure::Protocol)?;
        Ok(format_result(&result))
    };
    tokio::time::timeout(timeout, work).await.unwrap_or(Err(McpFailure::Timeout))
}

/// api.md §16.4: text blocks joined by newlines, else `structuredContent`
/// as JSON; other blocks as `[image <type>, <n> bytes]` or `[resource <uri>]`.
pub fn format_result(r: &Value) -> Called {
    let is_error = r.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let blocks = r.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut parts: Vec<String> = vec![];
    let mut any_text = false;
    for b in &blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                any_text = true;
                parts.push(b.get("text").and_then(Value::as_str).unwrap_or_default().to_string());
            }
            Some(kind @ ("image" | "audio")) => {
                let mime = b.get("mimeType").and_then(Value::as_str).unwrap_or("application/octet-stream");
                let bytes = b.get("data").and_then(Value::as_str).map_or(0, |d| d.len() / 4 * 3);
                parts.push(format!("[{kind} {mime}, {bytes} bytes]"));
            }
            Some("resource") => {
                let uri = b.pointer("/resource/uri").and_then(Value::as_str).unwrap_or_default();
                parts.push(format!("[resource {uri}]"));
            }
            Some("resource_link") => {
                parts.push(format!("[resource {}]", b.get("uri").and_then(Value::as_str).unwrap_or_default()));
            }
            _ => parts.push("[unknown content]".into()),
        }
    }
    let structured = r.get("structuredContent").filter(|s| !s.is_null()).cloned();
    let text = match &structured {
        Some(s) if !any_text => s.to_string(),
        _ => parts.join("\n"),
    };
    Called { text, is_error, structured }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_formatted_as_the_contract_says() {
        let r = json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "isError": false});
        assert_eq!(format_result(&r), Called { text: "a\nb".into(), is_error: false, structured: None });
        let r = json!({"content": [], "structuredContent": {"sum": 5}});
        assert_eq!(format_result(&r).text, "{\"sum\":5}");
        assert_eq!(format_result(&r).structured, Some(json!({"sum": 5})));
        let r = json!({"content": [{"type": "image", "mimeType": "image/png", "data": "AAAA"}, {"type": "resource", "resource": {"uri": "file:///x"}}], "isError": true});
        assert_eq!(
            format_result(&r),
            Called { text: "[image image/png, 3 bytes]\n[resource file:///x]".into(), is_error: true, structured: None }
        );
    }

    #[test]
    fn failures_have_their_codes() {
        assert_eq!(McpFailure::Http(502).code(), "mcp.http_502");
        assert_eq!(McpFailure::AuthenticationFailed.sync_type(), "authentication_failed");
        assert_eq!(status_in("HTTP 401 Unauthorized: {}"), Some(401));
        assert_eq!(status_in("garbage"), None);
    }
}
