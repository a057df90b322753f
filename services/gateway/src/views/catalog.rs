//! Agents and their versions, SandboxProfiles, ModelRoutingProfiles,
//! prices and AgentDeployments.

use super::common::{doc, opt};
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::sessions::v1 as ss;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// An Agent's definition as the API shows it, typed for the gateway's own
/// readers (the CMA projection reads its fields, so a renamed one fails to
/// compile there): the mesh message, shown and read through
/// `checkfu_proto::agent_definition`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Definition(pub ss::AgentDefinition);

impl Definition {
    /// The typed definition, or a 0.1.0 sessions service's text read as
    /// the public JSON (the empty definition if that text does not read).
    fn of(typed: Option<&ss::AgentDefinition>, text: &str) -> Definition {
        match typed {
            Some(d) => Definition(d.clone()),
            None => Definition(checkfu_proto::agent_definition::read(doc(text)).unwrap_or_default()),
        }
    }
}

impl Serialize for Definition {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Definition {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Definition, D::Error> {
        let v = Value::deserialize(d)?;
        checkfu_proto::agent_definition::read(v).map(Definition).map_err(|e| serde::de::Error::custom(e.message))
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Agent {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    /// The editable definition: instructions, model, tools, skills, session_variable, multiagent.
    #[schema(value_type = Object)]
    pub draft: Definition,
    /// Null until the first publish.
    pub latest_version: Option<i64>,
    pub version: i64,
    pub archived: bool,
    pub created_at: String,
    pub updated_at: String,
}

#[allow(deprecated)] // draft_json: a 0.1.0 sessions service's
pub fn agent(a: &ss::Agent) -> Agent {
    Agent {
        id: a.id.clone(),
        environment_id: a.environment_id.clone(),
        name: a.name.clone(),
        draft: Definition::of(a.draft.as_ref(), &a.draft_json),
        latest_version: (a.latest_version != 0).then_some(a.latest_version),
        version: a.version,
        archived: a.archived,
        created_at: a.created_at.clone(),
        updated_at: a.updated_at.clone(),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentVersion {
    pub agent_id: String,
    pub version: i64,
    /// SHA-256 of the definition's canonical JSON.
    pub release_sha256: String,
    #[schema(value_type = Object)]
    pub definition: Definition,
    pub published_by: String,
    pub published_at: String,
}

#[allow(deprecated)] // definition_json: a 0.1.0 sessions service's
pub fn agent_version(v: &ss::AgentVersion) -> AgentVersion {
    AgentVersion {
        agent_id: v.agent_id.clone(),
        version: v.version,
        release_sha256: v.release_sha256.clone(),
        definition: Definition::of(v.definition.as_ref(), &v.definition_json),
        published_by: v.published_by.clone(),
        published_at: v.published_at.clone(),
    }
}

/// One immutable sandbox profile revision.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SandboxRevision {
    pub profile_id: String,
    pub revision: i64,
    pub image: String,
    /// What the profile is for, as this revision was published with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Caller-defined labels of this revision.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    pub packages: Vec<String>,
    /// `{allowed_hosts, allow_package_managers, allow_mcp_servers}`; package-manager hosts are listed explicitly.
    #[schema(value_type = Object)]
    pub network: crate::sandbox_wire::Network,
    /// `{cpu_millis, memory_mib, disk_mib}`.
    #[schema(value_type = Object)]
    pub resources: crate::sandbox_wire::Resources,
    pub retention_days: i64,
    /// `managed`, or `external_tools` (api.md §17.13).
    pub execution: String,
    pub created_at: String,
}

pub fn sandbox_revision(r: &ss::SandboxRevision) -> SandboxRevision {
    let spec = crate::sandbox_wire::rendered(r);
    SandboxRevision {
        profile_id: r.profile_id.clone(),
        revision: r.revision,
        image: spec.image,
        description: spec.description,
        metadata: spec.metadata,
        packages: spec.packages,
        network: spec.network,
        resources: spec.resources,
        retention_days: spec.retention_days,
        execution: spec.execution,
        created_at: r.created_at.clone(),
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SandboxProfile {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    pub latest_revision: i64,
    pub created_at: String,
    /// When it was archived (nothing new pins it); `null` while active.
    pub archived_at: Option<String>,
    /// The latest revision, when the response includes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest: Option<SandboxRevision>,
}

pub fn sandbox_profile(p: &ss::SandboxProfile) -> SandboxProfile {
    SandboxProfile {
        id: p.id.clone(),
        environment_id: p.environment_id.clone(),
        name: p.name.clone(),
        latest_revision: p.latest_revision,
        created_at: p.created_at.clone(),
        archived_at: opt(&p.archived_at),
        latest: None,
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Candidate {
    /// `anthropic`, `openai` or `scripted`.
    pub provider: String,
    pub model: String,
    /// `minimal`, `low`, `medium`, `high` or `max`.
    pub effort: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_id: Option<String>,
    /// The installation endpoint this candidate uses; absent: the
    /// provider's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

/// A provider endpoint the installation configured.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelEndpoint {
    /// What a candidate's `endpoint` names.
    pub name: String,
    /// `anthropic` or `openai`.
    pub provider: String,
    /// Where requests go (never with credentials).
    pub base_url: String,
    /// Whether the installation holds a key for it.
    pub key_configured: bool,
    /// The provider's default endpoint (used when a candidate names none).
    pub default: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ModelRoutingProfile {
    pub id: String,
    pub environment_id: String,
    pub name: String,
    /// Ordered fallbacks.
    pub candidates: Vec<Candidate>,
    pub created_at: String,
}

pub fn routing_profile(p: &mg::RoutingProfile) -> ModelRoutingProfile {
    ModelRoutingProfile {
        id: p.id.clone(),
        environment_id: p.environment_id.clone(),
        name: p.name.clone(),
        candidates: p
            .candidates
            .iter()
            .map(|c| Candidate {
                provider: c.provider.clone(),
                model: c.model.clone(),
                effort: c.effort.clone(),
                connection_id: opt(&c.connection_id),
                endpoint: opt(&c.endpoint),
            })
            .collect(),
        created_at: p.created_at.clone(),
    }
}

/// A (provider, model) reviewed as fit to judge for one purpose. Only a
/// candidate with an `active` one, between `reviewed_at` and `expires_at`,
/// is ever called for that purpose.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvaluatorQualification {
    pub id: String,
    pub provider: String,
    pub model: String,
    /// `decision` or `delivery_screen`.
    pub purpose: String,
    pub evidence: String,
    pub reviewed_at: String,
    pub expires_at: String,
    /// `active` or `revoked`.
    pub status: String,
    pub created_by: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

pub fn evaluator_qualification(q: &mg::EvaluatorQualification) -> EvaluatorQualification {
    EvaluatorQualification {
        id: q.id.clone(),
        provider: q.provider.clone(),
        model: q.model.clone(),
        purpose: q.purpose.clone(),
        evidence: q.evidence.clone(),
        reviewed_at: q.reviewed_at.clone(),
        expires_at: q.expires_at.clone(),
        status: q.status.clone(),
        created_by: q.created_by.clone(),
        created_at: q.created_at.clone(),
        revoked_at: opt(&q.revoked_at),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PriceEntry {
    pub provider: String,
    /// `*` prices every model of the provider not listed by name.
    pub model: String,
    pub input_micro_usd_per_mtok: i64,
    pub output_micro_usd_per_mtok: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Pins {
    pub agent_version: i64,
    pub release_sha256: String,
    pub harness: String,
    pub model_routing_profile_id: String,
    pub sandbox_profile_id: String,
    pub sandbox_profile_revision: i64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AgentDeployment {
    pub id: String,
    pub environment_id: String,
    pub key: String,
    pub agent_id: String,
    pub revision: i64,
    pub pins: Pins,
    /// `{kind: "managed"}`, `{kind: "runner", pool}` or
    /// `{kind: "external_tools", pool}` (the loop runs managed; sandbox
    /// tools run at the holder of each Session's work item, api.md §17.13).
    #[schema(value_type = Object)]
    pub execution: Value,
    pub created_at: String,
    pub updated_at: String,
}

// Reads the deprecated JSON text of a 0.1.0 sessions service.
#[allow(deprecated)]
pub fn deployment(d: &ss::Deployment) -> AgentDeployment {
    let p = d.pins.clone().unwrap_or_default();
    AgentDeployment {
        id: d.id.clone(),
        environment_id: d.environment_id.clone(),
        key: d.key.clone(),
        agent_id: d.agent_id.clone(),
        revision: d.revision,
        execution: crate::execution_wire::view(p.execution.as_ref(), &p.execution_json),
        pins: Pins {
            agent_version: p.agent_version,
            release_sha256: p.release_sha256,
            harness: p.harness,
            model_routing_profile_id: p.model_routing_profile_id,
            sandbox_profile_id: p.sandbox_profile_id,
            sandbox_profile_revision: p.sandbox_profile_revision,
        },
        created_at: d.created_at.clone(),
        updated_at: d.updated_at.clone(),
    }
}
