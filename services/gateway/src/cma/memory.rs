//! CMA memory stores (api.md §17.11) ↔ §13's MemoryStores: a memory is the
//! document at its path (`mem_<base64url(path)>`), an update a
//! compare-and-set write, a memory version one (store version, path).

use super::cx::{Cx, encode};
use super::wire::{self, CmaError, CmaResult, refuse};
use crate::memory_wire::{MemoryDocument, MemoryDocumentAnswer, MemoryDocumentPage, MemoryStore, MemoryVersion, VersionChange};
use crate::views::Page;
use axum::Json;
use axum::extract::{Path, RawQuery};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use checkfu_core::{Code, Error};
use serde_json::{Value, json};

/// `POST /v1/memory_stores`: owned by the caller, `review: direct`; the
/// caller's `read` and `write` rows are minted with it.
pub async fn create(cx: Cx, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let name = body["name"].as_str().ok_or_else(|| Error::invalid_field("name", "name is required"))?;
    let me = &cx.caller.principal_id;
    let mut native = json!({"environment_id": cx.env_id, "name": name, "owner": {"kind": "principal", "id": me},
        "metadata": wire::metadata(&body["metadata"])?});
    if let Some(d) = body["description"].as_str() {
        native["description"] = json!(d);
    }
    // A store is a workspace resource: its managers create them.
    cx.state.require_manage(&cx.caller, &cx.env_id).await?;
    let s = cx.native.post::<MemoryStore>("/v1/memory-stores", &native).await?;
    for permission in ["read", "write"] {
        cx.native.grant(json!({"kind": "principal", "id": me}), permission, json!({"kind": "memory_store", "id": s.id})).await?;
    }
    Ok(Json(store(&s)))
}

pub async fn retrieve(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    Ok(Json(store(&cx.native.get::<MemoryStore>(&format!("/v1/memory-stores/{}", checked(&id)?)).await?)))
}

pub async fn list(cx: Cx, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let q = wire::query_pairs(raw.as_deref())?;
    let archived = if wire::param(&q, "include_archived") == Some("true") { "&include_archived=true" } else { "" };
    let created = wire::created_at_filter(&q)?;
    let keep = |s: &Value| created(&s["created_at"]);
    Ok(Json(cx.native.page_where(&format!("/v1/memory-stores?environment_id={}{archived}", cx.env_id), &q, store, keep).await?))
}

pub async fn update(cx: Cx, Path(id): Path<String>, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    let current = cx.native.get::<MemoryStore>(&format!("/v1/memory-stores/{id}")).await?;
    let mut change = json!({"expected_version": current.version});
    for k in ["name", "description"] {
        if let Some(v) = body.get(k).filter(|v| !v.is_null()) {
            change[k] = v.clone();
        }
    }
    if let Some(m) = body.get("metadata") {
        change["metadata"] = wire::patch_metadata(&current.metadata, m)?;
    }
    Ok(Json(store(&cx.native.post::<MemoryStore>(&format!("/v1/memory-stores/{id}"), &change).await?)))
}

pub async fn archive(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    Ok(Json(store(&cx.native.post::<MemoryStore>(&format!("/v1/memory-stores/{id}/archive"), &json!({})).await?)))
}

/// `DELETE`: archived, then deleted natively (a mounted store → 409).
pub async fn delete(cx: Cx, Path(id): Path<String>) -> CmaResult<Json<Value>> {
    let id = checked(&id)?;
    cx.native.post::<MemoryStore>(&format!("/v1/memory-stores/{id}/archive"), &json!({})).await?;
    cx.native.delete(&format!("/v1/memory-stores/{id}")).await?;
    Ok(Json(json!({"id": id, "type": "memory_store_deleted"})))
}

/// `POST …/memories`: a write that expects the path free.
pub async fn create_memory(
    cx: Cx,
    Path(store_id): Path<String>,
    RawQuery(raw): RawQuery,
    Json(body): Json<Value>,
) -> CmaResult<Json<Value>> {
    let store_id = checked(&store_id)?;
    let path = native_path(body["path"].as_str().unwrap_or_default())?;
    let content = body["content"].as_str().unwrap_or_default();
    let write = json!({"path": path, "content": content, "expected_sha256": null});
    let r = cx
        .native
        .post::<MemoryDocumentAnswer>(&format!("/v1/memory-stores/{store_id}/document"), &write)
        .await
        .map_err(|e| conflict_on(e, "create", &path))?;
    Ok(Json(memory(&store_id, &r.document, r.store_version, full(&raw)?)))
}

/// `GET …/memories/{id}?view=basic|full`.
pub async fn retrieve_memory(cx: Cx, Path((store_id, mem)): Path<(String, String)>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let store_id = checked(&store_id)?;
    let path = path_of(&mem)?;
    let r = cx.native.get::<MemoryDocumentAnswer>(&format!("/v1/memory-stores/{store_id}/document?path={}", encode(&path))).await?;
    Ok(Json(memory(&store_id, &r.document, r.document.updated_in_version, full(&raw)?)))
}

/// `GET …/memories?path_prefix&depth`: memories, and `memory_prefix`
/// items for the folders below `depth`.
pub async fn list_memories(cx: Cx, Path(store_id): Path<String>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let store_id = checked(&store_id)?;
    let q = wire::query_pairs(raw.as_deref())?;
    let full = full(&raw)?;
    let limit = wire::limit(&q, 20, if full { 20 } else { 100 })?;
    let prefix = native_path(wire::param(&q, "path_prefix").unwrap_or("/")).unwrap_or_else(|_| "/".into());
    let depth = wire::number::<usize>(&q, "depth", "depth is a whole number")?;
    let mut url = format!("/v1/memory-stores/{store_id}/documents?path_prefix={}&limit={limit}", encode(&prefix));
    if let Some(p) = wire::param(&q, "page") {
        url.push_str(&format!("&page={}", encode(p)));
    }
    let r = cx.native.get::<MemoryDocumentPage>(&url).await?;
    let base = prefix.trim_end_matches('/').matches('/').count();
    let mut data: Vec<Value> = vec![];
    for d in &r.data {
        let path = d.path.as_str();
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match depth {
            Some(n) if segments.len() > base + n => {
                let folder = format!("/{}/", segments[..base + n].join("/"));
                if !data.iter().any(|x| x["path"] == folder.as_str()) {
                    data.push(json!({"type": "memory_prefix", "path": folder}));
                }
            }
            _ => {
                let mut m = memory(&store_id, d, d.updated_in_version, false);
                if full {
                    let one = cx
                        .native
                        .get::<MemoryDocumentAnswer>(&format!("/v1/memory-stores/{store_id}/document?path={}", encode(path)))
                        .await?;
                    m["content"] = json!(one.document.content);
                }
                data.push(m);
            }
        }
    }
    Ok(Json(wire::page(data, r.next_page)))
}

/// `POST …/memories/{id}`: a compare-and-set write, against the sent
/// `precondition` or the head the projection read.
pub async fn update_memory(
    cx: Cx,
    Path((store_id, mem)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
    Json(body): Json<Value>,
) -> CmaResult<Json<Value>> {
    let store_id = checked(&store_id)?;
    let path = path_of(&mem)?;
    if body["path"].as_str().is_some_and(|p| native_path(p).ok().as_deref() != Some(path.as_str())) {
        return Err(refuse("memory_path_immutable", "a memory's path does not change; create one at the new path and delete this one"));
    }
    let expected = match body["precondition"]["content_sha256"].as_str() {
        Some(sha) => sha.to_string(),
        None => {
            let now =
                cx.native.get::<MemoryDocumentAnswer>(&format!("/v1/memory-stores/{store_id}/document?path={}", encode(&path))).await?;
            now.document.content_sha256
        }
    };
    let content = match body.get("content") {
        Some(Value::String(c)) => c.clone(),
        _ => return Err(Error::invalid_field("content", "content is required").into()),
    };
    let write = json!({"path": path, "content": content, "expected_sha256": expected});
    let r = cx
        .native
        .post::<MemoryDocumentAnswer>(&format!("/v1/memory-stores/{store_id}/document"), &write)
        .await
        .map_err(|e| conflict_on(e, "update", &path))?;
    Ok(Json(memory(&store_id, &r.document, r.store_version, full(&raw)?)))
}

/// `DELETE …/memories/{id}?expected_content_sha256`.
pub async fn delete_memory(cx: Cx, Path((store_id, mem)): Path<(String, String)>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let store_id = checked(&store_id)?;
    let path = path_of(&mem)?;
    let q = wire::query_pairs(raw.as_deref())?;
    let mut url = format!("/v1/memory-stores/{store_id}/document?path={}", encode(&path));
    if let Some(sha) = wire::param(&q, "expected_content_sha256") {
        url.push_str(&format!("&expected_sha256={}", encode(sha)));
    }
    cx.native.delete(&url).await.map_err(|e| conflict_on(e, "update", &path))?;
    Ok(Json(json!({"id": mem, "type": "memory_deleted"})))
}

/// `GET …/memory_versions`: one per (store version, path), newest first.
pub async fn list_versions(cx: Cx, Path(store_id): Path<String>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let store_id = checked(&store_id)?;
    let q = wire::query_pairs(raw.as_deref())?;
    if let Some((k, _)) = q.iter().find(|(k, _)| {
        !["limit", "page", "memory_id", "operation", "session_id", "view", "beta"].contains(&k.as_str()) && !k.starts_with("created_at[")
    }) {
        return Err(Error::invalid_field(k, format!("{k} is not a filter of memory versions")).into());
    }
    let limit = wire::limit(&q, 20, 100)? as usize;
    let only_path = match wire::param(&q, "memory_id") {
        Some(m) => Some(path_of(m)?),
        None => None,
    };
    let operation = wire::param(&q, "operation");
    let session = wire::param(&q, "session_id");
    let created = wire::created_at_filter(&q)?;
    let keep = |v: &MemoryVersion, c: &VersionChange| {
        only_path.as_deref().is_none_or(|p| c.path == p)
            && operation.is_none_or(|o| c.operation == o)
            && session.is_none_or(|s| v.actor.kind == "session" && v.actor.id == s)
            && created(&json!(v.created_at))
    };
    // A token is the native page a CMA page started in and how many of
    // that page's (kept) items came before it: a native version holds
    // several changes, so a CMA page may end inside one.
    let (mut native_page, mut skip) = match wire::param(&q, "page") {
        Some(t) => version_token(t)?,
        None => (String::new(), 0),
    };
    let mut data = vec![];
    loop {
        let mut url = format!("/v1/memory-stores/{store_id}/versions?limit=100");
        if !native_page.is_empty() {
            url.push_str(&format!("&page={}", encode(&native_page)));
        }
        let r = cx.native.get::<Page<MemoryVersion>>(&url).await?;
        let kept: Vec<Value> =
            r.data.iter().flat_map(|v| v.changes.iter().filter(|c| keep(v, c)).map(|c| version(&store_id, v, c))).collect();
        let room = limit - data.len();
        if kept.len() > skip + room {
            data.extend(kept[skip..skip + room].iter().cloned());
            let next = format!("{}~{}", native_page, skip + room);
            return Ok(Json(wire::page(data, Some(next))));
        }
        data.extend(kept.into_iter().skip(skip));
        skip = 0;
        match r.next_page.filter(|p| !p.is_empty()) {
            Some(p) if data.len() < limit => native_page = p.to_string(),
            Some(p) => return Ok(Json(wire::page(data, Some(format!("{p}~0"))))),
            None => return Ok(Json(wire::page(data, None))),
        }
    }
}

/// A memory versions page token: `<native page>~<items to skip in it>`.
fn version_token(t: &str) -> CmaResult<(String, usize)> {
    let bad = || Error::invalid_field("page", "page is not a token this list gave");
    let (page, skip) = t.rsplit_once('~').ok_or_else(bad)?;
    Ok((page.to_string(), skip.parse().map_err(|_| bad())?))
}

/// `GET …/memory_versions/{id}`.
pub async fn retrieve_version(cx: Cx, Path((store_id, vid)): Path<(String, String)>) -> CmaResult<Json<Value>> {
    let store_id = checked(&store_id)?;
    let (n, path) = version_of(&vid)?;
    let v = cx.native.get::<MemoryVersion>(&format!("/v1/memory-stores/{store_id}/versions/{n}")).await?;
    let c = v.changes.iter().find(|c| c.path == path).ok_or_else(|| Error::not_found("memory version", &vid))?;
    let mut out = version(&store_id, &v, c);
    if c.operation != "deleted" {
        let url = format!("/v1/memory-stores/{store_id}/document?path={}&at_version={n}", encode(&path));
        out["content"] = json!(cx.native.get::<MemoryDocumentAnswer>(&url).await?.document.content);
    }
    Ok(Json(out))
}

/// `POST …/memory_versions/{id}/redact`: the history is immutable.
pub async fn redact(_cx: Cx, Path(_ids): Path<(String, String)>) -> CmaError {
    refuse("versions_immutable", "memory versions are immutable: the store's history is its audit record")
}

fn checked(id: &str) -> CmaResult<String> {
    super::wire::path_id::<checkfu_core::id::MemoryStoreId>("memory store", id)
}

/// A CMA path as the store keeps it (`/a/b.md`).
fn native_path(p: &str) -> CmaResult<String> {
    if p.is_empty() {
        return Err(Error::invalid_field("path", "path is required").into());
    }
    Ok(if p.starts_with('/') { p.to_string() } else { format!("/{p}") })
}

/// `mem_<base64url(path)>` → the path; anything else is not found.
fn path_of(mem: &str) -> CmaResult<String> {
    mem.strip_prefix("mem_")
        .and_then(|b| URL_SAFE_NO_PAD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .filter(|p| p.starts_with('/'))
        .ok_or_else(|| Error::not_found("memory", mem).into())
}

fn memory_id(path: &str) -> String {
    format!("mem_{}", URL_SAFE_NO_PAD.encode(path))
}

/// `memver_<store version>_<base64url(path)>` → both.
fn version_of(vid: &str) -> CmaResult<(i64, String)> {
    let bad = || CmaError(Error::not_found("memory version", vid));
    let rest = vid.strip_prefix("memver_").ok_or_else(bad)?;
    let (n, b) = rest.split_once('_').ok_or_else(bad)?;
    let n: i64 = n.parse().map_err(|_| bad())?;
    let path = URL_SAFE_NO_PAD.decode(b).ok().and_then(|b| String::from_utf8(b).ok()).ok_or_else(bad)?;
    Ok((n, path))
}

/// `view=full` (content included) or `basic` (the default).
fn full(raw: &Option<String>) -> CmaResult<bool> {
    let q = wire::query_pairs(raw.as_deref())?;
    match wire::param(&q, "view") {
        None | Some("basic") => Ok(false),
        Some("full") => Ok(true),
        Some(other) => Err(Error::invalid_field("view", format!("view is basic or full, not {other:?}")).into()),
    }
}

/// A native compare-and-set refusal in CMA's words.
fn conflict_on(e: CmaError, op: &str, path: &str) -> CmaError {
    if e.0.code != Code::Conflict || e.0.details.get("reason").and_then(Value::as_str) != Some("sha_mismatch") {
        return e;
    }
    match op {
        "create" => CmaError(
            Error::conflict(format!("a memory exists at {path}"))
                .with_details(json!({"reason": "memory_path_conflict_error", "conflicting_memory_id": memory_id(path)})),
        ),
        _ => CmaError(
            Error::conflict(format!("{path} changed since the precondition was read"))
                .with_details(json!({"reason": "memory_precondition_failed_error", "memory_id": memory_id(path)})),
        ),
    }
}

fn store(s: &MemoryStore) -> Value {
    json!({
        "type": "memory_store", "id": s.id, "name": s.name, "description": s.description,
        "metadata": if s.metadata.is_object() { s.metadata.clone() } else { json!({}) },
        "created_at": s.created_at, "updated_at": s.updated_at, "archived_at": s.archived_at,
    })
}

fn memory(store_id: &str, d: &MemoryDocument, version: i64, full: bool) -> Value {
    let path = d.path.as_str();
    let mut m = json!({
        "type": "memory", "id": memory_id(path), "memory_store_id": store_id, "path": path,
        "content_sha256": d.content_sha256, "content_size_bytes": d.size_bytes,
        "memory_version_id": format!("memver_{version}_{}", URL_SAFE_NO_PAD.encode(path)),
        "created_at": d.updated_at, "updated_at": d.updated_at,
    });
    if full {
        m["content"] = json!(d.content);
    }
    m
}

fn version(store_id: &str, v: &MemoryVersion, c: &VersionChange) -> Value {
    let path = c.path.as_str();
    let n = v.store_version;
    let created_by = match v.actor.kind.as_str() {
        "session" => json!({"type": "session_actor", "session_id": v.actor.id}),
        _ => json!({"type": "api_actor", "api_key_id": Value::Null, "principal_id": v.actor.id}),
    };
    json!({
        "type": "memory_version", "id": format!("memver_{n}_{}", URL_SAFE_NO_PAD.encode(path)),
        "memory_store_id": store_id, "memory_id": memory_id(path), "path": path,
        "operation": c.operation, "content_sha256": c.sha256_after, "created_at": v.created_at, "created_by": created_by,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_tokens_name_a_native_page_and_a_skip() {
        assert_eq!(version_token("p1abc~3").expect("token"), ("p1abc".to_string(), 3));
        assert_eq!(version_token("~0").expect("first page"), (String::new(), 0));
        assert!(version_token("p1abc").is_err() && version_token("x~y").is_err());
    }

    #[test]
    fn memory_ids_are_their_paths() {
        let id = memory_id("/notes/a.md");
        assert_eq!(path_of(&id).expect("round trip"), "/notes/a.md");
        assert!(path_of("mem_!!").is_err() && path_of("file_1").is_err());
        let (n, p) = version_of(&format!("memver_7_{}", URL_SAFE_NO_PAD.encode("/a.md"))).expect("parses");
        assert_eq!((n, p.as_str()), (7, "/a.md"));
        assert_eq!(native_path("a.md").expect("ok"), "/a.md");
    }

    #[test]
    fn compare_and_set_refusals_speak_cma() {
        let sha = CmaError(Error::conflict("x").with_reason("sha_mismatch"));
        let e = conflict_on(sha, "create", "/a.md");
        assert_eq!(e.0.details["reason"], "memory_path_conflict_error");
        assert_eq!(e.0.details["conflicting_memory_id"], memory_id("/a.md"));
        let sha = CmaError(Error::conflict("x").with_reason("sha_mismatch"));
        assert_eq!(conflict_on(sha, "update", "/a.md").0.details["reason"], "memory_precondition_failed_error");
    }
}
