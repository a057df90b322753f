//! Cross-site request forgery: a request authenticated by the console's
//! cookie that changes anything (any method but GET, HEAD and OPTIONS) must
//! come from the console's own origin and carry `Checkfu-CSRF` equal to the
//! `checkfu_csrf` cookie (double submit) and to the token minted with the
//! session (governance keeps its digest). A page on another origin can make
//! the browser send the cookie, but can neither read the token nor set the
//! header without a CORS preflight the gateway never grants.

use axum::http::{HeaderMap, Method};
use checkfu_core::{Code, Error};

/// The header the console sends its CSRF token in.
pub const HEADER: &str = "checkfu-csrf";

fn refused(why: &str) -> Error {
    Error::new(Code::PermissionDenied, why.to_string()).with_reason("csrf")
}

/// Whether a request came from the page's own origin, as far as the browser
/// says: `Sec-Fetch-Site` when sent, and `Origin` naming this host.
/// Clients that send neither (not browsers) pass; the token still decides.
pub fn same_origin(headers: &HeaderMap) -> Result<(), Error> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && !matches!(site, "same-origin" | "none")
    {
        return Err(refused("a cross-origin request may not use the console's session"));
    }
    if let Some(origin) = headers.get(axum::http::header::ORIGIN) {
        let host = headers.get(axum::http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let forwarded = headers.get("x-forwarded-host").and_then(|v| v.to_str().ok()).unwrap_or_default();
        let authority = origin.to_str().ok().and_then(|o| o.split_once("://")).map(|(_, a)| a).unwrap_or_default();
        if authority.is_empty() || (authority != host && authority != forwarded) {
            return Err(refused("a cross-origin request may not use the console's session"));
        }
    }
    Ok(())
}

/// Refuses a cookie-authenticated request that changes something without
/// the session's CSRF token, or from another origin.
pub fn check(method: &Method, headers: &HeaderMap, csrf_sha256: &str) -> Result<(), Error> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    same_origin(headers)?;
    let header = headers.get(HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if header.is_empty() {
        return Err(refused("a change made with the console's session needs the Checkfu-CSRF header"));
    }
    let cookie = super::cookies::get(headers, super::cookies::CSRF).unwrap_or_default();
    if cookie != header || checkfu_core::sha256_hex(header) != csrf_sha256 {
        return Err(refused("the Checkfu-CSRF header does not match this console session"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, headers: &[(&str, &str)], digest: &str) -> Result<(), Error> {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.insert(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        check(&method.parse().unwrap(), &h, digest)
    }

    #[test]
    fn reads_pass_and_changes_need_the_matching_token_from_this_origin() {
        let digest = checkfu_core::sha256_hex("csrf_t");
        assert!(req("GET", &[("origin", "https://evil.example")], &digest).is_ok());
        let good = [("host", "c.example"), ("origin", "https://c.example"), ("cookie", "checkfu_csrf=csrf_t"), (HEADER, "csrf_t")];
        assert!(req("POST", &good, &digest).is_ok());
        let no_header = &good[..3];
        assert_eq!(req("POST", no_header, &digest).unwrap_err().code, Code::PermissionDenied);
        let other_origin =
            [("host", "c.example"), ("origin", "https://evil.example"), ("cookie", "checkfu_csrf=csrf_t"), (HEADER, "csrf_t")];
        assert!(req("DELETE", &other_origin, &digest).is_err());
        let cross_site = [("host", "c.example"), ("sec-fetch-site", "cross-site"), ("cookie", "checkfu_csrf=csrf_t"), (HEADER, "csrf_t")];
        assert!(req("POST", &cross_site, &digest).is_err());
        let forged = [("host", "c.example"), ("cookie", "checkfu_csrf=csrf_u"), (HEADER, "csrf_u")];
        assert!(req("POST", &forged, &digest).is_err(), "a pair that is not this session's");
    }
}
