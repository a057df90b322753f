//! The one error classification. Every service error becomes a [`Code`]; the
//! code decides the HTTP status, the dotted public `type` and the gRPC status,
//! here and nowhere else, so an error keeps its meaning across every hop.

use serde_json::{Value, json};
use std::fmt;

/// The public error classes (docs/api.md, "Conventions as implemented").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    MissingKey,
    InvalidKey,
    PermissionDenied,
    NotFound,
    Invalid,
    Conflict,
    PayloadTooLarge,
    IdempotencyKeyReused,
    PreconditionFailed,
    RateLimited,
    Unavailable,
    Internal,
}

impl Code {
    const ALL: [Code; 12] = [
        Code::MissingKey,
        Code::InvalidKey,
        Code::PermissionDenied,
        Code::NotFound,
        Code::Invalid,
        Code::Conflict,
        Code::PayloadTooLarge,
        Code::IdempotencyKeyReused,
        Code::PreconditionFailed,
        Code::RateLimited,
        Code::Unavailable,
        Code::Internal,
    ];

    /// The dotted `error.type` of the public envelope.
    pub fn as_type(self) -> &'static str {
        match self {
            Code::MissingKey => "auth.missing_key",
            Code::InvalidKey => "auth.invalid_key",
            Code::PermissionDenied => "permission.denied",
            Code::NotFound => "not_found",
            Code::Invalid => "validation.invalid",
            Code::Conflict => "validation.conflict",
            Code::PayloadTooLarge => "validation.payload_too_large",
            Code::IdempotencyKeyReused => "idempotency.key_reused",
            Code::PreconditionFailed => "precondition.failed",
            Code::RateLimited => "rate_limited",
            Code::Unavailable => "unavailable",
            Code::Internal => "internal",
        }
    }

    pub fn from_type(t: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.as_type() == t)
    }

    pub fn http_status(self) -> u16 {
        match self {
            Code::MissingKey | Code::InvalidKey => 401,
            Code::PermissionDenied => 403,
            Code::NotFound => 404,
            Code::Invalid => 400,
            Code::Conflict | Code::IdempotencyKeyReused => 409,
            Code::PayloadTooLarge => 413,
            Code::PreconditionFailed => 412,
            Code::RateLimited => 429,
            Code::Unavailable => 503,
            Code::Internal => 500,
        }
    }

    pub fn grpc(self) -> tonic::Code {
        match self {
            Code::MissingKey | Code::InvalidKey => tonic::Code::Unauthenticated,
            Code::PermissionDenied => tonic::Code::PermissionDenied,
            Code::NotFound => tonic::Code::NotFound,
            Code::Invalid | Code::PayloadTooLarge => tonic::Code::InvalidArgument,
            Code::Conflict | Code::IdempotencyKeyReused => tonic::Code::AlreadyExists,
            Code::PreconditionFailed => tonic::Code::FailedPrecondition,
            Code::RateLimited => tonic::Code::ResourceExhausted,
            Code::Unavailable => tonic::Code::Unavailable,
            Code::Internal => tonic::Code::Internal,
        }
    }
}

/// A classified error with a human message and structured details.
#[derive(Debug, Clone, PartialEq)]
pub struct Error {
    pub code: Code,
    pub message: String,
    pub details: Value,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error { code, message: message.into(), details: json!({}) }
    }
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }
    /// Names why a request was refused in `details.reason` (api.md §16:
    /// `name_taken`, `credential_in_url`, ...), beside any other details.
    pub fn with_reason(mut self, reason: &str) -> Self {
        match &mut self.details {
            Value::Object(m) => {
                m.insert("reason".into(), Value::String(reason.into()));
            }
            _ => self.details = json!({ "reason": reason }),
        }
        self
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Code::Invalid, message)
    }
    /// A validation error naming the offending field in `details.field`.
    pub fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        Self::new(Code::Invalid, message).with_details(json!({ "field": field }))
    }
    pub fn not_found(kind: &str, id: &str) -> Self {
        Self::new(Code::NotFound, format!("{kind} {id} was not found")).with_details(json!({ "resource": kind, "id": id }))
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(Code::Conflict, message)
    }
    pub fn denied(message: impl Into<String>) -> Self {
        Self::new(Code::PermissionDenied, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Code::Internal, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(Code::Unavailable, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_type(), self.message)
    }
}

impl std::error::Error for Error {}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        let details = json!({ "type": e.code.as_type(), "details": e.details });
        tonic::Status::with_details(e.code.grpc(), e.message, details.to_string().into_bytes().into())
    }
}

impl From<tonic::Status> for Error {
    /// Recovers the classification a Checkfu service attached; a status from
    /// anything else (transport failure, a dead peer) is classified by its code.
    fn from(s: tonic::Status) -> Self {
        if let Ok(v) = serde_json::from_slice::<Value>(s.details())
            && let Some(code) = v.get("type").and_then(Value::as_str).and_then(Code::from_type)
        {
            return Error { code, message: s.message().to_string(), details: v.get("details").cloned().unwrap_or_else(|| json!({})) };
        }
        let code = match s.code() {
            tonic::Code::NotFound => Code::NotFound,
            tonic::Code::InvalidArgument => Code::Invalid,
            tonic::Code::PermissionDenied => Code::PermissionDenied,
            tonic::Code::Unauthenticated => Code::InvalidKey,
            tonic::Code::AlreadyExists | tonic::Code::Aborted => Code::Conflict,
            tonic::Code::FailedPrecondition => Code::PreconditionFailed,
            tonic::Code::ResourceExhausted => Code::RateLimited,
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => Code::Unavailable,
            _ => Code::Internal,
        };
        Error::new(code, s.message().to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::invalid(format!("invalid JSON: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_survives_a_grpc_hop() {
        let e = Error::invalid_field("name", "name is required");
        let back = Error::from(tonic::Status::from(e.clone()));
        assert_eq!(back, e);
    }

    #[test]
    fn foreign_status_is_classified_by_code() {
        let e = Error::from(tonic::Status::unavailable("connection refused"));
        assert_eq!(e.code, Code::Unavailable);
        assert_eq!(e.code.http_status(), 503);
    }

    #[test]
    fn every_type_round_trips() {
        for c in Code::ALL {
            assert_eq!(Code::from_type(c.as_type()), Some(c));
        }
    }
}
