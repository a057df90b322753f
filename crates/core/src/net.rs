//! Network targets the platform reaches on a tenant's behalf (web_fetch,
//! outbound webhooks): only public addresses, never private, loopback or
//! link-local ones, unless an installation explicitly allows them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() {
        return false;
    }
    // Addresses that carry an IPv4 address inside are as public as it is:
    // IPv4-compatible `::a.b.c.d` (::/96), 6to4 (2002::/16) and the
    // well-known NAT64 prefix (64:ff9b::/96).
    if s[..6] == [0; 6] {
        return public_v4(v4(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return public_v4(v4(s[1], s[2]));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return public_v4(v4(s[6], s[7]));
    }
    !((s[0] & 0xfe00) == 0xfc00         // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80    // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0    // site-local fec0::/10 (deprecated, still routed inside sites)
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x2001 && s[1] == 0)      // Teredo 2001::/32: a tunnel to an obfuscated IPv4 peer
        || (s[0] == 0x0064 && s[1] == 0xff9b) // local-use NAT64 64:ff9b:1::/48 and the rest of the prefix
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0])) // discard-only 100::/64
}

/// The host (IPv6 brackets removed) and port of a URL the platform calls
/// for a tenant: http or https, with a host, and carrying no credentials.
pub fn http_target(url: &url::Url) -> crate::Result<(String, u16)> {
    let invalid = |why: &str| crate::Error::invalid_field("url", why);
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("only http and https URLs are allowed"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("URLs carrying credentials are refused"));
    }
    let host = url.host_str().ok_or_else(|| invalid("the URL has no host"))?;
    // Always known for http and https.
    let port = url.port_or_known_default().unwrap_or(80);
    Ok((host.trim_start_matches('[').trim_end_matches(']').to_string(), port))
}

/// Resolves `host:port` and returns the one address to connect to, refusing
/// (as `permission.denied`) a name with any non-public address unless
/// `allow_private`. Connecting to exactly this address (pinning it) keeps a
/// later DNS answer from changing the target after the check.
pub async fn resolve_target(host: &str, port: u16, allow_private: bool) -> crate::Result<std::net::SocketAddr> {
    let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| crate::Error::unavailable(format!("cannot resolve {host}: {e}")))?
        .collect();
    let first = *addrs.first().ok_or_else(|| crate::Error::unavailable(format!("{host} resolves to no address")))?;
    if !allow_private && addrs.iter().any(|a| !is_public(a.ip())) {
        return Err(crate::Error::denied(format!(
            "{host} resolves to a private, loopback or link-local address, which is never contacted"
        )));
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            // IPv4 addresses carried inside IPv6 ones.
            "::127.0.0.1",
            "::10.0.0.1",
            "::169.254.169.254",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::",
            "2002:c0a8:0101::1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::10.1.1.1",
            "64:ff9b::169.254.169.254",
            "64:ff9b:1::8.8.8.8",
            "fec0::1",
            "fedf::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "100::1",
        ] {
            assert!(!is_public(private.parse().expect("ip")), "{private} must be refused");
        }
        for public in ["1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::8.8.8.8", "2002:0808:0808::1", "64:ff9b::1.1.1.1"] {
            assert!(is_public(public.parse().expect("ip")), "{public} is public");
        }
    }
}
