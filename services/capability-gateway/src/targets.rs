//! Which hosts a fetch may reach: those on the allowlist (addresses must
//! also be public: `checkfu_core::net::is_public`). Both checks run on the
//! first URL and on every redirect.

/// An HTTP client builder that reaches `host` only at `addr`, the address
/// checked before connecting (so a second DNS answer cannot send the
/// request elsewhere), following no redirect and ignoring the process's
/// proxy settings. Callers add their timeouts and headers.
pub fn pinned_client(host: &str, addr: std::net::SocketAddr) -> reqwest::ClientBuilder {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).no_proxy().resolve(host, addr)
}

/// Whether `host` is on the allowlist: an exact entry, a `*.suffix`
/// entry covering a subdomain (not the bare suffix itself), or `*`, every
/// host (whose addresses must still be public).
pub fn host_allowed(allowed: &[String], host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    allowed.iter().any(|a| match a.strip_prefix("*.") {
        None if a == "*" => true,
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(suffix) && host.as_bytes()[host.len() - suffix.len() - 1] == b'.',
        None => *a == host,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowlist_matches_exact_hosts_and_subdomains_of_wildcards() {
        let allowed = vec!["example.com".to_string(), "*.docs.rs".to_string()];
        assert!(host_allowed(&allowed, "example.com"));
        assert!(host_allowed(&allowed, "EXAMPLE.com."));
        assert!(!host_allowed(&allowed, "www.example.com"));
        assert!(!host_allowed(&allowed, "example.com.evil.net"));
        assert!(host_allowed(&allowed, "a.docs.rs"));
        assert!(!host_allowed(&allowed, "docs.rs"), "a wildcard covers subdomains only");
        assert!(!host_allowed(&allowed, "evildocs.rs"));
        assert!(!host_allowed(&[], "example.com"));
        assert!(host_allowed(&["*".to_string()], "anything.example"), "* is every host");
    }
}
