//! Skills (api.md §16.6): `manage` on the Environment writes, `read` reads;
//! a skill in an Environment the caller cannot read does not exist (404).
//! A bundle comes as a multipart form (`environment_id`, a `files` part per
//! file, its filename the path) or as JSON with each file's content in
//! UTF-8 or base64; either way at most 12 MiB.

use super::Paging;
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::extract::Query;
use crate::idempotency::once;
use crate::multipart::{self, Part};
use crate::uploads_wire::{self as wire, BundleFile};
use crate::views::{ErrorEnvelope, Page, page};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::HeaderMap;
use axum::response::Response;
use base64::Engine;
use checkfu_core::{Code, Error, sha256_hex};
use checkfu_proto::sessions::v1 as ss;
use serde::Deserialize;
use serde_json::json;
use utoipa::IntoParams;

/// The largest bundle body accepted (the bundle itself is at most 8 MiB).
pub const MAX_BUNDLE_BODY: usize = 12 * 1024 * 1024;
/// Parts of a multipart bundle at most (its files, plus `environment_id`).
const MAX_PARTS: usize = 520;

/// A bundle as sent: its Environment (on create) and its files.
struct Sent {
    environment_id: Option<String>,
    files: Vec<ss::BundleFile>,
}

fn too_large() -> Error {
    Error::new(Code::PayloadTooLarge, format!("a skill bundle body is at most {MAX_BUNDLE_BODY} bytes"))
}

fn from_json(files: Vec<BundleFile>) -> ApiResult<Vec<ss::BundleFile>> {
    let mut out = Vec::with_capacity(files.len());
    for (i, f) in files.into_iter().enumerate() {
        let content = match f.encoding.as_deref().unwrap_or("utf8") {
            "utf8" => f.content.into_bytes(),
            "base64" => base64::engine::general_purpose::STANDARD
                .decode(f.content.as_bytes())
                .map_err(|_| Error::invalid_field(&format!("files[{i}].content"), "content is not valid base64"))?,
            _ => return Err(Error::invalid_field(&format!("files[{i}].encoding"), "encoding is utf8 or base64").into()),
        };
        out.push(ss::BundleFile { path: f.path, content });
    }
    Ok(out)
}

fn from_parts(parts: Vec<Part>) -> ApiResult<Sent> {
    let mut sent = Sent { environment_id: None, files: vec![] };
    for p in parts {
        match p.name.as_str() {
            "environment_id" => sent.environment_id = Some(p.text()?),
            "files" | "files[]" => {
                let path =
                    p.filename.clone().ok_or_else(|| Error::invalid_field("files", "each files part needs a filename (its path)"))?;
                sent.files.push(ss::BundleFile { path, content: p.bytes.to_vec() });
            }
            other => return Err(Error::invalid_field(other, format!("unknown form field {other:?}; fields: environment_id, files")).into()),
        }
    }
    Ok(sent)
}

/// Reads a bundle from a form or a JSON body.
async fn read_bundle(req: Request, creating: bool) -> ApiResult<Sent> {
    if multipart::is_multipart(&req) {
        return from_parts(multipart::read(req, MAX_BUNDLE_BODY, MAX_PARTS).await?);
    }
    let bytes = Bytes::from_request(req, &()).await.map_err(|_| too_large())?;
    if bytes.len() > MAX_BUNDLE_BODY {
        return Err(too_large().into());
    }
    let invalid = |e: serde_json::Error| Error::invalid(format!("the body is not a skill bundle: {e}"));
    if creating {
        let b: wire::CreateSkill = serde_json::from_slice(&bytes).map_err(invalid)?;
        Ok(Sent { environment_id: Some(b.environment_id), files: from_json(b.files)? })
    } else {
        let b: wire::CreateSkillVersion = serde_json::from_slice(&bytes).map_err(invalid)?;
        Ok(Sent { environment_id: None, files: from_json(b.files)? })
    }
}

/// What idempotency compares: the Environment and each file's path and bytes.
fn fingerprint(env: &str, files: &[ss::BundleFile]) -> serde_json::Value {
    let files: Vec<_> = files.iter().map(|f| json!([f.path, sha256_hex(&f.content)])).collect();
    json!({"environment_id": env, "files": files})
}

/// A version number from the path.
fn version_of(n: &str) -> ApiResult<i64> {
    n.parse::<i64>().ok().filter(|v| *v >= 1).ok_or_else(|| Error::invalid_field("n", "the version must be a positive integer").into())
}

async fn skill_for(st: &AppState, caller: &Caller, id: &str) -> ApiResult<ss::Skill> {
    checkfu_core::id::SkillId::check("id", id)?;
    let s = st.skills.clone().get_skill(ss::GetByIdRequest { id: id.into() }).await?.into_inner();
    if st.allowed(&caller.principal_id, "read", "environment", &s.environment_id, &s.environment_id).await? {
        Ok(s)
    } else {
        Err(Error::not_found("skill", id).into())
    }
}

#[utoipa::path(post, path = "/v1/skills", tag = "skills", operation_id = "skills.createSkill", params(crate::idempotency::IdempotencyKeyHeader), request_body = wire::CreateSkill,
    responses((status = 201, description = "The skill at version 1", body = wire::Skill), (status = "4XX", body = ErrorEnvelope),
        (status = 503, body = ErrorEnvelope)))]
pub async fn create_skill(State(st): State<AppState>, caller: Caller, headers: HeaderMap, req: Request) -> ApiResult<Response> {
    st.require_capability("skills").await?;
    let sent = read_bundle(req, true).await?;
    let env = sent.environment_id.ok_or_else(|| Error::invalid_field("environment_id", "environment_id is required"))?;
    st.require_manage(&caller, &env).await?;
    let body = fingerprint(&env, &sent.files);
    let req = ss::CreateSkillRequest { environment_id: env, files: sent.files, actor_id: caller.principal_id.clone() };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/skills", &body, || async {
        let s = st.skills.clone().create_skill(req).await?.into_inner();
        super::created(wire::Skill { version: Some(s.latest_version), ..wire::skill(&s) })
    })
    .await
}

#[utoipa::path(post, path = "/v1/skills/{id}/versions", tag = "skills", operation_id = "skills.createSkillVersion", params(crate::idempotency::IdempotencyKeyHeader, ("id" = String, Path)), request_body = wire::CreateSkillVersion,
    responses((status = 201, description = "The new version (the skill's latest_version moves to it)", body = wire::SkillVersion),
        (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn create_version(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    req: Request,
) -> ApiResult<Response> {
    st.require_capability("skills").await?;
    let s = skill_for(&st, &caller, &id).await?;
    st.require_manage(&caller, &s.environment_id).await?;
    let sent = read_bundle(req, false).await?;
    let body = fingerprint(&s.environment_id, &sent.files);
    let route = format!("POST /v1/skills/{id}/versions");
    let req = ss::CreateSkillVersionRequest { skill_id: id, files: sent.files, actor_id: caller.principal_id.clone() };
    once(&st.idem, &caller.principal_id, &headers, &route, &body, || async {
        let v = st.skills.clone().create_skill_version(req).await?.into_inner();
        super::created(wire::SkillVersion { latest_version: Some(v.version), ..wire::skill_version(&v) })
    })
    .await
}

/// `?environment_id=&include_archived=&limit=&page=`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SkillQuery {
    /// Only this Environment.
    #[serde(default)]
    pub environment_id: Option<String>,
    /// Archived skills too; default false.
    #[serde(default)]
    pub include_archived: Option<bool>,
}

#[utoipa::path(get, path = "/v1/skills", tag = "skills", operation_id = "skills.listSkills", params(Paging, SkillQuery),
    responses((status = 200, body = Page<wire::Skill>), (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn list_skills(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<SkillQuery>,
    paging: Paging,
) -> ApiResult<Json<Page<wire::Skill>>> {
    st.require_capability("skills").await?;
    let envs = st.readable_envs(&caller, q.environment_id.as_deref()).await?;
    let req = ss::ListSkillsRequest {
        environment_ids: envs,
        include_archived: q.include_archived.unwrap_or(false),
        limit: paging.limit(),
        page: paging.page(),
    };
    let r = st.skills.clone().list_skills(req).await?.into_inner();
    Ok(Json(page(&r.data, &r.next_page, wire::skill)))
}

#[utoipa::path(get, path = "/v1/skills/{id}", tag = "skills", operation_id = "skills.getSkill", params(("id" = String, Path)),
    responses((status = 200, body = wire::Skill), (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn get_skill(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> ApiResult<Json<wire::Skill>> {
    st.require_capability("skills").await?;
    Ok(Json(wire::skill(&skill_for(&st, &caller, &id).await?)))
}

#[utoipa::path(get, path = "/v1/skills/{id}/versions", tag = "skills", operation_id = "skills.listSkillVersions", params(("id" = String, Path), Paging),
    responses((status = 200, description = "Newest first", body = Page<wire::SkillVersion>), (status = "4XX", body = ErrorEnvelope),
        (status = 503, body = ErrorEnvelope)))]
pub async fn list_versions(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    paging: Paging,
) -> ApiResult<Json<Page<wire::SkillVersion>>> {
    st.require_capability("skills").await?;
    skill_for(&st, &caller, &id).await?;
    let r = st
        .skills
        .clone()
        .list_skill_versions(ss::ListSkillVersionsRequest { skill_id: id, limit: paging.limit(), page: paging.page() })
        .await?;
    let r = r.into_inner();
    Ok(Json(page(&r.data, &r.next_page, wire::skill_version)))
}

#[utoipa::path(get, path = "/v1/skills/{id}/versions/{n}", tag = "skills", operation_id = "skills.getSkillVersion", params(("id" = String, Path), ("n" = i64, Path)),
    responses((status = 200, body = wire::SkillVersion), (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn get_version(
    State(st): State<AppState>,
    caller: Caller,
    Path((id, n)): Path<(String, String)>,
) -> ApiResult<Json<wire::SkillVersion>> {
    let version = version_of(&n)?;
    st.require_capability("skills").await?;
    skill_for(&st, &caller, &id).await?;
    let v = st.skills.clone().get_skill_version(ss::GetSkillVersionRequest { skill_id: id, version }).await?.into_inner();
    Ok(Json(wire::skill_version(&v)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PathQuery {
    /// The file's path within the bundle (`SKILL.md`, `scripts/hi.sh`).
    path: String,
}

#[utoipa::path(get, path = "/v1/skills/{id}/versions/{n}/content", tag = "skills", operation_id = "skills.getSkillVersionContent",
    params(("id" = String, Path), ("n" = i64, Path), PathQuery),
    responses((status = 200, description = "The file's bytes; `checkfu-file-size` and `checkfu-file-sha256` describe it", content_type = "application/octet-stream", body = Vec<u8>),
        (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn version_content(
    State(st): State<AppState>,
    caller: Caller,
    Path((id, n)): Path<(String, String)>,
    Query(q): Query<PathQuery>,
) -> ApiResult<Response> {
    let version = version_of(&n)?;
    st.require_capability("skills").await?;
    skill_for(&st, &caller, &id).await?;
    let c = st.skills.clone().read_skill_file(ss::ReadSkillFileRequest { skill_id: id, version, path: q.path }).await?.into_inner();
    let f = c.file.unwrap_or_default();
    Ok(super::files::window(c.data, "application/octet-stream", f.size_bytes, &f.sha256))
}

#[utoipa::path(post, path = "/v1/skills/{id}/archive", tag = "skills", operation_id = "skills.archiveSkill", params(("id" = String, Path)),
    responses((status = 200, description = "Archived: no new version or publication may name it; published releases keep theirs",
        body = wire::Skill), (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn archive_skill(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> ApiResult<Json<wire::Skill>> {
    st.require_capability("skills").await?;
    let s = skill_for(&st, &caller, &id).await?;
    st.require_manage(&caller, &s.environment_id).await?;
    Ok(Json(wire::skill(&st.skills.clone().archive_skill(ss::GetByIdRequest { id }).await?.into_inner())))
}
