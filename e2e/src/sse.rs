//! A Server-Sent Events client for tests: frames with their `id`, `event`,
//! `data` and comment lines, decoded by the product's own UTF-8-safe
//! decoder (`checkfu_core::sse`), which the CLI and the model gateway use.
#![allow(clippy::unwrap_used, reason = "test harness: a failed step panics, failing the test or the benchmark")]

use futures_util::StreamExt;
use serde_json::Value;
use std::time::Duration;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frame {
    pub id: Option<String>,
    pub event: String,
    pub data: String,
    pub comments: Vec<String>,
}

impl Frame {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or(Value::Null)
    }
}

pub struct Stream {
    inner: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    decoder: checkfu_core::sse::Decoder,
    pub content_type: String,
}

impl Stream {
    pub async fn open(base: &str, key: &str, path: &str, last_event_id: Option<i64>) -> Stream {
        let mut rb = reqwest::Client::new().get(format!("{base}{path}")).bearer_auth(key);
        if let Some(id) = last_event_id {
            rb = rb.header("Last-Event-ID", id.to_string());
        }
        let r = rb.send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "stream refused");
        let content_type = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        Stream { inner: Box::pin(r.bytes_stream()), decoder: checkfu_core::sse::Decoder::new(64 * 1024 * 1024), content_type }
    }

    /// The next frame (or comment block), or None after `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(f) = self.decoder.next_frame().expect("a well-formed event stream") {
                return Some(Frame { id: f.id, event: f.event.unwrap_or_default(), data: f.data, comments: f.comments });
            }
            let chunk = tokio::time::timeout_at(deadline, self.inner.next()).await.ok()??;
            self.decoder.push(&chunk.ok()?);
        }
    }

    /// Whether the server ends the stream within `timeout` (frames and
    /// pings before the end are skipped).
    pub async fn ends_within(&mut self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.inner.next()).await {
                Err(_) => return false,
                Ok(None) | Ok(Some(Err(_))) => return true,
                Ok(Some(Ok(_))) => {}
            }
        }
    }

    /// Frames until one satisfies `stop` (inclusive).
    pub async fn until(&mut self, timeout: Duration, stop: impl Fn(&Frame) -> bool) -> Vec<Frame> {
        let mut out = vec![];
        while let Some(f) = self.next(timeout).await {
            let done = stop(&f);
            out.push(f);
            if done {
                return out;
            }
        }
        panic!("stream ended before the expected frame; got {out:?}");
    }
}
