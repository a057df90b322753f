//! The gateway's storage: routing profiles (`sql.rs`) and evaluator
//! qualifications (`qualifications.rs`), each behind its trait.

mod qualifications;
mod sql;

pub use qualifications::SqlQualificationStore;
pub use sql::SqlRoutingStore;

use crate::model::RoutingProfile;
use crate::qualifications::{Purpose, Qualification};
use checkfu_core::Result;
use checkfu_core::id::{EvaluatorQualificationId, RoutingProfileId};
use checkfu_core::page::PageRequest;

#[async_trait::async_trait]
pub trait RoutingStore: Send + Sync + 'static {
    async fn insert(&self, p: &RoutingProfile) -> Result<()>;
    async fn get(&self, id: &RoutingProfileId) -> Result<Option<RoutingProfile>>;
    /// Profiles in any of `environment_ids`, newest first.
    async fn list(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<RoutingProfile>>;
}

#[async_trait::async_trait]
pub trait QualificationStore: Send + Sync + 'static {
    async fn insert(&self, q: &Qualification) -> Result<()>;
    async fn get(&self, id: &EvaluatorQualificationId) -> Result<Option<Qualification>>;
    /// Newest first; one more row than the page holds, to tell a next page.
    async fn list(&self, page: &PageRequest) -> Result<Vec<Qualification>>;
    /// Marks an active qualification revoked at `now`; `false` when it was
    /// not active (already revoked, or absent).
    async fn revoke(&self, id: &EvaluatorQualificationId, now: i64) -> Result<bool>;
    /// The newest qualification of (provider, model, purpose) current at
    /// `now`.
    async fn current(&self, provider: &str, model: &str, purpose: Purpose, now: i64) -> Result<Option<Qualification>>;
}
