//! Console sign-in and sign-out: an API key exchanged once for a console
//! session cookie (see `console/`).

use crate::AppState;
use crate::auth::{limit, throttled};
use crate::bodies::parse;
use crate::console::{cookies, csrf, wire};
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;
use crate::views::{self, ErrorEnvelope};
use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use checkfu_core::time::rfc3339;
use checkfu_core::{Code, Error};
use checkfu_proto::governance::v1 as gov;
use std::net::SocketAddr;

async fn answer(st: &AppState, s: gov::ConsoleSession, csrf_token: Option<String>) -> Result<wire::ConsoleSession, ApiError> {
    let principal = st.gov.clone().get_principal(gov::GetByIdRequest { id: s.principal_id.clone() }).await?.into_inner();
    Ok(wire::ConsoleSession {
        id: s.id,
        principal: views::principal(&principal),
        key_id: s.key_id,
        created_at: rfc3339(s.created_ms),
        expires_at: rfc3339(s.expires_ms),
        idle_timeout_seconds: s.idle_timeout_ms / 1000,
        csrf_token,
    })
}

/// These routes are about the console's cookie, not a key.
fn no_cookie() -> Error {
    Error::new(Code::MissingKey, "no console session: this endpoint reads the checkfu_session cookie the console's sign-in sets")
}

fn set_cookies(h: &mut HeaderMap, session: &str, csrf_token: &str, secure: bool, max_age_s: i64) {
    for c in [
        cookies::set(cookies::SESSION, session, true, secure, max_age_s),
        cookies::set(cookies::CSRF, csrf_token, false, secure, max_age_s),
    ] {
        if let Ok(v) = HeaderValue::from_str(&c) {
            h.append(header::SET_COOKIE, v);
        }
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

#[utoipa::path(post, path = "/v1/console/sessions", tag = "consoleSessions", operation_id = "consoleSessions.createConsoleSession",
    security(()), request_body = wire::CreateConsoleSession,
    responses((status = 201, description = "The session; its token is set as the HttpOnly `checkfu_session` cookie and its CSRF token as `checkfu_csrf`", body = wire::ConsoleSession),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_console_session(
    State(st): State<AppState>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    // Signing a browser in from another site would hand it someone else's
    // session (login CSRF).
    csrf::same_origin(&headers)?;
    let b: wire::CreateConsoleSession = parse(&body)?;
    // The key is throttled exactly as a key presented on any request.
    let ip = extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let opened = throttled(&st, ip, &b.api_key, async {
        Ok::<_, ApiError>(st.gov.clone().open_console_session(gov::AuthenticateRequest { secret: b.api_key.clone() }).await?.into_inner())
    })
    .await?;
    let session = opened.session.ok_or_else(|| Error::internal("governance answered no console session"))?;
    let max_age_s = (session.expires_ms - session.created_ms) / 1000;
    let view = answer(&st, session, Some(opened.csrf_token.clone())).await?;
    let mut h = HeaderMap::new();
    set_cookies(&mut h, &opened.token, &opened.csrf_token, cookies::over_tls(&headers), max_age_s);
    Ok((StatusCode::CREATED, h, Json(view)).into_response())
}

#[utoipa::path(get, path = "/v1/console/sessions/current", tag = "consoleSessions", operation_id = "consoleSessions.getConsoleSession",
    security(("console_session" = [])),
    responses((status = 200, description = "The console session the request's cookie names", body = wire::ConsoleSession), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_console_session(
    State(st): State<AppState>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> ApiResult<Json<wire::ConsoleSession>> {
    let token = cookies::get(&headers, cookies::SESSION).ok_or_else(no_cookie)?;
    // One resolve, under the same throttle and per-Principal limit as any
    // request the cookie authenticates.
    let ip = extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let s = throttled(&st, ip, &token, async {
        Ok::<_, ApiError>(st.gov.clone().resolve_console_session(gov::ConsoleTokenRequest { token: token.clone() }).await?.into_inner())
    })
    .await?;
    limit(&st, &s.principal_id).await?;
    Ok(Json(answer(&st, s, None).await?))
}

#[utoipa::path(delete, path = "/v1/console/sessions/current", tag = "consoleSessions", operation_id = "consoleSessions.deleteConsoleSession",
    security(("console_session" = [])),
    responses((status = 204, description = "Signed out: the session is ended server-side and its cookies cleared"), (status = "4XX", body = ErrorEnvelope)))]
pub async fn delete_console_session(State(st): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    let token = cookies::get(&headers, cookies::SESSION).ok_or_else(no_cookie)?;
    // A live session signs out only with its CSRF token, from its origin;
    // one already over just loses its cookies.
    match crate::auth::console_session(&st, &token).await {
        Ok((_, csrf_sha256)) => {
            csrf::check(&axum::http::Method::DELETE, &headers, &csrf_sha256)?;
            st.gov.clone().close_console_session(gov::ConsoleTokenRequest { token }).await?;
        }
        Err(e) if e.0.code == Code::InvalidKey => {}
        Err(e) => return Err(e),
    }
    let mut h = HeaderMap::new();
    set_cookies(&mut h, "", "", cookies::over_tls(&headers), 0);
    Ok((StatusCode::NO_CONTENT, h).into_response())
}
