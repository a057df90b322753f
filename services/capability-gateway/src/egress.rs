//! The sandbox egress proxy (api.md §16.5): the only network route a
//! sandbox has. It admits plain HTTP requests (absolute-form) and `CONNECT`
//! tunnels (any port) only to hosts on the Session's pinned
//! `network.allowed_hosts`, resolves names itself, refuses non-public
//! addresses unless the installation allows private targets, and connects
//! to the address it checked. It adds no credential.
//!
//! Who is asking is in `Proxy-Authorization: Basic` (user `egress`,
//! password an egress token): a token signed for one Run by the capability
//! gateway ([`mint`]), under a key of its own, so it is good for nothing but
//! this proxy and that Run's allowlist. A refusal is `403` with
//! `Checkfu-Egress: denied; reason=<reason>` and one line of text; the
//! first refusal per host and port in a Run is recorded (an audit record on
//! the Session now, an `egress.denied` event when the runner takes it).

use crate::fetch::WebFetcher;
use crate::targets::host_allowed;
use base64::Engine;
use checkfu_core::capability::{Claims, TokenKey};
use checkfu_core::time::now_ms;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A request head larger than this is refused.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client has to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an egress token lasts: longer than any one command may run.
pub const TOKEN_TTL_MS: i64 = 15 * 60 * 1000;
/// What an egress token's scope says.
const SCOPE: &str = "egress";

/// Why a request was refused (the `reason` of the header and event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    NotAllowlisted,
    NonPublicAddress,
    UnsupportedRequest,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::NotAllowlisted => "not_allowlisted",
            Refusal::NonPublicAddress => "non_public_address",
            Refusal::UnsupportedRequest => "unsupported_request",
        }
    }
}

/// A refusal to record: which Run, where to, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub session_id: String,
    pub run_id: String,
    pub host: String,
    pub port: u16,
    pub reason: Refusal,
}

/// Where refusals go: recorded once per (Run, host, port), with an audit
/// record for the first.
#[async_trait::async_trait]
pub trait DenialSink: Send + Sync + 'static {
    async fn record(&self, d: Denial);
}

/// Signs an egress token for the Run `claims` (a capability token's)
/// names.
pub fn mint(key: &TokenKey, claims: &Claims) -> checkfu_core::Result<String> {
    key.sign(&Claims { tools: vec![SCOPE.into()], expires_ms: now_ms() + TOKEN_TTL_MS, ..claims.clone() })
}

#[derive(Clone)]
pub struct EgressProxy {
    pub key: TokenKey,
    pub allowlists: WebFetcher,
    pub allow_private: bool,
    pub denials: Arc<dyn DenialSink>,
}

/// A parsed request head.
struct Head {
    method: String,
    target: String,
    /// The raw header lines to pass on (proxy headers removed).
    forward: Vec<(String, Vec<u8>)>,
    proxy_auth: Option<String>,
    /// Bytes read past the head (the start of a body).
    rest: Vec<u8>,
}

fn metric(outcome: &'static str) {
    metrics::counter!("checkfu_egress_requests_total", "outcome" => outcome).increment(1);
}

impl EgressProxy {
    /// Serves connections until `shutdown`.
    pub async fn serve(self, listener: TcpListener, shutdown: tokio_util::sync::CancellationToken) {
        loop {
            let (stream, _) = tokio::select! {
                _ = shutdown.cancelled() => return,
                a = listener.accept() => match a {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "the egress proxy could not accept a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let me = self.clone();
            tokio::spawn(async move { me.handle(stream).await });
        }
    }

    async fn handle(&self, mut client: TcpStream) {
        let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
            Ok(Some(h)) => h,
            _ => {
                metric("unsupported_request");
                let _ = refuse(&mut client, "-", 0, Refusal::UnsupportedRequest).await;
                return;
            }
        };
        let Some(claims) = head.proxy_auth.as_deref().and_then(|a| self.claims(a)) else {
            metric("unauthenticated");
            let body = "this proxy serves Checkfu sandboxes only\n";
            let resp = format!(
                "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"checkfu-egress\"\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = client.write_all(resp.as_bytes()).await;
            return;
        };
        let (host, port, origin_form) = match target_of(&head) {
            Some(t) => t,
            None => {
                metric("unsupported_request");
                let _ = refuse(&mut client, "-", 0, Refusal::UnsupportedRequest).await;
                self.deny(&claims, "-", 0, Refusal::UnsupportedRequest).await;
                return;
            }
        };
        let allowed = match self.allowlists.allowlist(&claims.session_id).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(session_id = %claims.session_id, error = %e.message, "the egress allowlist is unavailable");
                let _ = client.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
                return;
            }
        };
        if !host_allowed(&allowed, &host) {
            metric("not_allowlisted");
            let _ = refuse(&mut client, &host, port, Refusal::NotAllowlisted).await;
            self.deny(&claims, &host, port, Refusal::NotAllowlisted).await;
            return;
        }
        let addr = match checkfu_core::net::resolve_target(&host, port, self.allow_private).await {
            Ok(a) => a,
            Err(e) if e.code == checkfu_core::Code::PermissionDenied => {
                metric("non_public_address");
                let _ = refuse(&mut client, &host, port, Refusal::NonPublicAddress).await;
                self.deny(&claims, &host, port, Refusal::NonPublicAddress).await;
                return;
            }
            Err(_) => {
                metric("unreachable");
                let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
                return;
            }
        };
        let Ok(Ok(mut upstream)) = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr)).await else {
            metric("unreachable");
            let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
            return;
        };
        metric("allowed");
        if head.method.eq_ignore_ascii_case("CONNECT") {
            if client.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n").await.is_err() {
                return;
            }
            if !head.rest.is_empty() && upstream.write_all(&head.rest).await.is_err() {
                return;
            }
        } else {
            // One request per connection: the next could name another host.
            let mut out = format!("{} {} HTTP/1.1\r\n", head.method, origin_form).into_bytes();
            for (name, value) in &head.forward {
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(value);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"Connection: close\r\n\r\n");
            out.extend_from_slice(&head.rest);
            if upstream.write_all(&out).await.is_err() {
                return;
            }
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }

    /// The Run an egress token names, if it is one and current.
    fn claims(&self, proxy_auth: &str) -> Option<Claims> {
        let b64 = proxy_auth.trim().strip_prefix("Basic ").or_else(|| proxy_auth.trim().strip_prefix("basic "))?;
        let decoded = base64::engine::general_purpose::STANDARD.decode(b64.trim()).ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (_, token) = text.split_once(':')?;
        let claims = self.key.open(token, now_ms()).ok()?;
        claims.tools.iter().any(|t| t == SCOPE).then_some(claims)
    }

    async fn deny(&self, claims: &Claims, host: &str, port: u16, reason: Refusal) {
        let d = Denial { session_id: claims.session_id.clone(), run_id: claims.run_id.clone(), host: host.into(), port, reason };
        self.denials.record(d).await;
    }
}

/// `403` with the reason in `Checkfu-Egress`, one line of text.
async fn refuse(client: &mut TcpStream, host: &str, port: u16, reason: Refusal) -> std::io::Result<()> {
    let line = match reason {
        Refusal::NotAllowlisted => format!("{host}:{port} is not on this session's sandbox allowlist\n"),
        Refusal::NonPublicAddress => format!("{host}:{port} resolves to a private, loopback or link-local address\n"),
        Refusal::UnsupportedRequest => "the egress proxy takes CONNECT host:port or an absolute http:// request\n".to_string(),
    };
    let resp = format!(
        "HTTP/1.1 403 Forbidden\r\nCheckfu-Egress: denied; reason={}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{line}",
        reason.as_str(),
        line.len()
    );
    client.write_all(resp.as_bytes()).await?;
    client.shutdown().await
}

/// Reads and parses a request head; `None` when it is not one or too big.
async fn read_head(client: &mut TcpStream) -> Option<Head> {
    let mut buf: Vec<u8> = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 96];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let mut forward = vec![];
                let mut proxy_auth = None;
                for h in req.headers.iter() {
                    let name = h.name.to_ascii_lowercase();
                    if name == "proxy-authorization" {
                        proxy_auth = std::str::from_utf8(h.value).ok().map(str::to_string);
                    } else if !matches!(name.as_str(), "proxy-connection" | "connection" | "keep-alive") {
                        forward.push((h.name.to_string(), h.value.to_vec()));
                    }
                }
                return Some(Head {
                    method: req.method?.to_string(),
                    target: req.path?.to_string(),
                    forward,
                    proxy_auth,
                    rest: buf[len..].to_vec(),
                });
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => continue,
            _ => return None,
        }
    }
}

/// Where a request goes: `CONNECT host:port`, or an absolute `http://`
/// URI (its origin-form to send on).
fn target_of(h: &Head) -> Option<(String, u16, String)> {
    if h.method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = h.target.rsplit_once(':')?;
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        let port: u16 = port.parse().ok()?;
        return (!host.is_empty() && port > 0).then_some((host, port, String::new()));
    }
    let url = reqwest::Url::parse(&h.target).ok()?;
    if url.scheme() != "http" || !url.username().is_empty() || url.password().is_some() {
        return None;
    }
    let host = url.host_str()?.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    let port = url.port_or_known_default()?;
    let mut origin = url.path().to_string();
    if let Some(q) = url.query() {
        origin.push('?');
        origin.push_str(q);
    }
    Some((host, port, origin))
}

/// Binds the proxy's listener.
pub async fn bind(addr: &str) -> std::io::Result<(TcpListener, SocketAddr)> {
    let l = TcpListener::bind(addr).await?;
    let a = l.local_addr()?;
    Ok((l, a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(method: &str, target: &str) -> Head {
        Head { method: method.into(), target: target.into(), forward: vec![], proxy_auth: None, rest: vec![] }
    }

    #[test]
    fn targets_are_connect_or_absolute_http() {
        assert_eq!(target_of(&head("CONNECT", "pypi.org:443")), Some(("pypi.org".into(), 443, String::new())));
        assert_eq!(target_of(&head("CONNECT", "[::1]:8443")), Some(("::1".into(), 8443, String::new())));
        assert_eq!(target_of(&head("GET", "http://Localhost:8000/a?b=1")), Some(("localhost".into(), 8000, "/a?b=1".into())));
        assert_eq!(target_of(&head("GET", "/relative")), None);
        assert_eq!(target_of(&head("GET", "https://example.com/")), None, "https goes through CONNECT");
        assert_eq!(target_of(&head("GET", "http://u:p@example.com/")), None);
        assert_eq!(target_of(&head("CONNECT", "nohost")), None);
    }
}
