//! Capability tokens on the wire: a runner sends the token of the Run it
//! works on with each call to the model and capability gateways (and the
//! governance calls it makes through the public edge), in the
//! `x-checkfu-capability` metadata. See `checkfu_core::capability`.

use checkfu_core::capability::{Claims, METADATA, TokenKey};

/// `msg` as a request carrying `token`.
pub fn with_token<T>(msg: T, token: &str) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    if let Ok(v) = token.parse() {
        req.metadata_mut().insert(METADATA, v);
    }
    req
}

/// The token a request carries, or `""`.
pub fn token_of<T>(req: &tonic::Request<T>) -> &str {
    req.metadata().get(METADATA).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

/// Checks the capability tokens a service's callers send.
#[derive(Debug, Clone)]
pub struct Verifier {
    key: TokenKey,
}

impl Verifier {
    pub fn new(key: TokenKey) -> Verifier {
        Verifier { key }
    }

    /// The claims of `req`'s token; a missing, forged or expired token is
    /// PERMISSION_DENIED.
    pub fn verify<T>(&self, req: &tonic::Request<T>) -> Result<Claims, tonic::Status> {
        Ok(self.key.open(token_of(req), checkfu_core::time::now_ms())?)
    }
}
