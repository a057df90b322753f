//! The console's files, compiled into the binary from `console/dist/`
//! (built by esbuild and committed, so building `checkfu` needs no
//! JavaScript toolchain). Every path under `/console/` that is not a file
//! answers the page itself, so each of the console's URLs can be shared
//! and reloaded. Files are revalidated by ETag and sent gzip-compressed to
//! browsers that accept it; every answer carries a strict CSP.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use std::io::Write;
use std::sync::LazyLock;

struct File {
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

const FILES: &[File] = &[
    File { path: "index.html", content_type: "text/html; charset=utf-8", bytes: include_bytes!("../../../../console/dist/index.html") },
    File { path: "app.js", content_type: "text/javascript; charset=utf-8", bytes: include_bytes!("../../../../console/dist/app.js") },
    File { path: "app.css", content_type: "text/css; charset=utf-8", bytes: include_bytes!("../../../../console/dist/app.css") },
    File { path: "icon.svg", content_type: "image/svg+xml", bytes: include_bytes!("../../../../console/dist/icon.svg") },
];

/// The console's policy: its own files only, no inline script or style, no
/// `eval`, no framing, nothing sent to another origin.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
                       font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// A file ready to serve: its bytes, gzipped bytes and ETag.
struct Prepared {
    file: &'static File,
    gzip: Vec<u8>,
    etag: String,
}

/// Compressed once, on first use.
static PREPARED: LazyLock<Vec<Prepared>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|file| {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            let gzip = enc.write_all(file.bytes).and_then(|()| enc.finish()).unwrap_or_default();
            let etag = format!("\"{}\"", &checkfu_core::sha256_hex(file.bytes)[..32]);
            Prepared { file, gzip, etag }
        })
        .collect()
});

fn serve(path: &str, headers: &HeaderMap) -> Response {
    let name = match path {
        "" => "index.html",
        p if p.starts_with("assets/") => &p["assets/".len()..],
        // A page of the console (a route the script renders).
        _ => "index.html",
    };
    let Some(p) = PREPARED.iter().find(|p| p.file.path == name) else {
        return (StatusCode::NOT_FOUND, secure(HeaderMap::new()), "no such file").into_response();
    };
    let mut h = HeaderMap::new();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(p.file.content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if let Ok(v) = HeaderValue::from_str(&p.etag) {
        h.insert(header::ETAG, v);
    }
    let h = secure(h);
    if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.split(',').any(|t| t.trim() == p.etag)) {
        return (StatusCode::NOT_MODIFIED, h).into_response();
    }
    let gzip = headers.get(header::ACCEPT_ENCODING).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("gzip"));
    if gzip && !p.gzip.is_empty() {
        let mut h = h;
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        return (h, p.gzip.clone()).into_response();
    }
    (h, p.file.bytes).into_response()
}

/// The headers every console answer carries.
fn secure(mut h: HeaderMap) -> HeaderMap {
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h
}

/// `/console` and everything under `/console/`.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/console", axum::routing::get(|| async { Redirect::permanent("/console/") }))
        .route("/console/", axum::routing::get(|headers: HeaderMap| async move { serve("", &headers) }))
        .route("/console/{*path}", axum::routing::get(|Path(path): Path<String>, headers: HeaderMap| async move { serve(&path, &headers) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_the_index_and_files_are_themselves() {
        let r = serve("sessions/sess_1", &HeaderMap::new());
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(r.headers()[header::CONTENT_SECURITY_POLICY], CSP);
        let r = serve("assets/app.js", &HeaderMap::new());
        assert_eq!(r.headers()[header::CONTENT_TYPE], "text/javascript; charset=utf-8");
        assert_eq!(serve("assets/missing.js", &HeaderMap::new()).status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn an_etag_match_is_not_modified_and_gzip_is_smaller() {
        let first = serve("assets/app.js", &HeaderMap::new());
        let etag = first.headers()[header::ETAG].clone();
        let mut h = HeaderMap::new();
        h.insert(header::IF_NONE_MATCH, etag);
        assert_eq!(serve("assets/app.js", &h).status(), StatusCode::NOT_MODIFIED);
        let p = PREPARED.iter().find(|p| p.file.path == "app.js").unwrap();
        assert!(!p.gzip.is_empty() && p.gzip.len() < p.file.bytes.len(), "gzip shrinks the script");
    }
}
