//! The OAuth 2 refresh-token grant (RFC 6749 §6) for `oauth2_refresh`
//! credentials: the capability gateway trades the refresh token for an
//! access token when none is valid for 60 s more, and once after an
//! upstream 401. A returned refresh token replaces the old one.
//!
//! The token endpoint is resolved and checked like any upstream (public
//! unless private targets are allowed), the connection pinned to the
//! checked address, redirects refused, the answer bounded.

use base64::Engine;
use checkfu_core::net;
use serde::Deserialize;
use std::time::Duration;

/// An access token is refreshed when it has less than this left.
pub const REFRESH_MARGIN_MS: i64 = 60_000;
/// A token endpoint's answer larger than this is refused.
const MAX_ANSWER: usize = 64 * 1024;

/// What the token endpoint issued.
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    pub access_token: String,
    /// When the access token expires (epoch ms); an hour when unsaid.
    pub expires_ms: i64,
    pub refresh_token: Option<String>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<f64>,
    #[serde(default)]
    refresh_token: Option<String>,
}

/// Why a refresh failed, in the platform's words (never the endpoint's
/// body, which may echo what was sent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshFailed(pub String);

pub struct Grant<'a> {
    pub token_endpoint: &'a str,
    pub client_id: &'a str,
    pub client_secret: Option<&'a str>,
    /// `client_secret_basic`, `client_secret_post` or `none`.
    pub auth: &'a str,
    pub refresh_token: &'a str,
    pub scope: Option<&'a str>,
}

/// Every byte but the unreserved ones as `%XX`.
fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

fn form_encode(pairs: &[(&str, &str)]) -> String {
    pairs.iter().map(|(k, v)| format!("{}={}", pct(k), pct(v))).collect::<Vec<_>>().join("&")
}

pub async fn refresh(g: &Grant<'_>, allow_private: bool, now_ms: i64) -> Result<Issued, RefreshFailed> {
    let url = reqwest::Url::parse(g.token_endpoint).map_err(|_| RefreshFailed("the token endpoint is not a URL".into()))?;
    let (host, port) = net::http_target(&url).map_err(|_| RefreshFailed("the token endpoint is not an http(s) URL".into()))?;
    let addr = net::resolve_target(&host, port, allow_private)
        .await
        .map_err(|_| RefreshFailed("the token endpoint could not be resolved to an address this installation may reach".into()))?;
    let client = crate::targets::pinned_client(&host, addr)
        .timeout(Duration::from_secs(20))
        .build()
        .map_err(|_| RefreshFailed("no HTTP client".into()))?;
    let mut form = vec![("grant_type", "refresh_token"), ("refresh_token", g.refresh_token)];
    if let Some(s) = g.scope {
        form.push(("scope", s));
    }
    let mut req = client.post(url).header("accept", "application/json").header("content-type", "application/x-www-form-urlencoded");
    match (g.auth, g.client_secret) {
        ("client_secret_basic", Some(secret)) => {
            // RFC 6749 §2.3.1: each part form-encoded, then Basic.
            let pair = format!("{}:{}", pct(g.client_id), pct(secret));
            let mut v = http::HeaderValue::from_str(&format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair)))
                .map_err(|_| RefreshFailed("the client credentials are not a header value".into()))?;
            v.set_sensitive(true);
            req = req.header(http::header::AUTHORIZATION, v);
        }
        ("client_secret_post", Some(secret)) => {
            form.push(("client_id", g.client_id));
            form.push(("client_secret", secret));
        }
        _ => form.push(("client_id", g.client_id)),
    }
    let resp = req.body(form_encode(&form)).send().await.map_err(|_| RefreshFailed("the token endpoint could not be reached".into()))?;
    let status = resp.status();
    let body = resp.bytes().await.map_err(|_| RefreshFailed("the token endpoint's answer could not be read".into()))?;
    if body.len() > MAX_ANSWER {
        return Err(RefreshFailed("the token endpoint's answer is too large".into()));
    }
    if !status.is_success() {
        // The `error` code is a registered token (RFC 6749 §5.2): safe to show.
        let code = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
            .filter(|c| c.len() <= 64 && c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
            .unwrap_or_else(|| "unknown".into());
        return Err(RefreshFailed(format!("the token endpoint refused the refresh (HTTP {}, {code})", status.as_u16())));
    }
    let answer: TokenAnswer =
        serde_json::from_slice(&body).map_err(|_| RefreshFailed("the token endpoint's answer is not a token response".into()))?;
    if answer.access_token.is_empty() || answer.access_token.len() > crate::model::MAX_SECRET {
        return Err(RefreshFailed("the token endpoint issued no usable access token".into()));
    }
    let lifetime_ms = answer.expires_in.filter(|s| s.is_finite() && *s > 0.0).map_or(3_600_000, |s| (s * 1000.0) as i64);
    Ok(Issued {
        access_token: answer.access_token,
        expires_ms: now_ms + lifetime_ms,
        refresh_token: answer.refresh_token.filter(|r| !r.is_empty() && r.len() <= crate::model::MAX_SECRET),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_percent_encoded() {
        assert_eq!(
            form_encode(&[("grant_type", "refresh_token"), ("refresh_token", "a b/c+")]),
            "grant_type=refresh_token&refresh_token=a%20b%2Fc%2B"
        );
    }
}
