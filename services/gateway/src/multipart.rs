//! Multipart forms (`POST /v1/files`, `POST /v1/skills`), read whole within
//! a bound and refused with the error envelope: 413 past the bound, 400 for
//! a malformed form.

use crate::error::ApiResult;
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::StatusCode;
use checkfu_core::{Code, Error};

/// One part of a form.
#[derive(Debug, Clone)]
pub struct Part {
    pub name: String,
    pub filename: Option<String>,
    pub content_type: Option<String>,
    pub bytes: bytes::Bytes,
}

impl Part {
    /// A text field's value.
    pub fn text(&self) -> ApiResult<String> {
        String::from_utf8(self.bytes.to_vec())
            .map_err(|_| Error::invalid_field(&self.name, format!("{} must be UTF-8 text", self.name)).into())
    }
}

fn too_large(max: usize) -> Error {
    Error::new(Code::PayloadTooLarge, format!("the form is limited to {max} bytes"))
}

/// Whether the request carries a multipart form.
pub fn is_multipart(req: &Request) -> bool {
    req.headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("multipart/form-data"))
}

/// Every part of the form, at most `max` bytes of them together and at most
/// `max_parts` parts.
pub async fn read(req: Request, max: usize, max_parts: usize) -> ApiResult<Vec<Part>> {
    let mut form = Multipart::from_request(req, &())
        .await
        .map_err(|e| Error::invalid(format!("the body is not a multipart form: {}", e.body_text())))?;
    let mut parts = vec![];
    let mut total = 0usize;
    loop {
        let field = match form.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(parts),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large(max).into()),
            Err(e) => return Err(Error::invalid(format!("the multipart form is malformed: {}", e.body_text())).into()),
        };
        if parts.len() >= max_parts {
            return Err(Error::invalid(format!("a form holds at most {max_parts} parts")).into());
        }
        let name = field.name().unwrap_or_default().to_string();
        let filename = field.file_name().map(str::to_string);
        let content_type = field.content_type().map(str::to_string);
        let bytes = match field.bytes().await {
            Ok(b) => b,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large(max).into()),
            Err(e) => return Err(Error::invalid(format!("the multipart form is malformed: {}", e.body_text())).into()),
        };
        total += bytes.len();
        if total > max {
            return Err(too_large(max).into());
        }
        parts.push(Part { name, filename, content_type, bytes });
    }
}
