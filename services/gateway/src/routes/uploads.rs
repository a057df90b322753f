//! Files people upload (api.md §16.7).
//!
//! Uploading needs `read` on the Environment; the uploader owns the File.
//! A File is seen and deleted by its owner, `manage` holders on its
//! Environment and admins; to anyone else it does not exist (404). A
//! message or a new Session may name only Files its author can see.

use super::{InEnvironment, Paging};
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::extract::Query;
use crate::idempotency::once;
use crate::multipart::{self, Part};
use crate::uploads_wire::{self as wire};
use crate::views::{ErrorEnvelope, Page, page};
use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::HeaderMap;
use axum::response::Response;
use checkfu_core::{Code, Error, sha256_hex};
use checkfu_proto::sessions::v1 as ss;
use serde_json::{Value, json};
use utoipa::IntoParams;

/// The largest File.
pub const MAX_FILE_BYTES: usize = 64 * 1024 * 1024;
/// The largest upload form: the File and its fields.
pub const MAX_FORM_BYTES: usize = MAX_FILE_BYTES + 64 * 1024;
/// Uploads this gateway holds in memory at once; more wait their turn.
static IN_FLIGHT: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);
/// The bytes sent to the sessions service per message.
const CHUNK: usize = 1024 * 1024;

impl AppState {
    /// 503 `unavailable` while the installation does not offer `feature`.
    pub(crate) async fn require_capability(&self, feature: &str) -> ApiResult<()> {
        let caps = self.connections.clone().list_capabilities(checkfu_proto::capability::v1::ListCapabilitiesRequest {}).await?;
        match caps.into_inner().data.into_iter().find(|c| c.name == feature) {
            Some(c) if !c.available => Err(checkfu_core::features::unavailable(feature, &c.reason).into()),
            _ => Ok(()),
        }
    }
}

/// Its owner, `manage` on its Environment, or an admin.
pub(crate) async fn may_see(st: &AppState, principal_id: &str, f: &ss::UploadedFile) -> ApiResult<bool> {
    Ok(f.created_by == principal_id
        || st.allowed(principal_id, "manage", "environment", &f.environment_id, &f.environment_id).await?
        || st.allowed(principal_id, "admin", "installation", "*", "").await?)
}

async fn visible(st: &AppState, principal_id: &str, id: &str) -> ApiResult<ss::UploadedFile> {
    checkfu_core::id::FileId::check("id", id)?;
    let f = st.files.clone().get_file(ss::GetByIdRequest { id: id.into() }).await?.into_inner();
    if may_see(st, principal_id, &f).await? { Ok(f) } else { Err(Error::not_found("file", id).into()) }
}

/// Every File a message's content names must be visible to its author.
pub(crate) async fn check_file_blocks(st: &AppState, author: &str, payload: &Value) -> ApiResult<()> {
    let Some(blocks) = payload.get("content").and_then(Value::as_array) else { return Ok(()) };
    for b in blocks.iter().filter(|b| matches!(b.get("type").and_then(Value::as_str), Some("document" | "image"))) {
        if let Some(id) = b.pointer("/source/file_id").and_then(Value::as_str)
            && checkfu_core::id::FileId::check("file_id", id).is_ok()
        {
            visible(st, author, id).await?;
        }
    }
    Ok(())
}

/// The Files of a new Session's `resources:[{type:"file", file_id}]`, each
/// visible to its creator.
pub(crate) async fn resource_files(st: &AppState, author: &str, resources: &[Value]) -> ApiResult<Vec<String>> {
    if resources.len() > crate::uploads_wire::MAX_RESOURCES {
        return Err(Error::invalid_field("resources", format!("at most {} resources", crate::uploads_wire::MAX_RESOURCES)).into());
    }
    let mut ids = vec![];
    for (i, r) in resources.iter().enumerate() {
        let field = format!("resources[{i}]");
        match r.get("type").and_then(Value::as_str) {
            Some("file") => {}
            // Mounted by the sessions service (`memory_mounts`).
            Some("memory_store") => continue,
            _ => {
                return Err(Error::invalid_field(
                    &format!("{field}.type"),
                    "a resource is {type:\"file\", file_id} or {type:\"memory_store\", memory_store_id, access, mount_name?}",
                )
                .into());
            }
        }
        let id = r.get("file_id").and_then(Value::as_str).unwrap_or_default();
        checkfu_core::id::FileId::check(&format!("{field}.file_id"), id)?;
        visible(st, author, id).await?;
        ids.push(id.to_string());
    }
    Ok(ids)
}

/// The `memory_store` entries of a new Session's `resources`, shape-checked
/// (the sessions and memory services check names and access).
pub(crate) fn memory_mounts(resources: &[Value]) -> ApiResult<Vec<checkfu_proto::sessions::v1::MemoryMount>> {
    let mut out = vec![];
    for (i, r) in resources.iter().enumerate().filter(|(_, r)| r.get("type").and_then(Value::as_str) == Some("memory_store")) {
        let field = format!("resources[{i}]");
        let known = ["type", "memory_store_id", "access", "mount_name"];
        if let Some(k) = r.as_object().and_then(|o| o.keys().find(|k| !known.contains(&k.as_str()))) {
            return Err(Error::invalid_field(&format!("{field}.{k}"), format!("unknown field {k:?}")).into());
        }
        let text = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
        let id = text("memory_store_id").unwrap_or_default();
        checkfu_core::id::MemoryStoreId::check(&format!("{field}.memory_store_id"), &id)?;
        let access = text("access").ok_or_else(|| Error::invalid_field(&format!("{field}.access"), "access is read_only or read_write"))?;
        if r.get("mount_name").is_some_and(|n| !n.is_string() && !n.is_null()) {
            return Err(Error::invalid_field(&format!("{field}.mount_name"), "mount_name is a string").into());
        }
        out.push(checkfu_proto::sessions::v1::MemoryMount {
            memory_store_id: id,
            access,
            mount_name: text("mount_name").unwrap_or_default(),
        });
    }
    Ok(out)
}

struct Form {
    environment_id: String,
    expires_in_seconds: Option<i64>,
    file: Part,
}

fn form(parts: Vec<Part>) -> ApiResult<Form> {
    let (mut env, mut expires, mut file) = (None, None, None);
    for p in parts {
        match p.name.as_str() {
            "environment_id" => env = Some(p.text()?),
            "expires_in_seconds" => {
                // An empty field (or a form's `null`) leaves the default.
                let t = p.text()?;
                let t = t.trim();
                if !t.is_empty() && t != "null" {
                    expires =
                        Some(t.parse::<i64>().map_err(|_| Error::invalid_field("expires_in_seconds", "expires_in_seconds is an integer"))?);
                }
            }
            "file" if file.is_some() => return Err(Error::invalid_field("file", "send one file part").into()),
            "file" => file = Some(p),
            other => {
                return Err(Error::invalid_field(
                    other,
                    format!("unknown form field {other:?}; fields: environment_id, expires_in_seconds, file"),
                )
                .into());
            }
        }
    }
    let environment_id = env.ok_or_else(|| Error::invalid_field("environment_id", "environment_id is required"))?;
    let file = file.ok_or_else(|| Error::invalid_field("file", "a file part is required"))?;
    if file.bytes.len() > MAX_FILE_BYTES {
        return Err(Error::new(Code::PayloadTooLarge, format!("a File is at most {MAX_FILE_BYTES} bytes")).into());
    }
    Ok(Form { environment_id, expires_in_seconds: expires, file })
}

#[utoipa::path(post, path = "/v1/files", tag = "files", operation_id = "files.uploadFile", params(crate::idempotency::IdempotencyKeyHeader), request_body(content = wire::UploadForm, content_type = "multipart/form-data"),
    responses((status = 201, body = wire::File), (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn upload_file(State(st): State<AppState>, caller: Caller, headers: HeaderMap, req: Request) -> ApiResult<Response> {
    st.require_capability("files").await?;
    let _turn = IN_FLIGHT.acquire().await.map_err(|_| Error::unavailable("the gateway is shutting down"))?;
    let f = form(multipart::read(req, MAX_FORM_BYTES, 8).await?)?;
    checkfu_core::id::EnvironmentId::check("environment_id", &f.environment_id)?;
    st.require_read(&caller, &f.environment_id).await?;
    let filename = f.file.filename.clone().ok_or_else(|| Error::invalid_field("file.filename", "the file part needs a filename"))?;
    let content_type = f.file.content_type.clone().unwrap_or_default();
    let sha256 = sha256_hex(&f.file.bytes);
    // Idempotency compares the parts, not the form's boundary.
    let fingerprint = json!({
        "environment_id": f.environment_id,
        "expires_in_seconds": f.expires_in_seconds,
        "file": {"filename": filename, "content_type": content_type, "sha256": sha256, "size": f.file.bytes.len()},
    });
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/files", &fingerprint, || async {
        let header = ss::FileHeader {
            environment_id: f.environment_id.clone(),
            filename,
            media_type: content_type,
            expires_in_seconds: f.expires_in_seconds,
            actor_id: caller.principal_id.clone(),
            sha256,
        };
        let bytes = f.file.bytes.clone();
        let mut msgs = vec![ss::FileUpload { header: Some(header), data: vec![] }];
        msgs.extend(bytes.chunks(CHUNK).map(|c| ss::FileUpload { header: None, data: c.to_vec() }));
        let created = st.files.clone().create_file(futures_util::stream::iter(msgs)).await?.into_inner();
        super::created(wire::file(&created))
    })
    .await
}

#[utoipa::path(get, path = "/v1/files", tag = "files", operation_id = "files.listFiles", params(Paging, InEnvironment),
    responses((status = 200, description = "Newest first: your own, or every File of an Environment you manage", body = Page<wire::File>),
        (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn list_files(
    State(st): State<AppState>,
    caller: Caller,
    paging: Paging,
    Query(env): Query<InEnvironment>,
) -> ApiResult<Json<Page<wire::File>>> {
    st.require_capability("files").await?;
    let envs = st.readable_envs(&caller, env.environment_id.as_deref()).await?;
    let everyone = match env.environment_id.as_deref().filter(|e| !e.is_empty()) {
        Some(env) => st.allowed(&caller.principal_id, "manage", "environment", env, env).await? || st.is_admin(&caller).await?,
        None => st.is_admin(&caller).await?,
    };
    let req = ss::ListUploadedFilesRequest {
        environment_ids: envs,
        created_by: if everyone { String::new() } else { caller.principal_id.clone() },
        limit: paging.limit(),
        page: paging.page(),
    };
    let r = st.files.clone().list_files(req).await?.into_inner();
    Ok(Json(page(&r.data, &r.next_page, wire::file)))
}

#[utoipa::path(get, path = "/v1/files/{id}", tag = "files", operation_id = "files.getFile", params(("id" = String, Path)),
    responses((status = 200, body = wire::File), (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn get_file(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> ApiResult<Json<wire::File>> {
    st.require_capability("files").await?;
    Ok(Json(wire::file(&visible(&st, &caller.principal_id, &id).await?)))
}

#[derive(Debug, serde::Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WindowQuery {
    /// The first byte; default 0.
    #[serde(default)]
    offset: Option<i64>,
    /// At most 8 MiB (8388608); default and cap 8 MiB.
    #[serde(default)]
    length: Option<i64>,
}

#[utoipa::path(get, path = "/v1/files/{id}/content", tag = "files", operation_id = "files.getFileContent", params(("id" = String, Path), WindowQuery),
    responses((status = 200, description = "The window's bytes (at most 8 MiB), in the File's media type; `checkfu-file-size` gives the whole size",
        content_type = "application/octet-stream", body = Vec<u8>),
        (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn file_content(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<WindowQuery>,
) -> ApiResult<Response> {
    st.require_capability("files").await?;
    visible(&st, &caller.principal_id, &id).await?;
    let req = ss::ReadUploadedFileRequest { id, offset: q.offset.unwrap_or(0), length: q.length.unwrap_or(0) };
    let w = st.files.clone().read_file(req).await?.into_inner();
    let f = w.file.unwrap_or_default();
    Ok(super::files::window(w.data, &f.media_type, f.size_bytes, &f.sha256))
}

#[utoipa::path(delete, path = "/v1/files/{id}", tag = "files", operation_id = "files.deleteFile", params(("id" = String, Path)),
    responses((status = 200, description = "Deleted; the bytes are destroyed (Sessions keep the copies they were given)", body = wire::Deleted),
        (status = "4XX", body = ErrorEnvelope), (status = 503, body = ErrorEnvelope)))]
pub async fn delete_file(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> ApiResult<Json<wire::Deleted>> {
    st.require_capability("files").await?;
    visible(&st, &caller.principal_id, &id).await?;
    let f = st.files.clone().delete_file(ss::GetByIdRequest { id }).await?.into_inner();
    Ok(Json(wire::Deleted { id: f.id, deleted: true }))
}
