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
use crate::chunks::{Chunks, Found};
use crate::mounts::{MEMORY_DIR, MOUNT_DIRS, OUTPUTS, in_mount, is_memory_folder};
use crate::tree::Tree;
use checkfu_proto::runner::v1 as pb;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The read-write memory mounts of a Run's sandbox (`memory/<name>`).
pub fn writable_mounts(work: &pb::WorkItem) -> Vec<String> {
    crate::work_sandbox::of(work).writable_mounts.into_iter().filter(|f| is_memory_folder(f)).collect()
}

/// The largest memory document written back (the store's limit).
const MAX_MEMORY_DOCUMENT: u64 = 256 * 1024;

/// The most a capture offers (the rest are not offered).
const MAX_OFFERED: usize = 1_000;
/// The largest file the control plane captures.
const MAX_CAPTURED: u64 = 64 * 1024 * 1024;
/// The most files a snapshot lists.
const MAX_ENTRIES: usize = 100_000;

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
    /// The workspace it describes ([`Tree::identity`]).
    #[serde(default)]
    tree: String,
}

/// What this runner remembers of the Session's workspace, if it is about
/// `tree` (else only what was reported as unenforced).
fn remembered(workspaces: &Path, session_id: &str, tree: &Tree) -> Local {
    let l = read_local(workspaces, session_id);
    if l.tree == tree.identity() {
        return l;
    }
    Local { unenforced: l.unenforced, tree: tree.identity().to_string(), ..Local::default() }
}

fn local_path(workspaces: &Path, session_id: &str) -> PathBuf {
    workspaces.join(format!("{session_id}.sync.json"))
}

fn read_local(workspaces: &Path, session_id: &str) -> Local {
    std::fs::read(local_path(workspaces, session_id)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

fn write_local(workspaces: &Path, session_id: &str, l: &Local) {
    if let Ok(bytes) = serde_json::to_vec(l) {
        let _ = std::fs::create_dir_all(workspaces);
        let _ = std::fs::write(local_path(workspaces, session_id), bytes);
    }
}

type Status = tonic::Status;

/// What an upload sends.
enum Upload<'a> {
    Bytes(&'a [u8]),
    File(&'a Tree, &'a str),
}

/// What the control plane has recorded as unenforced for this sandbox.
fn recorded(sandbox: &pb::WorkSandbox) -> Vec<(String, String)> {
    sandbox.unenforced.iter().map(|u| (u.field.clone(), u.reason.clone())).collect()
}

/// The sandbox limits a Run's SandboxProfile asks for, on this plane: its
/// memory per command and its disk as the largest file a command writes.
pub fn limits(work: &pb::WorkItem, cgroup: Option<PathBuf>) -> crate::sandbox::Limits {
    let r = crate::work_sandbox::of(work).profile.and_then(|p| p.resources).unwrap_or_default();
    let mib = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
    let d = crate::sandbox::Limits::default();
    let cpu = cgroup.as_deref().is_some_and(crate::cgroup::SandboxCgroup::cpu_available);
    crate::sandbox::Limits {
        memory_mib: mib(r.memory_mib).unwrap_or(d.memory_mib),
        file_mib: mib(r.disk_mib).unwrap_or(d.file_mib),
        cpu_millis: if cpu { mib(r.cpu_millis) } else { None },
        cgroup,
        ..d
    }
}

impl Runner {
    fn local_tree(&self, session_id: &str) -> Tree {
        Tree::Local(self.cfg.workspaces.join(session_id))
    }

    /// Materialises the Session's sandbox for a Run just claimed here. On
    /// the Kubernetes plane this waits for the Run's first sandbox tool
    /// call ([`Runner::restore_pod_once`]): a Run that never uses its
    /// sandbox never starts a pod.
    pub(crate) async fn restore(&self, work: &pb::WorkItem, lease: &pb::LeaseRef) -> Result<(), Status> {
        if self.kubernetes.is_some() {
            return Ok(());
        }
        let tree = self.local_tree(&work.session_id);
        // The mounts go in even when the snapshot could not be restored.
        let restored = self.restore_into(&tree, work, lease).await;
        let mounted = self.mount(&tree, work, lease).await;
        restored.and(mounted)
    }

    /// The first time in a Run that its sandbox pod is used: restores it.
    pub(crate) async fn restore_pod_once(&self, work: &pb::WorkItem, sandbox: &crate::agent::RemoteSandbox) {
        let first = self.pods_opened.lock().unwrap_or_else(|p| p.into_inner()).insert(work.run_id.clone(), sandbox.clone()).is_none();
        let Some(lease) = work.lease.as_ref().filter(|_| first) else { return };
        let tree = Tree::Pod(Box::new(sandbox.clone()));
        if let Err(status) = self.restore_into(&tree, work, lease).await {
            tracing::warn!(%status, session_id = %work.session_id, "restoring the sandbox pod's workspace failed; the turn runs with what is there");
        }
        if let Err(status) = self.mount(&tree, work, lease).await {
            tracing::warn!(%status, session_id = %work.session_id, "mounting the Session's files and skills in its pod failed");
        }
    }

    async fn restore_into(&self, tree: &Tree, work: &pb::WorkItem, lease: &pb::LeaseRef) -> Result<(), Status> {
        let sandbox = crate::work_sandbox::of(work);
        let mut local = remembered(&self.cfg.workspaces, &work.session_id, tree);
        if sandbox.fresh {
            // A new (or expired) sandbox: nothing of an older one survives
            // (a pod's is replaced with its Sandbox).
            if let Tree::Local(root) = tree {
                let _ = std::fs::remove_dir_all(root);
            }
            let _ = std::fs::remove_file(local_path(&self.cfg.workspaces, &work.session_id));
            return Ok(());
        }
        let want = sandbox.snapshot_sha256.as_str();
        if want.is_empty() || want == local.snapshot_sha256 {
            return Ok(());
        }
        let mut manifest = vec![];
        let mut chunks = self.download(lease, want).await?;
        while let Some(c) = chunks.next().await {
            manifest.extend(c?);
        }
        let manifest: Manifest =
            serde_json::from_slice(&manifest).map_err(|e| Status::data_loss(format!("the snapshot manifest is unreadable: {e}")))?;
        let keep: std::collections::BTreeSet<&str> = manifest.files.iter().map(|e| e.path.as_str()).collect();
        let present: BTreeMap<String, Found> =
            tree.walk(MAX_ENTRIES).await?.into_iter().filter(|f| !in_mount(&f.rel)).map(|f| (f.rel.clone(), f)).collect();
        for f in present.values() {
            if !keep.contains(f.rel.as_str()) {
                let _ = tree.remove(&f.rel).await;
            }
        }
        let mut seen = BTreeMap::new();
        for e in &manifest.files {
            let known = present.get(&e.path).filter(|f| f.size == e.size).map(|f| {
                let cached = local.seen.get(&f.rel).is_some_and(|(s, m, sha)| *s == f.size && *m == f.mtime_ns && sha == &e.sha256);
                (f.size, f.mtime_ns, cached)
            });
            let kept = match known {
                Some((size, mtime, true)) => Some((size, mtime)),
                // Not known here (another runner wrote it, or this one
                // restarted): the same bytes need no download.
                Some((size, mtime, false)) => {
                    let sha = tree.sha256(&e.path).await.unwrap_or_default();
                    (sha == e.sha256).then_some((size, mtime))
                }
                None => None,
            };
            let (size, mtime) = match kept {
                Some(k) => k,
                None => {
                    let chunks = self.download(lease, &e.sha256).await?;
                    tree.write(&e.path, e.mode, chunks).await?
                }
            };
            seen.insert(e.path.clone(), (size, mtime, e.sha256.clone()));
        }
        local.snapshot_sha256 = want.to_string();
        local.seen = seen;
        write_local(&self.cfg.workspaces, &work.session_id, &local);
        Ok(())
    }

    /// Writes the Session's mounts (its Files and skills) read-only into
    /// the workspace, replacing whatever the mount folders held that the
    /// control plane does not list; unchanged files are not fetched again.
    async fn mount(&self, tree: &Tree, work: &pb::WorkItem, lease: &pb::LeaseRef) -> Result<(), Status> {
        let mounts = crate::work_sandbox::of(work).mounts;
        let writable = writable_mounts(work);
        if let Tree::Local(root) = tree {
            // A mount folder is a real directory: anything else in its
            // place (a link the agent made) goes.
            for d in MOUNT_DIRS {
                let p = root.join(d);
                if std::fs::symlink_metadata(&p).is_ok_and(|m| !m.is_dir()) {
                    let _ = std::fs::remove_file(&p);
                }
            }
            if mounts.is_empty() && !MOUNT_DIRS.iter().any(|d| root.join(d).exists()) {
                return Ok(());
            }
        }
        let present: BTreeMap<String, Found> =
            tree.walk(MAX_ENTRIES).await?.into_iter().filter(|f| in_mount(&f.rel)).map(|f| (f.rel.clone(), f)).collect();
        for rel in present.keys().filter(|p| !mounts.iter().any(|m| &m.path == *p)) {
            let _ = tree.remove(rel).await;
        }
        for m in &mounts {
            if !in_mount(&m.path) || !m.path.split('/').all(|s| !s.is_empty() && s != "." && s != "..") {
                return Err(Status::invalid_argument(format!("{:?} is not a mount path", m.path)));
            }
            if let Some(f) = present.get(&m.path)
                && f.size == m.size_bytes
                && tree.sha256(&m.path).await.is_ok_and(|sha| sha == m.sha256)
            {
                continue;
            }
            let _ = tree.remove(&m.path).await;
            let chunks = self.download_kind(lease, &m.source, &m.sha256).await?;
            let mode =
                if writable.iter().any(|f| m.path.strip_prefix(f.as_str()).is_some_and(|r| r.starts_with('/'))) { 0o644 } else { 0o444 };
            tree.write(&m.path, mode, chunks).await?;
        }
        Ok(())
    }

    /// A snapshot blob, a chunk at a time.
    async fn download(&self, lease: &pb::LeaseRef, sha256: &str) -> Result<Chunks, Status> {
        self.download_kind(lease, "snapshot", sha256).await
    }

    /// A blob of `kind`, a chunk at a time.
    async fn download_kind(&self, lease: &pb::LeaseRef, kind: &str, sha256: &str) -> Result<Chunks, Status> {
        let req = pb::GetBlobRequest { lease: Some(lease.clone()), kind: kind.into(), sha256: sha256.into() };
        let stream = self.runs.clone().get_blob(req).await?.into_inner();
        Ok(Box::pin(stream.map(|c| c.map(|c| c.data))))
    }

    /// Uploads `bytes`, or a file of the workspace read as it is sent.
    async fn upload(&self, lease: &pb::LeaseRef, kind: &str, sha256: &str, from: Upload<'_>) -> Result<(), Status> {
        let head = pb::BlobChunk { lease: Some(lease.clone()), kind: kind.into(), sha256: sha256.into(), data: vec![] };
        let (tree, rel) = match from {
            Upload::Bytes(bytes) => {
                self.runs.clone().put_blob(futures_util::stream::iter([pb::BlobChunk { data: bytes.to_vec(), ..head }])).await?;
                return Ok(());
            }
            Upload::File(tree, rel) => (tree, rel),
        };
        // A read failing midway ends the upload short: the digest then
        // fails to match and nothing is stored.
        let body = crate::chunks::until_error(tree.read(rel).await?, |data| pb::BlobChunk { data, ..Default::default() });
        self.runs.clone().put_blob(futures_util::stream::iter([head]).chain(body)).await?;
        Ok(())
    }

    /// Captures the outputs and snapshots the workspace of a Run about to
    /// settle. Does nothing for a Session that never used its workspace
    /// (on the Kubernetes plane: that did not use its pod in this Run).
    pub(crate) async fn capture(&self, work: &pb::WorkItem, lease: &pb::LeaseRef) -> Result<(), Status> {
        let tree = match &self.kubernetes {
            None => Some(self.local_tree(&work.session_id)),
            Some(_) => self.pods_opened.lock().unwrap_or_else(|p| p.into_inner()).remove(&work.run_id).map(|sb| Tree::Pod(Box::new(sb))),
        };
        let sandbox = crate::work_sandbox::of(work);
        let mut local = match &tree {
            Some(t) => remembered(&self.cfg.workspaces, &work.session_id, t),
            None => read_local(&self.cfg.workspaces, &work.session_id),
        };
        let cpu_share = self.cfg.sandbox_cgroup.as_deref().is_some_and(crate::cgroup::SandboxCgroup::cpu_available);
        let packages = sandbox.profile.as_ref().is_some_and(|p| !p.packages.is_empty());
        let reported = match self.kubernetes {
            Some(_) => checkfu_core::plane::kubernetes_unenforced(packages),
            None => checkfu_core::plane::local_unenforced(packages, cpu_share),
        };
        // The control plane recorded this plane's list when the sandbox
        // materialised; report only a difference.
        if local.unenforced.is_empty() {
            local.unenforced = recorded(&sandbox);
        }
        let tree = tree.filter(|t| t.exists());
        let Some(tree) = tree else {
            if local.unenforced != reported {
                self.record_snapshot(lease, "", &reported).await?;
                local.unenforced = reported;
                write_local(&self.cfg.workspaces, &work.session_id, &local);
            }
            return Ok(());
        };
        let all = tree.walk(MAX_ENTRIES).await?;
        self.write_back_memory(work, lease, &tree, &all).await?;
        // Mounts are written again before every Run, never kept.
        let found: Vec<Found> = all.into_iter().filter(|f| !in_mount(&f.rel)).collect();
        let mut entries = Vec::with_capacity(found.len());
        let mut seen = BTreeMap::new();
        for f in &found {
            let sha = match local.seen.get(&f.rel) {
                Some((size, mtime, sha)) if *size == f.size && *mtime == f.mtime_ns => sha.clone(),
                _ => tree.sha256(&f.rel).await?,
            };
            seen.insert(f.rel.clone(), (f.size, f.mtime_ns, sha.clone()));
            entries.push(Entry { path: f.rel.clone(), size: f.size, sha256: sha, mode: f.mode });
        }
        self.capture_outputs(lease, &tree, &found, &entries, &mut local).await?;
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
            for e in &entries {
                if missing.contains(&e.sha256) && sent.insert(e.sha256.clone()) {
                    self.upload(lease, "snapshot", &e.sha256, Upload::File(&tree, &e.path)).await?;
                }
            }
            if missing.contains(&manifest_sha) {
                self.upload(lease, "snapshot", &manifest_sha, Upload::Bytes(&manifest)).await?;
            }
            self.record_snapshot(lease, &manifest_sha, &reported).await?;
        }
        local.snapshot_sha256 = manifest_sha;
        local.seen = seen;
        local.unenforced = reported;
        write_local(&self.cfg.workspaces, &work.session_id, &local);
        Ok(())
    }

    /// Reports what the Run changed in each read-write memory mount
    /// against what the mount was given: new and changed files with their
    /// text, deleted ones, and those left out (not UTF-8 text, past 256
    /// KiB, or a name a store cannot hold).
    async fn write_back_memory(&self, work: &pb::WorkItem, lease: &pb::LeaseRef, tree: &Tree, all: &[Found]) -> Result<(), Status> {
        let writable = writable_mounts(work);
        if writable.is_empty() {
            return Ok(());
        }
        let mounts = crate::work_sandbox::of(work).mounts;
        for folder in &writable {
            let prefix = format!("{folder}/");
            let given: BTreeMap<&str, &str> =
                mounts.iter().filter_map(|m| m.path.strip_prefix(&prefix).map(|rel| (rel, m.sha256.as_str()))).collect();
            let mut changes = vec![];
            let mut skipped = vec![];
            let mut present = std::collections::BTreeSet::new();
            for f in all.iter().filter(|f| f.rel.starts_with(&prefix)) {
                let rel = &f.rel[prefix.len()..];
                present.insert(rel.to_string());
                if !document_name(rel) || f.size > MAX_MEMORY_DOCUMENT {
                    skipped.push(rel.to_string());
                    continue;
                }
                let sha = tree.sha256(&f.rel).await?;
                if given.get(rel) == Some(&sha.as_str()) {
                    continue;
                }
                let mut bytes = vec![];
                let mut chunks = tree.read(&f.rel).await?;
                while let Some(c) = chunks.next().await {
                    bytes.extend(c?);
                }
                match String::from_utf8(bytes) {
                    Ok(text) => changes.push(pb::MemoryFileChange { path: rel.to_string(), content: Some(text) }),
                    Err(_) => skipped.push(rel.to_string()),
                }
            }
            for rel in given.keys().filter(|p| !present.contains(**p)) {
                changes.push(pb::MemoryFileChange { path: rel.to_string(), content: None });
            }
            if changes.is_empty() && skipped.is_empty() {
                continue;
            }
            let mount_name = folder.trim_start_matches(&format!("{MEMORY_DIR}/")).to_string();
            let req = pb::WritebackMemoryRequest { lease: Some(lease.clone()), mount_name, changes, skipped };
            self.runs.clone().writeback_memory(req).await?;
        }
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
    async fn capture_outputs(
        &self,
        lease: &pb::LeaseRef,
        tree: &Tree,
        found: &[Found],
        entries: &[Entry],
        local: &mut Local,
    ) -> Result<(), Status> {
        let prefix = format!("{OUTPUTS}/");
        let mut outputs: Vec<(pb::OfferedFile, &str)> = vec![];
        for (f, e) in found.iter().zip(entries) {
            let Some(rel) = f.rel.strip_prefix(&prefix) else { continue };
            if outputs.len() >= MAX_OFFERED {
                tracing::warn!("more than {MAX_OFFERED} files in outputs/: the rest are not offered");
                break;
            }
            let sha256 = if f.size > MAX_CAPTURED { String::new() } else { e.sha256.clone() };
            outputs.push((pb::OfferedFile { path: rel.to_string(), size: f.size as i64, sha256 }, &f.rel));
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
            if let Some((o, rel)) = outputs.iter().find(|(o, _)| o.path == d.path)
                && sent.insert(o.sha256.clone())
            {
                self.upload(lease, "files", &o.sha256, Upload::File(tree, rel)).await?;
            }
        }
        self.runs.clone().record_files(pb::FilesRequest { lease: Some(lease.clone()), files }).await?;
        local.outputs_sha256 = digest;
        Ok(())
    }
}

/// Whether a file under a memory mount may be a document: each segment
/// of `[A-Za-z0-9._-]`, not `.` or `..`, the whole at most 1,023 bytes.
fn document_name(rel: &str) -> bool {
    rel.len() < 1024
        && rel.split('/').all(|s| {
            !s.is_empty() && s != "." && s != ".." && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        })
}

#[cfg(test)]
mod tests {
    use super::{document_name, in_mount, is_memory_folder};

    #[test]
    fn memory_documents_and_folders_are_named_as_stores_name_them() {
        assert!(document_name("a.md") && document_name("notes/b-1.txt"));
        assert!(!document_name("a b.md") && !document_name("é.md") && !document_name(""));
        assert!(
            is_memory_folder("memory/notes")
                && !is_memory_folder("memory/")
                && !is_memory_folder("memory/a/b")
                && !is_memory_folder("skills/x")
        );
    }

    #[test]
    fn mount_folders_are_matched_by_whole_segments() {
        for p in ["skills", "skills/greeting/SKILL.md", "uploads/file_1/notes.txt"] {
            assert!(in_mount(p), "{p}");
        }
        for p in ["skillset/a", "uploads.txt", "outputs/skills/a", ""] {
            assert!(!in_mount(p), "{p}");
        }
    }
}
