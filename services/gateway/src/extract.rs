//! Request extraction with the error envelope: bounded JSON bodies, query
//! strings and path ids that fail as 400/413, never as axum's plain text.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use checkfu_core::{Code, Error};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Request bodies larger than this are refused with 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The exact body bytes (at most [`MAX_BODY_BYTES`], else 413), for a
/// handler that must see them unchanged (a signed body).
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let too_large = || Error::new(Code::PayloadTooLarge, format!("request bodies are limited to {MAX_BODY_BYTES} bytes"));
        let bytes = Bytes::from_request(req, state).await.map_err(|e| match e {
            BytesRejection::FailedToBufferBody(_) => too_large(),
            other => Error::invalid(other.body_text()),
        })?;
        if bytes.len() > MAX_BODY_BYTES {
            return Err(too_large().into());
        }
        Ok(RawBody(bytes))
    }
}

/// A JSON object body, kept as a `Value` so handlers read fields explicitly
/// and the idempotency layer can hash it canonically.
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        if bytes.is_empty() {
            return Ok(JsonBody(Value::Object(Default::default())));
        }
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| Error::invalid(format!("the body is not valid JSON: {e}")))?;
        if !v.is_object() {
            return Err(Error::invalid("the body must be a JSON object").into());
        }
        Ok(JsonBody(v))
    }
}

/// Query parameters, deserialised with the envelope on failure.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let q = parts.uri.query().unwrap_or_default();
        serde_urlencoded::from_str(q).map(Query).map_err(|e| ApiError(Error::invalid(format!("invalid query string: {e}"))))
    }
}
