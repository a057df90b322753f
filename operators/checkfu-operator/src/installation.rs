//! The operator's calls to the Checkfu installation it serves: pairing a
//! runner pod (a pairing code minted with the Runner's installation API
//! key, redeemed for a Runner credential) and revoking a Runner. The real
//! implementation, over the public API, is the `checkfu operator` command's.

use crate::error::Error;
use std::future::Future;
use std::pin::Pin;

pub type Fut<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// What pairing needs: where, with which key, for which pool.
#[derive(Debug, Clone)]
pub struct PairRequest {
    /// The installation's public URL.
    pub server: String,
    /// An installation API key allowed to mint pairing codes.
    pub api_key: String,
    pub environment_id: String,
    pub principal_id: String,
    pub pool: String,
    /// The Runner's name (the pod's), shown in `GET /v1/runners`.
    pub name: String,
}

/// A paired Runner: what `checkfu runner` keeps (its `runner.json`, or
/// the file the operator gives a runner pod).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Paired {
    pub server: String,
    pub runner_id: String,
    pub credential: String,
    pub environment_id: String,
    pub pool: String,
    pub principal_id: String,
}

pub trait Installation: Send + Sync {
    fn pair<'a>(&'a self, req: &'a PairRequest) -> Fut<'a, Paired>;
    /// Revokes a Runner; one already revoked (or gone) is not an error.
    fn revoke<'a>(&'a self, server: &'a str, api_key: &'a str, runner_id: &'a str) -> Fut<'a, ()>;
}

/// No installation to call: for the scenario tests of what needs none
/// (Sandboxes, leader election); every call is refused.
#[cfg(feature = "testing")]
pub struct Unconfigured;

#[cfg(feature = "testing")]
impl Installation for Unconfigured {
    fn pair<'a>(&'a self, _: &'a PairRequest) -> Fut<'a, Paired> {
        Box::pin(async { Err(Error::Installation("this operator has no way to reach a Checkfu installation".into())) })
    }
    fn revoke<'a>(&'a self, _: &'a str, _: &'a str, _: &'a str) -> Fut<'a, ()> {
        Box::pin(async { Err(Error::Installation("this operator has no way to reach a Checkfu installation".into())) })
    }
}
