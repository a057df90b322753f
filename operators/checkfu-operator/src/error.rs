//! The operator's one error: what failed, so a reconcile is retried with
//! backoff (an API or installation call) or reported on the resource and
//! not retried until it changes (an invalid spec).

use std::fmt;

#[derive(Debug)]
pub enum Error {
    /// The Kubernetes API refused or failed a call.
    Kube(kube::Error),
    /// The resource cannot be acted on as written (reported on its status).
    Invalid(String),
    /// The Checkfu installation refused or failed a pairing call.
    Installation(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Kube(e) => write!(f, "Kubernetes API: {e}"),
            Error::Invalid(m) => write!(f, "invalid: {m}"),
            Error::Installation(m) => write!(f, "the Checkfu installation: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        Error::Kube(e)
    }
}

impl Error {
    /// A label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kubernetes",
            Error::Invalid(_) => "invalid",
            Error::Installation(_) => "installation",
        }
    }
}

/// Whether a Kubernetes error is "not found".
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether a Kubernetes error is a conflict (a stale `resourceVersion`, or
/// an object that already exists).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}
