//! The console session behind a request's cookie, asked of governance on
//! every request (never cached), so revoking the key it was made from, or
//! disabling its Principal, ends it at once.

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use checkfu_proto::governance::v1::ConsoleTokenRequest;

/// Who the console session `token` acts as, and the digest its CSRF token
/// must have.
pub async fn resolve(state: &AppState, token: &str) -> Result<(Caller, String), ApiError> {
    let s = state.gov.clone().resolve_console_session(ConsoleTokenRequest { token: token.to_string() }).await?.into_inner();
    Ok((Caller { principal_id: s.principal_id, key_id: s.key_id }, s.csrf_sha256))
}
