//! Governance storage: the narrow trait the service needs, and its SQL
//! implementation (SQLite embedded, PostgreSQL in production).

mod approvals;
mod console;
mod sql;
mod vaults;

use crate::model::*;
use crate::policy::ActionPolicy;
use checkfu_core::Result;
use checkfu_core::id::{AssignmentId, EnvironmentId, GroupId, KeyId, PolicyId, PrincipalId};
use checkfu_core::page::PageRequest;

pub use approvals::ApprovalStore;
pub use console::ConsoleSessionStore;
pub use sql::SqlGovernanceStore;
pub use vaults::VaultStore;

/// Everything governance persists. Implementations must be linearizable per
/// row: a revoke seen by one call is seen by every later call.
#[async_trait::async_trait]
pub trait GovernanceStore: ApprovalStore + ConsoleSessionStore + VaultStore + Send + Sync + 'static {
    /// Whether the installation has been bootstrapped (any principal exists).
    async fn is_empty(&self) -> Result<bool>;
    /// Writes the bootstrap rows in one transaction; false if already bootstrapped.
    async fn bootstrap(&self, admin: &Principal, grant: &Assignment, env: &Environment, key: &ApiKey, secret_sha256: &str) -> Result<bool>;

    async fn insert_principal(&self, p: &Principal) -> Result<()>;
    async fn get_principal(&self, id: &PrincipalId) -> Result<Option<Principal>>;
    async fn list_principals(&self, page: &PageRequest) -> Result<Vec<Principal>>;
    async fn set_principal_disabled(&self, id: &PrincipalId, disabled: bool) -> Result<Option<Principal>>;

    async fn insert_api_key(&self, key: &ApiKey, secret_sha256: &str) -> Result<()>;
    async fn get_api_key(&self, id: &KeyId) -> Result<Option<ApiKey>>;
    async fn list_api_keys(&self, principal_id: &PrincipalId, page: &PageRequest) -> Result<Vec<ApiKey>>;
    /// Keys of the principal not revoked.
    async fn count_active_api_keys(&self, principal_id: &PrincipalId) -> Result<i64>;
    async fn revoke_api_key(&self, id: &KeyId, at_ms: i64) -> Result<Option<ApiKey>>;

    async fn insert_group(&self, g: &Group) -> Result<()>;
    async fn get_group(&self, id: &GroupId) -> Result<Option<Group>>;
    async fn list_groups(&self, page: &PageRequest) -> Result<Vec<Group>>;
    async fn add_group_member(&self, group_id: &GroupId, principal_id: &PrincipalId) -> Result<()>;
    async fn remove_group_member(&self, group_id: &GroupId, principal_id: &PrincipalId) -> Result<bool>;
    async fn groups_of(&self, principal_id: &str) -> Result<Vec<String>>;

    async fn insert_environment(&self, e: &Environment) -> Result<()>;
    async fn get_environment(&self, id: &EnvironmentId) -> Result<Option<Environment>>;
    async fn list_environments(&self, page: &PageRequest) -> Result<Vec<Environment>>;
    /// Compare-and-set on `version`; `None` when the row moved or is missing.
    async fn update_environment(&self, e: &Environment, expected_version: i64) -> Result<bool>;

    async fn insert_assignment(&self, a: &Assignment) -> Result<()>;
    async fn get_assignment(&self, id: &AssignmentId) -> Result<Option<Assignment>>;
    async fn list_assignments(&self, f: &AssignmentFilter, page: &PageRequest) -> Result<Vec<Assignment>>;
    async fn delete_assignment(&self, id: &AssignmentId) -> Result<bool>;
    /// The assignments reaching an enabled principal: its own and its groups'.
    /// Empty for a disabled or unknown principal. One statement, because
    /// every request of the platform asks it.
    async fn reach_of(&self, principal_id: &str) -> Result<Vec<Assignment>>;
    /// The live key with this secret hash and its enabled principal's id.
    async fn authenticate(&self, secret_sha256: &str) -> Result<Option<(String, String)>>;

    async fn insert_policy(&self, p: &ActionPolicy) -> Result<()>;
    async fn get_policy(&self, id: &PolicyId) -> Result<Option<ActionPolicy>>;
    /// Policies of any of `environment_ids`, newest first.
    async fn list_policies(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<ActionPolicy>>;
    /// Every policy of one Environment, for evaluation.
    async fn policies_in(&self, environment_id: &str) -> Result<Vec<ActionPolicy>>;
    /// The policy named `name` in `environment_id` (names are unique there).
    async fn policy_named(&self, environment_id: &str, name: &str) -> Result<Option<ActionPolicy>>;
    /// Compare-and-set on `version`.
    async fn update_policy(&self, p: &ActionPolicy, expected_version: i64) -> Result<bool>;
    async fn delete_policy(&self, id: &PolicyId) -> Result<bool>;

    async fn insert_audit(&self, r: &AuditRecord) -> Result<()>;
    async fn list_audit(&self, resource_id: &str, actor_id: &str, page: &PageRequest) -> Result<Vec<AuditRecord>>;
}

#[cfg(test)]
mod conformance;
