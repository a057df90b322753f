//! Provider adapters. Each turns a provider-neutral [`ModelRequest`] into a
//! stream of text deltas and a final [`ModelOutput`]. Only the scripted model
//! ships in this increment; the Anthropic and OpenAI-compatible adapters plug
//! in behind the same trait.

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
