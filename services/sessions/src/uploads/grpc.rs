//! Thin gRPC handlers for Files and Skills: convert, call, map errors.

use super::{NewUpload, Uploads};
use crate::model::{SkillFile, SkillVersion, UploadedFile};
use checkfu_core::Error;
use checkfu_core::page::PageRequest;
use checkfu_proto::sessions::v1 as pb;
use checkfu_proto::sessions::v1::files_service_server::FilesService;
use checkfu_proto::sessions::v1::skills_service_server::SkillsService;
use tonic::{Request, Response, Status};

pub struct UploadsGrpc {
    pub uploads: Uploads,
}

type R<T> = std::result::Result<Response<T>, Status>;

fn ok<T>(v: T) -> R<T> {
    Ok(Response::new(v))
}

fn file(f: UploadedFile) -> pb::UploadedFile {
    pb::UploadedFile {
        id: f.id.into(),
        environment_id: f.environment_id.into(),
        filename: f.filename,
        media_type: f.media_type,
        size_bytes: f.size_bytes,
        sha256: f.sha256,
        created_by: f.created_by.into(),
        created_ms: f.created_ms,
        expires_ms: f.expires_ms,
    }
}

fn skill(s: crate::model::Skill) -> pb::Skill {
    pb::Skill {
        id: s.id.into(),
        environment_id: s.environment_id.into(),
        name: s.name,
        description: s.description,
        latest_version: s.latest_version,
        status: s.status.as_str().into(),
        created_by: s.created_by.into(),
        created_ms: s.created_ms,
        updated_ms: s.updated_ms,
    }
}

fn skill_file(f: SkillFile) -> pb::SkillFile {
    pb::SkillFile { path: f.path, size_bytes: f.size_bytes, sha256: f.sha256 }
}

fn version(v: SkillVersion) -> pb::SkillVersion {
    pb::SkillVersion {
        skill_id: v.skill_id.into(),
        version: v.version,
        name: v.name,
        description: v.description,
        files: v.files.into_iter().map(skill_file).collect(),
        created_by: v.created_by.into(),
        created_ms: v.created_ms,
    }
}

fn bundle(files: Vec<pb::BundleFile>) -> Vec<(String, Vec<u8>)> {
    files.into_iter().map(|f| (f.path, f.content)).collect()
}

#[tonic::async_trait]
impl FilesService for UploadsGrpc {
    async fn create_file(&self, r: Request<tonic::Streaming<pb::FileUpload>>) -> R<pb::UploadedFile> {
        use futures_util::StreamExt;
        let mut stream = r.into_inner();
        let first = stream.next().await.transpose()?.ok_or_else(|| Error::invalid_field("header", "send the header first"))?;
        let h = first.header.ok_or_else(|| Error::invalid_field("header", "the first message carries the header"))?;
        let new = NewUpload {
            environment_id: h.environment_id,
            filename: h.filename,
            media_type: h.media_type,
            expires_in_seconds: h.expires_in_seconds,
            actor_id: h.actor_id,
            sha256: h.sha256,
        };
        let head = futures_util::stream::iter([Ok(bytes::Bytes::from(first.data))]);
        let rest = stream.map(|c| c.map(|c| bytes::Bytes::from(c.data)).map_err(Error::from));
        let mut all = head.chain(rest);
        ok(file(self.uploads.create_upload(new, &mut all).await?))
    }

    async fn get_file(&self, r: Request<pb::GetByIdRequest>) -> R<pb::UploadedFile> {
        ok(file(self.uploads.upload(&r.into_inner().id).await?))
    }

    async fn list_files(&self, r: Request<pb::ListUploadedFilesRequest>) -> R<pb::ListUploadedFilesResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.uploads.list_uploads(&r.environment_ids, &r.created_by, &p).await?, |f| &f.id);
        ok(pb::ListUploadedFilesResponse { data: rows.into_iter().map(file).collect(), next_page })
    }

    async fn read_file(&self, r: Request<pb::ReadUploadedFileRequest>) -> R<pb::UploadedFileWindow> {
        let r = r.into_inner();
        let (f, data) = self.uploads.read_upload(&r.id, r.offset, r.length).await?;
        ok(pb::UploadedFileWindow { file: Some(file(f)), data: data.to_vec() })
    }

    async fn delete_file(&self, r: Request<pb::GetByIdRequest>) -> R<pb::UploadedFile> {
        ok(file(self.uploads.delete_upload(&r.into_inner().id).await?))
    }
}

#[tonic::async_trait]
impl SkillsService for UploadsGrpc {
    async fn create_skill(&self, r: Request<pb::CreateSkillRequest>) -> R<pb::Skill> {
        let r = r.into_inner();
        ok(skill(self.uploads.create_skill(&r.environment_id, bundle(r.files), &r.actor_id).await?))
    }

    async fn create_skill_version(&self, r: Request<pb::CreateSkillVersionRequest>) -> R<pb::SkillVersion> {
        let r = r.into_inner();
        ok(version(self.uploads.create_skill_version(&r.skill_id, bundle(r.files), &r.actor_id).await?))
    }

    async fn get_skill(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Skill> {
        ok(skill(self.uploads.skill(&r.into_inner().id).await?))
    }

    async fn list_skills(&self, r: Request<pb::ListSkillsRequest>) -> R<pb::ListSkillsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let (rows, next_page) = p.finish(self.uploads.list_skills(&r.environment_ids, r.include_archived, &p).await?, |s| &s.id);
        ok(pb::ListSkillsResponse { data: rows.into_iter().map(skill).collect(), next_page })
    }

    async fn get_skill_version(&self, r: Request<pb::GetSkillVersionRequest>) -> R<pb::SkillVersion> {
        let r = r.into_inner();
        ok(version(self.uploads.skill_version(&r.skill_id, r.version).await?))
    }

    async fn list_skill_versions(&self, r: Request<pb::ListSkillVersionsRequest>) -> R<pb::ListSkillVersionsResponse> {
        let r = r.into_inner();
        let p = PageRequest::standard(r.limit, &r.page)?;
        let rows = self.uploads.list_skill_versions(&r.skill_id, &p).await?;
        let (rows, next_page) = p.finish_numbered(rows, |v| v.version);
        ok(pb::ListSkillVersionsResponse { data: rows.into_iter().map(version).collect(), next_page })
    }

    async fn read_skill_file(&self, r: Request<pb::ReadSkillFileRequest>) -> R<pb::SkillFileContent> {
        let r = r.into_inner();
        let (f, data) = self.uploads.read_skill_file(&r.skill_id, r.version, &r.path).await?;
        ok(pb::SkillFileContent { file: Some(skill_file(f)), data: data.to_vec() })
    }

    async fn archive_skill(&self, r: Request<pb::GetByIdRequest>) -> R<pb::Skill> {
        ok(skill(self.uploads.archive_skill(&r.into_inner().id).await?))
    }
}
