//! The console's two cookies: the session token (`HttpOnly`: script never
//! sees it) and the CSRF token (readable by the console's script, which
//! sends it back as `Checkfu-CSRF`). Both `SameSite=Strict`, `Path=/`,
//! `Secure` when the request came over TLS.

use axum::http::HeaderMap;
use cookie::{Cookie, SameSite};

/// The session cookie: its value is the console session's token.
pub const SESSION: &str = "checkfu_session";
/// The CSRF cookie: the double-submit half the console's script reads.
pub const CSRF: &str = "checkfu_csrf";

/// The value of cookie `name` on the request, if sent (the first, if sent
/// twice); unparseable pairs are ignored.
pub fn get(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .map(|c| c.value().to_string())
        .filter(|v| !v.is_empty())
}

/// Whether the browser reached the gateway over TLS (directly, or through
/// a proxy that says so): only then may cookies be `Secure`.
pub fn over_tls(headers: &HeaderMap) -> bool {
    headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).is_some_and(|p| p.eq_ignore_ascii_case("https"))
}

/// A `Set-Cookie` value; `max_age_s` 0 deletes the cookie.
pub fn set(name: &str, value: &str, http_only: bool, secure: bool, max_age_s: i64) -> String {
    Cookie::build((name, value))
        .path("/")
        .http_only(http_only)
        .secure(secure)
        .same_site(SameSite::Strict)
        .max_age(cookie::time::Duration::seconds(max_age_s))
        .build()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_named_cookie_among_others() {
        let mut h = HeaderMap::new();
        h.insert("cookie", "a=1; checkfu_session=cks_abc; checkfu_csrf=csrf_x".parse().unwrap());
        assert_eq!(get(&h, SESSION).as_deref(), Some("cks_abc"));
        assert_eq!(get(&h, CSRF).as_deref(), Some("csrf_x"));
        assert_eq!(get(&h, "b"), None);
        h.insert("cookie", "checkfu_session=".parse().unwrap());
        assert_eq!(get(&h, SESSION), None, "an empty value is no cookie");
    }

    #[test]
    fn the_session_cookie_is_strict_and_hidden_from_script() {
        let c = set(SESSION, "cks_1", true, true, 43200);
        for part in ["checkfu_session=cks_1", "HttpOnly", "SameSite=Strict", "Secure", "Path=/", "Max-Age=43200"] {
            assert!(c.contains(part), "{c} lacks {part}");
        }
        let c = set(CSRF, "csrf_1", false, false, 0);
        assert!(!c.contains("HttpOnly") && !c.contains("Secure") && c.contains("Max-Age=0"), "{c}");
    }
}
