//! What every view shares: the page and error envelopes, and reading a
//! service's optional text.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

pub use crate::json_text::doc;

pub fn opt(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// A page of a collection, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Page<T> {
    pub data: Vec<T>,
    /// Opaque token for the next page; null on the last one.
    pub next_page: Option<String>,
}

pub fn page<T, U>(items: &[T], next_page: &str, f: impl Fn(&T) -> U) -> Page<U> {
    Page { data: items.iter().map(f).collect(), next_page: opt(next_page) }
}

/// The error envelope of every non-2xx response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
    pub request_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Dotted type: `validation.invalid`, `permission.denied`, ...
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    #[schema(value_type = Object)]
    pub details: Value,
}
