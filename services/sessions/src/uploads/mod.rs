//! Uploads: what people put into the installation ahead of a Session —
//! Files (`files.rs`) and skill bundles kept as immutable versions
//! (`skills.rs`) — and what a Session is given of them. A component of
//! the sessions service holding only what it needs: the store, the blob
//! store and its settings. It knows nothing of Runs or the log; the
//! service hands it the Session and its pinned version where a mount
//! depends on them. `grpc.rs` serves it as the Files and Skills services.

mod files;
pub mod grpc;
mod skills;

pub use files::NewUpload;
pub(crate) use skills::skill_key;

use crate::model::UploadSettings;
use crate::store::SessionsStore;
use checkfu_blobs::BlobStore;
use checkfu_core::{Error, Result};
use std::sync::Arc;

#[derive(Clone)]
pub struct Uploads {
    store: Arc<dyn SessionsStore>,
    /// Where Files' and skill files' bytes live.
    blobs: Option<Arc<dyn BlobStore>>,
    /// Files and skills switched off or not, and how long Files live.
    settings: UploadSettings,
}

impl Uploads {
    pub fn new(store: Arc<dyn SessionsStore>) -> Self {
        Uploads { store, blobs: None, settings: UploadSettings::default() }
    }

    pub(crate) fn set_blobs(&mut self, blobs: Arc<dyn BlobStore>) {
        self.blobs = Some(blobs);
    }

    pub(crate) fn set_settings(&mut self, settings: UploadSettings) {
        self.settings = settings;
    }

    fn require_feature(&self, feature: &str) -> Result<()> {
        self.settings.disabled.require(feature)
    }

    fn blobs(&self) -> Result<&Arc<dyn BlobStore>> {
        self.blobs.as_ref().ok_or_else(|| Error::unavailable("this installation has no blob store"))
    }
}
