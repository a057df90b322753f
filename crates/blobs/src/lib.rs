//! Blob storage: the bytes of captured session files and workspace
//! snapshots, kept by content (`sha256`) under a per-Session prefix.
//!
//! One trait, [`BlobStore`], and one implementation over the `object_store`
//! crate, opened on the local filesystem when embedded (`data_dir/blobs`)
//! or on S3-compatible object storage in production (`s3://bucket/prefix`).
//! The conformance suite (`conformance.rs`) runs against both: the
//! filesystem always, an S3-compatible server when
//! `CHECKFU_TEST_S3_ENDPOINT` names one.
//!
//! Writes are verified: [`BlobStore::put_stream`] hashes what it streams and
//! completes the object only when the bytes match the digest they were
//! offered under, so a key always holds the content its name says.

pub mod conformance;

use bytes::Bytes;
use checkfu_core::{Error, Result};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};
use sha2::Digest;
use std::sync::Arc;

/// The largest part buffered before it is sent (S3 needs parts of at least
/// 5 MiB but the last).
const PART_BYTES: usize = 8 * 1024 * 1024;

/// Where blobs are kept.
#[async_trait::async_trait]
pub trait BlobStore: Send + Sync + 'static {
    /// Streams `chunks` to `key`, completing it only if they hash to
    /// `sha256` and total at most `max_bytes`; returns the size.
    async fn put_stream(
        &self,
        key: &str,
        sha256: &str,
        max_bytes: u64,
        chunks: &mut (dyn futures_util::Stream<Item = Result<Bytes>> + Send + Unpin),
    ) -> Result<u64>;
    /// `length` bytes of `key` from `offset` (fewer at its end).
    async fn read(&self, key: &str, offset: u64, length: u64) -> Result<Bytes>;
    /// The size of `key`, if it exists.
    async fn size(&self, key: &str) -> Result<Option<u64>>;
    /// Deletes every blob under `prefix`; returns how many.
    async fn delete_prefix(&self, prefix: &str) -> Result<u64>;
}

/// A [`BlobStore`] over any `object_store` backend.
#[derive(Debug, Clone)]
pub struct ObjectBlobs {
    inner: Arc<dyn ObjectStore>,
}

fn unavailable(e: object_store::Error) -> Error {
    Error::unavailable(format!("the blob store failed: {e}"))
}

fn path(key: &str) -> Result<Path> {
    Path::parse(key).map_err(|e| Error::invalid(format!("not a blob key: {e}")))
}

impl ObjectBlobs {
    pub fn new(inner: Arc<dyn ObjectStore>) -> ObjectBlobs {
        ObjectBlobs { inner }
    }

    /// The blob store a URL names: `s3://bucket[/prefix]` (credentials,
    /// region and endpoint from the standard `AWS_*` variables, e.g.
    /// `AWS_ENDPOINT_URL` and `AWS_ALLOW_HTTP=true` for an S3-compatible
    /// server), or `file:///dir` / a plain directory path.
    pub fn open(url: &str) -> Result<ObjectBlobs> {
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let s3 = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .build()
                .map_err(|e| Error::invalid(format!("blob_store {url:?}: {e}")))?;
            let inner: Arc<dyn ObjectStore> = if prefix.trim_matches('/').is_empty() {
                Arc::new(s3)
            } else {
                Arc::new(object_store::prefix::PrefixStore::new(s3, prefix.trim_matches('/')))
            };
            return Ok(ObjectBlobs::new(inner));
        }
        let dir = url.strip_prefix("file://").unwrap_or(url);
        std::fs::create_dir_all(dir).map_err(|e| Error::internal(format!("creating {dir}: {e}")))?;
        let fs =
            object_store::local::LocalFileSystem::new_with_prefix(dir).map_err(|e| Error::internal(format!("blob_store {dir}: {e}")))?;
        Ok(ObjectBlobs::new(Arc::new(fs)))
    }
}

#[async_trait::async_trait]
impl BlobStore for ObjectBlobs {
    async fn put_stream(
        &self,
        key: &str,
        sha256: &str,
        max_bytes: u64,
        chunks: &mut (dyn futures_util::Stream<Item = Result<Bytes>> + Send + Unpin),
    ) -> Result<u64> {
        use futures_util::StreamExt;
        let location = path(key)?;
        let upload = self.inner.put_multipart(&location).await.map_err(unavailable)?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        let mut hasher = sha2::Sha256::new();
        let mut size = 0u64;
        let failed = loop {
            match chunks.next().await {
                None => break None,
                Some(Err(e)) => break Some(e),
                Some(Ok(chunk)) => {
                    size += chunk.len() as u64;
                    if size > max_bytes {
                        break Some(Error::new(checkfu_core::Code::PayloadTooLarge, format!("a blob is at most {max_bytes} bytes")));
                    }
                    hasher.update(&chunk);
                    if let Err(e) = writer.wait_for_capacity(4).await {
                        break Some(unavailable(e));
                    }
                    writer.put(chunk);
                }
            }
        };
        let failed = failed.or_else(|| {
            let got = hex::encode(hasher.finalize());
            (got != sha256).then(|| Error::invalid_field("sha256", format!("the bytes hash to {got}, not {sha256}")))
        });
        if let Some(e) = failed {
            let _ = writer.abort().await;
            return Err(e);
        }
        writer.finish().await.map_err(unavailable)?;
        Ok(size)
    }

    async fn read(&self, key: &str, offset: u64, length: u64) -> Result<Bytes> {
        let location = path(key)?;
        let size = self.size(key).await?.ok_or_else(|| Error::not_found("blob", key))?;
        let end = offset.saturating_add(length).min(size);
        if offset >= end {
            return Ok(Bytes::new());
        }
        self.inner.get_range(&location, offset..end).await.map_err(unavailable)
    }

    async fn size(&self, key: &str) -> Result<Option<u64>> {
        match self.inner.head(&path(key)?).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn delete_prefix(&self, prefix: &str) -> Result<u64> {
        use futures_util::StreamExt;
        let prefix = path(prefix)?;
        let keys: Vec<Path> = self.inner.list(Some(&prefix)).filter_map(|m| async move { m.ok().map(|m| m.location) }).collect().await;
        let mut n = 0;
        for k in keys {
            match self.inner.delete(&k).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => n += 1,
                Err(e) => return Err(unavailable(e)),
            }
        }
        Ok(n)
    }
}

/// A stream of one in-memory buffer, in chunks (tests, small blobs).
pub fn chunks_of(bytes: Bytes, chunk: usize) -> impl futures_util::Stream<Item = Result<Bytes>> + Send + Unpin {
    let parts: Vec<Result<Bytes>> =
        (0..bytes.len().div_ceil(chunk.max(1))).map(|i| Ok(bytes.slice(i * chunk..((i + 1) * chunk).min(bytes.len())))).collect();
    futures_util::stream::iter(parts)
}
