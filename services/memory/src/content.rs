//! Document content by digest. Small content lives in the store's
//! `memory_contents` row; anything larger goes to the blob store (S3 in
//! production, the data directory embedded) under [`blob_key`], written
//! before the commit that names it, so a committed digest always reads.

use crate::model::Content;
use crate::store::MemoryDb;
use checkfu_blobs::BlobStore;
use checkfu_core::{Error, Result};
use std::sync::Arc;

/// Content up to this size is kept inline in the database row.
pub const INLINE_MAX: usize = 16 * 1024;

pub fn blob_key(sha256: &str) -> String {
    format!("memory/contents/{sha256}")
}

#[derive(Clone)]
pub struct Contents {
    pub(crate) db: Arc<dyn MemoryDb>,
    pub(crate) blobs: Option<Arc<dyn BlobStore>>,
}

impl Contents {
    /// Digests `text`, uploading it first when it is too large to inline.
    pub async fn stage(&self, text: &str) -> Result<Content> {
        let sha256 = checkfu_core::sha256_hex(text.as_bytes());
        let size_bytes = text.len() as i64;
        if text.len() <= INLINE_MAX {
            return Ok(Content { sha256, size_bytes, inline: Some(text.to_string()) });
        }
        let Some(blobs) = &self.blobs else {
            // No blob store configured: large content stays inline.
            return Ok(Content { sha256, size_bytes, inline: Some(text.to_string()) });
        };
        let key = blob_key(&sha256);
        if blobs.size(&key).await? != Some(text.len() as u64) {
            let bytes = bytes::Bytes::copy_from_slice(text.as_bytes());
            let mut chunks = checkfu_blobs::chunks_of(bytes, 1 << 20);
            blobs.put_stream(&key, &sha256, text.len() as u64, &mut chunks).await?;
        }
        Ok(Content { sha256, size_bytes, inline: None })
    }

    /// The text of a digest the store knows.
    pub async fn text(&self, sha256: &str) -> Result<String> {
        match self.db.content(sha256).await? {
            Some(Some(text)) => Ok(text),
            Some(None) => {
                let blobs = self
                    .blobs
                    .as_ref()
                    .ok_or_else(|| Error::unavailable("document content is in a blob store this process has not opened"))?;
                let bytes = blobs.read(&blob_key(sha256), 0, crate::model::MAX_CONTENT_BYTES as u64 + 1).await?;
                String::from_utf8(bytes.to_vec()).map_err(|_| Error::internal(format!("stored content {sha256} is not UTF-8")))
            }
            None => Err(Error::internal(format!("content {sha256} is named but not stored"))),
        }
    }
}
