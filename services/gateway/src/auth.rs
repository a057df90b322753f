//! Who is calling: `Authorization: Bearer <api key>`, resolved by governance
//! on every request, so a revoked key stops working at once.

use crate::AppState;
use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use checkfu_core::{Code, Error};
use checkfu_proto::governance::v1::AuthenticateRequest;

/// The authenticated principal behind a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal_id: String,
    pub key_id: String,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let header = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::trim).unwrap_or_default();
        let secret = header.strip_prefix("Bearer ").or_else(|| header.strip_prefix("bearer ")).map(str::trim).unwrap_or_default();
        if secret.is_empty() {
            return Err(Error::new(Code::MissingKey, "an API key is required: send Authorization: Bearer <key>").into());
        }
        let resp = state.gov.clone().authenticate(AuthenticateRequest { secret: secret.to_string() }).await?.into_inner();
        Ok(Caller { principal_id: resp.principal_id, key_id: resp.key_id })
    }
}
