//! The conformance suite every [`BlobStore`] passes.

use crate::{BlobStore, chunks_of};
use bytes::Bytes;
use checkfu_core::Code;
use checkfu_core::sha256_hex;

/// Runs every check against `store`, under `prefix` (unique per run).
pub async fn run(store: &dyn BlobStore, prefix: &str) {
    let body: Bytes = (0..(20 * 1024 * 1024 + 7)).map(|i: u32| (i % 251) as u8).collect::<Vec<u8>>().into();
    let digest = sha256_hex(&body);
    let key = format!("{prefix}/files/{digest}");

    // Streamed in small chunks across several parts, verified, sized.
    let n = store.put_stream(&key, &digest, 64 << 20, &mut chunks_of(body.clone(), 1 << 20)).await.expect("put");
    assert_eq!(n, body.len() as u64);
    assert_eq!(store.size(&key).await.expect("size"), Some(body.len() as u64));

    // Windows concatenate to the exact bytes; a window past the end is short.
    let third = body.len() as u64 / 3 + 1;
    let mut joined = Vec::new();
    for w in 0..3 {
        joined.extend_from_slice(&store.read(&key, w * third, third).await.expect("read"));
    }
    assert_eq!(sha256_hex(&joined), digest);
    assert!(store.read(&key, body.len() as u64 + 10, 5).await.expect("past the end").is_empty());

    // A stream whose bytes do not match its digest leaves nothing.
    let liar = format!("{prefix}/files/{}", sha256_hex(b"something else"));
    let e = store
        .put_stream(&liar, &sha256_hex(b"something else"), 1 << 20, &mut chunks_of(Bytes::from_static(b"hello"), 2))
        .await
        .expect_err("mismatch");
    assert_eq!(e.code, Code::Invalid);
    assert_eq!(store.size(&liar).await.expect("size"), None);
    // Nor does one over its limit.
    let big = Bytes::from(vec![1u8; 2048]);
    let capped = format!("{prefix}/files/{}", sha256_hex(&big));
    let e = store.put_stream(&capped, &sha256_hex(&big), 1024, &mut chunks_of(big.clone(), 512)).await.expect_err("too large");
    assert_eq!(e.code, Code::PayloadTooLarge);
    assert_eq!(store.size(&capped).await.expect("size"), None);

    // Empty blobs exist too.
    let empty = format!("{prefix}/snapshot/{}", sha256_hex(b""));
    assert_eq!(store.put_stream(&empty, &sha256_hex(b""), 10, &mut chunks_of(Bytes::new(), 1)).await.expect("empty"), 0);
    assert_eq!(store.size(&empty).await.expect("size"), Some(0));

    // A prefix is deleted as a whole, and only it.
    let other = format!("{prefix}-other/files/{digest}");
    store.put_stream(&other, &digest, 64 << 20, &mut chunks_of(body.clone(), 4 << 20)).await.expect("put other");
    assert_eq!(store.delete_prefix(&format!("{prefix}/snapshot")).await.expect("delete"), 1);
    assert_eq!(store.size(&empty).await.expect("size"), None);
    assert!(store.size(&key).await.expect("size").is_some(), "files/ is kept");
    assert!(store.delete_prefix(prefix).await.expect("delete") >= 1);
    assert_eq!(store.size(&key).await.expect("size"), None);
    assert!(store.size(&other).await.expect("size").is_some(), "a neighbouring prefix is untouched");
    store.delete_prefix(&format!("{prefix}-other")).await.expect("cleanup");
    let missing = store.read(&key, 0, 1).await.expect_err("gone");
    assert_eq!(missing.code, Code::NotFound);
}

#[cfg(test)]
mod tests {
    use crate::ObjectBlobs;

    #[tokio::test(flavor = "multi_thread")]
    async fn the_filesystem_store_conforms() {
        let dir = tempfile::tempdir().expect("dir");
        let store = ObjectBlobs::open(dir.path().to_str().expect("utf-8")).expect("open");
        super::run(&store, "sessions/sess_1").await;
    }

    /// Against a real S3-compatible server (CI starts one; see .ci/run).
    #[tokio::test(flavor = "multi_thread")]
    async fn an_s3_compatible_store_conforms() {
        let Some(bucket_url) = checkfu_core::testing::service("CHECKFU_TEST_S3_URL", "the blob store on an S3-compatible server") else {
            return;
        };
        let store = ObjectBlobs::open(&bucket_url).expect("open");
        super::run(&store, &format!("conformance/{}", checkfu_core::id::new_id("run"))).await;
    }
}
