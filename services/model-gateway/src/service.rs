//! Routing and metering: validate profiles, run a turn on the first candidate
//! whose provider answers, and price the usage from the catalog.

use crate::endpoints::Endpoints;
use crate::model::*;
use crate::pricing;
use crate::providers::{ModelProvider, Target, scripted::Scripted};
use crate::qualifications::{NewQualification, Purpose, Qualification};
use crate::store::{QualificationStore, RoutingStore};
use checkfu_core::id::{EnvironmentId, EvaluatorQualificationId, RoutingProfileId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;

pub const MAX_CANDIDATES: usize = 8;

/// A candidate's usage in integer micro-USD from the price catalog (0, and
/// a warning, for a model the catalog lacks).
fn price(c: &Candidate, usage: Usage) -> i64 {
    pricing::cost_micro_usd(c.provider.as_str(), &c.model, usage).unwrap_or_else(|| {
        tracing::warn!(provider = c.provider.as_str(), model = %c.model, "model missing from the price catalog");
        0
    })
}

/// Overload and outages move on to the next candidate; anything else is the answer.
fn falls_back(e: &Error) -> bool {
    e.code == checkfu_core::Code::Unavailable || e.code == checkfu_core::Code::RateLimited
}

/// A finished, metered platform task.
#[derive(Debug, Clone)]
pub struct TaskDone {
    pub provider: Provider,
    pub model: String,
    pub answer: crate::tasks::Answer,
    pub usage: Usage,
    pub cost_micro_usd: i64,
    /// The qualification a judgment was asked under.
    pub qualification_id: Option<EvaluatorQualificationId>,
}

/// The gateway's stores.
#[derive(Clone)]
pub struct Stores {
    pub routing: Arc<dyn RoutingStore>,
    pub qualifications: Arc<dyn QualificationStore>,
}

/// A finished, metered turn.
#[derive(Debug, Clone)]
pub struct Metered {
    pub provider: Provider,
    pub model: String,
    pub output: ModelOutput,
    pub cost_micro_usd: i64,
}

#[derive(Clone)]
pub struct ModelGatewayService {
    store: Arc<dyn RoutingStore>,
    qualifications: Arc<dyn QualificationStore>,
    providers: Arc<HashMap<&'static str, Arc<dyn ModelProvider>>>,
    /// Where each provider's requests may go, with their keys.
    endpoints: Arc<Endpoints>,
    /// Routing profiles never change once created, so they are kept once read.
    profiles: Arc<checkfu_core::cache::Bounded<String, RoutingProfile>>,
}

impl ModelGatewayService {
    /// The installation's provider endpoints and their keys come from its
    /// configuration; they never leave this service.
    pub fn new(stores: Stores, endpoints: Endpoints) -> Self {
        let mut providers: HashMap<&'static str, Arc<dyn ModelProvider>> = HashMap::new();
        providers.insert(Provider::Scripted.as_str(), Arc::new(Scripted));
        providers.insert(Provider::OpenAi.as_str(), Arc::new(crate::providers::openai::OpenAi));
        providers.insert(Provider::Anthropic.as_str(), Arc::new(crate::providers::anthropic::Anthropic));
        ModelGatewayService {
            store: stores.routing,
            qualifications: stores.qualifications,
            providers: Arc::new(providers),
            endpoints: Arc::new(endpoints),
            profiles: Arc::new(checkfu_core::cache::Bounded::new(4096)),
        }
    }

    /// The configured endpoints (what a routing profile may name).
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// Where a candidate's call goes: its endpoint, checked and pinned.
    async fn target(&self, c: &Candidate) -> Result<Target> {
        if c.legacy_base_url {
            return Err(Error::unavailable(
                "this candidate was stored with a base_url of its own, which is no longer honoured: name a configured endpoint instead",
            ));
        }
        let endpoint = self.endpoints.for_candidate(c.provider, c.endpoint.as_deref()).ok_or_else(|| {
            Error::unavailable(format!(
                "the endpoint {:?} is not configured on this gateway",
                c.endpoint.as_deref().unwrap_or(c.provider.as_str())
            ))
        })?;
        let client = endpoint.client(self.endpoints.allow_private).await?;
        Ok(Target { endpoint: endpoint.clone(), client })
    }

    /// A candidate's provider and where its call goes (`None` for the
    /// scripted model, which calls nothing); `unavailable` when this
    /// gateway cannot serve it, so the next candidate is tried.
    async fn resolve(&self, c: &Candidate) -> Result<(Arc<dyn ModelProvider>, Option<Target>)> {
        let provider = self
            .providers
            .get(c.provider.as_str())
            .cloned()
            .ok_or_else(|| Error::unavailable(format!("provider {} is not configured on this gateway", c.provider.as_str())))?;
        if c.provider == Provider::Scripted {
            return Ok((provider, None));
        }
        match self.target(c).await {
            Ok(t) => Ok((provider, Some(t))),
            Err(e) => {
                tracing::warn!(provider = c.provider.as_str(), error = %e.message, "skipping a candidate whose endpoint cannot be used");
                Err(e)
            }
        }
    }

    /// Readiness: the store answers.
    pub async fn ready(&self) -> bool {
        self.store.get(&RoutingProfileId::mint()).await.is_ok()
    }

    pub async fn create_profile(&self, environment_id: &str, name: &str, candidates: &[StoredCandidate]) -> Result<RoutingProfile> {
        let environment_id = EnvironmentId::parse("environment_id", environment_id)?;
        if name.trim().is_empty() || name.len() > 200 {
            return Err(Error::invalid_field("name", "name must be 1 to 200 characters"));
        }
        if candidates.is_empty() || candidates.len() > MAX_CANDIDATES {
            return Err(Error::invalid_field("candidates", format!("candidates must list 1 to {MAX_CANDIDATES} models")));
        }
        let candidates = candidates.iter().enumerate().map(|(i, c)| Candidate::parse(i, c)).collect::<Result<Vec<_>>>()?;
        for (i, c) in candidates.iter().enumerate() {
            let Some(name) = c.endpoint.as_deref() else { continue };
            match self.endpoints.get(name) {
                None => {
                    return Err(Error::invalid_field(
                        &format!("candidates[{i}].endpoint"),
                        format!("no endpoint named {name:?} is configured (GET /v1/model-endpoints lists them)"),
                    ));
                }
                Some(e) if e.provider != c.provider => {
                    return Err(Error::invalid_field(
                        &format!("candidates[{i}].endpoint"),
                        format!("the endpoint {name:?} serves {}, not {}", e.provider.as_str(), c.provider.as_str()),
                    ));
                }
                Some(_) => {}
            }
        }
        let p = RoutingProfile { id: RoutingProfileId::mint(), environment_id, name: name.into(), candidates, created_ms: now_ms() };
        self.store.insert(&p).await.map_err(|e| match e.code {
            checkfu_core::Code::Conflict => Error::conflict(format!("a routing profile named {name:?} already exists in this environment")),
            _ => e,
        })?;
        Ok(p)
    }

    pub async fn profile(&self, id: &str) -> Result<RoutingProfile> {
        let id = RoutingProfileId::parse("id", id)?;
        if let Some(p) = self.profiles.get(id.as_str()) {
            return Ok(p);
        }
        let p = self.store.get(&id).await?.ok_or_else(|| Error::not_found("model_routing_profile", &id))?;
        self.profiles.insert(id.to_string(), p.clone());
        Ok(p)
    }

    pub async fn list_profiles(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<RoutingProfile>> {
        self.store.list(environment_ids, page).await
    }

    /// Runs one turn on the profile's candidates in order, falling back when a
    /// provider is not configured or fails as unavailable.
    pub async fn generate(
        &self,
        profile_id: &str,
        req: &ModelRequest,
        started: mpsc::Sender<(Provider, String)>,
        deltas: mpsc::Sender<String>,
    ) -> Result<Metered> {
        let profile = self.profile(profile_id).await?;
        let mut last = Error::unavailable("no candidate could serve the request");
        for c in &profile.candidates {
            let (provider, target) = match self.resolve(c).await {
                Ok(found) => found,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let _ = started.send((c.provider, c.model.clone())).await;
            match provider.generate(c, target.as_ref(), req, deltas.clone()).await {
                Ok(output) => {
                    let cost = price(c, output.usage);
                    return Ok(Metered { provider: c.provider, model: c.model.clone(), output, cost_micro_usd: cost });
                }
                Err(e) if falls_back(&e) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// Runs a platform task on the profile's candidates in order (as
    /// [`Self::generate`] falls back); the profile must live in
    /// `environment_id`. A judgment (a Check) calls only candidates
    /// qualified for its purpose now; with none, nothing is called and the
    /// task fails `evaluator_unqualified`.
    pub async fn run_task(&self, profile_id: &str, environment_id: &str, task: &crate::tasks::Task) -> Result<TaskDone> {
        task.check()?;
        let profile = self.profile(profile_id).await?;
        if profile.environment_id.as_str() != environment_id {
            return Err(Error::invalid_field(
                "model_routing_profile_id",
                format!("model routing profile {profile_id} belongs to another environment"),
            ));
        }
        let mut last = None;
        for c in &profile.candidates {
            let qualification = match task.purpose() {
                Some(purpose) => match self.qualifications.current(c.provider.as_str(), &c.model, purpose, now_ms()).await? {
                    Some(q) => Some(q.id),
                    None => continue,
                },
                None => None,
            };
            let c = &Candidate { effort: task.effort().unwrap_or(c.effort), ..c.clone() };
            let done = |answer, usage| TaskDone {
                provider: c.provider,
                model: c.model.clone(),
                answer,
                usage,
                cost_micro_usd: price(c, usage),
                qualification_id: qualification.clone(),
            };
            if c.provider == Provider::Scripted {
                let (answer, usage) = task.scripted()?;
                return Ok(done(answer, usage));
            }
            let (provider, target) = match self.resolve(c).await {
                Ok(found) => found,
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            // Nobody watches a task's previews.
            let (deltas, _) = mpsc::channel(1);
            let answered = provider.generate(c, target.as_ref(), &task.prompt(), deltas).await.and_then(|out| {
                let text: String =
                    out.content.iter().filter_map(|b| if let Block::Text(t) = b { Some(t.as_str()) } else { None }).collect();
                Ok((task.parse(&text)?, out.usage))
            });
            match answered {
                Ok((answer, usage)) => return Ok(done(answer, usage)),
                Err(e) if falls_back(&e) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| match task.purpose() {
            Some(purpose) => Error::new(
                checkfu_core::Code::PreconditionFailed,
                format!(
                    "no candidate of {profile_id} is qualified to judge for {} now: an installation admin records an evaluator qualification",
                    purpose.as_str()
                ),
            )
            .with_reason("evaluator_unqualified"),
            None => Error::unavailable("no candidate could serve the task"),
        }))
    }

    /// Records a qualification (the gateway checked the caller is an
    /// installation admin).
    pub async fn create_qualification(&self, new: &NewQualification) -> Result<Qualification> {
        let q = new.check()?;
        self.qualifications.insert(&q).await?;
        Ok(q)
    }

    pub async fn qualification(&self, id: &str) -> Result<Qualification> {
        let id = EvaluatorQualificationId::parse("id", id)?;
        self.qualifications.get(&id).await?.ok_or_else(|| Error::not_found("evaluator_qualification", &id))
    }

    pub async fn list_qualifications(&self, page: &PageRequest) -> Result<Vec<Qualification>> {
        self.qualifications.list(page).await
    }

    /// Revokes a qualification: no judgment is asked under it again.
    /// Revoking a revoked one changes nothing.
    pub async fn revoke_qualification(&self, id: &str) -> Result<Qualification> {
        let q = self.qualification(id).await?;
        self.qualifications.revoke(&q.id, now_ms()).await?;
        self.qualification(id).await
    }

    /// Whether a candidate of the profile is qualified for `purpose` now.
    pub async fn evaluators_qualified(&self, profile_id: &str, purpose: Purpose) -> Result<bool> {
        let profile = self.profile(profile_id).await?;
        let now = now_ms();
        for c in &profile.candidates {
            if self.qualifications.current(c.provider.as_str(), &c.model, purpose, now).await?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
