//! The platform's composition: its configuration (`config/`), the roles
//! (`roles/`, one file each) and [`Node`], which runs any set of them on one
//! listener, the mesh's mutual TLS, health, and the process modes besides a
//! node (`operator.rs`, `self_hosted.rs` for a Runner, `sandbox_agent.rs`).
//! The `checkfu` binary (`bin/checkfu`) parses the command line over it;
//! tests boot whole meshes through it.

pub mod certs;
pub mod config;
pub mod credentials;
pub mod health;
pub mod key_file;
pub mod mesh;
pub mod node;
pub mod open_files;
pub mod operator;
pub mod options;
pub mod peers;
pub mod roles;
pub mod sandbox_agent;
pub mod self_hosted;

pub use checkfu_core::Role;
pub use node::Node;
pub use options::{
    BootstrapInfo, CapabilityGatewayOptions, GatewayOptions, GovernanceOptions, ModelGatewayOptions, NodeOptions, SchedulerOptions,
    SessionsOptions,
};

/// The allocator of every process that runs the platform (`checkfu`, and
/// the bench and tests that embed it): the event log's writers, the
/// gateway and the runner allocate from many threads at once, where
/// glibc's arenas contend (see docs/benchmarks.md). Built without
/// transparent huge pages, which would fault whole 2 MiB pages into an idle
/// process (44 MB resident instead of 30).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
