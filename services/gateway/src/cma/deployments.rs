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
pub async fn deployment_for(cx: &Cx, agent_id: &str, version: i64, sbp: &str) -> CmaResult<String> {
    let k = key(sbp, agent_id, version);
    let existing = facts::cma_deployments(&cx.state, &cx.env_id).await?.into_iter().find(|d| d.key == k);
    let profile = facts::profile(&cx.state, sbp).await.map_err(|e| match e.0.code {
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
        Some(d) if d.pins.sandbox_profile_revision == latest => Ok(d.id),
        Some(d) => {
            let id = d.id.clone();
            match advance(&cx.native, &d, latest).await {
                // Not a manager: run on its head.
                Err(e) if e.0.code == Code::PermissionDenied => Ok(id),
                other => other.map(|()| id),
            }
        }
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
            if self_hosted(&profile) {
                body["execution"] = json!({"kind": "external_tools", "pool": format!("cma:{sbp}")});
            }
            let d: views::AgentDeployment = cx.native.post("/v1/agent-deployments", &body).await.map_err(missing)?;
            Ok(d.id)
        }
    }
}

/// Moves a deployment onto the profile's `revision`, other pins kept.
async fn advance(native: &Native, d: &views::AgentDeployment, revision: i64) -> CmaResult<()> {
    let p = &d.pins;
    let body = json!({"agent_version": p.agent_version, "model_routing_profile_id": p.model_routing_profile_id,
        "sandbox_profile_id": p.sandbox_profile_id, "sandbox_profile_revision": revision, "harness": p.harness, "execution": d.execution});
    native.post::<views::AgentDeployment>(&format!("/v1/agent-deployments/{}/revisions", d.id), &body).await?;
    Ok(())
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
