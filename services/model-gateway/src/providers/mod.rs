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

/// The largest provider stream frame read (one event of a streamed turn).
const MAX_PROVIDER_FRAME: usize = 4 * 1024 * 1024;

/// The `data:` payloads of a provider's Server-Sent Events response, one
/// frame at a time, however the network splits the bytes (the shared
/// UTF-8-safe decoder of `checkfu_core::sse`).
pub(crate) struct SseData {
    stream: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    decoder: checkfu_core::sse::Decoder,
}

impl SseData {
    /// Sends a provider's streaming request and reads its answer's events;
    /// an unreachable provider or a failure status is classified without
    /// echoing the URL (which may carry a key).
    pub(crate) async fn open(request: reqwest::RequestBuilder) -> checkfu_core::Result<Self> {
        let resp = request
            .send()
            .await
            .map_err(|e| checkfu_core::Error::unavailable(format!("the provider could not be reached: {}", e.without_url())))?;
        if !resp.status().is_success() {
            return Err(http_error(resp.status().as_u16()));
        }
        Ok(SseData { stream: Box::pin(resp.bytes_stream()), decoder: checkfu_core::sse::Decoder::new(MAX_PROVIDER_FRAME) })
    }

    pub(crate) async fn next(&mut self) -> checkfu_core::Result<Option<String>> {
        use futures_util::StreamExt;
        loop {
            match self.decoder.next_frame() {
                Ok(Some(f)) if f.has_data() => return Ok(Some(f.data)),
                Ok(Some(_)) => continue,
                Ok(None) => {}
                Err(e) => return Err(checkfu_core::Error::unavailable(format!("the provider stream was unreadable: {e}"))),
            }
            match self.stream.next().await {
                Some(Ok(chunk)) => self.decoder.push(&chunk),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A provider's stream split inside a multi-byte character still
    /// yields the text whole.
    #[tokio::test]
    async fn a_character_split_by_the_network_arrives_whole() {
        let wire = "data: {\"t\":\"naïve 世界\"}\n\ndata: [DONE]\n\n".as_bytes().to_vec();
        let cut = wire.iter().position(|b| *b >= 0x80).expect("a multi-byte character") + 1;
        let chunks = vec![wire[..cut].to_vec(), wire[cut..].to_vec()];
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(move || {
                let chunks = chunks.clone();
                async move { axum::body::Body::from_stream(futures_util::stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>))) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        let mut events = SseData::open(reqwest::Client::new().get(format!("http://{addr}/"))).await.expect("get");
        assert_eq!(events.next().await.expect("frame").as_deref(), Some("{\"t\":\"naïve 世界\"}"));
        assert_eq!(events.next().await.expect("frame").as_deref(), Some("[DONE]"));
        assert_eq!(events.next().await.expect("end"), None);
    }
}
