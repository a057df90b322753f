//! What the operator and the runner agree on about Checkfu's Kubernetes
//! resources, below both: the `Runner` and `Sandbox` custom resources
//! (`crd.rs`; their CRDs are generated from these types and committed to
//! `charts/checkfu-crds`) and the Secret a Sandbox's agent token lives in.
//! With the `testing` feature, `mock_api.rs` is an in-memory API server
//! for either side's scenario tests.

pub mod crd;
#[cfg(feature = "testing")]
pub mod mock_api;

/// The key of a Sandbox's Secret holding its agent token: the runner
/// writes it, the operator mounts it into the sandbox pod.
pub const TOKEN_KEY: &str = "token";
