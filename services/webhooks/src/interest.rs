//! Which endpoints want an Environment's events, kept between ingests.
//!
//! Every platform event is offered to this role, and reading the endpoints
//! table for each one cost the database a query per event — most of what
//! this role asked of it. What is kept is read again whenever an endpoint
//! may have changed, so an ingest that starts after an endpoint write was
//! answered decides on the new rows, exactly as a read of the table would:
//!
//! - **Local**: one process owns an embedded store, so its writes are all
//!   the writes; each moves a generation before it is answered.
//! - **Shared**: replicas share PostgreSQL; each write moves the shared
//!   [`EPOCH`] (Redis) before it is answered, and an ingest reads the epoch
//!   first and uses only what was kept under that same token. What is read
//!   is kept under the token read *before* the table was, so a read that
//!   raced a write is never used after it.
//!
//! Nothing is used once it is [`MAX_AGE`] old whatever the token says (the
//! bound when a move could not be announced), and when the epoch cannot be
//! read every ingest reads the table, as before. Secrets are not kept: an
//! ingest needs only who wants what.

use crate::model::Endpoint;
use crate::store::WebhooksStore;
use checkfu_core::cache::Bounded;
use checkfu_core::{Error, Result};
use checkfu_ephemeral::Epochs;
use checkfu_ephemeral::outage::FailureLog;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The epoch endpoint writes move when replicas share a store.
pub const EPOCH: &str = "webhook_endpoints";

/// The oldest list used, whatever the token says.
pub const MAX_AGE: Duration = Duration::from_secs(5);

/// Environments kept; beyond it the map starts over.
const MAX_ENVIRONMENTS: usize = 10_000;

/// How a kept list is known to be current.
enum Freshness {
    /// Nothing is kept: every ingest reads the table.
    Off,
    /// This process's writes are all the writes.
    Local(AtomicU64),
    /// Writes anywhere move the shared epoch.
    Shared { epochs: Arc<dyn Epochs>, unreachable: FailureLog },
}

/// What a kept list was read under.
#[derive(Clone, PartialEq, Eq)]
enum Token {
    Local(u64),
    Shared(Arc<str>),
}

type Kept = checkfu_core::cache::Kept<Token, Arc<Vec<Endpoint>>>;

/// The endpoints each Environment's events go to (one per process).
pub struct Interest {
    freshness: Freshness,
    kept: Bounded<String, Kept>,
}

impl Interest {
    /// Keeps nothing.
    pub fn off() -> Self {
        Interest { freshness: Freshness::Off, kept: Bounded::new(MAX_ENVIRONMENTS) }
    }

    /// Keeps lists for a process that owns its store.
    pub fn local() -> Self {
        Interest { freshness: Freshness::Local(AtomicU64::new(0)), kept: Bounded::new(MAX_ENVIRONMENTS) }
    }

    /// Keeps lists under the shared epoch.
    pub fn shared(epochs: Arc<dyn Epochs>) -> Self {
        let unreachable = FailureLog::new("the webhook endpoints epoch is unreachable; reading the endpoints for every event");
        Interest { freshness: Freshness::Shared { epochs, unreachable }, kept: Bounded::new(MAX_ENVIRONMENTS) }
    }

    /// The current token; `None` when nothing may be kept.
    async fn token(&self) -> Option<Token> {
        match &self.freshness {
            Freshness::Off => None,
            Freshness::Local(generation) => Some(Token::Local(generation.load(Ordering::Acquire))),
            // Without a token (none announced yet, or the store lost it)
            // nothing is kept: the role gives the epoch one (`keep_epoch`).
            Freshness::Shared { epochs, unreachable } => match epochs.current(EPOCH).await {
                Ok(t) => {
                    unreachable.recovered();
                    t.map(|t| Token::Shared(t.into()))
                }
                Err(e) => {
                    unreachable.failed(&e);
                    None
                }
            },
        }
    }

    /// The enabled endpoints of `environment_id` and installation-wide
    /// ones, secrets left out.
    pub async fn endpoints_for(&self, store: &dyn WebhooksStore, environment_id: &str) -> Result<Arc<Vec<Endpoint>>> {
        let Some(token) = self.token().await else { return Ok(Arc::new(read(store, environment_id).await?)) };
        if let Some(endpoints) = self.kept.get(environment_id).and_then(|k| k.valid_under(&token, MAX_AGE)) {
            return Ok(endpoints);
        }
        let endpoints = Arc::new(read(store, environment_id).await?);
        self.kept.insert(environment_id.to_string(), Kept::new(token, endpoints.clone()));
        Ok(endpoints)
    }

    /// After a committed endpoint write, before it is answered: every list
    /// kept anywhere is read again by the next ingest. When the epoch
    /// cannot be moved (three tries) the write is answered 503 saying so:
    /// it is committed, and replicas follow it within [`MAX_AGE`].
    pub async fn changed(&self) -> Result<()> {
        match &self.freshness {
            Freshness::Off => Ok(()),
            Freshness::Local(generation) => {
                generation.fetch_add(1, Ordering::AcqRel);
                Ok(())
            }
            Freshness::Shared { epochs, .. } => {
                let Err(e) = checkfu_ephemeral::announce(epochs.as_ref(), EPOCH).await else { return Ok(()) };
                tracing::error!(error = %e.message, "an endpoint change is committed, but the other replicas could not be told");
                Err(Error::unavailable(
                    "the endpoint change is saved, but the other webhooks replicas could not be told at once: they follow it within 5 s",
                ))
            }
        }
    }
}

async fn read(store: &dyn WebhooksStore, environment_id: &str) -> Result<Vec<Endpoint>> {
    let mut endpoints = store.endpoints_for(environment_id).await?;
    for e in &mut endpoints {
        e.secret.clear();
    }
    Ok(endpoints)
}
