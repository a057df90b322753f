//! Response shapes of Files and Skills (api.md §16.6–16.7), and the JSON
//! form of a skill bundle.

use checkfu_core::time::rfc3339;
use checkfu_proto::sessions::v1 as ss;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct File {
    pub id: String,
    pub environment_id: String,
    /// As uploaded: 1–255 bytes, no `/` or NUL.
    pub filename: String,
    /// From the part's `Content-Type`, else `application/octet-stream`.
    pub media_type: String,
    pub size_bytes: i64,
    pub sha256: String,
    pub created_by: String,
    pub created_at: String,
    /// `null`: kept until deleted.
    pub expires_at: Option<String>,
}

pub fn file(f: &ss::UploadedFile) -> File {
    File {
        id: f.id.clone(),
        environment_id: f.environment_id.clone(),
        filename: f.filename.clone(),
        media_type: f.media_type.clone(),
        size_bytes: f.size_bytes,
        sha256: f.sha256.clone(),
        created_by: f.created_by.clone(),
        created_at: rfc3339(f.created_ms),
        expires_at: (f.expires_ms > 0).then(|| rfc3339(f.expires_ms)),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Deleted {
    pub id: String,
    pub deleted: bool,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Skill {
    pub id: String,
    pub environment_id: String,
    /// From `SKILL.md`'s front matter; fixed for the skill's life.
    pub name: String,
    /// The latest version's.
    pub description: String,
    pub latest_version: i64,
    /// `active` or `archived`.
    pub status: String,
    pub created_by: String,
    pub created_at: String,
    pub updated_at: String,
    /// On `POST /v1/skills` only: the version that write made (1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
}

pub fn skill(s: &ss::Skill) -> Skill {
    Skill {
        id: s.id.clone(),
        environment_id: s.environment_id.clone(),
        name: s.name.clone(),
        description: s.description.clone(),
        latest_version: s.latest_version,
        status: s.status.clone(),
        created_by: s.created_by.clone(),
        created_at: rfc3339(s.created_ms),
        updated_at: rfc3339(s.updated_ms),
        version: None,
    }
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SkillFile {
    pub path: String,
    pub size_bytes: i64,
    pub sha256: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SkillVersion {
    pub skill_id: String,
    pub version: i64,
    pub name: String,
    pub description: String,
    pub files: Vec<SkillFile>,
    pub created_by: String,
    pub created_at: String,
    /// On `POST /v1/skills/{id}/versions` only: the skill's latest_version
    /// after this write (this version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_version: Option<i64>,
}

pub fn skill_version(v: &ss::SkillVersion) -> SkillVersion {
    SkillVersion {
        skill_id: v.skill_id.clone(),
        version: v.version,
        name: v.name.clone(),
        description: v.description.clone(),
        files: v.files.iter().map(|f| SkillFile { path: f.path.clone(), size_bytes: f.size_bytes, sha256: f.sha256.clone() }).collect(),
        created_by: v.created_by.clone(),
        created_at: rfc3339(v.created_ms),
        latest_version: None,
    }
}

/// One file of a JSON bundle.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BundleFile {
    /// Relative; segments of `[A-Za-z0-9._-]`; a top directory shared by
    /// every path is stripped.
    pub path: String,
    pub content: String,
    /// `utf8` (default) or `base64`.
    #[serde(default)]
    pub encoding: Option<String>,
}

/// `POST /v1/skills` as JSON (or multipart: `environment_id` and a `files`
/// part per file whose filename is its path).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSkill {
    pub environment_id: String,
    /// `SKILL.md` (YAML front matter `name`, `description`) and the rest:
    /// at most 512 files and 8 MiB.
    pub files: Vec<BundleFile>,
}

/// `POST /v1/skills/{id}/versions` as JSON (or multipart `files` parts).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSkillVersion {
    pub files: Vec<BundleFile>,
}

/// `POST /v1/files`: a multipart form (these fields only).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct UploadForm {
    pub environment_id: String,
    /// 3,600 to 31,536,000; default the installation's retention
    /// (`files_retention_days`, 30 days).
    pub expires_in_seconds: Option<i64>,
    /// The bytes (at most 64 MiB); its filename and `Content-Type` are kept.
    #[schema(value_type = String, format = Binary)]
    pub file: Vec<u8>,
}

/// Files one new Session's `resources` may name.
pub const MAX_RESOURCES: usize = 20;
