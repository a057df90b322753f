//! Who is calling: `Authorization: Bearer <api key>` (or the console's
//! session cookie, see `console/`), resolved by governance — or by the
//! replica's decision cache, which follows every change governance
//! announces (`decisions.rs`) — so a revoked key stops working at once.

use crate::AppState;
use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use checkfu_core::{Code, Error};
use checkfu_proto::governance::v1::{AuthenticateRequest, ConsoleTokenRequest};

/// Counts the request against the principal's per-second limit: over it,
/// 429 `rate_limited` with `retry-after`. A limiter that cannot be reached
/// lets the request through (it guards fairness, not access).
pub(crate) async fn limit(state: &AppState, principal_id: &str) -> Result<(), ApiError> {
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
        // A request the gateway makes of itself on an authenticated
        // caller's behalf (the CMA projection, `cma/native.rs`) carries that
        // caller; extensions cannot come off the wire.
        if let Some(c) = parts.extensions.get::<Caller>() {
            return Ok(c.clone());
        }
        let client = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
        let credential = credential(&parts.headers);
        let secret = match &credential {
            Credential::Key(s) | Credential::Console(s) => s.as_str(),
        };
        if secret.is_empty() {
            return Err(Error::new(Code::MissingKey, "an API key is required: send Authorization: Bearer <key>").into());
        }
        let (caller, csrf_sha256) = throttled(state, client, secret, async {
            match &credential {
                Credential::Key(secret) => authenticate(state, secret).await.map(|c| (c, None)),
                Credential::Console(token) => console_session(state, token).await.map(|(c, csrf)| (c, Some(csrf))),
            }
        })
        .await?;
        if let Some(csrf_sha256) = csrf_sha256 {
            crate::console::csrf::check(&parts.method, &parts.headers, &csrf_sha256)?;
        }
        limit(state, &caller.principal_id).await?;
        Ok(caller)
    }
}

/// What a request authenticates with: an API key, or the console's session
/// cookie when it sends no key.
#[derive(Debug, Clone)]
pub enum Credential {
    Key(String),
    Console(String),
}

/// The request's credential: `Authorization: Bearer` first, then the
/// console's cookie; an empty key when it has neither.
pub fn credential(headers: &axum::http::HeaderMap) -> Credential {
    let key = bearer(headers);
    if key.is_empty()
        && let Some(token) = crate::console::cookies::get(headers, crate::console::cookies::SESSION)
    {
        return Credential::Console(token);
    }
    Credential::Key(key.to_string())
}

/// Who the credential belongs to now (an open stream asks again).
pub async fn reauthenticate(state: &AppState, credential: &Credential) -> Result<Caller, ApiError> {
    match credential {
        Credential::Key(secret) => authenticate(state, secret).await,
        Credential::Console(token) => console_session(state, token).await.map(|(c, _)| c),
    }
}

/// Checks a secret (an API key or a console session token) under the
/// address throttle: a throttled address may still present a secret that
/// authenticated recently (its owner shares the address with whoever floods
/// it), the secret is checked as always, and an invalid one counts against
/// the address.
pub(crate) async fn throttled<T, F>(state: &AppState, client: Option<std::net::IpAddr>, secret: &str, check: F) -> Result<T, ApiError>
where
    F: std::future::Future<Output = Result<T, ApiError>>,
{
    let digest = checkfu_core::sha256_hex(secret);
    if let Some(ip) = client
        && !recently_valid(state, &digest)
    {
        refuse_if_throttled(state, ip)?;
    }
    match check.await {
        Err(e) if e.0.code == Code::InvalidKey => {
            state.limits.known_keys.remove(&digest);
            if let Some(ip) = client {
                count_failure(state, ip).await;
            }
            Err(e)
        }
        Err(e) => Err(e),
        Ok(v) => {
            state.limits.known_keys.insert(digest, std::time::Instant::now());
            Ok(v)
        }
    }
}

/// Guards a request whose credential the gateway does not resolve itself
/// (a Runner credential or a work token, which the sessions service
/// checks on every call): the address throttle and the credential's own
/// per-second limit before, and after, a refusal (401) counted against the
/// address as an invalid API key is.
pub async fn guard_opaque_credential<F>(
    state: &AppState,
    client: Option<std::net::IpAddr>,
    secret: &str,
    call: F,
) -> Result<axum::response::Response, ApiError>
where
    F: std::future::Future<Output = axum::response::Response>,
{
    let digest = checkfu_core::sha256_hex(secret);
    if let Some(ip) = client
        && !recently_valid(state, &digest)
    {
        refuse_if_throttled(state, ip)?;
    }
    limit(state, &format!("credential:{digest}")).await?;
    let resp = call.await;
    if resp.status() == axum::http::StatusCode::UNAUTHORIZED {
        state.limits.known_keys.remove(&digest);
        if let Some(ip) = client {
            count_failure(state, ip).await;
        }
    } else if resp.status().is_success() {
        state.limits.known_keys.insert(digest, std::time::Instant::now());
    }
    Ok(resp)
}

/// Invalid keys one client address may present per window by default;
/// past that, its requests are refused before anyone is asked about their
/// key.
pub const AUTH_FAILURES_PER_WINDOW: u32 = 20;
pub const AUTH_FAILURE_WINDOW: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a key that authenticated lets its holder past an address's
/// throttle.
const KNOWN_KEY_TTL: std::time::Duration = std::time::Duration::from_secs(600);

fn recently_valid(state: &AppState, digest: &str) -> bool {
    state.limits.known_keys.get(digest).is_some_and(|at| at.elapsed() < KNOWN_KEY_TTL)
}

fn refuse_if_throttled(state: &AppState, ip: std::net::IpAddr) -> Result<(), ApiError> {
    let Some(until) = state.limits.throttled.get(&ip) else { return Ok(()) };
    let now = std::time::Instant::now();
    if until <= now {
        state.limits.throttled.remove(&ip);
        return Ok(());
    }
    let secs = (until - now).as_millis().div_ceil(1000).max(1) as u64;
    Err(Error::new(Code::RateLimited, format!("too many invalid API keys from this address; retry after {secs} s"))
        .with_details(serde_json::json!({"retry_after_seconds": secs}))
        .into())
}

/// Counts an invalid key against the client's address (in the limiter all
/// gateway replicas share); over the limit, the address is throttled here.
async fn count_failure(state: &AppState, ip: std::net::IpAddr) {
    match state.limits.limiter.hit(&format!("authfail:{ip}"), state.limits.auth_failures_per_window, AUTH_FAILURE_WINDOW).await {
        Ok(checkfu_ephemeral::Admit::No { retry_after }) => {
            tracing::warn!(client = %ip, "throttling a client that presents invalid API keys");
            state.limits.throttled.insert(ip, std::time::Instant::now() + retry_after.max(std::time::Duration::from_secs(1)));
        }
        Ok(checkfu_ephemeral::Admit::Yes) => {}
        Err(e) => {
            state.limits.unreachable.failed(&e);
        }
    }
}

/// The API key a request carries (`Authorization: Bearer <key>`), or "".
pub fn bearer(headers: &axum::http::HeaderMap) -> &str {
    let header = headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::trim).unwrap_or_default();
    header.strip_prefix("Bearer ").or_else(|| header.strip_prefix("bearer ")).map(str::trim).unwrap_or_default()
}

/// Who `secret` belongs to: asked of governance, or kept from its last
/// answer while nothing changed (`decisions.rs`), so a revoked key fails
/// on every request that starts after the revoke was answered.
pub async fn authenticate(state: &AppState, secret: &str) -> Result<Caller, ApiError> {
    let ask = async {
        let resp = state.gov.clone().authenticate(AuthenticateRequest { secret: secret.to_string() }).await?.into_inner();
        Ok((resp.principal_id, resp.key_id))
    };
    let (principal_id, key_id) = state.decisions.key(&checkfu_core::sha256_hex(secret), ask).await?;
    Ok(Caller { principal_id, key_id })
}

/// Who the console session `token` acts as, and the digest its CSRF token
/// must have: asked of governance on every request (never cached), so
/// revoking the key it was made from, or disabling its Principal, ends it
/// at once.
pub async fn console_session(state: &AppState, token: &str) -> Result<(Caller, String), ApiError> {
    let s = state.gov.clone().resolve_console_session(ConsoleTokenRequest { token: token.to_string() }).await?.into_inner();
    Ok((Caller { principal_id: s.principal_id, key_id: s.key_id }, s.csrf_sha256))
}
