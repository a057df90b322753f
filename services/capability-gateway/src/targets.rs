//! Which targets a fetch may reach: hosts on the allowlist, and only public
//! addresses. Both checks run on the first URL and on every redirect.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether `host` is on the allowlist: an exact entry, or a `*.suffix`
/// entry covering a subdomain (not the bare suffix itself).
pub fn host_allowed(allowed: &[String], host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    allowed.iter().any(|a| match a.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(suffix) && host.as_bytes()[host.len() - suffix.len() - 1] == b'.',
        None => *a == host,
    })
}

/// Whether an address is on the public internet: not private, loopback,
/// link-local, unspecified, multicast, broadcast, shared (CGNAT),
/// documentation, benchmarking or reserved space.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => public_v4(v4),
            None => public_v6(v6),
        },
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || o[0] == 0
        || (o[0] == 100 && (64..128).contains(&o[1]))
        || (o[0] == 192 && o[1] == 0 && o[2] == 0)
        || (o[0] == 198 && (18..20).contains(&o[1]))
        || o[0] >= 240)
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] == 0x2001 && s[1] == 0x0db8)
        || (s[0] == 0x0064 && s[1] == 0xff9b))
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
    }

    #[test]
    fn only_public_addresses_are_reachable() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "224.0.0.1",
        ] {
            assert!(!is_public(private.parse().expect("ip")), "{private} must be refused");
        }
        for public in ["1.1.1.1", "93.184.216.34", "2606:4700:4700::1111"] {
            assert!(is_public(public.parse().expect("ip")), "{public} is public");
        }
    }
}
