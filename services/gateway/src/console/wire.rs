//! The console session's body and answer on the wire.

use crate::views::Principal;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The sign-in: the API key to exchange (sent once, never stored).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateConsoleSession {
    pub api_key: String,
}

/// A console session: who it acts as, and when it ends.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConsoleSession {
    pub id: String,
    /// The Principal the session acts as (the key's).
    pub principal: Principal,
    /// The API key the session is bound to: revoking it ends the session.
    pub key_id: String,
    pub created_at: String,
    /// The latest the session lasts, however it is used.
    pub expires_at: String,
    /// How long the session survives without a request.
    pub idle_timeout_seconds: i64,
    /// The CSRF token to send as `Checkfu-CSRF` on changes; only in the
    /// sign-in answer (it is also the `checkfu_csrf` cookie).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csrf_token: Option<String>,
}
