//! The public error envelope. Every non-2xx response is
//! `{"error":{"type","message","details"},"request_id"}` — built here, from
//! the one classification in `checkfu_core`, and nowhere else.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use checkfu_core::{Code, Error};
use serde_json::json;

tokio::task_local! {
    /// The id of the request being served, for envelopes built deep inside.
    pub static REQUEST_ID: String;
}

pub fn current_request_id() -> String {
    REQUEST_ID.try_with(Clone::clone).unwrap_or_default()
}

/// An error on its way to the client.
#[derive(Debug)]
pub struct ApiError(pub Error);

pub type ApiResult<T> = Result<T, ApiError>;

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl From<tonic::Status> for ApiError {
    fn from(s: tonic::Status) -> Self {
        ApiError(Error::from(s))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let e = self.0;
        if e.code == Code::Internal {
            tracing::error!(message = %e.message, "internal error");
        }
        let status = StatusCode::from_u16(e.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = json!({
            "error": {"type": e.code.as_type(), "message": e.message, "details": e.details},
            "request_id": current_request_id(),
        });
        let mut resp = (status, axum::Json(body)).into_response();
        if e.code == Code::RateLimited
            && let Some(s) = e.details.get("retry_after_seconds").and_then(|v| v.as_u64())
            && let Ok(v) = HeaderValue::from_str(&s.to_string())
        {
            resp.headers_mut().insert("retry-after", v);
        }
        resp
    }
}
