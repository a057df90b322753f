//! A workspace's files a chunk at a time, beneath a confined root: what
//! both the runner (on this host) and the in-pod sandbox agent use to walk,
//! hash, read and write a workspace, so the two planes move bytes alike.

use crate::confined::Root;
use futures_util::{Stream, StreamExt};
use sha2::Digest;
use std::io::Read;
use std::path::Path;
use std::pin::Pin;
use tonic::Status;

/// The bytes moved per message or read.
pub const CHUNK: usize = 1024 * 1024;

/// Bytes, a chunk at a time.
pub type Chunks = Pin<Box<dyn Stream<Item = Result<Vec<u8>, Status>> + Send>>;

/// `chunks` until the first failure, each made a message by `wrap`.
pub fn until_error<T: Send + 'static>(chunks: Chunks, wrap: fn(Vec<u8>) -> T) -> UntilError<T> {
    UntilError { inner: chunks, wrap, done: false }
}

/// See [`until_error`].
pub struct UntilError<T> {
    inner: Chunks,
    wrap: fn(Vec<u8>) -> T,
    done: bool,
}

impl<T> Stream for UntilError<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<T>> {
        use std::task::Poll;
        if self.done {
            return Poll::Ready(None);
        }
        match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(data))) => Poll::Ready(Some((self.wrap)(data))),
            Poll::Ready(_) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A regular file of the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub rel: String,
    pub size: u64,
    pub mode: u32,
    pub mtime_ns: i128,
}

/// A file's modification time, in nanoseconds.
pub fn mtime_ns(meta: &std::fs::Metadata) -> i128 {
    use std::os::unix::fs::MetadataExt;
    i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec())
}

/// Every regular file beneath `root` (symbolic links and other kinds are
/// not followed or kept), at most `limit`, in path order.
pub fn walk(root: &Path, limit: usize) -> Vec<Found> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = vec![];
    let mut stack = vec![(root.to_path_buf(), String::new())];
    'dirs: while let Some((dir, prefix)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let Ok(name) = e.file_name().into_string() else { continue };
            let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
            let Ok(meta) = e.path().symlink_metadata() else { continue };
            if meta.is_dir() {
                stack.push((e.path(), rel));
            } else if meta.is_file() {
                if out.len() >= limit {
                    break 'dirs;
                }
                out.push(Found { rel, size: meta.len(), mode: meta.permissions().mode() & 0o777, mtime_ns: mtime_ns(&meta) });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

/// The SHA-256 of the regular file `rel` beneath `root`.
pub fn sha256_of(root: &Root, rel: &Path) -> std::io::Result<String> {
    let mut f = root.open_file(rel)?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(hex::encode(h.finalize()));
        }
        h.update(&buf[..n]);
    }
}

/// The regular file `rel` beneath `root`, a chunk at a time.
pub fn chunks_of(file: std::fs::File) -> Chunks {
    use tokio::io::AsyncReadExt;
    let file = tokio::fs::File::from_std(file);
    Box::pin(futures_util::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0u8; CHUNK];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(buf), Some(file)))
            }
            Err(e) => Some((Err(Status::internal(format!("reading: {e}"))), None)),
        }
    }))
}

/// Writes `chunks` to the regular file `rel` beneath `root` (created or
/// replaced, with its directories; never through a link) with `mode`;
/// its size and modification time as written.
pub async fn write_to(root: &Root, rel: &Path, mode: u32, mut chunks: Chunks) -> Result<(u64, i128), Status> {
    use std::os::unix::fs::PermissionsExt;
    use tokio::io::AsyncWriteExt;
    let file = root.create(rel).map_err(|e| Status::internal(format!("writing {}: {e}", rel.display())))?;
    let mut file = tokio::fs::File::from_std(file);
    while let Some(chunk) = chunks.next().await {
        file.write_all(&chunk?).await.map_err(|e| Status::internal(format!("writing {}: {e}", rel.display())))?;
    }
    file.flush().await.map_err(|e| Status::internal(format!("writing {}: {e}", rel.display())))?;
    let _ = file.set_permissions(std::fs::Permissions::from_mode(mode & 0o755)).await;
    let meta = file.metadata().await.map_err(|e| Status::internal(e.to_string()))?;
    Ok((meta.len(), mtime_ns(&meta)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_lists_regular_files_in_path_order_even_when_cut_short() {
        let dir = tempfile::tempdir().expect("dir");
        for p in ["b/z.txt", "b/a.txt", "a.txt", "c/d/e.txt", "m.txt"] {
            let path = dir.path().join(p);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, p).expect("write");
        }
        std::os::unix::fs::symlink("a.txt", dir.path().join("link")).expect("symlink");
        let all: Vec<String> = walk(dir.path(), 100).into_iter().map(|f| f.rel).collect();
        assert_eq!(all, ["a.txt", "b/a.txt", "b/z.txt", "c/d/e.txt", "m.txt"], "links are not kept");
        let cut: Vec<String> = walk(dir.path(), 3).into_iter().map(|f| f.rel).collect();
        assert_eq!(cut.len(), 3);
        let mut sorted = cut.clone();
        sorted.sort();
        assert_eq!(cut, sorted, "a manifest is the same for the same workspace");
    }
}
