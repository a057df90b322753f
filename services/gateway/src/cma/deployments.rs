//! The native Deployments CMA sessions run on, one per (environment,
//! agent, version), keyed `cma:<sbp>:<agt>:v<n>`: found, created by a
//! manager, and moved on when the agent or the environment changes.

use super::cx::{Cx, Native};
use super::facts;
use super::wire::{CmaResult, refuse};
use crate::views;
use checkfu_core::{Code, Error};
use serde_json::json;

/// Whether a SandboxProfile (its view) is a self_hosted environment: its
/// latest revision's tools run at the work item's holder (§17.13).
pub fn self_hosted(profile: &views::SandboxProfile) -> bool {
    profile.latest.as_ref().is_some_and(|r| r.execution == "external_tools")
}

/// The deployment key of (environment, agent, version).
fn key(sbp: &str, agent_id: &str, version: i64) -> String {
    format!("cma:{sbp}:{agent_id}:v{version}")
}

/// The deployment a CMA session runs on: found by key, created or
/// advanced to the profile's latest revision by a `manage` holder; anyone
/// else runs on what exists, or gets 403 `deployment_missing`.
pub async fn deployment_for(cx: &Cx, agent_id: &str, version: i64, sbp: &str) -> CmaResult<views::AgentDeployment> {
    choose(cx, agent_id, version, sbp, lookup(cx, sbp).await).await
}

/// What choosing a deployment reads, none of it depending on the agent: a
/// create reads it alongside the agent.
pub struct Lookup {
    deployments: CmaResult<Vec<views::AgentDeployment>>,
    /// The profile's head (its latest revision's body only matters when a
    /// deployment is made).
    profile: CmaResult<views::SandboxProfile>,
}

pub async fn lookup(cx: &Cx, sbp: &str) -> Lookup {
    let (deployments, profile) = tokio::join!(facts::cma_deployments(&cx.state, &cx.env_id), facts::profile_head(&cx.state, sbp));
    Lookup { deployments, profile }
}

/// [`deployment_for`] from what [`lookup`] read.
pub async fn choose(cx: &Cx, agent_id: &str, version: i64, sbp: &str, found: Lookup) -> CmaResult<views::AgentDeployment> {
    let k = key(sbp, agent_id, version);
    let existing = found.deployments?.into_iter().find(|d| d.key == k);
    let profile = found.profile.map_err(|e| match e.0.code {
        Code::NotFound => Error::invalid_field("environment_id", format!("no such environment {sbp}")).into(),
        _ => e,
    })?;
    if profile.environment_id != cx.env_id {
        return Err(Error::invalid_field("environment_id", format!("no such environment {sbp} in this workspace")).into());
    }
    if profile.archived_at.is_some() {
        return Err(refuse("environment_archived", format!("environment {sbp} is archived: no new session starts in it")));
    }
    let latest = profile.latest_revision;
    let missing = |e: super::wire::CmaError| match e.0.code {
        Code::PermissionDenied => {
            Error::new(Code::PermissionDenied, format!("no deployment {k} exists and only a manager of the workspace may create it"))
                .with_reason("deployment_missing")
                .into()
        }
        _ => e,
    };
    match existing {
        Some(d) if d.pins.sandbox_profile_revision == latest => Ok(d),
        Some(d) => match advance(&cx.native, &d, latest).await {
            // Not a manager, or another create advanced it first: run on
            // its head.
            Err(e) if matches!(e.0.code, Code::PermissionDenied | Code::Conflict) => Ok(d),
            other => other,
        },
        None => {
            let v = facts::version(&cx.state, agent_id, version).await?;
            let route = v
                .definition
                .0
                .model
                .and_then(|m| m.routing_profile_id)
                .ok_or_else(|| refuse("model_not_routable", "the agent's version names no model route"))?;
            let mut body = json!({"environment_id": cx.env_id, "key": k, "agent_id": agent_id, "agent_version": version,
                "model_routing_profile_id": route, "sandbox_profile_id": sbp, "sandbox_profile_revision": latest});
            // A self_hosted environment's plane: the loop here, its sandbox
            // tools at the Runners of `cma:<sbp>` (§17.13).
            if self_hosted(&facts::profile(&cx.state, sbp).await?) {
                body["execution"] = json!({"kind": "external_tools", "pool": format!("cma:{sbp}")});
            }
            match cx.native.post("/v1/agent-deployments", &body).await {
                // Another create made it first (the key is unique per
                // environment); it may not have moved the epoch yet.
                Err(e) if e.0.code == Code::Conflict => {
                    let now = crate::catalog_facts::CatalogFacts::cma_deployments_now(&cx.state, &cx.env_id).await?;
                    now.iter().find(|d| d.key == k).map(views::deployment).ok_or(e)
                }
                other => other.map_err(missing),
            }
        }
    }
}

/// Moves a deployment onto the profile's `revision`, other pins kept.
async fn advance(native: &Native, d: &views::AgentDeployment, revision: i64) -> CmaResult<views::AgentDeployment> {
    let p = &d.pins;
    let body = json!({"agent_version": p.agent_version, "model_routing_profile_id": p.model_routing_profile_id,
        "sandbox_profile_id": p.sandbox_profile_id, "sandbox_profile_revision": revision, "harness": p.harness, "execution": d.execution});
    native.post(&format!("/v1/agent-deployments/{}/revisions", d.id), &body).await
}

/// After a manager's `agents.update`: every environment the agent's
/// older versions were deployed to gets a deployment of the new one.
pub async fn advance_deployments(cx: &Cx, agent_id: &str) -> CmaResult<()> {
    let agent = facts::agent(&cx.state, agent_id).await?;
    let Some(latest) = agent.latest_version else { return Ok(()) };
    let all = facts::cma_deployments(&cx.state, &cx.env_id).await?;
    let mut profiles: Vec<String> = all.iter().filter(|d| d.agent_id == agent_id).map(|d| d.pins.sandbox_profile_id.clone()).collect();
    profiles.sort();
    profiles.dedup();
    for sbp in profiles {
        deployment_for(cx, agent_id, latest, &sbp).await?;
    }
    Ok(())
}

/// After a manager's `environments.update`: the deployments on it move to
/// its new revision.
pub async fn advance_environment(cx: &Cx, sbp: &str) -> CmaResult<()> {
    let profile = facts::profile(&cx.state, sbp).await?;
    let latest = profile.latest_revision;
    for d in facts::cma_deployments(&cx.state, &cx.env_id).await? {
        if d.pins.sandbox_profile_id == sbp && d.pins.sandbox_profile_revision != latest {
            advance(&cx.native, &d, latest).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_keys_name_environment_agent_and_version() {
        assert_eq!(key("sbp_1", "agt_2", 3), "cma:sbp_1:agt_2:v3");
    }
}
