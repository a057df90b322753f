//! Who is calling: `Authorization: Bearer <api key>`, resolved by governance
//! on every request, so a revoked key stops working at once.

use crate::AppState;
use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use checkfu_core::{Code, Error};
use checkfu_proto::governance::v1::AuthenticateRequest;

/// Counts the request against the principal's per-second limit: over it,
/// 429 `rate_limited` with `retry-after`. A limiter that cannot be reached
/// lets the request through (it guards fairness, not access).
async fn limit(state: &AppState, principal_id: &str) -> Result<(), ApiError> {
    let window = std::time::Duration::from_secs(1);
    let hit = state.limits.limiter.hit(principal_id, state.limits.per_second, window).await;
    if hit.is_ok() {
        state.limits.unreachable.recovered();
    }
    match hit {
        Ok(checkfu_ephemeral::Admit::Yes) => Ok(()),
        Ok(checkfu_ephemeral::Admit::No { retry_after }) => {
            let secs = retry_after.as_millis().div_ceil(1000).max(1) as u64;
            Err(Error::new(Code::RateLimited, format!("more than {} requests per second; retry after {secs} s", state.limits.per_second))
                .with_details(serde_json::json!({"retry_after_seconds": secs, "limit_per_second": state.limits.per_second}))
                .into())
        }
        Err(e) => {
            state.limits.unreachable.failed(&e);
            Ok(())
        }
    }
}

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
        limit(state, &resp.principal_id).await?;
        Ok(Caller { principal_id: resp.principal_id, key_id: resp.key_id })
    }
}
