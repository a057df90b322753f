//! Provider adapters. Each turns a provider-neutral [`ModelRequest`] into a
//! stream of text deltas and a final [`ModelOutput`]. Only the scripted model
//! ships in this increment; the Anthropic and OpenAI-compatible adapters plug
//! in behind the same trait.

pub mod anthropic;
pub mod openai;
pub mod scripted;

use crate::model::{Candidate, ModelOutput, ModelRequest};
use checkfu_core::Result;
use tokio::sync::mpsc;

/// A model provider. `deltas` receives text previews as they are produced;
/// the returned output is the whole turn.
#[async_trait::async_trait]
pub trait ModelProvider: Send + Sync + 'static {
    async fn generate(&self, candidate: &Candidate, req: &ModelRequest, deltas: mpsc::Sender<String>) -> Result<ModelOutput>;
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
