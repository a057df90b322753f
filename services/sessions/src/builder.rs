//! Assembles the sessions service from its settings. The components share
//! the log, the catalog and the uploads, so every setting is made here
//! first and the components are built once, in [`Builder::build`]: a
//! component built earlier would keep a copy without the setting.

use crate::approvals::Approvals;
use crate::budget::Budgets;
use crate::catalog::Catalog;
use crate::log::Log;
use crate::model::UploadSettings;
use crate::outcomes::Outcomes;
use crate::runs::{Parts, Runs};
use crate::service::SessionsService;
use crate::store::SessionsStore;
use crate::threads::Threads;
use crate::uploads::Uploads;
use crate::upstream::{Governance, Memory, Models, ToolSources};
use checkfu_core::Result;
use checkfu_core::capability::TokenKey;
use checkfu_proto::transport::Transport;
use std::sync::Arc;
use tokio::sync::Notify;

pub struct Builder {
    store: Arc<dyn SessionsStore>,
    log: Log,
    catalog: Catalog,
    uploads: Uploads,
    governance: Option<Governance>,
    memory: Option<Memory>,
    models: Option<Models>,
    blobs: Option<Arc<dyn checkfu_blobs::BlobStore>>,
    token_key: Option<TokenKey>,
}

impl Builder {
    pub fn new(store: Arc<dyn SessionsStore>) -> Self {
        Builder {
            log: Log::new(store.clone()),
            catalog: Catalog::new(store.clone()),
            uploads: Uploads::new(store.clone()),
            store,
            governance: None,
            memory: None,
            models: None,
            blobs: None,
            token_key: None,
        }
    }

    pub fn build(self) -> SessionsService {
        let runs = Runs::new(Parts {
            store: self.store.clone(),
            log: self.log.clone(),
            catalog: self.catalog.clone(),
            uploads: self.uploads.clone(),
            memory: self.memory,
            blobs: self.blobs,
            token_key: self.token_key,
            models: self.models.clone(),
        });
        SessionsService {
            threads: Threads {
                store: self.store.clone(),
                log: self.log.clone(),
                catalog: self.catalog.clone(),
                governance: self.governance.clone(),
            },
            outcomes: Outcomes { store: self.store.clone(), log: self.log.clone(), models: self.models },
            approvals: Approvals { log: self.log.clone(), governance: self.governance },
            budgets: Budgets { store: self.store.clone(), log: self.log.clone() },
            store: self.store,
            log: self.log,
            catalog: self.catalog,
            uploads: self.uploads,
            runs,
        }
    }

    /// Whether Files and skills are offered, and how long Files live.
    pub fn with_upload_settings(mut self, settings: UploadSettings) -> Self {
        self.catalog.features = settings.disabled.clone();
        self.uploads.set_settings(settings);
        self
    }

    /// Lets SandboxProfiles allow every public host (an installation setting).
    pub fn with_unrestricted_network(mut self, allowed: bool) -> Self {
        self.catalog.unrestricted_network = allowed;
        self
    }

    /// Keeps session files, workspace snapshots and uploads in `blobs`.
    pub fn with_blobs(mut self, blobs: Arc<dyn checkfu_blobs::BlobStore>) -> Self {
        self.uploads.set_blobs(blobs.clone());
        self.blobs = Some(blobs);
        self
    }

    /// Signs capability tokens with `key` (derived from the installation key).
    pub fn with_token_key(mut self, key: TokenKey) -> Self {
        self.token_key = Some(key);
        self
    }

    /// Shares live events and previews with the other sessions replicas
    /// through `fanout` (Redis pub/sub in production).
    pub async fn with_fanout(mut self, fanout: Arc<dyn checkfu_ephemeral::Fanout>) -> Result<Self> {
        self.log = self.log.with_fanout(fanout).await?;
        Ok(self)
    }

    pub fn with_outbox_wake(mut self, wake: Arc<Notify>) -> Self {
        self.log = self.log.with_outbox_wake(wake);
        self
    }

    pub fn with_governance(mut self, transport: Transport) -> Self {
        self.governance = Some(Governance::new(transport));
        self
    }

    /// Moves the gateways' decisions epoch after catalog writes (see
    /// `Catalog::changed`).
    pub fn with_epochs(mut self, epochs: Option<Arc<dyn checkfu_ephemeral::Epochs>>) -> Self {
        self.catalog.epochs = epochs;
        self
    }

    pub fn with_tool_sources(mut self, transport: Transport) -> Self {
        self.catalog.tool_sources = Some(ToolSources::new(transport));
        self
    }

    pub fn with_memory(mut self, transport: Transport) -> Self {
        self.memory = Some(Memory::new(transport));
        self
    }

    pub fn with_models(mut self, transport: Transport) -> Self {
        self.models = Some(Models::new(transport));
        self
    }

    pub fn with_lease_ms(mut self, ms: i64) -> Self {
        self.log.lease_ms = ms;
        self
    }
}
