//! The catalog's resources: Agents, their versions, SandboxProfiles and
//! their revisions, Deployments.

use super::to_json;
use crate::catalog::DeploymentInput;
use crate::model::*;
use checkfu_core::Result;
use checkfu_core::time::rfc3339;
use checkfu_proto::sessions::v1 as pb;

#[allow(deprecated)] // draft_json: for a 0.1.0 gateway
pub(crate) fn agent(a: Agent) -> pb::Agent {
    pb::Agent {
        draft: Some(super::definition::message(&a.draft)),
        draft_json: to_json(&a.draft),
        id: a.id.into(),
        environment_id: a.environment_id.into(),
        name: a.name,
        latest_version: a.latest_version,
        version: a.version,
        archived: a.archived,
        created_at: rfc3339(a.created_ms),
        updated_at: rfc3339(a.updated_ms),
    }
}

#[allow(deprecated)] // definition_json: for a 0.1.0 gateway
pub(crate) fn agent_version(v: AgentVersion) -> pb::AgentVersion {
    pb::AgentVersion {
        definition: Some(super::definition::message(&v.definition)),
        definition_json: to_json(&v.definition),
        agent_id: v.agent_id.into(),
        version: v.version,
        release_sha256: v.release_sha256,
        published_by: v.published_by,
        published_at: rfc3339(v.published_ms),
        environment_id: v.environment_id.into(),
    }
}

pub(crate) fn sandbox_profile(p: SandboxProfile) -> pb::SandboxProfile {
    pb::SandboxProfile {
        id: p.id.into(),
        environment_id: p.environment_id.into(),
        name: p.name,
        latest_revision: p.latest_revision,
        created_at: rfc3339(p.created_ms),
        archived_at: p.archived_ms.map(rfc3339).unwrap_or_default(),
    }
}

// Writes `spec_json` for 0.1.0 readers too.
#[allow(deprecated)]
pub(crate) fn sandbox_revision(r: SandboxRevision) -> pb::SandboxRevision {
    pb::SandboxRevision {
        spec: Some(super::sandbox::spec(&r.spec)),
        spec_json: to_json(&r.spec),
        profile_id: r.profile_id.into(),
        revision: r.revision,
        created_at: rfc3339(r.created_ms),
    }
}

// Writes `execution_json` for 0.1.0 readers too.
#[allow(deprecated)]
pub(crate) fn deployment(d: Deployment) -> pb::Deployment {
    pb::Deployment {
        pins: Some(pb::DeploymentPins {
            agent_version: d.pins.agent_version,
            release_sha256: d.pins.release_sha256.clone(),
            harness: d.pins.harness.clone(),
            model_routing_profile_id: d.pins.model_routing_profile_id.clone().into(),
            sandbox_profile_id: d.pins.sandbox_profile_id.clone().into(),
            sandbox_profile_revision: d.pins.sandbox_profile_revision,
            execution_json: to_json(&d.pins.execution),
            execution: Some(super::execution::execution(&d.pins.execution)),
        }),
        id: d.id.into(),
        environment_id: d.environment_id.into(),
        key: d.key,
        agent_id: d.agent_id.into(),
        revision: d.revision,
        created_at: rfc3339(d.created_ms),
        updated_at: rfc3339(d.updated_ms),
    }
}

// Reads a 0.1.0 caller's `execution_json` when the typed plane is absent.
#[allow(deprecated)]
pub(crate) fn deployment_input(i: Option<pb::DeploymentInput>) -> Result<DeploymentInput> {
    let i = i.unwrap_or_default();
    Ok(DeploymentInput {
        agent_version: i.agent_version,
        model_routing_profile_id: i.model_routing_profile_id,
        sandbox_profile_id: i.sandbox_profile_id,
        sandbox_profile_revision: i.sandbox_profile_revision,
        harness: i.harness,
        execution: super::execution::execution_input(i.execution, &i.execution_json)?,
    })
}
