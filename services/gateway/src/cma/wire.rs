//! CMA's transport shapes (api.md §17.2–17.4): its error envelope and
//! `x-should-retry`, its query strings and pages, its timestamps.

use crate::error::current_request_id;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use checkfu_core::{Code, Error};
use serde_json::{Map, Value, json};

/// A refusal on its way to a CMA client: the native error it came from (or
/// the projection's own), shown in CMA's envelope.
#[derive(Debug)]
pub struct CmaError(pub Error);

pub type CmaResult<T> = Result<T, CmaError>;

impl From<Error> for CmaError {
    fn from(e: Error) -> Self {
        CmaError(e)
    }
}

impl From<tonic::Status> for CmaError {
    fn from(s: tonic::Status) -> Self {
        CmaError(Error::from(s))
    }
}

impl From<crate::error::ApiError> for CmaError {
    fn from(e: crate::error::ApiError) -> Self {
        CmaError(e.0)
    }
}

/// 400 `invalid_request_error` with CMA's `error_code`: input CMA accepts
/// but this projection refuses rather than fake (never a retried 5xx).
pub fn refuse(code: &str, message: impl Into<String>) -> CmaError {
    CmaError(Error::invalid(message).with_reason(code))
}

/// The CMA status and `error.type` of a native error class (§17.3). The
/// settle-only refusal is 400, as CMA answers it.
fn classify(e: &Error) -> (StatusCode, &'static str) {
    let reason = e.details.get("reason").and_then(Value::as_str).unwrap_or_default();
    match e.code {
        Code::MissingKey | Code::InvalidKey => (StatusCode::UNAUTHORIZED, "authentication_error"),
        Code::PermissionDenied => (StatusCode::FORBIDDEN, "permission_error"),
        Code::NotFound => (StatusCode::NOT_FOUND, "not_found_error"),
        Code::Invalid => (StatusCode::BAD_REQUEST, "invalid_request_error"),
        Code::Conflict if reason == "settle_only" => (StatusCode::BAD_REQUEST, "invalid_request_error"),
        Code::Conflict | Code::IdempotencyKeyReused => (StatusCode::CONFLICT, "invalid_request_error"),
        Code::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "request_too_large"),
        Code::PreconditionFailed => (StatusCode::PRECONDITION_FAILED, "invalid_request_error"),
        Code::RateLimited => (StatusCode::TOO_MANY_REQUESTS, "rate_limit_error"),
        Code::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "api_error"),
        Code::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "api_error"),
    }
}

/// The `error` object of CMA's envelope (also an SSE `event: error`'s).
pub fn error_object(e: &Error) -> (StatusCode, Value) {
    let (status, kind) = classify(e);
    let mut details = match &e.details {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let code = details.remove("reason").and_then(|r| r.as_str().map(String::from)).unwrap_or_else(|| default_code(e.code).into());
    details.insert("error_code".into(), json!(code));
    details.insert("checkfu_type".into(), json!(e.code.as_type()));
    (status, json!({"type": kind, "message": e.message, "details": details}))
}

fn default_code(c: Code) -> &'static str {
    match c {
        Code::MissingKey => "missing_api_key",
        Code::InvalidKey => "invalid_api_key",
        Code::PermissionDenied => "permission_denied",
        Code::NotFound => "not_found",
        Code::Invalid => "invalid_request",
        Code::Conflict => "conflict",
        Code::IdempotencyKeyReused => "idempotency_key_reused",
        Code::PayloadTooLarge => "request_too_large",
        Code::PreconditionFailed => "precondition_failed",
        Code::RateLimited => "rate_limited",
        Code::Unavailable => "unavailable",
        Code::Internal => "internal",
    }
}

impl IntoResponse for CmaError {
    fn into_response(self) -> Response {
        let e = self.0;
        if e.code == Code::Internal {
            tracing::error!(message = %e.message, "internal error (CMA projection)");
        }
        let (status, error) = error_object(&e);
        let body = json!({"type": "error", "error": error, "request_id": current_request_id()});
        let mut resp = (status, axum::Json(body)).into_response();
        let h = resp.headers_mut();
        // The SDK retries 409 and 5xx unless told not to: a conflict or a
        // switched-off capability will not change by retrying.
        let capability = e.details.get("capability").is_some();
        if status == StatusCode::CONFLICT || (status == StatusCode::SERVICE_UNAVAILABLE && capability) {
            h.insert("x-should-retry", HeaderValue::from_static("false"));
        } else if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
            let secs = e.details.get("retry_after_seconds").and_then(Value::as_u64).unwrap_or(1);
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                h.insert("retry-after", v);
            }
        }
        resp
    }
}

/// A request's query string as pairs, `key[]` folded onto `key` (the SDK
/// sends arrays as `key[]=a&key[]=b`; a bare `key` is tolerated), nested
/// keys such as `created_at[gte]` kept literally.
pub fn query_pairs(raw: Option<&str>) -> CmaResult<Vec<(String, String)>> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(raw.unwrap_or_default()).map_err(|e| Error::invalid(format!("invalid query string: {e}")))?;
    Ok(pairs.into_iter().map(|(k, v)| (k.strip_suffix("[]").map(String::from).unwrap_or(k), v)).collect())
}

/// One query parameter's last value.
pub fn param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// A `page` token this projection issued as a number — an offset into a
/// list it assembles, or the version a page starts at; `None` on the first
/// page.
pub fn number_token<T: std::str::FromStr>(pairs: &[(String, String)]) -> CmaResult<Option<T>> {
    param(pairs, "page")
        .map(|p| p.parse::<T>().map_err(|_| Error::invalid_field("page", "page is not a token this list gave").into()))
        .transpose()
}

/// Every value of a repeated query parameter.
pub fn params<'a>(pairs: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    pairs.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect()
}

/// A numeric query parameter, if sent; one that does not parse → 400
/// `message`.
pub fn number<T: std::str::FromStr>(pairs: &[(String, String)], key: &str, message: &str) -> CmaResult<Option<T>> {
    param(pairs, key).map(|v| v.parse::<T>().map_err(|_| Error::invalid_field(key, message).into())).transpose()
}

/// `limit`: default and maximum per list (§17.4); out of range → 400.
pub fn limit(pairs: &[(String, String)], default: u32, max: u32) -> CmaResult<u32> {
    match param(pairs, "limit") {
        None => Ok(default),
        Some(v) => match v.parse::<u32>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(Error::invalid_field("limit", format!("limit must be 1 to {max}")).into()),
        },
    }
}

/// Whether a list goes newest first: `order` is `asc` or `desc`, else
/// `descending_by_default` decides.
pub fn descending(pairs: &[(String, String)], descending_by_default: bool) -> CmaResult<bool> {
    match param(pairs, "order") {
        None => Ok(descending_by_default),
        Some("asc") => Ok(false),
        Some("desc") => Ok(true),
        Some(o) => Err(Error::invalid_field("order", format!("order is asc or desc, not {o:?}")).into()),
    }
}

/// `created_at[gt|gte|lt|lte]` bounds (RFC 3339 with an offset), as a
/// test on a native timestamp.
pub fn created_at_filter(pairs: &[(String, String)]) -> CmaResult<impl Fn(&Value) -> bool + use<>> {
    let mut bounds: Vec<(String, i64)> = vec![];
    for op in ["gt", "gte", "lt", "lte"] {
        let key = format!("created_at[{op}]");
        if let Some(v) = param(pairs, &key) {
            let ms = checkfu_core::time::parse_rfc3339(v, 9)
                .ok_or_else(|| Error::invalid_field(&key, format!("{key} must be an RFC 3339 time with an offset")))?;
            bounds.push((op.to_string(), ms));
        }
    }
    Ok(move |t: &Value| {
        let Some(at) = t.as_str().and_then(|s| checkfu_core::time::parse_rfc3339(s, 9)) else { return bounds.is_empty() };
        bounds.iter().all(|(op, b)| match op.as_str() {
            "gt" => at > *b,
            "gte" => at >= *b,
            "lt" => at < *b,
            _ => at <= *b,
        })
    })
}

/// A CMA page: `{data, next_page}` (null at the end).
pub fn page(data: Vec<Value>, next_page: Option<String>) -> Value {
    json!({"data": data, "next_page": next_page.filter(|p| !p.is_empty())})
}

/// A CMA `metadata` object: string values only (native keeps the same).
pub fn metadata(v: &Value) -> CmaResult<Value> {
    match v {
        Value::Null => Ok(json!({})),
        Value::Object(m) if m.values().all(Value::is_string) => Ok(v.clone()),
        _ => Err(refuse("invalid_metadata", "metadata must be an object of string values")),
    }
}

/// Applies a CMA metadata patch: a key set to `null` or `""` is removed,
/// others set; keys not named are kept.
pub fn patch_metadata(current: &Value, patch: &Value) -> CmaResult<Value> {
    let mut out = current.as_object().cloned().unwrap_or_default();
    let Value::Object(p) = patch else {
        return Err(refuse("invalid_metadata", "metadata must be an object"));
    };
    for (k, v) in p {
        match v {
            Value::Null => {
                out.remove(k);
            }
            Value::String(s) if s.is_empty() => {
                out.remove(k);
            }
            Value::String(_) => {
                out.insert(k.clone(), v.clone());
            }
            _ => return Err(refuse("invalid_metadata", format!("metadata value of {k:?} must be a string"))),
        }
    }
    Ok(Value::Object(out))
}

/// A path's id of the kind it names (`T`), else 404 for a `kind` (§17.1):
/// CMA answers an id of another kind as not found, never as invalid.
pub fn path_id<T: checkfu_core::id::TypedId>(kind: &str, id: &str) -> CmaResult<String> {
    if !checkfu_core::id::is_valid(T::PREFIX, id) {
        return Err(Error::not_found(kind, id).into());
    }
    Ok(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_classes_map_onto_cma_statuses() {
        let cases = [
            (Error::new(Code::InvalidKey, "x"), 401, "authentication_error"),
            (Error::new(Code::PermissionDenied, "x"), 403, "permission_error"),
            (Error::not_found("session", "x"), 404, "not_found_error"),
            (Error::invalid("x"), 400, "invalid_request_error"),
            (Error::conflict("x"), 409, "invalid_request_error"),
            (Error::conflict("x").with_reason("settle_only"), 400, "invalid_request_error"),
            (Error::new(Code::PayloadTooLarge, "x"), 413, "request_too_large"),
            (Error::new(Code::PreconditionFailed, "x"), 412, "invalid_request_error"),
            (Error::new(Code::RateLimited, "x"), 429, "rate_limit_error"),
            (Error::unavailable("x"), 503, "api_error"),
            (Error::internal("x"), 500, "api_error"),
        ];
        for (e, status, kind) in cases {
            let (s, obj) = error_object(&e);
            assert_eq!((s.as_u16(), obj["type"].as_str().unwrap_or_default()), (status, kind), "{e:?}");
            assert_eq!(obj["details"]["checkfu_type"], e.code.as_type());
        }
        let (_, obj) = error_object(&Error::invalid("x").with_reason("model_not_routable"));
        assert_eq!(obj["details"]["error_code"], "model_not_routable");
        assert!(obj["details"].get("reason").is_none(), "the reason becomes error_code");
    }

    #[test]
    fn conflicts_and_capability_outages_are_not_retried() {
        let r = CmaError(Error::conflict("x")).into_response();
        assert_eq!(r.headers()["x-should-retry"], "false");
        let off = checkfu_core::features::unavailable("cma_projection", "feature_disabled");
        let r = CmaError(off).into_response();
        assert_eq!((r.status().as_u16(), r.headers()["x-should-retry"].to_str().ok()), (503, Some("false")));
        let r = CmaError(Error::unavailable("busy")).into_response();
        assert!(r.headers().get("x-should-retry").is_none());
        assert_eq!(r.headers()["retry-after"], "1");
    }

    #[test]
    fn array_parameters_fold_their_brackets() {
        let q = query_pairs(Some("statuses%5B%5D=idle&statuses[]=running&created_at[gte]=2026-01-01T00:00:00Z&limit=5")).expect("parses");
        assert_eq!(params(&q, "statuses"), ["idle", "running"]);
        assert_eq!(param(&q, "created_at[gte]"), Some("2026-01-01T00:00:00Z"));
        assert_eq!(limit(&q, 20, 100).expect("in range"), 5);
        assert!(limit(&query_pairs(Some("limit=0")).expect("parses"), 20, 100).is_err());
    }

    #[test]
    fn metadata_patches_keep_unnamed_keys() {
        let out = patch_metadata(&json!({"a": "1", "b": "2"}), &json!({"b": null, "c": "3"})).expect("patch");
        assert_eq!(out, json!({"a": "1", "c": "3"}));
        assert!(patch_metadata(&json!({}), &json!({"a": 1})).is_err());
    }
}
