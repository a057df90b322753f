//! Uploaded Files, the copies Sessions keep of them, and Skills with their
//! immutable versions: the rows that describe bytes kept in the blob store.

use super::SqlSessionsStore;
use super::rows::{i, id, s};
use crate::model::*;
use checkfu_core::id::{FileId, SessionId, SkillId};
use checkfu_core::page::PageRequest;
use checkfu_core::{Error, Result};
use checkfu_store::sqlx::{self, Row, any::AnyRow};
use checkfu_store::{db_err, find_one, is_unique_violation, list_in_envs_with};

#[async_trait::async_trait]
pub trait UploadsStore: Send + Sync + 'static {
    async fn insert_upload(&self, f: &UploadedFile) -> Result<()>;
    async fn get_upload(&self, id: &FileId) -> Result<Option<UploadedFile>>;
    /// Newest first; `created_by` empty lists every uploader's.
    async fn list_uploads(&self, environment_ids: &[String], created_by: &str, page: &PageRequest) -> Result<Vec<UploadedFile>>;
    /// False when it was already gone.
    async fn delete_upload(&self, id: &FileId) -> Result<bool>;
    /// Files whose expiry passed before `now_ms`, oldest first.
    async fn expired_uploads(&self, now_ms: i64, limit: i64) -> Result<Vec<UploadedFile>>;

    /// Records a Session's copy of a File (a second record of one File is
    /// ignored).
    async fn add_session_upload(&self, u: &SessionUpload) -> Result<()>;
    async fn session_uploads(&self, session_id: &SessionId) -> Result<Vec<SessionUpload>>;

    /// A new skill with its first version; 409 `name_taken` when an active
    /// skill of its Environment has the name.
    async fn insert_skill(&self, s: &Skill, first: &SkillVersion) -> Result<()>;
    /// Appends `v` if the skill is active at `v.version - 1`; false when it moved.
    async fn insert_skill_version(&self, v: &SkillVersion) -> Result<bool>;
    async fn get_skill(&self, id: &SkillId) -> Result<Option<Skill>>;
    async fn list_skills(&self, environment_ids: &[String], include_archived: bool, page: &PageRequest) -> Result<Vec<Skill>>;
    async fn archive_skill(&self, id: &SkillId, now_ms: i64) -> Result<()>;
    async fn get_skill_version(&self, id: &SkillId, version: i64) -> Result<Option<SkillVersion>>;
    /// Newest first, before `before_version`.
    async fn list_skill_versions(&self, id: &SkillId, before_version: Option<i64>, limit: i64) -> Result<Vec<SkillVersion>>;
    /// The skill versions holding a file with these bytes.
    async fn skill_versions_holding(&self, sha256: &str) -> Result<Vec<(SkillId, i64)>>;
}

fn upload(r: &AnyRow) -> Result<UploadedFile> {
    Ok(UploadedFile {
        id: id(r, "id")?,
        environment_id: id(r, "environment_id")?,
        filename: s(r, "filename")?,
        media_type: s(r, "media_type")?,
        size_bytes: i(r, "size_bytes")?,
        sha256: s(r, "sha256")?,
        created_by: id(r, "created_by")?,
        created_ms: i(r, "created_ms")?,
        expires_ms: i(r, "expires_ms")?,
    })
}

fn session_upload(r: &AnyRow) -> Result<SessionUpload> {
    Ok(SessionUpload {
        session_id: id(r, "session_id")?,
        file_id: id(r, "file_id")?,
        filename: s(r, "filename")?,
        media_type: s(r, "media_type")?,
        size_bytes: i(r, "size_bytes")?,
        sha256: s(r, "sha256")?,
        added_ms: i(r, "added_ms")?,
    })
}

fn skill(r: &AnyRow) -> Result<Skill> {
    Ok(Skill {
        id: id(r, "id")?,
        environment_id: id(r, "environment_id")?,
        name: s(r, "name")?,
        description: s(r, "description")?,
        latest_version: i(r, "latest_version")?,
        status: SkillStatus::parse("status", &s(r, "status")?)?,
        created_by: id(r, "created_by")?,
        created_ms: i(r, "created_ms")?,
        updated_ms: i(r, "updated_ms")?,
    })
}

fn name_taken(s: &Skill) -> Error {
    Error::conflict(format!("an active skill named {:?} already exists in environment {}", s.name, s.environment_id))
        .with_reason("name_taken")
}

impl SqlSessionsStore {
    async fn version_rows(&self, rows: Vec<AnyRow>) -> Result<Vec<SkillVersion>> {
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let skill_id: SkillId = id(r, "skill_id")?;
            let version = i(r, "version")?;
            let files = sqlx::query("SELECT path, size_bytes, sha256 FROM skill_files WHERE skill_id = $1 AND version = $2 ORDER BY path")
                .bind(&skill_id)
                .bind(version)
                .fetch_all(&self.db.reads)
                .await
                .map_err(db_err)?
                .iter()
                .map(|f| Ok(SkillFile { path: s(f, "path")?, size_bytes: i(f, "size_bytes")?, sha256: s(f, "sha256")? }))
                .collect::<Result<Vec<_>>>()?;
            out.push(SkillVersion {
                skill_id,
                version,
                name: s(r, "name")?,
                description: s(r, "description")?,
                files,
                created_by: id(r, "created_by")?,
                created_ms: i(r, "created_ms")?,
            });
        }
        Ok(out)
    }
}

async fn insert_version(tx: &mut sqlx::Transaction<'_, sqlx::Any>, v: &SkillVersion) -> Result<()> {
    sqlx::query(
        "INSERT INTO skill_versions (skill_id, version, name, description, created_by, created_ms) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&v.skill_id)
    .bind(v.version)
    .bind(&v.name)
    .bind(&v.description)
    .bind(&v.created_by)
    .bind(v.created_ms)
    .execute(&mut **tx)
    .await
    .map_err(db_err)?;
    for f in &v.files {
        sqlx::query("INSERT INTO skill_files (skill_id, version, path, size_bytes, sha256) VALUES ($1, $2, $3, $4, $5)")
            .bind(&v.skill_id)
            .bind(v.version)
            .bind(&f.path)
            .bind(f.size_bytes)
            .bind(&f.sha256)
            .execute(&mut **tx)
            .await
            .map_err(db_err)?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl UploadsStore for SqlSessionsStore {
    async fn insert_upload(&self, f: &UploadedFile) -> Result<()> {
        sqlx::query(
            "INSERT INTO uploaded_files (id, environment_id, filename, media_type, size_bytes, sha256, created_by, created_ms, expires_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&f.id)
        .bind(&f.environment_id)
        .bind(&f.filename)
        .bind(&f.media_type)
        .bind(f.size_bytes)
        .bind(&f.sha256)
        .bind(&f.created_by)
        .bind(f.created_ms)
        .bind(f.expires_ms)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn get_upload(&self, id: &FileId) -> Result<Option<UploadedFile>> {
        find_one(&self.db, "SELECT * FROM uploaded_files WHERE id = $1", id, upload).await
    }

    async fn list_uploads(&self, environment_ids: &[String], created_by: &str, page: &PageRequest) -> Result<Vec<UploadedFile>> {
        list_in_envs_with(
            &self.db,
            "SELECT * FROM uploaded_files WHERE environment_id = $1 AND id < $2 AND ($4 = '' OR created_by = $4) ORDER BY id DESC LIMIT $3",
            environment_ids,
            &[created_by],
            page,
            upload,
            |f| &f.id,
        )
        .await
    }

    async fn delete_upload(&self, id: &FileId) -> Result<bool> {
        let done = sqlx::query("DELETE FROM uploaded_files WHERE id = $1").bind(id).execute(&self.db.pool).await.map_err(db_err)?;
        Ok(done.rows_affected() == 1)
    }

    async fn expired_uploads(&self, now_ms: i64, limit: i64) -> Result<Vec<UploadedFile>> {
        sqlx::query("SELECT * FROM uploaded_files WHERE expires_ms > 0 AND expires_ms < $1 ORDER BY expires_ms LIMIT $2")
            .bind(now_ms)
            .bind(limit)
            .fetch_all(&self.db.reads)
            .await
            .map_err(db_err)?
            .iter()
            .map(upload)
            .collect()
    }

    async fn add_session_upload(&self, u: &SessionUpload) -> Result<()> {
        sqlx::query(
            "INSERT INTO session_uploads (session_id, file_id, filename, media_type, size_bytes, sha256, added_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (session_id, file_id) DO NOTHING",
        )
        .bind(&u.session_id)
        .bind(&u.file_id)
        .bind(&u.filename)
        .bind(&u.media_type)
        .bind(u.size_bytes)
        .bind(&u.sha256)
        .bind(u.added_ms)
        .execute(&self.db.pool)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn session_uploads(&self, session_id: &SessionId) -> Result<Vec<SessionUpload>> {
        sqlx::query("SELECT * FROM session_uploads WHERE session_id = $1 ORDER BY file_id")
            .bind(session_id)
            .fetch_all(&self.db.reads)
            .await
            .map_err(db_err)?
            .iter()
            .map(session_upload)
            .collect()
    }

    async fn insert_skill(&self, sk: &Skill, first: &SkillVersion) -> Result<()> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let inserted = sqlx::query(
            "INSERT INTO skills (id, environment_id, name, description, latest_version, status, created_by, created_ms, updated_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&sk.id)
        .bind(&sk.environment_id)
        .bind(&sk.name)
        .bind(&sk.description)
        .bind(sk.latest_version)
        .bind(sk.status.as_str())
        .bind(&sk.created_by)
        .bind(sk.created_ms)
        .bind(sk.updated_ms)
        .execute(&mut *tx)
        .await;
        match inserted {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => return Err(name_taken(sk)),
            Err(e) => return Err(db_err(e)),
        }
        insert_version(&mut tx, first).await?;
        tx.commit().await.map_err(db_err)
    }

    async fn insert_skill_version(&self, v: &SkillVersion) -> Result<bool> {
        let mut tx = self.db.pool.begin().await.map_err(db_err)?;
        let moved = sqlx::query(
            "UPDATE skills SET latest_version = $1, description = $2, updated_ms = $3 WHERE id = $4 AND latest_version = $5 AND status = 'active'",
        )
        .bind(v.version)
        .bind(&v.description)
        .bind(v.created_ms)
        .bind(&v.skill_id)
        .bind(v.version - 1)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        if moved.rows_affected() != 1 {
            return Ok(false);
        }
        insert_version(&mut tx, v).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(true)
    }

    async fn get_skill(&self, id: &SkillId) -> Result<Option<Skill>> {
        find_one(&self.db, "SELECT * FROM skills WHERE id = $1", id, skill).await
    }

    async fn list_skills(&self, environment_ids: &[String], include_archived: bool, page: &PageRequest) -> Result<Vec<Skill>> {
        list_in_envs_with(
            &self.db,
            "SELECT * FROM skills WHERE environment_id = $1 AND id < $2 AND ($4 = 'all' OR status = 'active') ORDER BY id DESC LIMIT $3",
            environment_ids,
            &[if include_archived { "all" } else { "active" }],
            page,
            skill,
            |s| &s.id,
        )
        .await
    }

    async fn archive_skill(&self, id: &SkillId, now_ms: i64) -> Result<()> {
        sqlx::query("UPDATE skills SET status = 'archived', updated_ms = $1 WHERE id = $2 AND status = 'active'")
            .bind(now_ms)
            .bind(id)
            .execute(&self.db.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn get_skill_version(&self, id: &SkillId, version: i64) -> Result<Option<SkillVersion>> {
        let rows = sqlx::query("SELECT * FROM skill_versions WHERE skill_id = $1 AND version = $2")
            .bind(id)
            .bind(version)
            .fetch_all(&self.db.reads)
            .await
            .map_err(db_err)?;
        Ok(self.version_rows(rows).await?.into_iter().next())
    }

    async fn list_skill_versions(&self, id: &SkillId, before_version: Option<i64>, limit: i64) -> Result<Vec<SkillVersion>> {
        let rows = sqlx::query("SELECT * FROM skill_versions WHERE skill_id = $1 AND version < $2 ORDER BY version DESC LIMIT $3")
            .bind(id)
            .bind(before_version.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(&self.db.reads)
            .await
            .map_err(db_err)?;
        self.version_rows(rows).await
    }

    async fn skill_versions_holding(&self, sha256: &str) -> Result<Vec<(SkillId, i64)>> {
        sqlx::query("SELECT DISTINCT skill_id, version FROM skill_files WHERE sha256 = $1")
            .bind(sha256)
            .fetch_all(&self.db.reads)
            .await
            .map_err(db_err)?
            .iter()
            .map(|r| Ok((id(r, "skill_id")?, r.try_get::<i64, _>("version").map_err(db_err)?)))
            .collect()
    }
}
