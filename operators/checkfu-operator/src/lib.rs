//! The Kubernetes operator for self-hosted Runners and sandbox pods.
//!
//! So far: the custom resources (`crd.rs`: `Runner` and `Sandbox`, whose
//! CRDs are generated from these types and committed to
//! `charts/checkfu-crds`) and the sandbox pod the operator keeps for a
//! `Sandbox` (`pod.rs`). The reconcilers, the in-pod agent and the Helm
//! wiring are issue 12's remaining work.

pub mod crd;
pub mod pod;
