//! Catalog rows a create reads on its way in — the Deployment it runs on,
//! and for the CMA projection the Agent, the SandboxProfile and the
//! workspace's `cma:` Deployments — kept in each gateway replica under the
//! same epoch as its decisions (see `decisions.rs`).
//!
//! Every Session create read its Deployment from the sessions service, and
//! a CMA create four rows more, although these rows change only when
//! someone edits the catalog. The sessions service moves the epoch after
//! every Agent, SandboxProfile and Deployment write and before answering
//! it, so a request that starts after such a write was answered reads the
//! new rows, exactly as without the cache. A gateway keeps them only where
//! it knows the sessions service announces to the epoch it reads (one
//! process, or Redis shared by every node): otherwise every read asks.

use crate::AppState;
use crate::decisions::Kept;
use crate::error::ApiResult;
use checkfu_core::cache::Bounded;
use checkfu_proto::sessions::v1 as ss;
use std::sync::Arc;

/// Rows of each kind kept; beyond it that map starts over.
const MAX_ROWS: usize = 10_000;

/// The catalog rows one gateway replica keeps.
pub struct CatalogFacts {
    on: bool,
    deployments: Bounded<String, Kept<ss::Deployment>>,
    agents: Bounded<String, Kept<ss::Agent>>,
    profiles: Bounded<String, Kept<ss::SandboxProfile>>,
    cma_deployments: Bounded<String, Kept<Arc<Vec<ss::Deployment>>>>,
}

impl CatalogFacts {
    /// `on`: whether the sessions service moves the epoch this gateway's
    /// decisions read.
    pub fn new(on: bool) -> Self {
        CatalogFacts {
            on,
            deployments: Bounded::new(MAX_ROWS),
            agents: Bounded::new(MAX_ROWS),
            profiles: Bounded::new(MAX_ROWS),
            cma_deployments: Bounded::new(MAX_ROWS),
        }
    }

    async fn kept<T: Clone>(
        &self,
        st: &AppState,
        map: &Bounded<String, Kept<T>>,
        key: &str,
        ask: impl Future<Output = ApiResult<T>>,
    ) -> ApiResult<T> {
        if !self.on {
            return ask.await;
        }
        st.decisions.kept(map, key, ask).await
    }

    /// A Deployment at its head revision.
    pub async fn deployment(&self, st: &AppState, id: &str) -> ApiResult<ss::Deployment> {
        let ask = async { Ok(st.sessions.clone().get_deployment(ss::GetByIdRequest { id: id.into() }).await?.into_inner()) };
        self.kept(st, &self.deployments, id, ask).await
    }

    pub async fn agent(&self, st: &AppState, id: &str) -> ApiResult<ss::Agent> {
        let ask = async { Ok(st.sessions.clone().get_agent(ss::GetByIdRequest { id: id.into() }).await?.into_inner()) };
        self.kept(st, &self.agents, id, ask).await
    }

    /// A SandboxProfile's row (its latest revision's number, not the
    /// revision).
    pub async fn profile(&self, st: &AppState, id: &str) -> ApiResult<ss::SandboxProfile> {
        let ask = async { Ok(st.sessions.clone().get_sandbox_profile(ss::GetByIdRequest { id: id.into() }).await?.into_inner()) };
        self.kept(st, &self.profiles, id, ask).await
    }

    /// The Environment's Deployments whose key starts `cma:` (the
    /// projection's), at most about 10,000.
    pub async fn cma_deployments(&self, st: &AppState, env_id: &str) -> ApiResult<Arc<Vec<ss::Deployment>>> {
        self.kept(st, &self.cma_deployments, env_id, Self::cma_deployments_now(st, env_id)).await
    }

    /// [`Self::cma_deployments`] read from the store whatever is kept: after
    /// a conflict, whose winner may not have moved the epoch yet.
    pub async fn cma_deployments_now(st: &AppState, env_id: &str) -> ApiResult<Arc<Vec<ss::Deployment>>> {
        let mut out = vec![];
        let mut page = String::new();
        loop {
            let req = ss::ListInEnvironmentsRequest { environment_ids: vec![env_id.into()], limit: 100, page: page.clone() };
            let r = st.sessions.clone().list_deployments(req).await?.into_inner();
            out.extend(r.data.into_iter().filter(|d| d.key.starts_with("cma:")));
            if r.next_page.is_empty() || out.len() > 10_000 {
                return Ok(Arc::new(out));
            }
            page = r.next_page;
        }
    }
}
