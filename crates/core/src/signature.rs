//! `Checkfu-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`
//! (api.md §8): outbound webhooks sign with it, and signed ingest (§12.4)
//! checks it. Receivers recompute it over the raw body and reject a `t` more
//! than five minutes away, which bounds replays.

use hmac::{KeyInit, Mac};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// How far a receiver accepts `t` from its own clock.
pub const TOLERANCE_SECONDS: i64 = 300;

fn mac(secret: &str, t: i64, body: &[u8]) -> HmacSha256 {
    // `new_from_slice` fails only for fixed-size keys; HMAC takes any length.
    let mut m = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC accepts keys of any length");
    m.update(t.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    m
}

/// Hex HMAC-SHA256 of a raw body alone — how providers sign deliveries
/// (GitHub's `X-Hub-Signature-256` is `sha256=` and this).
pub fn body_mac_hex(secret: &str, body: &[u8]) -> String {
    let mut m = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC accepts keys of any length");
    m.update(body);
    hex::encode(m.finalize().into_bytes())
}

/// Whether `signature_hex` is `body`'s [`body_mac_hex`], compared in
/// constant time.
pub fn verify_body_mac(secret: &str, body: &[u8], signature_hex: &str) -> bool {
    let Ok(bytes) = hex::decode(signature_hex.trim()) else { return false };
    let mut m = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC accepts keys of any length");
    m.update(body);
    m.verify_slice(&bytes).is_ok()
}

/// A new signing secret: `whsec_` and 64 hex digits (256 random bits).
pub fn new_secret() -> String {
    use rand::Rng;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("whsec_{}", hex::encode(bytes))
}

/// The header value for `body` signed at `t`.
pub fn sign(secret: &str, t: i64, body: &[u8]) -> String {
    format!("t={t},v1={}", hex::encode(mac(secret, t, body).finalize().into_bytes()))
}

/// Verifies a header as a receiver would: a well-formed `t` within the
/// tolerance of `now` and a matching `v1` (compared in constant time).
pub fn verify(secret: &str, header: &str, body: &[u8], now_seconds: i64) -> bool {
    let mut t = None;
    let mut v1 = vec![];
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => v1.push(v.to_string()),
            _ => {}
        }
    }
    let Some(t) = t else { return false };
    if (now_seconds - t).abs() > TOLERANCE_SECONDS {
        return false;
    }
    v1.iter().any(|sig| hex::decode(sig).is_ok_and(|bytes| mac(secret, t, body).verify_slice(&bytes).is_ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_and_reject_tampering_and_old_timestamps() {
        let h = sign("whsec_abc", 1_700_000_000, b"{\"a\":1}");
        assert!(h.starts_with("t=1700000000,v1="));
        assert!(verify("whsec_abc", &h, b"{\"a\":1}", 1_700_000_100));
        assert!(!verify("whsec_abc", &h, b"{\"a\":2}", 1_700_000_100), "the body changed");
        assert!(!verify("whsec_other", &h, b"{\"a\":1}", 1_700_000_100), "another secret");
        assert!(!verify("whsec_abc", &h, b"{\"a\":1}", 1_700_000_000 + 301), "more than 5 minutes away");
        assert!(!verify("whsec_abc", "v1=00", b"", 0), "no timestamp");
    }

    /// GitHub's documented example: secret "It's a Secret to Everybody",
    /// payload "Hello, World!".
    #[test]
    fn a_body_signature_matches_githubs_example() {
        let sig = body_mac_hex("It's a Secret to Everybody", b"Hello, World!");
        assert_eq!(sig, "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17");
        assert!(verify_body_mac("It's a Secret to Everybody", b"Hello, World!", &sig));
        assert!(!verify_body_mac("another", b"Hello, World!", &sig));
        assert!(!verify_body_mac("It's a Secret to Everybody", b"Hello, World!", "zz"));
    }

    /// A known answer computed outside this code (Python's `hmac` and
    /// `openssl dgst -sha256 -hmac` agree on it), so a signing bug that
    /// `verify` shares cannot hide.
    #[test]
    fn the_signature_matches_an_independent_implementation() {
        let body = br#"{"id":"wevt_1","type":"session.status_idle"}"#;
        assert_eq!(
            sign("whsec_known_answer", 1_700_000_000, body),
            "t=1700000000,v1=7faed672f05a5a305b8c35cffb2e8146b1bbf50f97fd2fa4cd02bc1e7ccf16dd"
        );
    }
}
