//! Provider adapters. Each turns a provider-neutral [`ModelRequest`] into a
//! stream of text deltas and a final [`ModelOutput`]: the scripted model,
//! Anthropic Messages and OpenAI-compatible Chat Completions, behind one
//! trait. A real provider is called only at a [`Target`]: an installation
//! endpoint, through a client pinned to its checked address.

pub mod anthropic;
pub mod openai;
pub mod scripted;

use crate::endpoints::Endpoint;
use crate::model::{Candidate, ModelOutput, ModelRequest};
use checkfu_core::Result;
use tokio::sync::mpsc;

/// Where a call goes: the endpoint (base URL, key) and a client that
/// connects only to its checked address and follows no redirect.
pub struct Target {
    pub endpoint: Endpoint,
    pub client: reqwest::Client,
}

/// A model provider. `deltas` receives text previews as they are produced;
/// the returned output is the whole turn. `target` is `None` only for the
/// scripted model, which calls nothing.
#[async_trait::async_trait]
pub trait ModelProvider: Send + Sync + 'static {
    async fn generate(
        &self,
        candidate: &Candidate,
        target: Option<&Target>,
        req: &ModelRequest,
        deltas: mpsc::Sender<String>,
    ) -> Result<ModelOutput>;
}

/// The target a real provider needs.
pub(crate) fn require(target: Option<&Target>) -> Result<&Target> {
    target.ok_or_else(|| checkfu_core::Error::unavailable("no endpoint is configured for this provider"))
}

/// Classifies a provider's HTTP failure without echoing anything secret:
/// overload and outages are `unavailable` (so the next candidate is tried).
pub(crate) fn http_error(status: u16) -> checkfu_core::Error {
    use checkfu_core::Error;
    match status {
        408 | 409 | 429 | 500 | 502 | 503 | 504 | 529 => {
            Error::unavailable(format!("the provider is overloaded or unavailable (HTTP {status})"))
        }
        401 | 403 => {
            Error::unavailable(format!("the provider refused this gateway's credentials (HTTP {status}); check its configured key"))
        }
        _ => Error::invalid(format!("the provider refused the request (HTTP {status})")),
    }
}

/// The `data:` payloads of a provider's Server-Sent Events response, one
/// at a time, however the network splits the bytes.
pub(crate) struct SseData {
    stream: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: String,
}

impl SseData {
    pub(crate) fn new(resp: reqwest::Response) -> Self {
        SseData { stream: Box::pin(resp.bytes_stream()), buf: String::new() }
    }

    pub(crate) async fn next(&mut self) -> checkfu_core::Result<Option<String>> {
        use futures_util::StreamExt;
        loop {
            while let Some(end) = self.buf.find('\n') {
                let line: String = self.buf.drain(..=end).collect();
                if let Some(data) = line.trim().strip_prefix("data:") {
                    return Ok(Some(data.trim().to_string()));
                }
            }
            match self.stream.next().await {
                Some(Ok(chunk)) => self.buf.push_str(&String::from_utf8_lossy(&chunk)),
                Some(Err(e)) => return Err(checkfu_core::Error::unavailable(format!("the provider stream broke: {}", e.without_url()))),
                None => return Ok(None),
            }
        }
    }
}

/// A target at `base` with `key`, private addresses allowed (tests talk to
/// a server on loopback).
#[cfg(test)]
pub(crate) async fn test_target(provider: crate::model::Provider, base: &str, key: Option<&str>) -> Target {
    let endpoint = Endpoint::new("test", provider, base, key.map(str::to_string), true).expect("endpoint");
    let client = endpoint.client(true).await.expect("client");
    Target { endpoint, client }
}
