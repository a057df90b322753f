//! CMA skills (api.md §17.12) ↔ §16.6's Skills: versioned bundles, their
//! `display_name` the front matter's `name`.

use super::cx::{Cx, encode};
use super::wire::{self, CmaError, CmaResult, refuse};
use crate::uploads_wire::{Skill, SkillVersion};
use axum::Json;
use axum::extract::{Path, RawQuery, Request};
use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use checkfu_core::Error;
use serde_json::{Value, json};

/// A bundle's form, read whole (the native limit).
const MAX_BODY: usize = 12 << 20;

/// `POST /v1/skills` (multipart `files[]`, `display_name?`).
pub async fn create(cx: Cx, req: Request) -> CmaResult<Json<Value>> {
    let files = bundle(req).await?;
    let s: Skill = cx.native.post("/v1/skills", &json!({"environment_id": cx.env_id, "files": files})).await?;
    Ok(Json(skill(&s)))
}

pub async fn list(cx: Cx, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let q = wire::query_pairs(raw.as_deref())?;
    // Every skill here is the workspace's own: `source=anthropic` lists none.
    if wire::param(&q, "source").is_some_and(|s| s != "custom") {
        return Ok(Json(wire::page(vec![], None)));
    }
    // Skills deleted here (archived natively) are gone from this surface.
    let path = format!("/v1/skills?environment_id={}", cx.env_id);
    let live = |s: &Skill| if s.status != "archived" { skill(s) } else { Value::Null };
    Ok(Json(cx.native.page_where(&path, &q, live, |s| !s.is_null()).await?))
}

pub async fn retrieve(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    Ok(Json(skill(&live(&cx, &id).await?)))
}

/// `DELETE`: archived natively (published releases keep it), then gone
/// from this surface.
pub async fn delete(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    live(&cx, &id).await?;
    cx.native.post::<Skill>(&format!("/v1/skills/{id}/archive"), &json!({})).await?;
    Ok(Json(json!({"id": id, "type": "skill_deleted"})))
}

/// `POST /v1/skills/{id}/versions`.
pub async fn create_version(cx: Cx, Path(id): Path<String>, req: Request) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    let files = bundle(req).await?;
    let v: SkillVersion = cx.native.post(&format!("/v1/skills/{id}/versions"), &json!({"files": files})).await?;
    Ok(Json(version(&v)))
}

/// `GET /v1/skills/{id}/versions`: newest first.
pub async fn list_versions(cx: Cx, Path(id): Path<String>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    let q = wire::query_pairs(raw.as_deref())?;
    Ok(Json(cx.native.page(&format!("/v1/skills/{id}/versions"), &q, version).await?))
}

pub async fn retrieve_version(cx: Cx, Path((id, n)): Path<(String, String)>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    let n: i64 = n.parse().map_err(|_| Error::not_found("skill version", &n))?;
    Ok(Json(version(&cx.native.get(&format!("/v1/skills/{id}/versions/{n}")).await?)))
}

/// Versions are what published agents pinned: never deleted.
pub async fn delete_version(_cx: Cx, Path(_ids): Path<(String, String)>) -> CmaError {
    refuse("skill_version_delete_unsupported", "skill versions are immutable: agents' releases pin them; delete the skill to retire it")
}

/// `GET /v1/skills/{id}/versions/{n}/content`: the version's bundle as a
/// zip archive under one top-level folder (the skill's name), as CMA
/// uploads take it. Entries are stored: the bundle is small (≤ 8 MiB) and
/// mostly text already compressed in transit.
pub async fn download_version(cx: Cx, Path((id, n)): Path<(String, String)>) -> CmaResult<Response> {
    let id = live(&cx, &id).await?.id;
    let n: i64 = n.parse().map_err(|_| Error::not_found("skill_version", &n))?;
    let v: SkillVersion = cx.native.get(&format!("/v1/skills/{id}/versions/{n}")).await?;
    let top = if v.name.is_empty() { "skill".to_string() } else { v.name.clone() };
    let mut files = vec![];
    for f in &v.files {
        let path = &f.path;
        let resp = cx.native.raw(Method::GET, &format!("/v1/skills/{id}/versions/{n}/content?path={}", encode(path)), None, &[]).await?;
        let bytes =
            axum::body::to_bytes(resp.into_body(), MAX_BODY).await.map_err(|e| Error::internal(format!("reading a skill file: {e}")))?;
        files.push((format!("{top}/{path}"), bytes));
    }
    let archive = zip_of(&files).map_err(|e| Error::internal(format!("writing the skill archive: {e}")))?;
    let name = format!("attachment; filename=\"{top}.zip\"");
    Ok(([(header::CONTENT_TYPE, "application/zip".to_string()), (header::CONTENT_DISPOSITION, name)], archive).into_response())
}

/// A zip archive of `(path, bytes)` entries, stored.
fn zip_of(files: &[(String, bytes::Bytes)]) -> zip::result::ZipResult<Vec<u8>> {
    use std::io::Write;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (path, bytes) in files {
        w.start_file(path.as_str(), options)?;
        w.write_all(bytes)?;
    }
    Ok(w.finish()?.into_inner())
}

fn checked(id: &str) -> CmaResult<String> {
    super::wire::path_id::<checkfu_core::id::SkillId>("skill", id)
}

/// A skill not deleted through this surface (archived ones are gone).
async fn live(cx: &Cx, id: &str) -> CmaResult<Skill> {
    let id = checked(id)?;
    let s: Skill = cx.native.get(&format!("/v1/skills/{id}")).await?;
    if s.status == "archived" {
        return Err(Error::not_found("skill", &id).into());
    }
    Ok(s)
}

/// A CMA bundle (`files[]` parts named by path, all under one top-level
/// folder) as the native bundle: paths relative to that folder.
async fn bundle(req: Request) -> CmaResult<Vec<Value>> {
    let parts = crate::multipart::read(req, MAX_BODY, 513).await?;
    let mut files: Vec<(String, Vec<u8>)> = vec![];
    for p in parts {
        match p.name.as_str() {
            "files" | "files[]" => {
                let path = p.filename.clone().ok_or_else(|| Error::invalid_field("files", "each file part needs its path as filename"))?;
                files.push((path, p.bytes.to_vec()));
            }
            "display_name" => {}
            other => return Err(Error::invalid_field(other, format!("{other} is not a field of a skill upload")).into()),
        }
    }
    let top: Option<String> = files.first().and_then(|(p, _)| p.split_once('/').map(|(t, _)| t.to_string()));
    let shared = top.filter(|t| files.iter().all(|(p, _)| p.starts_with(&format!("{t}/"))));
    Ok(files
        .into_iter()
        .map(|(p, bytes)| {
            let rel = match &shared {
                Some(t) => p[t.len() + 1..].to_string(),
                None => p,
            };
            json!({"path": rel, "content": base64::engine::general_purpose::STANDARD.encode(bytes), "encoding": "base64"})
        })
        .collect())
}

fn skill(s: &Skill) -> Value {
    json!({"type": "skill", "id": s.id, "display_name": s.name, "description": s.description, "source": "custom",
        "latest_version": s.latest_version.to_string(), "created_at": s.created_at, "updated_at": s.updated_at})
}

fn version(v: &SkillVersion) -> Value {
    json!({"type": "skill_version", "id": v.version.to_string(), "skill_id": v.skill_id, "version": v.version.to_string(),
        "name": v.name, "description": v.description, "directory": v.name, "created_at": v.created_at})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_zips_under_its_folder_and_reads_back() {
        let files = vec![
            ("greeting/SKILL.md".to_string(), bytes::Bytes::from_static(b"---\nname: greeting\n---\nhi")),
            ("greeting/scripts/hi.sh".to_string(), bytes::Bytes::from_static(b"echo hi\n")),
        ];
        let archive = zip_of(&files).expect("zipped");
        let mut read = zip::ZipArchive::new(std::io::Cursor::new(archive)).expect("a zip archive");
        assert_eq!(read.len(), 2);
        let mut text = String::new();
        std::io::Read::read_to_string(&mut read.by_name("greeting/scripts/hi.sh").expect("entry"), &mut text).expect("read");
        assert_eq!(text, "echo hi\n");
    }
}
