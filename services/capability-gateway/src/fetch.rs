//! `web_fetch`: one GET, following at most a few redirects, each hop checked
//! against the allowlist and resolved to a public address before connecting.
//! The connection goes to the exact address that was checked (the name is
//! pinned to it), so a DNS answer cannot change between check and use.

use crate::targets::host_allowed;
use checkfu_core::{Error, Result};
use checkfu_proto::sessions::v1 as ss;
use checkfu_proto::sessions::v1::sessions_service_client::SessionsServiceClient;
use checkfu_proto::transport::Transport;
use futures_util::StreamExt;
use reqwest::Url;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct FetchLimits {
    pub max_bytes: usize,
    pub max_redirects: usize,
    pub timeout: Duration,
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits { max_bytes: 1024 * 1024, max_redirects: 5, timeout: Duration::from_secs(20) }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub status: u16,
    pub content_type: String,
    pub body: String,
    pub truncated: bool,
    pub final_url: String,
}

#[derive(Clone)]
pub struct WebFetcher {
    sessions: SessionsServiceClient<Transport>,
    allow_private: bool,
    limits: FetchLimits,
}

const MAX_URL: usize = 4096;

impl WebFetcher {
    pub fn new(sessions: Transport, allow_private: bool, limits: FetchLimits) -> Self {
        WebFetcher { sessions: SessionsServiceClient::new(sessions), allow_private, limits }
    }

    /// The Session's allowlist, from its pinned SandboxProfile revision.
    pub async fn allowlist(&self, session_id: &str) -> Result<Vec<String>> {
        let rev = self.sessions.clone().get_session_sandbox(ss::GetByIdRequest { id: session_id.into() }).await?.into_inner();
        if let Some(spec) = rev.spec {
            return Ok(spec.network.map(|n| n.allowed_hosts).unwrap_or_default());
        }
        // A 0.1.0 sessions service sends the revision as JSON text only.
        #[allow(deprecated)]
        let spec: serde_json::Value =
            serde_json::from_str(&rev.spec_json).map_err(|e| Error::internal(format!("sandbox revision unreadable: {e}")))?;
        Ok(spec["network"]["allowed_hosts"]
            .as_array()
            .map(|a| a.iter().filter_map(|h| h.as_str().map(str::to_string)).collect())
            .unwrap_or_default())
    }

    pub async fn fetch(&self, session_id: &str, url: &str) -> Result<Fetched> {
        if url.len() > MAX_URL {
            return Err(Error::invalid_field("url", "the URL is longer than 4096 bytes"));
        }
        let allowed = self.allowlist(session_id).await?;
        let mut url = Url::parse(url).map_err(|e| Error::invalid_field("url", format!("not a URL: {e}")))?;
        for _ in 0..=self.limits.max_redirects {
            let (host, addr) = self.check(&allowed, &url).await?;
            let client = crate::targets::pinned_client(&host, addr)
                .timeout(self.limits.timeout)
                .build()
                .map_err(|e| Error::internal(format!("http client: {e}")))?;
            let resp = client
                .get(url.clone())
                .header("user-agent", "checkfu-web-fetch/1")
                .send()
                .await
                .map_err(|e| Error::unavailable(format!("fetching {url} failed: {e}")))?;
            let status = resp.status();
            if status.is_redirection()
                && let Some(loc) = resp.headers().get("location").and_then(|l| l.to_str().ok())
            {
                url = url.join(loc).map_err(|e| Error::unavailable(format!("bad redirect location {loc:?}: {e}")))?;
                continue;
            }
            let content_type = resp.headers().get("content-type").and_then(|c| c.to_str().ok()).unwrap_or_default().to_string();
            let (body, truncated) = self.read_body(resp).await?;
            return Ok(Fetched { status: status.as_u16(), content_type, body, truncated, final_url: url.to_string() });
        }
        Err(Error::unavailable(format!("more than {} redirects", self.limits.max_redirects)))
    }

    /// Refuses a URL outside the allowlist or resolving to a non-public
    /// address; returns the host and the one address to connect to.
    async fn check(&self, allowed: &[String], url: &Url) -> Result<(String, SocketAddr)> {
        let (host, port) = checkfu_core::net::http_target(url)?;
        if !host_allowed(allowed, &host) {
            return Err(Error::denied(format!("{host} is not on this session's sandbox allowlist")));
        }
        let first = checkfu_core::net::resolve_target(&host, port, self.allow_private).await?;
        Ok((host, first))
    }

    async fn read_body(&self, resp: reqwest::Response) -> Result<(String, bool)> {
        let mut stream = resp.bytes_stream();
        let mut buf: Vec<u8> = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| Error::unavailable(format!("reading the response failed: {e}")))?;
            let room = self.limits.max_bytes - buf.len();
            if chunk.len() > room {
                buf.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            buf.extend_from_slice(&chunk);
        }
        Ok((String::from_utf8_lossy(&buf).into_owned(), truncated))
    }
}
