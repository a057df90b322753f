//! Routing-profile storage: the trait; `sql.rs` implements it.

mod sql;

pub use sql::SqlRoutingStore;

use crate::model::RoutingProfile;
use checkfu_core::Result;
use checkfu_core::id::RoutingProfileId;
use checkfu_core::page::PageRequest;

#[async_trait::async_trait]
pub trait RoutingStore: Send + Sync + 'static {
    async fn insert(&self, p: &RoutingProfile) -> Result<()>;
    async fn get(&self, id: &RoutingProfileId) -> Result<Option<RoutingProfile>>;
    /// Profiles in any of `environment_ids`, newest first.
    async fn list(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<RoutingProfile>>;
}
