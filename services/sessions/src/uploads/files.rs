//! Files people upload (api.md §16.7) and what a Session does with them.
//!
//! - A File's bytes live in the blob store at `uploads/<id>/<sha256>`;
//!   deleting it (or its expiry) deletes the row and destroys the bytes.
//! - A Session given a File (its `resources`, a message's document or image
//!   block) keeps a copy of its own under `sessions/<id>/uploads/<sha256>`,
//!   so a later deletion never recalls what the Session was given. Before
//!   each Run the runner copies it, read-only, to `uploads/<id>/<name>` in
//!   the workspace (`mounts()`).
//!
//! The gateway decided who may see or write each File; this module checks
//! shape, limits, the Environment and the feature switch.

use super::Uploads;
use crate::model::*;
use bytes::Bytes;
use checkfu_core::id::{EnvironmentId, FileId, PrincipalId, SessionId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};

/// What a caller sends ahead of a File's bytes.
#[derive(Debug, Clone)]
pub struct NewUpload {
    pub environment_id: String,
    pub filename: String,
    pub media_type: String,
    pub expires_in_seconds: Option<i64>,
    pub actor_id: String,
    pub sha256: String,
}

fn upload_key(f: &UploadedFile) -> String {
    format!("uploads/{}/{}", f.id, f.sha256)
}

fn session_key(session: &SessionId, sha256: &str) -> String {
    format!("sessions/{session}/uploads/{sha256}")
}

impl Uploads {
    /// Stores an upload: the bytes must hash to the header's digest and
    /// stay within 64 MiB, else nothing is kept.
    pub async fn create_upload(
        &self,
        new: NewUpload,
        chunks: &mut (dyn futures_util::Stream<Item = Result<Bytes>> + Send + Unpin),
    ) -> Result<UploadedFile> {
        self.require_feature("files")?;
        let environment_id = EnvironmentId::parse("environment_id", &new.environment_id)?;
        check_filename(&new.filename)?;
        let created_ms = now_ms();
        let mut f = UploadedFile {
            id: FileId::mint(),
            environment_id,
            filename: new.filename,
            media_type: media_type(&new.media_type),
            size_bytes: 0,
            sha256: new.sha256,
            created_by: PrincipalId::parse("actor_id", &new.actor_id)?,
            created_ms,
            expires_ms: upload_expiry(created_ms, new.expires_in_seconds, self.settings.retention_days)?,
        };
        let key = upload_key(&f);
        f.size_bytes = self.blobs()?.put_stream(&key, &f.sha256, MAX_UPLOAD_BYTES, chunks).await? as i64;
        if let Err(e) = self.store.insert_upload(&f).await {
            let _ = self.blobs()?.delete_prefix(&format!("uploads/{}", f.id)).await;
            return Err(e);
        }
        Ok(f)
    }

    pub async fn upload(&self, id: &str) -> Result<UploadedFile> {
        self.require_feature("files")?;
        let id = FileId::parse("id", id)?;
        self.store.get_upload(&id).await?.ok_or_else(|| Error::not_found("file", &id))
    }

    pub async fn list_uploads(&self, environment_ids: &[String], created_by: &str, page: &PageRequest) -> Result<Vec<UploadedFile>> {
        self.require_feature("files")?;
        self.store.list_uploads(environment_ids, created_by, page).await
    }

    /// A window of a File: at most 8 MiB from `offset` (the first 8 MiB by
    /// default).
    pub async fn read_upload(&self, id: &str, offset: i64, length: i64) -> Result<(UploadedFile, Bytes)> {
        let f = self.upload(id).await?;
        if offset < 0 || length < 0 {
            return Err(Error::invalid_field("offset", "offset and length must not be negative"));
        }
        let length = if length == 0 { MAX_WINDOW_BYTES } else { length.min(MAX_WINDOW_BYTES) };
        let bytes = self.blobs()?.read(&upload_key(&f), offset as u64, length as u64).await?;
        Ok((f, bytes))
    }

    /// Deletes a File and destroys its bytes. Sessions keep the copies they
    /// were given.
    pub async fn delete_upload(&self, id: &str) -> Result<UploadedFile> {
        let f = self.upload(id).await?;
        self.blobs()?.delete_prefix(&format!("uploads/{}", f.id)).await?;
        if !self.store.delete_upload(&f.id).await? {
            return Err(Error::not_found("file", &f.id));
        }
        Ok(f)
    }

    /// Deletes Files whose expiry passed. Returns how many.
    pub async fn sweep_uploads(&self) -> Result<usize> {
        let expired = self.store.expired_uploads(now_ms(), 100).await?;
        for f in &expired {
            self.blobs()?.delete_prefix(&format!("uploads/{}", f.id)).await?;
            self.store.delete_upload(&f.id).await?;
        }
        Ok(expired.len())
    }

    /// Deletes expired Files every `every` until `stop`.
    pub async fn run_upload_sweeper(self, every: std::time::Duration, stop: tokio_util::sync::CancellationToken) {
        crate::sweeps::every(every, stop, "uploads", || async {
            let n = self.sweep_uploads().await?;
            if n > 0 {
                tracing::info!(files = n, "deleted expired uploads");
            }
            Ok(())
        })
        .await
    }

    /// The Files a Session is being given, checked: they exist (404), are
    /// in its Environment (400) and, as images, a type a model takes.
    pub(crate) async fn files_for(&self, environment_id: &EnvironmentId, blocks: &[FileBlock]) -> Result<Vec<UploadedFile>> {
        if blocks.is_empty() {
            return Ok(vec![]);
        }
        self.require_feature("files")?;
        let mut out: Vec<UploadedFile> = vec![];
        for b in blocks {
            let f = self.store.get_upload(&b.file_id).await?.ok_or_else(|| Error::not_found("file", &b.file_id))?;
            check_usable(&f, environment_id, b.image)?;
            if !out.iter().any(|o| o.id == f.id) {
                out.push(f);
            }
        }
        Ok(out)
    }

    /// Gives a Session its own copy of each File (once per File).
    pub(crate) async fn give_files(&self, session: &SessionId, files: &[UploadedFile]) -> Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        let have = self.store.session_uploads(session).await?;
        for f in files {
            if have.iter().any(|h| h.file_id == f.id) {
                continue;
            }
            let to = session_key(session, &f.sha256);
            if self.blobs()?.size(&to).await?.is_none() {
                self.copy_blob(&upload_key(f), &to, &f.sha256, f.size_bytes as u64).await?;
            }
            let u = SessionUpload {
                session_id: session.clone(),
                file_id: f.id.clone(),
                filename: f.filename.clone(),
                media_type: f.media_type.clone(),
                size_bytes: f.size_bytes,
                sha256: f.sha256.clone(),
                added_ms: now_ms(),
            };
            self.store.add_session_upload(&u).await?;
        }
        Ok(())
    }

    /// Copies a blob a window at a time.
    async fn copy_blob(&self, from: &str, to: &str, sha256: &str, size: u64) -> Result<()> {
        let blobs = self.blobs()?.clone();
        let from = from.to_string();
        const WINDOW: u64 = 4 * 1024 * 1024;
        let windows = futures_util::stream::unfold(0u64, move |at| {
            let blobs = blobs.clone();
            let from = from.clone();
            async move {
                if at >= size {
                    return None;
                }
                let r = blobs.read(&from, at, WINDOW).await;
                let next = r.as_ref().map_or(size, |b| if b.is_empty() { size } else { at + b.len() as u64 });
                Some((r, next))
            }
        });
        let mut windows = Box::pin(windows);
        self.blobs()?.put_stream(to, sha256, MAX_UPLOAD_BYTES, &mut windows).await?;
        Ok(())
    }

    /// What a runner copies into the workspace before a Run: the Session's
    /// Files at `uploads/<id>/<name>` and its skills at `skills/<name>/`,
    /// all read-only, with what the model is told about the skills.
    pub(crate) async fn mounts(&self, session: &Session, version: Option<&AgentVersion>) -> Result<(Vec<WorkMount>, Vec<WorkSkill>)> {
        let mut mounts = vec![];
        for u in self.store.session_uploads(&session.id).await? {
            mounts.push(WorkMount {
                path: u.path(),
                sha256: u.sha256,
                size_bytes: u.size_bytes,
                source: "uploads",
                file_id: Some(u.file_id.to_string()),
                media_type: Some(u.media_type),
            });
        }
        let mut listed = vec![];
        for v in self.session_skills(session, version).await? {
            for f in &v.files {
                mounts.push(WorkMount {
                    path: format!("{SKILLS_DIR}/{}/{}", v.name, f.path),
                    sha256: f.sha256.clone(),
                    size_bytes: f.size_bytes,
                    source: "skills",
                    file_id: None,
                    media_type: None,
                });
            }
            listed.push(WorkSkill { path: format!("{SKILLS_DIR}/{}/{SKILL_MD}", v.name), name: v.name, description: v.description });
        }
        Ok((mounts, listed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::{SID, service_with};
    use checkfu_blobs::{BlobStore, ObjectBlobs, chunks_of};
    use checkfu_core::sha256_hex;
    use std::sync::Arc;

    fn new_upload(sha256: &str) -> NewUpload {
        NewUpload {
            environment_id: "env_01jx0000000000000000000001".into(),
            filename: "notes.txt".into(),
            media_type: "text/plain; charset=utf-8".into(),
            expires_in_seconds: None,
            actor_id: "prin_01jx0000000000000000000001".into(),
            sha256: sha256.into(),
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_expired_file_is_deleted_bytes_and_all_and_a_session_keeps_its_copy() {
        let blob_dir = tempfile::tempdir().expect("dir");
        let blobs = Arc::new(ObjectBlobs::open(blob_dir.path().to_str().expect("utf-8")).expect("blobs"));
        let (svc, store, _dir) = service_with(|b| b.with_blobs(blobs.clone())).await;
        let svc = svc.uploads;
        let bytes = bytes::Bytes::from_static(b"alpha beta");
        let sha = sha256_hex(&bytes);
        let f = svc.create_upload(new_upload(&sha), &mut chunks_of(bytes.clone(), 3)).await.expect("upload");
        assert_eq!((f.size_bytes, f.media_type.as_str()), (10, "text/plain"));
        assert_eq!(f.expires_ms - f.created_ms, 30 * 86_400_000, "the default retention");
        // Bytes that do not match their digest keep nothing.
        let wrong = svc.create_upload(new_upload(&"0".repeat(64)), &mut chunks_of(bytes.clone(), 3)).await;
        assert!(wrong.is_err());
        let page = PageRequest { limit: 10, before_id: None };
        assert_eq!(svc.list_uploads(&[f.environment_id.to_string()], "", &page).await.expect("list").len(), 1);

        let session = SessionId::parse("id", SID).expect("sid");
        svc.give_files(&session, std::slice::from_ref(&f)).await.expect("given");
        store.delete_upload(&f.id).await.expect("forget the row");
        store.insert_upload(&UploadedFile { expires_ms: 1, ..f.clone() }).await.expect("expired");
        assert_eq!(svc.sweep_uploads().await.expect("sweep"), 1);
        assert!(store.get_upload(&f.id).await.expect("get").is_none());
        assert_eq!(blobs.size(&upload_key(&f)).await.expect("size"), None, "the bytes are destroyed");
        assert_eq!(blobs.read(&session_key(&session, &sha), 0, 100).await.expect("copy"), bytes, "the Session's copy stays");
        assert_eq!(svc.sweep_uploads().await.expect("sweep"), 0);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn switched_off_files_answer_unavailable() {
        let (svc, _, _dir) = service_with(|b| {
            b.with_upload_settings(UploadSettings {
                disabled: checkfu_core::features::Disabled::parse("files").expect("list"),
                retention_days: 30,
            })
        })
        .await;
        let svc = svc.uploads;
        let e = svc.upload("file_01jx0000000000000000000001").await.expect_err("off");
        assert_eq!((e.code, e.details["reason"].as_str()), (checkfu_core::Code::Unavailable, Some("feature_disabled")));
        assert!(svc.skill("skl_01jx0000000000000000000001").await.is_err_and(|e| e.code == checkfu_core::Code::NotFound), "skills stay on");
    }
}
