//! What a Run finds and leaves behind, the same on every plane.
//!
//! - **Restore** (when a Run is claimed): the Session's newest workspace
//!   snapshot is materialised in the local workspace, unless it already is
//!   (the last Run ran here); an expired sandbox starts empty.
//! - **Capture** (when the Run settles): the files under `outputs/` become
//!   the Session's files (the control plane decides which are kept), and
//!   the workspace is snapshotted: a manifest of every regular file by
//!   content, uploading only the bytes the installation lacks.
//!
//! Paths come back only through the workspace's confined root, so a
//! manifest naming `../x` writes nothing outside it (the control plane also
//! refuses such manifests).

use crate::Runner;
use crate::confined::Root;
use checkfu_proto::runner::v1 as pb;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The folder of the workspace whose files are captured.
pub const OUTPUTS: &str = "outputs";
/// The most a capture offers (the rest are not offered).
const MAX_OFFERED: usize = 1_000;
/// The largest file the control plane captures.
const MAX_CAPTURED: u64 = 64 * 1024 * 1024;
/// The most files a snapshot lists.
const MAX_ENTRIES: usize = 100_000;
/// The bytes an upload sends per message.
const CHUNK: usize = 1024 * 1024;

/// One file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    pub mode: u32,
}

/// What was uploaded: sorted by path, so the same workspace always has the
/// same manifest digest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub files: Vec<Entry>,
}

/// What this runner remembers of a Session's workspace, beside it (outside
/// the sandbox): the snapshot it matches and each file's mtime, so an
/// unchanged file is not hashed again.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Local {
    snapshot_sha256: String,
    /// path → (size, mtime in ns, sha256)
    seen: BTreeMap<String, (u64, i128, String)>,
    /// The digest of the outputs last offered.
    outputs_sha256: String,
    /// What was last reported as unenforced.
    unenforced: Vec<(String, String)>,
}

struct Found {
    rel: String,
    abs: PathBuf,
    size: u64,
    mode: u32,
    mtime_ns: i128,
}

/// A file's modification time, in nanoseconds.
fn mtime_ns(meta: &std::fs::Metadata) -> i128 {
    use std::os::unix::fs::MetadataExt;
    i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec())
}

/// Every regular file beneath `root` (symbolic links and other kinds are
/// not followed or kept), at most `limit`, in path order.
fn walk(root: &Path, limit: usize) -> std::io::Result<Vec<Found>> {
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
                out.push(Found {
                    rel,
                    abs: e.path(),
                    size: meta.len(),
                    mode: meta.permissions().mode() & 0o777,
                    mtime_ns: mtime_ns(&meta),
                });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
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

fn local_path(workspaces: &Path, session_id: &str) -> PathBuf {
    workspaces.join(format!("{session_id}.sync.json"))
}

fn read_local(workspaces: &Path, session_id: &str) -> Local {
    std::fs::read(local_path(workspaces, session_id)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

fn write_local(workspaces: &Path, session_id: &str, l: &Local) {
    if let Ok(bytes) = serde_json::to_vec(l) {
        let _ = std::fs::write(local_path(workspaces, session_id), bytes);
    }
}

type Status = tonic::Status;

/// What the control plane has recorded as unenforced for this sandbox.
fn recorded(sandbox: &Value) -> Vec<(String, String)> {
    let list = sandbox.get("unenforced").and_then(Value::as_array).cloned().unwrap_or_default();
    list.iter().filter_map(|u| Some((u.get("field")?.as_str()?.to_string(), u.get("reason")?.as_str()?.to_string()))).collect()
}

/// The sandbox limits a Run's SandboxProfile asks for, on this plane: its
/// memory per command and its disk as the largest file a command writes.
pub fn limits(work: &pb::WorkItem, cgroup: Option<PathBuf>) -> crate::sandbox::Limits {
    let sandbox: Value = serde_json::from_str(&work.sandbox_json).unwrap_or(Value::Null);
    let r = &sandbox["profile"]["resources"];
    let d = crate::sandbox::Limits::default();
    let cpu = cgroup.as_deref().is_some_and(crate::cgroup::SandboxCgroup::cpu_available);
    crate::sandbox::Limits {
        memory_mib: r["memory_mib"].as_u64().unwrap_or(d.memory_mib),
        file_mib: r["disk_mib"].as_u64().unwrap_or(d.file_mib),
        cpu_millis: if cpu { r["cpu_millis"].as_u64() } else { None },
        cgroup,
        ..d
    }
}

impl Runner {
    fn workspace_root(&self, session_id: &str) -> PathBuf {
        self.cfg.workspaces.join(session_id)
    }

    /// Materialises the Session's sandbox for a Run just claimed here.
    pub(crate) async fn restore(&self, work: &pb::WorkItem, lease: &pb::LeaseRef) -> Result<(), Status> {
        let sandbox: Value = serde_json::from_str(&work.sandbox_json).unwrap_or(Value::Null);
        let root = self.workspace_root(&work.session_id);
        let mut local = read_local(&self.cfg.workspaces, &work.session_id);
        if sandbox.get("fresh").and_then(Value::as_bool) == Some(true) {
            // A new (or expired) sandbox: nothing of an older one survives.
            let _ = std::fs::remove_dir_all(&root);
            let _ = std::fs::remove_file(local_path(&self.cfg.workspaces, &work.session_id));
            return Ok(());
        }
        let want = sandbox.get("snapshot_sha256").and_then(Value::as_str).unwrap_or_default();
        if want.is_empty() || want == local.snapshot_sha256 {
            return Ok(());
        }
        let mut manifest = vec![];
        self.download(lease, want, &mut manifest).await?;
        let manifest: Manifest =
            serde_json::from_slice(&manifest).map_err(|e| Status::data_loss(format!("the snapshot manifest is unreadable: {e}")))?;
        std::fs::create_dir_all(&root).map_err(|e| Status::internal(format!("creating the workspace: {e}")))?;
        let keep: std::collections::BTreeSet<&str> = manifest.files.iter().map(|e| e.path.as_str()).collect();
        let present: BTreeMap<String, Found> =
            walk(&root, MAX_ENTRIES).unwrap_or_default().into_iter().map(|f| (f.rel.clone(), f)).collect();
        for f in present.values() {
            if !keep.contains(f.rel.as_str()) {
                let _ = std::fs::remove_file(&f.abs);
            }
        }
        let files = Root::open(&root, None).map_err(|e| Status::internal(format!("opening the workspace: {e}")))?;
        let mut seen = BTreeMap::new();
        for e in &manifest.files {
            let abs = root.join(&e.path);
            let same = present.get(&e.path).is_some_and(|f| {
                f.size == e.size && local.seen.get(&f.rel).is_some_and(|(s, m, sha)| *s == f.size && *m == f.mtime_ns && sha == &e.sha256)
            });
            if !same {
                let file = files.create(Path::new(&e.path)).map_err(|err| Status::internal(format!("restoring {:?}: {err}", e.path)))?;
                self.download(lease, &e.sha256, &mut tokio::fs::File::from_std(file)).await?;
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&abs, std::fs::Permissions::from_mode(e.mode & 0o755));
            }
            if let Ok(meta) = abs.symlink_metadata() {
                seen.insert(e.path.clone(), (meta.len(), mtime_ns(&meta), e.sha256.clone()));
            }
        }
        local.snapshot_sha256 = want.to_string();
        local.seen = seen;
        write_local(&self.cfg.workspaces, &work.session_id, &local);
        Ok(())
    }

    /// Streams a snapshot blob into `to` (a file, or memory), a chunk at a time.
    async fn download(&self, lease: &pb::LeaseRef, sha256: &str, to: &mut (impl tokio::io::AsyncWrite + Unpin)) -> Result<(), Status> {
        use tokio::io::AsyncWriteExt;
        let req = pb::GetBlobRequest { lease: Some(lease.clone()), kind: "snapshot".into(), sha256: sha256.into() };
        let mut stream = self.runs.clone().get_blob(req).await?.into_inner();
        while let Some(chunk) = stream.message().await? {
            to.write_all(&chunk.data).await.map_err(|e| Status::internal(format!("restoring: {e}")))?;
        }
        to.flush().await.map_err(|e| Status::internal(format!("restoring: {e}")))
    }

    /// Uploads a file (read as it is sent, 1 MiB at a time) or `bytes`.
    async fn upload(&self, lease: &pb::LeaseRef, kind: &str, sha256: &str, path: Option<&Path>, bytes: &[u8]) -> Result<(), Status> {
        use tokio::io::AsyncReadExt;
        let head = pb::BlobChunk { lease: Some(lease.clone()), kind: kind.into(), sha256: sha256.into(), data: vec![] };
        let Some(p) = path else {
            self.runs.clone().put_blob(futures_util::stream::iter([pb::BlobChunk { data: bytes.to_vec(), ..head }])).await?;
            return Ok(());
        };
        let file = tokio::fs::File::open(p).await.map_err(|e| Status::internal(format!("reading {}: {e}", p.display())))?;
        let body = futures_util::stream::unfold(Some(file), |file| async move {
            let mut file = file?;
            let mut buf = vec![0u8; CHUNK];
            match file.read(&mut buf).await {
                Ok(0) | Err(_) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((pb::BlobChunk { data: buf, ..Default::default() }, Some(file)))
                }
            }
        });
        use futures_util::StreamExt;
        self.runs.clone().put_blob(futures_util::stream::iter([head]).chain(body)).await?;
        Ok(())
    }

    /// Captures the outputs and snapshots the workspace of a Run about to
    /// settle. Does nothing for a Session that never used its workspace.
    pub(crate) async fn capture(&self, work: &pb::WorkItem, lease: &pb::LeaseRef) -> Result<(), Status> {
        let root = self.workspace_root(&work.session_id);
        let sandbox: Value = serde_json::from_str(&work.sandbox_json).unwrap_or(Value::Null);
        let mut local = read_local(&self.cfg.workspaces, &work.session_id);
        let cpu_share = self.cfg.sandbox_cgroup.as_deref().is_some_and(crate::cgroup::SandboxCgroup::cpu_available);
        let profile = sandbox.get("profile").unwrap_or(&Value::Null);
        let reported = match self.kubernetes {
            Some(_) => checkfu_core::plane::kubernetes_unenforced(profile),
            None => checkfu_core::plane::local_unenforced(profile, cpu_share),
        };
        // The control plane recorded this plane's list when the sandbox
        // materialised; report only a difference.
        if local.unenforced.is_empty() {
            local.unenforced = recorded(&sandbox);
        }
        if !root.exists() {
            if local.unenforced != reported {
                self.record_snapshot(lease, "", &reported).await?;
                local.unenforced = reported;
                write_local(&self.cfg.workspaces, &work.session_id, &local);
            }
            return Ok(());
        }
        let found = {
            let root = root.clone();
            tokio::task::spawn_blocking(move || walk(&root, MAX_ENTRIES)).await.map_err(|e| Status::internal(e.to_string()))?
        }
        .map_err(|e| Status::internal(format!("reading the workspace: {e}")))?;
        let mut entries = Vec::with_capacity(found.len());
        let mut seen = BTreeMap::new();
        for f in &found {
            let sha = match local.seen.get(&f.rel) {
                Some((size, mtime, sha)) if *size == f.size && *mtime == f.mtime_ns => sha.clone(),
                _ => {
                    let abs = f.abs.clone();
                    tokio::task::spawn_blocking(move || sha256_file(&abs))
                        .await
                        .map_err(|e| Status::internal(e.to_string()))?
                        .map_err(|e| Status::internal(format!("reading {}: {e}", f.rel)))?
                }
            };
            seen.insert(f.rel.clone(), (f.size, f.mtime_ns, sha.clone()));
            entries.push(Entry { path: f.rel.clone(), size: f.size, sha256: sha, mode: f.mode });
        }
        self.capture_outputs(lease, &found, &entries, &mut local).await?;
        let manifest = serde_json::to_vec(&Manifest { files: entries.clone() }).map_err(|e| Status::internal(e.to_string()))?;
        let manifest_sha = checkfu_core::sha256_hex(&manifest);
        if manifest_sha != local.snapshot_sha256 || local.unenforced != reported {
            let mut shas: Vec<String> = entries.iter().map(|e| e.sha256.clone()).collect();
            shas.push(manifest_sha.clone());
            shas.sort();
            shas.dedup();
            let req = pb::MissingBlobsRequest { lease: Some(lease.clone()), kind: "snapshot".into(), sha256s: shas };
            let missing: std::collections::BTreeSet<String> =
                self.runs.clone().missing_blobs(req).await?.into_inner().missing.into_iter().collect();
            let mut sent = std::collections::BTreeSet::new();
            for (e, f) in entries.iter().zip(&found) {
                if missing.contains(&e.sha256) && sent.insert(e.sha256.clone()) {
                    self.upload(lease, "snapshot", &e.sha256, Some(&f.abs), &[]).await?;
                }
            }
            if missing.contains(&manifest_sha) {
                self.upload(lease, "snapshot", &manifest_sha, None, &manifest).await?;
            }
            self.record_snapshot(lease, &manifest_sha, &reported).await?;
        }
        local.snapshot_sha256 = manifest_sha;
        local.seen = seen;
        local.unenforced = reported;
        write_local(&self.cfg.workspaces, &work.session_id, &local);
        Ok(())
    }

    async fn record_snapshot(&self, lease: &pb::LeaseRef, manifest_sha: &str, unenforced: &[(String, String)]) -> Result<(), Status> {
        let req = pb::RecordSnapshotRequest {
            lease: Some(lease.clone()),
            manifest_sha256: manifest_sha.into(),
            unenforced: unenforced.iter().map(|(f, r)| pb::Unenforced { field: f.clone(), reason: r.clone() }).collect(),
        };
        self.runs.clone().record_snapshot(req).await?;
        Ok(())
    }

    /// Offers the files under `outputs/` (when they changed since the last
    /// offer), uploads the bytes the installation lacks and records them.
    async fn capture_outputs(&self, lease: &pb::LeaseRef, found: &[Found], entries: &[Entry], local: &mut Local) -> Result<(), Status> {
        let prefix = format!("{OUTPUTS}/");
        let mut outputs: Vec<(pb::OfferedFile, &Path)> = vec![];
        for (f, e) in found.iter().zip(entries) {
            let Some(rel) = f.rel.strip_prefix(&prefix) else { continue };
            if outputs.len() >= MAX_OFFERED {
                tracing::warn!("more than {MAX_OFFERED} files in outputs/: the rest are not offered");
                break;
            }
            let sha256 = if f.size > MAX_CAPTURED { String::new() } else { e.sha256.clone() };
            outputs.push((pb::OfferedFile { path: rel.to_string(), size: f.size as i64, sha256 }, &f.abs));
        }
        let digest =
            checkfu_core::sha256_hex(outputs.iter().map(|(o, _)| format!("{}\0{}\0{}\n", o.path, o.size, o.sha256)).collect::<String>());
        if outputs.is_empty() || digest == local.outputs_sha256 {
            return Ok(());
        }
        let files: Vec<pb::OfferedFile> = outputs.iter().map(|(o, _)| o.clone()).collect();
        let plan = self.runs.clone().plan_files(pb::FilesRequest { lease: Some(lease.clone()), files: files.clone() }).await?.into_inner();
        let mut sent = std::collections::BTreeSet::new();
        for d in plan.files.iter().filter(|d| d.upload) {
            if let Some((o, abs)) = outputs.iter().find(|(o, _)| o.path == d.path)
                && sent.insert(o.sha256.clone())
            {
                self.upload(lease, "files", &o.sha256, Some(abs), &[]).await?;
            }
        }
        self.runs.clone().record_files(pb::FilesRequest { lease: Some(lease.clone()), files }).await?;
        local.outputs_sha256 = digest;
        Ok(())
    }
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
        let all: Vec<String> = walk(dir.path(), 100).expect("walk").into_iter().map(|f| f.rel).collect();
        assert_eq!(all, ["a.txt", "b/a.txt", "b/z.txt", "c/d/e.txt", "m.txt"], "links are not kept");
        let cut: Vec<String> = walk(dir.path(), 3).expect("walk").into_iter().map(|f| f.rel).collect();
        assert_eq!(cut.len(), 3);
        let mut sorted = cut.clone();
        sorted.sort();
        assert_eq!(cut, sorted, "a manifest is the same for the same workspace");
    }
}
