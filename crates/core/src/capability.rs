//! Capability tokens: what a runner shows to act for one Run.
//!
//! The sessions service signs a token when a Run is claimed (and again at
//! each heartbeat, as the lease is extended): HMAC-SHA256 under a key
//! derived from the installation's secrets key, so every process of the
//! installation can check one without calling anyone. A token names its
//! Session, Run, lease generation, Environment, routing profile, the tools
//! served outside the sandbox that the Run's pins allow, and expires with
//! the lease it was signed for. The model and capability gateways check the
//! signature, the expiry and that the call is within the scope; the public
//! edge also asks the sessions service whether the lease is still held, so a
//! revoked Runner is fenced at once.

use crate::{Code, Error, Result};
use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

const VERSION: &str = "cap1";
/// The largest token accepted (it travels in request metadata).
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// What a token lets its bearer act for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub session_id: String,
    pub run_id: String,
    pub generation: i64,
    pub environment_id: String,
    pub routing_profile_id: String,
    /// The tools the gateways serve (not the sandbox's) that the Run's pins
    /// allow, by name.
    pub tools: Vec<String>,
    /// The runner holding the lease.
    pub runner_id: String,
    /// When the lease it was signed for expires.
    pub expires_ms: i64,
}

/// The key tokens are signed with.
#[derive(Clone)]
pub struct TokenKey([u8; 32]);

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(<key>)")
    }
}

fn refused(why: &str) -> Error {
    Error::new(Code::PermissionDenied, format!("the capability token is not valid: {why}"))
        .with_details(serde_json::json!({"reason": "capability_invalid"}))
}

impl TokenKey {
    pub fn new(bytes: [u8; 32]) -> TokenKey {
        TokenKey(bytes)
    }

    fn mac(&self, body: &str) -> HmacSha256 {
        let mut m = <HmacSha256 as KeyInit>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        m.update(VERSION.as_bytes());
        m.update(b".");
        m.update(body.as_bytes());
        m
    }

    pub fn sign(&self, claims: &Claims) -> Result<String> {
        let body = hex::encode(serde_json::to_vec(claims).map_err(|e| Error::internal(e.to_string()))?);
        let token = format!("{VERSION}.{body}.{}", hex::encode(self.mac(&body).finalize().into_bytes()));
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Error::invalid("the Run's scope is too large for a capability token"));
        }
        Ok(token)
    }

    /// The claims of a token this key signed that has not expired at `now_ms`.
    pub fn open(&self, token: &str, now_ms: i64) -> Result<Claims> {
        if token.is_empty() {
            return Err(refused("no capability token was sent"));
        }
        if token.len() > MAX_TOKEN_BYTES {
            return Err(refused("malformed"));
        }
        let mut parts = token.split('.');
        let (Some(VERSION), Some(body), Some(mac), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(refused("malformed"));
        };
        let mac = hex::decode(mac).map_err(|_| refused("malformed"))?;
        self.mac(body).verify_slice(&mac).map_err(|_| refused("the signature does not match"))?;
        let bytes = hex::decode(body).map_err(|_| refused("malformed"))?;
        let claims: Claims = serde_json::from_slice(&bytes).map_err(|_| refused("malformed"))?;
        if claims.expires_ms < now_ms {
            return Err(refused("it expired with its lease"));
        }
        Ok(claims)
    }
}

/// The metadata key a capability token travels in.
pub const METADATA: &str = "x-checkfu-capability";

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            session_id: "sess_1".into(),
            run_id: "run_1".into(),
            generation: 2,
            environment_id: "env_1".into(),
            routing_profile_id: "mrp_1".into(),
            tools: vec!["web_fetch".into()],
            runner_id: "rnr_1".into(),
            expires_ms: 1_000,
        }
    }

    #[test]
    fn a_token_opens_only_under_its_key_unchanged_and_unexpired() {
        let key = TokenKey::new([7; 32]);
        let token = key.sign(&claims()).expect("sign");
        assert_eq!(key.open(&token, 999).expect("opens"), claims());
        assert!(key.open(&token, 1_001).is_err(), "expired with its lease");
        assert!(TokenKey::new([8; 32]).open(&token, 0).is_err(), "another installation's key");
        let mut other = claims();
        other.run_id = "run_2".into();
        let forged_body = hex::encode(serde_json::to_vec(&other).expect("json"));
        let mac = token.rsplit('.').next().expect("mac");
        assert!(key.open(&format!("cap1.{forged_body}.{mac}"), 0).is_err(), "claims changed under the old signature");
        for bad in ["", "cap1", "cap1.zz.zz", "cap2.00.00", &"x".repeat(MAX_TOKEN_BYTES + 1)] {
            let e = key.open(bad, 0).expect_err(bad);
            assert_eq!(e.code, Code::PermissionDenied);
        }
    }
}
