//! The Kubernetes operator for Runners and sandbox pods (CRDs `Runner`,
//! `SandboxPool`, `Sandbox`), built with kube-rs. It arrives with the
//! runners issue; this crate holds its place in the workspace layout and
//! carries no behaviour yet.
