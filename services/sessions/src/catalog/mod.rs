//! The agent catalog: Agents and their immutable versions, SandboxProfiles
//! and their immutable revisions, and Deployments pinning one of each. A
//! publication resolves what the version pins: its roster (`roster.rs`),
//! its skills (`skills.rs`) and its ToolSources.

mod roster;
mod skills;

use crate::model::*;
use checkfu_core::cache::Bounded;
use checkfu_core::check_name;
use checkfu_core::features::Disabled;
use checkfu_core::id::{AgentId, DeploymentId, EnvironmentId, RoutingProfileId, SandboxProfileId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result, sha256_hex};
use serde_json::json;
use std::sync::Arc;

/// What a Deployment (or its next revision) asks to pin.
#[derive(Debug, Clone, Default)]
pub struct DeploymentInput {
    pub agent_version: i64,
    pub model_routing_profile_id: String,
    pub sandbox_profile_id: String,
    pub sandbox_profile_revision: Option<i64>,
    pub harness: String,
    pub execution: Execution,
}

fn check_key(key: &str) -> Result<()> {
    let ok = !key.is_empty()
        && key.len() <= 100
        && key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.' | b':'));
    if ok { Ok(()) } else { Err(Error::invalid_field("key", "key must be 1 to 100 of a-z, 0-9, '-', '_', '.' and ':'")) }
}

fn renamed_conflict(what: &'static str) -> impl Fn(Error) -> Error {
    move |e| if e.code == Code::Conflict { Error::conflict(format!("{what} already exists")) } else { e }
}

/// Versions kept in memory; beyond this the cache starts over.
const VERSION_CACHE: usize = 4096;

#[derive(Clone)]
pub struct Catalog {
    store: Arc<dyn crate::store::SessionsStore>,
    /// Published versions are immutable, so they are cached once read.
    versions: Arc<Bounded<(String, i64), AgentVersion>>,
    /// SandboxProfile revisions are immutable too.
    revisions: Arc<Bounded<(String, i64), SandboxRevision>>,
    /// And so are a Deployment's revisions (what each pins).
    deployment_revisions: Arc<Bounded<(String, i64), Deployment>>,
    /// The capability gateway, which resolves ToolSource declarations at
    /// publication.
    pub(crate) tool_sources: Option<crate::upstream::ToolSources>,
    /// SandboxProfiles may allow every public host (`allowed_hosts:["*"]`).
    pub(crate) unrestricted_network: bool,
    /// Switched-off features (skills among them).
    pub(crate) features: Disabled,
    /// Where the gateways' decisions epoch is moved: gateways keep Agent,
    /// SandboxProfile and Deployment rows under it (their
    /// `catalog_facts`). None: no gateway keeps them.
    pub(crate) epochs: Option<Arc<dyn checkfu_ephemeral::Epochs>>,
}

impl Catalog {
    pub fn new(store: Arc<dyn crate::store::SessionsStore>) -> Catalog {
        Catalog {
            store,
            versions: Arc::new(Bounded::new(VERSION_CACHE)),
            revisions: Arc::new(Bounded::new(VERSION_CACHE)),
            deployment_revisions: Arc::new(Bounded::new(VERSION_CACHE)),
            tool_sources: None,
            unrestricted_network: false,
            features: Disabled::default(),
            epochs: None,
        }
    }

    /// After a committed write to a row gateways keep, before it is
    /// answered: the epoch moves, so a request that starts after the
    /// answer reads the new row. When it cannot be moved (three tries) the
    /// write is answered 503 saying so; gateways follow within 5 s.
    async fn changed<T>(&self, written: T) -> Result<T> {
        let Some(epochs) = &self.epochs else { return Ok(written) };
        let Err(e) = checkfu_ephemeral::announce(epochs.as_ref(), checkfu_ephemeral::DECISIONS_EPOCH).await else { return Ok(written) };
        tracing::error!(error = %e.message, "a catalog change is committed, but the gateways could not be told");
        Err(Error::unavailable("the change is saved, but the gateways could not be told at once: they follow it within 5 s"))
    }

    /// What revision `revision` of a Deployment pins: read once, then kept
    /// (a revision never changes; its `updated_ms` is the head's when it
    /// was read, which nothing that pins a revision looks at).
    pub(crate) async fn deployment_at(&self, id: &DeploymentId, revision: i64) -> Result<Option<Deployment>> {
        self.deployment_revisions.get_or_read((id.to_string(), revision), self.store.get_deployment_at(id, revision)).await
    }

    /// A published agent version, from memory when seen before.
    pub(crate) async fn pinned_version(&self, agent_id: &AgentId, version: i64) -> Result<Option<AgentVersion>> {
        self.versions.get_or_read((agent_id.to_string(), version), self.store.get_agent_version(agent_id, version)).await
    }

    /// A new Agent whose draft is `draft` (read for its shape; its rules
    /// are checked here).
    pub async fn create_agent(&self, environment_id: &str, name: &str, draft: AgentDefinition) -> Result<Agent> {
        let environment_id = EnvironmentId::parse("environment_id", environment_id)?;
        check_name("name", name)?;
        draft.validate()?;
        let now = now_ms();
        let a = Agent {
            id: AgentId::mint(),
            environment_id,
            name: name.into(),
            draft,
            latest_version: 0,
            version: 1,
            archived: false,
            created_ms: now,
            updated_ms: now,
        };
        self.store.insert_agent(&a).await?;
        Ok(a)
    }

    pub async fn agent(&self, id: &str) -> Result<Agent> {
        let id = AgentId::parse("id", id)?;
        self.store.get_agent(&id).await?.ok_or_else(|| Error::not_found("agent", &id))
    }

    pub async fn list_agents(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Agent>> {
        self.store.list_agents(environment_ids, page).await
    }

    pub async fn update_agent(
        &self,
        id: &str,
        name: Option<&str>,
        draft: Option<AgentDefinition>,
        expected_version: Option<i64>,
    ) -> Result<Agent> {
        let current = self.agent(id).await?;
        if current.archived {
            return Err(Error::conflict("an archived agent cannot be edited"));
        }
        if let Some(v) = expected_version
            && v != current.version
        {
            return Err(Error::conflict(format!("agent is at version {}, not {v}", current.version))
                .with_details(json!({"current_version": current.version})));
        }
        let mut next = current.clone();
        if let Some(n) = name {
            check_name("name", n)?;
            next.name = n.into();
        }
        if let Some(d) = draft {
            d.validate()?;
            next.draft = d;
        }
        next.version += 1;
        next.updated_ms = now_ms();
        if !self.store.update_agent(&next, current.version).await? {
            return Err(Error::conflict("the agent changed concurrently; read it again"));
        }
        self.changed(next).await
    }

    pub async fn archive_agent(&self, id: &str) -> Result<Agent> {
        let current = self.agent(id).await?;
        if current.archived {
            return Ok(current);
        }
        let next = Agent { archived: true, version: current.version + 1, updated_ms: now_ms(), ..current.clone() };
        if !self.store.update_agent(&next, current.version).await? {
            return Err(Error::conflict("the agent changed concurrently; read it again"));
        }
        self.changed(next).await
    }

    /// Freezes the draft as the next version, addressed by the SHA-256 of
    /// its canonical JSON.
    pub async fn publish_agent_version(&self, agent_id: &str, published_by: &str, expected_version: Option<i64>) -> Result<AgentVersion> {
        let a = self.agent(agent_id).await?;
        if a.archived {
            return Err(Error::conflict("an archived agent cannot be published"));
        }
        if let Some(v) = expected_version
            && v != a.version
        {
            return Err(
                Error::conflict(format!("agent is at version {}, not {v}", a.version)).with_details(json!({"current_version": a.version}))
            );
        }
        a.draft.validate()?;
        a.draft.check_publishable()?;
        let definition = self.pin_tool_sources(&a.environment_id, a.draft.clone()).await?;
        let definition = self.pin_skills(&a.environment_id, definition).await?;
        let definition = self.resolve_roster(&a, a.latest_version + 1, definition).await?;
        let v = AgentVersion {
            agent_id: a.id.clone(),
            environment_id: a.environment_id.clone(),
            version: a.latest_version + 1,
            release_sha256: sha256_hex(definition.canonical_json()),
            definition,
            published_by: published_by.into(),
            published_ms: now_ms(),
        };
        if !self.store.publish_agent_version(&v, a.version).await? {
            return Err(Error::conflict("the agent changed while publishing; read it again"));
        }
        self.changed(v).await
    }

    /// Publication refuses another Environment's or an archived ToolSource
    /// and tools it does not offer, and pins each declaration's Connection.
    async fn pin_tool_sources(&self, environment_id: &str, mut definition: AgentDefinition) -> Result<AgentDefinition> {
        for t in definition.tools.iter_mut() {
            let ToolDecl::ToolSource { tool_source_id, tools, connection_id } = t else { continue };
            let Some(client) = &self.tool_sources else {
                return Err(checkfu_core::features::unavailable("tool_sources", checkfu_core::features::DEPENDENCY_MISSING));
            };
            let req = checkfu_proto::capability::v1::ResolveForPublicationRequest {
                environment_id: environment_id.to_string(),
                tool_source_id: tool_source_id.clone(),
                tools: tools.clone(),
            };
            let resolved = client.clone().resolve_for_publication(req).await?.into_inner();
            *connection_id = Some(resolved.connection_id);
        }
        Ok(definition)
    }

    pub async fn agent_version(&self, agent_id: &str, version: i64) -> Result<AgentVersion> {
        let agent_id = AgentId::parse("agent_id", agent_id)?;
        self.store
            .get_agent_version(&agent_id, version)
            .await?
            .ok_or_else(|| Error::not_found("agent_version", &format!("{agent_id}/{version}")))
    }

    pub async fn list_agent_versions(&self, agent_id: &str, limit: u32, page: &str) -> Result<(Vec<AgentVersion>, String)> {
        let agent_id = self.agent(agent_id).await?.id;
        let p = PageRequest::standard(limit, page)?;
        let rows = self.store.list_agent_versions(&agent_id, p.before_number()?, p.fetch_limit()).await?;
        Ok(p.finish_numbered(rows, |v| v.version))
    }

    /// A new profile and its revision 1 from `spec` as requested (checked
    /// and compiled here).
    pub async fn create_sandbox_profile(
        &self,
        environment_id: &str,
        name: &str,
        spec: SandboxSpec,
    ) -> Result<(SandboxProfile, SandboxRevision)> {
        let environment_id = EnvironmentId::parse("environment_id", environment_id)?;
        check_name("name", name)?;
        let spec = spec.checked(self.unrestricted_network)?;
        let now = now_ms();
        let p = SandboxProfile {
            id: SandboxProfileId::mint(),
            environment_id,
            name: name.into(),
            latest_revision: 1,
            created_ms: now,
            archived_ms: None,
        };
        let r = SandboxRevision { profile_id: p.id.clone(), revision: 1, spec, created_ms: now };
        self.store
            .insert_sandbox_profile(&p, &r)
            .await
            .map_err(renamed_conflict("a sandbox profile with this name in this environment"))?;
        Ok((p, r))
    }

    /// Archives a SandboxProfile: no new revision or deployment pins it;
    /// Sessions already running keep theirs.
    pub async fn archive_sandbox_profile(&self, profile_id: &str) -> Result<SandboxProfile> {
        let id = SandboxProfileId::parse("id", profile_id)?;
        let archived =
            self.store.archive_sandbox_profile(&id, now_ms()).await?.ok_or_else(|| Error::not_found("sandbox_profile", profile_id))?;
        self.changed(archived).await
    }

    pub async fn publish_sandbox_revision(&self, profile_id: &str, spec: SandboxSpec) -> Result<SandboxRevision> {
        let p = self.sandbox_profile(profile_id).await?;
        refuse_archived(&p)?;
        let spec = spec.checked(self.unrestricted_network)?;
        let r = SandboxRevision { profile_id: p.id.clone(), revision: p.latest_revision + 1, spec, created_ms: now_ms() };
        if !self.store.insert_sandbox_revision(&r).await? {
            return Err(Error::conflict("another revision was published concurrently; read the profile again"));
        }
        self.changed(r).await
    }

    pub async fn sandbox_profile(&self, id: &str) -> Result<SandboxProfile> {
        let id = SandboxProfileId::parse("id", id)?;
        self.store.get_sandbox_profile(&id).await?.ok_or_else(|| Error::not_found("sandbox_profile", &id))
    }

    /// A published revision (immutable, so cached once read).
    pub async fn sandbox_revision(&self, profile_id: &str, revision: i64) -> Result<SandboxRevision> {
        let profile_id = SandboxProfileId::parse("id", profile_id)?;
        self.revisions
            .get_or_read((profile_id.to_string(), revision), self.store.get_sandbox_revision(&profile_id, revision))
            .await?
            .ok_or_else(|| Error::not_found("sandbox_profile_revision", &format!("{profile_id}/{revision}")))
    }

    pub async fn list_sandbox_profiles(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<SandboxProfile>> {
        self.store.list_sandbox_profiles(environment_ids, page).await
    }

    /// Resolves and validates what a deployment revision pins. The routing
    /// profile's existence is checked by the caller against the model gateway.
    async fn pins(&self, environment_id: &str, agent: &Agent, input: &DeploymentInput) -> Result<Pins> {
        if agent.environment_id != environment_id {
            return Err(Error::invalid_field("agent_id", "the agent belongs to another environment"));
        }
        if agent.archived {
            return Err(Error::conflict("an archived agent cannot be deployed"));
        }
        if input.agent_version < 1 {
            return Err(Error::invalid_field("agent_version", "agent_version must be a published version (1 or more)"));
        }
        let version = self.agent_version(&agent.id, input.agent_version).await.map_err(|e| {
            if e.code == Code::NotFound {
                Error::invalid_field("agent_version", format!("agent {} has no version {}", agent.id, input.agent_version))
            } else {
                e
            }
        })?;
        let model_routing_profile_id = RoutingProfileId::parse("model_routing_profile_id", &input.model_routing_profile_id)?;
        SandboxProfileId::check("sandbox_profile_id", &input.sandbox_profile_id)?;
        let profile = self.sandbox_profile(&input.sandbox_profile_id).await?;
        if profile.environment_id != environment_id {
            return Err(Error::invalid_field("sandbox_profile_id", "the sandbox profile belongs to another environment"));
        }
        refuse_archived(&profile)?;
        let revision = input.sandbox_profile_revision.unwrap_or(profile.latest_revision);
        let rev = self.sandbox_revision(&profile.id, revision).await.map_err(|_| {
            Error::invalid_field("sandbox_profile_revision", format!("sandbox profile {} has no revision {revision}", profile.id))
        })?;
        let harness = if input.harness.is_empty() { BUILTIN_HARNESS.to_string() } else { input.harness.clone() };
        if harness != BUILTIN_HARNESS {
            return Err(Error::invalid_field("harness", format!("unknown harness {harness:?}; available: {BUILTIN_HARNESS}")));
        }
        let execution = input.execution.clone();
        if let Execution::Runner { pool } | Execution::ExternalTools { pool } = &execution {
            check_pool("execution.pool", pool)?;
        }
        // An external_tools profile's tools run only at its work items'
        // holders, and only such a profile has work items.
        let external = matches!(execution, Execution::ExternalTools { .. });
        if external != (rev.spec.execution == SandboxExecution::ExternalTools) {
            return Err(Error::invalid_field(
                "execution",
                "execution {kind:\"external_tools\", pool} pairs with a sandbox profile revision of execution \"external_tools\", and only with one",
            )
            .with_reason("execution_mismatch"));
        }
        Ok(Pins {
            agent_version: version.version,
            release_sha256: version.release_sha256,
            harness,
            model_routing_profile_id,
            sandbox_profile_id: profile.id,
            sandbox_profile_revision: revision,
            execution,
        })
    }

    pub async fn create_deployment(&self, environment_id: &str, key: &str, agent_id: &str, input: &DeploymentInput) -> Result<Deployment> {
        let environment_id = EnvironmentId::parse("environment_id", environment_id)?;
        check_key(key)?;
        AgentId::check("agent_id", agent_id)?;
        let agent = self.agent(agent_id).await?;
        let pins = self.pins(&environment_id, &agent, input).await?;
        let now = now_ms();
        let d = Deployment {
            id: DeploymentId::mint(),
            environment_id,
            key: key.into(),
            agent_id: agent.id.clone(),
            revision: 1,
            pins,
            created_ms: now,
            updated_ms: now,
        };
        self.store.insert_deployment(&d).await.map_err(renamed_conflict("a deployment with this key in this environment"))?;
        // A new row is kept nowhere, but the projection keeps lists of them.
        self.changed(d).await
    }

    pub async fn create_deployment_revision(&self, id: &str, input: &DeploymentInput) -> Result<Deployment> {
        let current = self.deployment(id).await?;
        let agent = self.agent(&current.agent_id).await?;
        let pins = self.pins(&current.environment_id, &agent, input).await?;
        let next = Deployment { revision: current.revision + 1, pins, updated_ms: now_ms(), ..current };
        if !self.store.insert_deployment_revision(&next).await? {
            return Err(Error::conflict("another revision was created concurrently; read the deployment again"));
        }
        self.changed(next).await
    }

    pub async fn deployment(&self, id: &str) -> Result<Deployment> {
        let id = DeploymentId::parse("id", id)?;
        self.store.get_deployment(&id).await?.ok_or_else(|| Error::not_found("agent_deployment", &id))
    }

    pub async fn list_deployments(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Deployment>> {
        self.store.list_deployments(environment_ids, page).await
    }
}

/// Nothing new pins an archived SandboxProfile (409 `archived`).
fn refuse_archived(p: &SandboxProfile) -> Result<()> {
    match p.archived_ms {
        Some(_) => Err(Error::conflict(format!("sandbox profile {} is archived", p.id)).with_reason("archived")),
        None => Ok(()),
    }
}
