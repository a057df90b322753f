//! What a Run leaves behind: the files captured from its outputs folder
//! (`model/files.rs` decides each one's fate) and the workspace snapshot a
//! later Run restores. Bytes live in the blob store under the Session's
//! prefix, by content: `sessions/<id>/files/<sha256>` and
//! `sessions/<id>/snapshot/<sha256>` (the manifest and the files it names),
//! so an unchanged file is never sent twice and an expired snapshot is one
//! prefix to delete.

use crate::model::Lease;
use crate::model::*;
use crate::runs::Runs;
use bytes::Bytes;
use checkfu_blobs::BlobStore;
use checkfu_core::id::{FileId, SessionId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result};
use serde_json::{Value, json};
use std::sync::Arc;

/// The largest blob a snapshot holds (one workspace file).
const MAX_SNAPSHOT_BLOB: u64 = 1 << 40;
/// The most entries a snapshot manifest lists.
pub const MAX_MANIFEST_ENTRIES: usize = 100_000;

/// A kind of blob a runner may write or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobKind {
    Files,
    Snapshot,
    /// The Session's copies of the Files it was given (read only).
    Uploads,
    /// Skill files of the versions the Session mounts (read only).
    Skills,
}

impl BlobKind {
    pub fn parse(s: &str) -> Result<BlobKind> {
        match s {
            "files" => Ok(BlobKind::Files),
            "snapshot" => Ok(BlobKind::Snapshot),
            "uploads" => Ok(BlobKind::Uploads),
            "skills" => Ok(BlobKind::Skills),
            _ => Err(Error::invalid_field("kind", "kind must be files, snapshot, uploads or skills")),
        }
    }

    fn max_bytes(self) -> u64 {
        match self {
            BlobKind::Files => MAX_FILE_BYTES as u64,
            BlobKind::Snapshot => MAX_SNAPSHOT_BLOB,
            BlobKind::Uploads | BlobKind::Skills => 0,
        }
    }

    fn dir(self) -> &'static str {
        match self {
            BlobKind::Files => "files",
            BlobKind::Snapshot => "snapshot",
            BlobKind::Uploads => "uploads",
            BlobKind::Skills => "skills",
        }
    }
}

fn check_sha(sha: &str) -> Result<()> {
    if sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(())
    } else {
        Err(Error::invalid_field("sha256", "sha256 must be 64 lowercase hex digits"))
    }
}

/// Where a Session's blobs of `kind` live (one prefix to delete).
fn prefix(session: &SessionId, kind: BlobKind) -> String {
    format!("sessions/{session}/{}", kind.dir())
}

fn key(session: &SessionId, kind: BlobKind, sha: &str) -> String {
    format!("{}/{sha}", prefix(session, kind))
}

fn check_offered(files: &[Offered]) -> Result<()> {
    if files.len() > MAX_OFFERED {
        return Err(Error::invalid_field("files", format!("offer at most {MAX_OFFERED} files per settlement")));
    }
    let mut seen = std::collections::BTreeSet::new();
    for f in files {
        if !valid_path(&f.path) || !seen.insert(f.path.as_str()) {
            return Err(Error::invalid_field("files.path", format!("{:?} is not a distinct path inside the outputs folder", f.path)));
        }
        if f.size < 0 {
            return Err(Error::invalid_field("files.size", "size must not be negative"));
        }
        if f.size <= MAX_FILE_BYTES {
            check_sha(&f.sha256)?;
        }
    }
    Ok(())
}

/// What a runner needs to materialise a Session's sandbox.
#[derive(Debug, Clone, PartialEq)]
pub struct Materialised {
    pub state: SandboxState,
    /// The sandbox expired (or never existed): start from an empty workspace.
    pub fresh: bool,
}

impl Runs {
    pub(crate) fn blobs(&self) -> Result<&Arc<dyn BlobStore>> {
        self.blobs.as_ref().ok_or_else(|| Error::unavailable("this installation has no blob store"))
    }

    /// What becomes of each offered file, and which bytes are missing.
    pub async fn plan_files(&self, lease: &Lease, files: Vec<Offered>) -> Result<Vec<(Offered, FileStatus, bool)>> {
        check_offered(&files)?;
        let sid = self.log.session_of(lease).await?;
        let kept = self.store.all_files(&sid).await?;
        let mut out = vec![];
        for (o, status) in decide(&kept, &files) {
            let upload = status == FileStatus::Captured && self.blobs()?.size(&key(&sid, BlobKind::Files, &o.sha256)).await?.is_none();
            out.push((o, status, upload));
        }
        Ok(out)
    }

    /// Records a capture decided as [`plan_files`] would; every captured
    /// file's bytes must be in the blob store.
    pub async fn record_files(&self, lease: &Lease, files: Vec<Offered>) -> Result<Vec<(Offered, FileStatus)>> {
        check_offered(&files)?;
        let sid = self.log.session_of(lease).await?;
        let kept = self.store.all_files(&sid).await?;
        let decided = decide(&kept, &files);
        let now = now_ms();
        let mut rows = vec![];
        for (o, status) in &decided {
            if *status == FileStatus::Captured {
                let size = self.blobs()?.size(&key(&sid, BlobKind::Files, &o.sha256)).await?;
                if size != Some(o.size as u64) {
                    return Err(Error::new(Code::PreconditionFailed, format!("the bytes of {:?} were not uploaded", o.path)));
                }
            }
            rows.push(SessionFile {
                id: FileId::mint(),
                session_id: sid.clone(),
                path: o.path.clone(),
                size: o.size,
                sha256: if *status == FileStatus::TooLarge { String::new() } else { o.sha256.clone() },
                status: *status,
                run_id: lease.run_id.clone(),
                captured_ms: now,
            });
        }
        self.store.put_files(&rows).await?;
        Ok(decided)
    }

    /// Streams a blob a runner uploads; the first chunk's lease, kind and
    /// digest name it.
    pub async fn put_blob(
        &self,
        lease: &Lease,
        kind: &str,
        sha256: &str,
        chunks: &mut (dyn futures_util::Stream<Item = Result<Bytes>> + Send + Unpin),
    ) -> Result<u64> {
        let kind = BlobKind::parse(kind)?;
        if matches!(kind, BlobKind::Uploads | BlobKind::Skills) {
            return Err(Error::invalid_field("kind", "uploads and skills are read only"));
        }
        check_sha(sha256)?;
        let sid = self.log.session_of(lease).await?;
        self.blobs()?.put_stream(&key(&sid, kind, sha256), sha256, kind.max_bytes(), chunks).await
    }

    pub async fn missing_blobs(&self, lease: &Lease, kind: &str, sha256s: Vec<String>) -> Result<Vec<String>> {
        let kind = BlobKind::parse(kind)?;
        if sha256s.len() > MAX_MANIFEST_ENTRIES {
            return Err(Error::invalid_field("sha256s", format!("ask about at most {MAX_MANIFEST_ENTRIES} blobs")));
        }
        let sid = self.log.session_of(lease).await?;
        let mut missing = vec![];
        for sha in sha256s {
            check_sha(&sha)?;
            if self.blobs()?.size(&key(&sid, kind, &sha)).await?.is_none() {
                missing.push(sha);
            }
        }
        Ok(missing)
    }

    /// Where a blob a lease's runner asks to read lives: the Session's own,
    /// or a skill file of a version the Session mounts.
    async fn readable_key(&self, lease: &Lease, kind: &str, sha256: &str) -> Result<String> {
        let kind = BlobKind::parse(kind)?;
        check_sha(sha256)?;
        let sid = self.log.session_of(lease).await?;
        if kind != BlobKind::Skills {
            return Ok(key(&sid, kind, sha256));
        }
        let s = self.store.get_session(&sid).await?.ok_or_else(|| Error::not_found("session", &sid))?;
        let version = self.catalog.pinned_version(&s.agent_id, s.pins.agent_version).await?;
        if !self.uploads.mounts_skill_blob(version.as_ref(), sha256).await? {
            return Err(Error::not_found("blob", sha256));
        }
        Ok(crate::uploads::skill_key(sha256))
    }

    /// A blob of the Session a lease holds, for restoring its workspace.
    pub async fn read_blob(&self, lease: &Lease, kind: &str, sha256: &str, offset: u64, length: u64) -> Result<Bytes> {
        let key = self.readable_key(lease, kind, sha256).await?;
        self.blobs()?.read(&key, offset, length).await
    }

    pub async fn blob_size(&self, lease: &Lease, kind: &str, sha256: &str) -> Result<u64> {
        let key = self.readable_key(lease, kind, sha256).await?;
        self.blobs()?.size(&key).await?.ok_or_else(|| Error::not_found("blob", sha256))
    }

    /// Records the workspace's newest snapshot; its manifest (and every
    /// file it names) must be uploaded, and its paths stay inside the
    /// workspace. An empty digest keeps the snapshot and records only what
    /// the plane does not enforce.
    pub async fn record_snapshot(&self, lease: &Lease, manifest_sha256: &str, unenforced: Vec<Unenforced>) -> Result<()> {
        if unenforced.len() > 64 || unenforced.iter().any(|u| u.field.len() > 200 || u.reason.len() > 1000) {
            return Err(Error::invalid_field("unenforced", "at most 64 entries of bounded length"));
        }
        let sid = self.log.session_of(lease).await?;
        let current =
            self.store.get_sandbox(&sid).await?.ok_or_else(|| Error::new(Code::PreconditionFailed, "the sandbox never materialised"))?;
        if manifest_sha256.is_empty() {
            return self.store.put_sandbox(&SandboxState { unenforced, updated_ms: now_ms(), ..current }).await;
        }
        check_sha(manifest_sha256)?;
        let manifest = self.blobs()?.read(&key(&sid, BlobKind::Snapshot, manifest_sha256), 0, 256 << 20).await?;
        let manifest: Value = serde_json::from_slice(&manifest).map_err(|e| Error::invalid_field("manifest", format!("not JSON: {e}")))?;
        let entries = manifest.get("files").and_then(Value::as_array).ok_or_else(|| Error::invalid_field("manifest", "no files list"))?;
        if entries.len() > MAX_MANIFEST_ENTRIES {
            return Err(Error::invalid_field("manifest", format!("at most {MAX_MANIFEST_ENTRIES} files")));
        }
        for e in entries {
            let path = e.get("path").and_then(Value::as_str).unwrap_or_default();
            let sha = e.get("sha256").and_then(Value::as_str).unwrap_or_default();
            if !valid_path(path) {
                return Err(Error::invalid_field("manifest", format!("{path:?} is not a path inside the workspace")));
            }
            check_sha(sha)?;
        }
        for e in entries {
            let sha = e.get("sha256").and_then(Value::as_str).unwrap_or_default();
            if self.blobs()?.size(&key(&sid, BlobKind::Snapshot, sha)).await?.is_none() {
                return Err(Error::new(Code::PreconditionFailed, "a file the snapshot names was not uploaded"));
            }
        }
        let state = SandboxState { snapshot_sha256: manifest_sha256.to_string(), unenforced, updated_ms: now_ms(), ..current };
        self.store.put_sandbox(&state).await
    }

    /// The Session's sandbox for a Run just claimed: made (its expiry fixed)
    /// the first time, started over once expired.
    pub(crate) async fn materialise(&self, session: &Session, spec: &SandboxSpec) -> Result<Materialised> {
        let now = now_ms();
        let prior = match self.store.get_sandbox(&session.id).await? {
            Some(s) if s.expires_ms > now => return Ok(Materialised { state: s, fresh: false }),
            prior => prior,
        };
        if prior.is_some() {
            self.blobs()?.delete_prefix(&prefix(&session.id, BlobKind::Snapshot)).await?;
            tracing::info!(session_id = %session.id, "the sandbox expired; the turn starts with a fresh filesystem");
        }
        // Most runners have no delegated cgroup; one that does reports the
        // difference.
        let unenforced = checkfu_core::plane::local_unenforced(!spec.packages.is_empty(), false)
            .into_iter()
            .map(|(field, reason)| Unenforced { field, reason })
            .collect();
        let state = SandboxState {
            session_id: session.id.clone(),
            snapshot_sha256: String::new(),
            materialized_ms: now,
            expires_ms: expiry(now, spec.retention_days),
            unenforced,
            updated_ms: now,
        };
        self.store.put_sandbox(&state).await?;
        Ok(Materialised { state, fresh: true })
    }

    /// What a runner is told about the sandbox of a Run it claims.
    pub(crate) async fn sandbox_for(&self, session: &Session, run_id: &checkfu_core::id::RunId) -> Result<WorkSandbox> {
        let rev = self.catalog.sandbox_revision(&session.pins.sandbox_profile_id, session.pins.sandbox_profile_revision).await?;
        let m = self.materialise(session, &rev.spec).await?;
        let version = self.catalog.pinned_version(&session.agent_id, session.pins.agent_version).await?;
        let (mut mounts, skills) = self.uploads.mounts(session, version.as_ref()).await?;
        let (memory, writable) = self.memory_mounts(session, run_id, m.fresh).await?;
        mounts.extend(memory);
        Ok(WorkSandbox {
            snapshot_sha256: m.state.snapshot_sha256,
            fresh: m.fresh,
            expires_at_ms: m.state.expires_ms,
            unenforced: m.state.unenforced,
            profile: rev.spec,
            mounts,
            writable_mounts: writable,
            skills,
        })
    }

    /// Deletes the snapshots of sandboxes that expired; their Sessions'
    /// next turns start fresh. Returns how many.
    pub async fn sweep_sandboxes(&self) -> Result<usize> {
        let expired = self.store.expired_sandboxes(now_ms(), 100).await?;
        for s in &expired {
            self.blobs()?.delete_prefix(&prefix(&s.session_id, BlobKind::Snapshot)).await?;
            self.store.put_sandbox(&SandboxState { snapshot_sha256: String::new(), updated_ms: now_ms(), ..s.clone() }).await?;
        }
        Ok(expired.len())
    }

    /// Deletes expired snapshots every `every` until `stop`.
    pub async fn run_sandbox_sweeper(self, every: std::time::Duration, stop: tokio_util::sync::CancellationToken) {
        crate::sweeps::every(every, stop, "sandbox", || async {
            let n = self.sweep_sandboxes().await?;
            if n > 0 {
                tracing::info!(sandboxes = n, "deleted the snapshots of expired sandboxes");
            }
            Ok(())
        })
        .await
    }

    /// The sandboxes of a page of Sessions, by Session.
    pub async fn sandbox_states(&self, ids: &[SessionId]) -> Result<std::collections::HashMap<SessionId, SandboxState>> {
        Ok(self.store.get_sandboxes(ids).await?.into_iter().map(|s| (s.session_id.clone(), s)).collect())
    }

    /// Of `ids`, the Sessions whose sandbox has ended: gone, terminated, or
    /// past its expiry (a malformed id names nothing live either).
    pub async fn ended_sandboxes(&self, ids: &[String]) -> Result<Vec<String>> {
        const MOST: usize = 500;
        if ids.len() > MOST {
            return Err(Error::invalid_field("session_ids", format!("at most {MOST} at a time")));
        }
        let now = now_ms();
        let mut ended = vec![];
        for raw in ids {
            let live = match SessionId::parse("session_ids", raw) {
                Ok(id) => match self.store.get_session(&id).await? {
                    Some(s) if s.status != SessionStatus::Terminated => {
                        self.store.get_sandbox(&id).await?.is_some_and(|x| x.expires_ms > now)
                    }
                    _ => false,
                },
                Err(_) => false,
            };
            if !live {
                ended.push(raw.clone());
            }
        }
        Ok(ended)
    }

    pub async fn sandbox_state(&self, session_id: &SessionId) -> Result<Option<SandboxState>> {
        self.store.get_sandbox(session_id).await
    }

    pub async fn list_files(&self, session_id: &str, page: &PageRequest) -> Result<Vec<SessionFile>> {
        let sid = self.log.session(session_id).await?.id;
        self.store.list_files(&sid, page).await
    }

    /// A window of a captured file: at most 8 MiB from `offset`.
    pub async fn read_file(&self, session_id: &str, path: &str, offset: i64, length: i64) -> Result<(SessionFile, Bytes)> {
        let sid = self.log.session(session_id).await?.id;
        if !valid_path(path) {
            return Err(Error::invalid_field("path", "path names a file inside the outputs folder"));
        }
        if offset < 0 || length < 0 {
            return Err(Error::invalid_field("offset", "offset and length must not be negative"));
        }
        let f = self.store.get_file(&sid, path).await?.ok_or_else(|| Error::not_found("file", path))?;
        if f.status != FileStatus::Captured {
            return Err(Error::new(Code::NotFound, format!("{path:?} was not captured ({})", f.status.as_str()))
                .with_details(json!({"status": f.status.as_str()})));
        }
        let length = if length == 0 { MAX_WINDOW_BYTES } else { length.min(MAX_WINDOW_BYTES) };
        let bytes = self.blobs()?.read(&key(&sid, BlobKind::Files, &f.sha256), offset as u64, length as u64).await?;
        Ok((f, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::{SID, service_with};
    use checkfu_blobs::{ObjectBlobs, chunks_of};
    use checkfu_core::sha256_hex;

    fn spec(retention_days: i64) -> SandboxSpec {
        SandboxSpec::compile(json!({"image": "debian:12", "retention_days": retention_days.min(30)})).expect("spec")
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_sandbox_keeps_its_expiry_and_starts_fresh_once_it_passed() {
        let blob_dir = tempfile::tempdir().expect("dir");
        let blobs = Arc::new(ObjectBlobs::open(blob_dir.path().to_str().expect("utf-8")).expect("blobs"));
        let (svc, store, _dir) = service_with(|b| b.with_blobs(blobs.clone())).await;
        let svc = svc.runs;
        let session = svc.log.session(SID).await.expect("session");
        let first = svc.materialise(&session, &spec(7)).await.expect("first");
        assert!(first.fresh, "a new sandbox starts empty");
        let week = first.state.expires_ms - first.state.materialized_ms;
        assert_eq!(week, 7 * 86_400_000);
        let again = svc.materialise(&session, &spec(7)).await.expect("again");
        assert!(!again.fresh);
        assert_eq!(again.state.expires_ms, first.state.expires_ms, "activity never extends it");
        assert_eq!(svc.materialise(&session, &spec(90)).await.expect("capped").state.expires_ms, first.state.expires_ms);

        // It holds a snapshot, then expires: the next Run starts fresh, the
        // snapshot is deleted and a new expiry is fixed.
        let manifest = Bytes::from_static(b"{\"files\":[]}");
        let sha = sha256_hex(&manifest);
        let key = format!("sessions/{SID}/snapshot/{sha}");
        blobs.put_stream(&key, &sha, 1 << 20, &mut chunks_of(manifest.clone(), 4)).await.expect("put");
        store.put_sandbox(&SandboxState { snapshot_sha256: sha.clone(), expires_ms: 1, ..first.state.clone() }).await.expect("expire");
        let after = svc.materialise(&session, &spec(7)).await.expect("after");
        assert!(after.fresh && after.state.snapshot_sha256.is_empty());
        assert!(after.state.expires_ms > now_ms());
        assert_eq!(blobs.size(&key).await.expect("size"), None, "the expired snapshot is deleted");

        // An idle Session's expired snapshot is swept without a Run.
        blobs.put_stream(&key, &sha, 1 << 20, &mut chunks_of(manifest, 4)).await.expect("put");
        store.put_sandbox(&SandboxState { snapshot_sha256: sha, expires_ms: 1, ..after.state }).await.expect("expire");
        assert_eq!(svc.sweep_sandboxes().await.expect("sweep"), 1);
        assert_eq!(blobs.size(&key).await.expect("size"), None);
        assert!(svc.sandbox_state(&session.id).await.expect("state").expect("kept").snapshot_sha256.is_empty());
    }
}
