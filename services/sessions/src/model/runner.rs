//! Self-hosted Runners and the pairings they are made from, and where a Run
//! may execute.

use super::Execution;
use checkfu_core::id::{EnvironmentId, PairingId, PrincipalId, RunnerId};
use checkfu_core::{Error, Result, string_enum};

/// The longest a pairing code lives.
pub const MAX_PAIRING_TTL_SECONDS: i64 = 900;
pub const DEFAULT_PAIRING_TTL_SECONDS: i64 = 600;

string_enum!(RunnerStatus { Active = "active", Revoked = "revoked" });

/// A single-use code that makes one Runner of `pool` acting as `principal_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct Pairing {
    pub id: PairingId,
    pub environment_id: EnvironmentId,
    pub principal_id: PrincipalId,
    pub pool: String,
    /// The digest of the code; the code itself is shown once.
    pub code_sha256: String,
    pub created_by: String,
    pub created_ms: i64,
    pub expires_ms: i64,
}

/// A paired self-hosted Runner.
#[derive(Debug, Clone, PartialEq)]
pub struct Runner {
    pub id: RunnerId,
    pub environment_id: EnvironmentId,
    pub pool: String,
    pub principal_id: PrincipalId,
    pub pairing_id: PairingId,
    pub name: String,
    /// The digest of the credential; the credential itself is shown once.
    pub credential_sha256: String,
    pub status: RunnerStatus,
    pub created_ms: i64,
    pub last_seen_ms: Option<i64>,
    pub revoked_ms: Option<i64>,
}

impl Runner {
    /// Where this Runner's claims look.
    pub fn placement(&self) -> String {
        placement(&self.environment_id, &self.pool)
    }
}

/// A pool name: what a deployment pins and a pairing names.
pub fn check_pool(field: &str, pool: &str) -> Result<()> {
    let ok = !pool.is_empty()
        && pool.len() <= 100
        && pool.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.' | b':'));
    if ok { Ok(()) } else { Err(Error::invalid_field(field, "pool must be 1 to 100 of a-z, 0-9, '-', '_', '.' and ':'")) }
}

/// The placement of Runs that may execute only on Runners of `pool` in
/// `environment_id`; the managed plane's placement is `""`.
pub fn placement(environment_id: &str, pool: &str) -> String {
    format!("{environment_id}/{pool}")
}

/// Where a Run of a Session pinned to `execution` in `environment_id` runs.
pub fn placement_of(environment_id: &str, execution: &Execution) -> String {
    match execution {
        Execution::Managed | Execution::ExternalTools { .. } => String::new(),
        Execution::Runner { pool } => placement(environment_id, pool),
    }
}

/// Who asks for work: a managed runner inside the mesh, or a self-hosted
/// Runner authenticated by its credential.
#[derive(Debug, Clone, PartialEq)]
pub enum Claimant {
    Managed { runner_id: String },
    SelfHosted(Runner),
}

impl From<&str> for Claimant {
    fn from(runner_id: &str) -> Claimant {
        Claimant::Managed { runner_id: runner_id.to_string() }
    }
}

impl Claimant {
    pub fn runner_id(&self) -> &str {
        match self {
            Claimant::Managed { runner_id } => runner_id,
            Claimant::SelfHosted(r) => &r.id,
        }
    }

    /// The placement of the Runs this claimant may take.
    pub fn placement(&self) -> String {
        match self {
            Claimant::Managed { .. } => String::new(),
            Claimant::SelfHosted(r) => r.placement(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_are_names() {
        assert!(check_pool("pool", "gpu-eu_1").is_ok());
        for bad in ["", "GPU", "a/b", &"x".repeat(101)] {
            assert!(check_pool("pool", bad).is_err(), "{bad:?}");
        }
        assert_eq!(placement_of("env_1", &Execution::Managed), "");
        assert_eq!(placement_of("env_1", &Execution::Runner { pool: "p".into() }), "env_1/p");
    }
}
