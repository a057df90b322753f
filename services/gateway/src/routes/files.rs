//! Session files: what the agent left in its outputs folder when each Run
//! settled. Reading them needs read access to the Session.

use super::Paging;
use crate::AppState;
use crate::auth::Caller;
use crate::authz::facts_for;
use crate::error::ApiResult;
use crate::extract::Query;
use crate::views::{self, ErrorEnvelope, Page};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use checkfu_proto::sessions::v1 as ss;
use utoipa::IntoParams;

#[utoipa::path(get, path = "/v1/sessions/{id}/files", tag = "sessions", operation_id = "sessions.listSessionFiles", params(("id" = String, Path), Paging),
    responses((status = 200, description = "Newest capture first", body = Page<views::SessionFile>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_files(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    paging: Paging,
) -> ApiResult<Json<Page<views::SessionFile>>> {
    facts_for(&st, &caller, &id, false).await?;
    let r = st
        .sessions
        .clone()
        .list_session_files(ss::ListRunsRequest { session_id: id, limit: paging.limit(), page: paging.page() })
        .await?
        .into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::session_file)))
}

#[derive(Debug, serde::Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ContentQuery {
    /// The file's `path`, as listed.
    path: String,
    /// The first byte; default 0.
    #[serde(default)]
    offset: Option<i64>,
    /// At most 8 MiB (8388608); default and cap 8 MiB.
    #[serde(default)]
    length: Option<i64>,
}

#[utoipa::path(get, path = "/v1/sessions/{id}/files/content", tag = "sessions", operation_id = "sessions.getSessionFileContent", params(("id" = String, Path), ContentQuery),
    responses((status = 200, description = "The window's bytes (at most 8 MiB); headers `checkfu-file-size` and `checkfu-file-sha256` describe the whole file",
        content_type = "application/octet-stream", body = Vec<u8>),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn file_content(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<ContentQuery>,
) -> ApiResult<Response> {
    facts_for(&st, &caller, &id, false).await?;
    let req = ss::ReadSessionFileRequest { session_id: id, path: q.path, offset: q.offset.unwrap_or(0), length: q.length.unwrap_or(0) };
    let w = st.sessions.clone().read_session_file(req).await?.into_inner();
    let f = w.file.unwrap_or_default();
    Ok(window(w.data, "application/octet-stream", f.size, &f.sha256))
}

/// A content window's response: its bytes in `media_type`, the whole
/// file's size and digest in `checkfu-file-size` and `checkfu-file-sha256`.
pub(crate) fn window(data: Vec<u8>, media_type: &str, size: i64, sha256: &str) -> Response {
    let mut resp = data.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_str(media_type).unwrap_or(HeaderValue::from_static("application/octet-stream")));
    if let Ok(v) = HeaderValue::from_str(&size.to_string()) {
        h.insert("checkfu-file-size", v);
    }
    if let Ok(v) = HeaderValue::from_str(sha256) {
        h.insert("checkfu-file-sha256", v);
    }
    resp
}
