//! Routing and metering: validate profiles, run a turn on the first candidate
//! whose provider answers, and price the usage from the catalog.

use crate::model::*;
use crate::pricing;
use crate::providers::{ModelProvider, scripted::Scripted};
use crate::store::RoutingStore;
use checkfu_core::id::{check as check_id, new_id};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::mpsc;

pub const MAX_CANDIDATES: usize = 8;

/// Provider credentials; they never leave the model gateway.
#[derive(Clone, Default)]
pub struct ProviderKeys {
    pub openai: Option<String>,
    pub anthropic: Option<String>,
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
    providers: Arc<HashMap<&'static str, Arc<dyn ModelProvider>>>,
    /// Routing profiles never change once created, so they are kept once read.
    profiles: Arc<checkfu_core::cache::Bounded<String, RoutingProfile>>,
}

impl ModelGatewayService {
    /// Provider keys from configuration (none is needed for a local
    /// OpenAI-compatible server such as vLLM or Ollama).
    pub fn new(store: Arc<dyn RoutingStore>, keys: ProviderKeys) -> Self {
        let mut providers: HashMap<&'static str, Arc<dyn ModelProvider>> = HashMap::new();
        providers.insert(Provider::Scripted.as_str(), Arc::new(Scripted));
        providers.insert(Provider::OpenAi.as_str(), Arc::new(crate::providers::openai::OpenAi::new(keys.openai)));
        providers.insert(Provider::Anthropic.as_str(), Arc::new(crate::providers::anthropic::Anthropic::new(keys.anthropic)));
        ModelGatewayService { store, providers: Arc::new(providers), profiles: Arc::new(checkfu_core::cache::Bounded::new(4096)) }
    }

    /// Readiness: the store answers.
    pub async fn ready(&self) -> bool {
        self.store.get("mrp_readiness").await.is_ok()
    }

    pub async fn create_profile(&self, environment_id: &str, name: &str, candidates: &[StoredCandidate]) -> Result<RoutingProfile> {
        check_id("environment_id", "env", environment_id)?;
        if name.trim().is_empty() || name.len() > 200 {
            return Err(Error::invalid_field("name", "name must be 1 to 200 characters"));
        }
        if candidates.is_empty() || candidates.len() > MAX_CANDIDATES {
            return Err(Error::invalid_field("candidates", format!("candidates must list 1 to {MAX_CANDIDATES} models")));
        }
        let candidates = candidates.iter().enumerate().map(|(i, c)| Candidate::parse(i, c)).collect::<Result<Vec<_>>>()?;
        let p = RoutingProfile {
            id: new_id("mrp"),
            environment_id: environment_id.into(),
            name: name.into(),
            candidates,
            created_ms: now_ms(),
        };
        self.store.insert(&p).await.map_err(|e| match e.code {
            checkfu_core::Code::Conflict => Error::conflict(format!("a routing profile named {name:?} already exists in this environment")),
            _ => e,
        })?;
        Ok(p)
    }

    pub async fn profile(&self, id: &str) -> Result<RoutingProfile> {
        check_id("id", "mrp", id)?;
        if let Some(p) = self.profiles.get(&id.to_string()) {
            return Ok(p);
        }
        let p = self.store.get(id).await?.ok_or_else(|| Error::not_found("model_routing_profile", id))?;
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
            let Some(provider) = self.providers.get(c.provider.as_str()) else {
                last = Error::unavailable(format!("provider {} is not configured on this gateway", c.provider.as_str()));
                continue;
            };
            let _ = started.send((c.provider, c.model.clone())).await;
            match provider.generate(c, req, deltas.clone()).await {
                Ok(output) => {
                    let cost = pricing::cost_micro_usd(c.provider.as_str(), &c.model, output.usage).unwrap_or_else(|| {
                        tracing::warn!(provider = c.provider.as_str(), model = %c.model, "model missing from the price catalog");
                        0
                    });
                    return Ok(Metered { provider: c.provider, model: c.model.clone(), output, cost_micro_usd: cost });
                }
                Err(e) if e.code == checkfu_core::Code::Unavailable || e.code == checkfu_core::Code::RateLimited => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }
}
