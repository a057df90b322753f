//! CMA files (api.md §17.12) ↔ §16.7's uploaded Files in the workspace;
//! `list(scope_id=sess_…)` lists what a Session captured from `outputs/`.

use super::cx::Cx;
use super::wire::{self, CmaResult};
use crate::uploads_wire::File;
use crate::views::SessionFile;
use axum::Json;
use axum::extract::{Path, RawQuery, Request};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use checkfu_core::Error;
use serde_json::{Value, json};

/// Largest upload accepted (the native File limit, plus the form).
const MAX_FORM_BYTES: usize = crate::routes::uploads::MAX_FORM_BYTES;
/// The native content endpoint serves windows of at most this many bytes.
const WINDOW: i64 = 8 << 20;

/// `POST /v1/files` (multipart `file`, `expires_in_seconds?`): the same
/// upload natively, in the workspace's Environment.
pub async fn upload(cx: Cx, req: Request) -> CmaResult<Json<Value>> {
    let parts = crate::multipart::read(req, MAX_FORM_BYTES, 8).await?;
    let boundary = format!("cma{}", checkfu_core::id::new_id("b"));
    let mut body: Vec<u8> = vec![];
    let mut field = |name: &str, filename: Option<&str>, content_type: Option<&str>, bytes: &[u8]| {
        body.extend(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"").as_bytes());
        if let Some(f) = filename {
            body.extend(format!("; filename=\"{}\"", f.replace(['"', '\r', '\n'], "_")).as_bytes());
        }
        body.extend(b"\r\n");
        if let Some(t) = content_type {
            body.extend(format!("Content-Type: {}\r\n", t.replace(['\r', '\n'], "")).as_bytes());
        }
        body.extend(b"\r\n");
        body.extend(bytes);
        body.extend(b"\r\n");
    };
    field("environment_id", None, None, cx.env_id.as_bytes());
    for p in &parts {
        match p.name.as_str() {
            "file" | "expires_in_seconds" => field(&p.name, p.filename.as_deref(), p.content_type.as_deref(), &p.bytes),
            other => return Err(Error::invalid_field(other, format!("{other} is not a field of a file upload")).into()),
        }
    }
    body.extend(format!("--{boundary}--\r\n").as_bytes());
    let content_type = format!("multipart/form-data; boundary={boundary}");
    let resp = cx.native.raw_bytes(Method::POST, "/v1/files", body, &content_type).await?;
    let bytes =
        axum::body::to_bytes(resp.into_body(), 1 << 20).await.map_err(|e| Error::internal(format!("reading a native response: {e}")))?;
    let f: Value = serde_json::from_slice(&bytes).map_err(|e| Error::internal(format!("a native response is not JSON: {e}")))?;
    Ok(Json(file(&super::cx::view_of(f)?)))
}

/// `GET /v1/files`: the workspace's Files, or with `scope_id=sess_…` the
/// files that Session captured.
pub async fn list(cx: Cx, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let q = wire::query_pairs(raw.as_deref())?;
    let ids = wire::params(&q, "ids");
    // Over the CMA items (their `id` is the native one).
    let keep = |f: &Value| ids.is_empty() || ids.contains(&f["id"].as_str().unwrap_or_default());
    if let Some(scope) = wire::param(&q, "scope_id") {
        let sid = super::wire::path_id::<checkfu_core::id::SessionId>("session", scope)
            .map_err(|_| Error::invalid_field("scope_id", "scope_id names a session (sess_…)"))?;
        return Ok(Json(cx.native.page_where(&format!("/v1/sessions/{sid}/files"), &q, |f| output(&sid, f), keep).await?));
    }
    Ok(Json(cx.native.page_where(&format!("/v1/files?environment_id={}", cx.env_id), &q, file, keep).await?))
}

pub async fn retrieve(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    Ok(Json(file(&cx.native.get(&format!("/v1/files/{}", checked(&id)?)).await?)))
}

pub async fn delete(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    cx.native.delete(&format!("/v1/files/{id}")).await?;
    Ok(Json(json!({"id": id, "type": "file_deleted"})))
}

/// `GET /v1/files/{id}/content`: the whole file, read window by window.
pub async fn download(cx: Cx, Path(id): Path<String>) -> CmaResult<Response> {
    let id = checked(&id)?;
    let meta: File = cx.native.get(&format!("/v1/files/{id}")).await?;
    let size = meta.size_bytes;
    let mut out: Vec<u8> = Vec::with_capacity(size.max(0) as usize);
    let mut offset = 0;
    while offset < size {
        let resp = cx.native.raw(Method::GET, &format!("/v1/files/{id}/content?offset={offset}&length={WINDOW}"), None, &[]).await?;
        let chunk = axum::body::to_bytes(resp.into_body(), WINDOW as usize + 1)
            .await
            .map_err(|e| Error::internal(format!("reading a File: {e}")))?;
        if chunk.is_empty() {
            break;
        }
        offset += chunk.len() as i64;
        out.extend_from_slice(&chunk);
    }
    Ok(([(axum::http::header::CONTENT_TYPE, meta.media_type)], out).into_response())
}

fn checked(id: &str) -> CmaResult<String> {
    super::wire::path_id::<checkfu_core::id::FileId>("file", id)
}

/// A native File as CMA shows it.
fn file(f: &File) -> Value {
    json!({"type": "file", "id": f.id, "filename": f.filename, "mime_type": f.media_type, "size_bytes": f.size_bytes,
        "created_at": f.created_at, "downloadable": true, "scope": Value::Null})
}

/// A file a Session captured from `outputs/`, scoped to it.
fn output(session_id: &str, f: &SessionFile) -> Value {
    json!({"type": "file", "id": f.id, "filename": f.path, "size_bytes": f.size, "created_at": f.captured_at,
        "downloadable": f.status == "captured", "scope": {"type": "session", "id": session_id}})
}
