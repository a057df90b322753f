//! Facts the projection reads for itself, over the services' clients:
//! what a Session the caller may read was pinned to, what a deployment key
//! names, which rules an agent's policy holds. Never an authorization
//! decision: the native call that follows (or came first) makes that.

use super::wire::CmaResult;
use crate::threads_wire::{self, Outcome};
use crate::{AppState, views};
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::sessions::v1 as ss;

pub async fn agent(st: &AppState, id: &str) -> CmaResult<views::Agent> {
    Ok(views::agent(&st.catalog.agent(st, id).await?))
}

/// A published version: read once, then kept (versions are immutable).
pub async fn version(st: &AppState, agent_id: &str, version: i64) -> CmaResult<views::AgentVersion> {
    let req = ss::GetAgentVersionRequest { agent_id: agent_id.into(), version };
    let read = async { CmaResult::Ok(Some(views::agent_version(&st.sessions.clone().get_agent_version(req).await?.into_inner()))) };
    let found = st.agent_versions.get_or_read(format!("{agent_id}:{version}"), read).await?;
    // The read answers a version or fails (NotFound): never nothing.
    found.ok_or_else(|| checkfu_core::Error::not_found("agent_version", &format!("{agent_id}/{version}")).into())
}

/// A SandboxProfile with its latest revision, as the native route shows it.
pub async fn profile(st: &AppState, id: &str) -> CmaResult<views::SandboxProfile> {
    let p = st.sessions.clone().get_sandbox_profile(ss::GetByIdRequest { id: id.into() }).await?.into_inner();
    Ok(crate::routes::catalog::profile_view(st, &p).await?)
}

/// A SandboxProfile's row alone (its `latest` left out): one call, for
/// what only needs its environment, archive state and latest revision.
pub async fn profile_head(st: &AppState, id: &str) -> CmaResult<views::SandboxProfile> {
    Ok(views::sandbox_profile(&st.catalog.profile(st, id).await?))
}

pub async fn deployment(st: &AppState, id: &str) -> CmaResult<views::AgentDeployment> {
    Ok(views::deployment(&st.catalog.deployment(st, id).await?))
}

pub async fn route(st: &AppState, id: &str) -> CmaResult<views::ModelRoutingProfile> {
    Ok(views::routing_profile(&st.models.clone().get_routing_profile(mg::GetRoutingProfileRequest { id: id.into() }).await?.into_inner()))
}

/// The ActionPolicy named `name` in `env_id`, if any.
pub async fn policy_named(st: &AppState, env_id: &str, name: &str) -> CmaResult<Option<views::ActionPolicy>> {
    // Governance answers a named lookup on one page; a peer from before
    // `name` existed ignores it and pages every policy, so pages are
    // still followed.
    let mut page = String::new();
    loop {
        let req =
            gov::ListActionPoliciesRequest { environment_ids: vec![env_id.into()], limit: 100, page: page.clone(), name: name.into() };
        let r = st.gov.clone().list_action_policies(req).await?.into_inner();
        if let Some(p) = r.data.iter().find(|p| p.name == name) {
            return Ok(Some(views::action_policy(p)));
        }
        if r.next_page.is_empty() {
            return Ok(None);
        }
        page = r.next_page;
    }
}

/// The workspace's deployments the projection made (`cma:` keys).
pub async fn cma_deployments(st: &AppState, env_id: &str) -> CmaResult<Vec<views::AgentDeployment>> {
    Ok(st.catalog.cma_deployments(st, env_id).await?.iter().map(views::deployment).collect())
}

/// The Environment's ToolSources: id → name (`mcp_server_name`).
pub async fn tool_source_names(st: &AppState, env_id: &str) -> CmaResult<std::collections::HashMap<String, String>> {
    use checkfu_proto::capability::v1 as cap;
    let mut out = std::collections::HashMap::new();
    let mut page = String::new();
    loop {
        let req = cap::ListToolSourcesRequest { environment_ids: vec![env_id.into()], limit: 100, page: page.clone() };
        let r = st.tool_sources.clone().list_tool_sources(req).await?.into_inner();
        out.extend(r.data.into_iter().map(|t| (t.id, t.name)));
        if r.next_page.is_empty() || out.len() > 10_000 {
            return Ok(out);
        }
        page = r.next_page;
    }
}

/// A Connection's secret-free record.
pub async fn connection(st: &AppState, id: &str) -> CmaResult<checkfu_proto::capability::v1::Connection> {
    use checkfu_proto::capability::v1 as cap;
    Ok(st.connections.clone().get_connection(cap::GetConnectionRequest { id: id.into() }).await?.into_inner())
}

/// A Session's Outcomes, oldest first (at most the newest 100).
pub async fn outcomes(st: &AppState, session_id: &str) -> CmaResult<Vec<Outcome>> {
    let req = ss::ListRunsRequest { session_id: session_id.into(), limit: 100, page: String::new() };
    let r = st.sessions.clone().list_outcomes(req).await?.into_inner();
    Ok(threads_wire::outcomes_of(&r)?.into_iter().rev().collect())
}

pub async fn budget(st: &AppState, id: &str) -> CmaResult<views::Budget> {
    Ok(views::budget(&st.sessions.clone().get_budget(ss::GetByIdRequest { id: id.into() }).await?.into_inner()))
}

/// The priced (provider, model) pairs; model `*` prices a whole provider.
pub async fn prices(st: &AppState) -> CmaResult<Vec<(String, String)>> {
    let c = st.models.clone().get_price_catalog(mg::GetPriceCatalogRequest {}).await?.into_inner();
    Ok(c.entries.into_iter().map(|p| (p.provider, p.model)).collect())
}
