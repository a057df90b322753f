//! Sessions, their events (paged and streamed over SSE) and Runs.

use super::ListQuery;
use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiResult;
use crate::extract::{Fields, JsonBody, Query};
use crate::idempotency::{key_of, once};
use crate::views;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use checkfu_core::Error;
use checkfu_core::page::encode_token;
use checkfu_proto::sessions::v1 as ss;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::time::Duration;
use tokio_stream::StreamExt;

type JsonResult = ApiResult<Json<Value>>;

/// Preview streams a client may opt into.
const DELTA_TYPES: [&str; 2] = ["agent.message", "agent.thinking"];

/// Checks that the caller may speak as `principal_id`: it is the caller, or
/// the caller holds `act_as` on it.
async fn require_speaks_for(st: &AppState, caller: &Caller, principal_id: &str, field: &str) -> ApiResult<()> {
    checkfu_core::id::check(field, "prin", principal_id)?;
    if principal_id == caller.principal_id {
        return Ok(());
    }
    st.require(caller, "act_as", "principal", principal_id, "").await
}

async fn session_for(st: &AppState, caller: &Caller, id: &str, write: bool) -> ApiResult<ss::Session> {
    checkfu_core::id::check("id", "sess", id)?;
    let s = st.sessions.clone().get_session(ss::GetByIdRequest { id: id.into() }).await?.into_inner();
    if s.principal_id == caller.principal_id || st.allowed(&caller.principal_id, "act_as", "principal", &s.principal_id, "").await? {
        return Ok(s);
    }
    if !write && st.allowed(&caller.principal_id, "read", "environment", &s.environment_id, &s.environment_id).await? {
        return Ok(s);
    }
    Err(Error::denied(format!("{} may not {} session {id}", caller.principal_id, if write { "act in" } else { "read" })).into())
}

/// The principal a Session acts as must itself hold `invoke` on the Agent;
/// an admin's reach is never lent to it.
async fn require_invoke(st: &AppState, principal_id: &str, agent_id: &str, environment_id: &str) -> ApiResult<()> {
    if st.allowed(principal_id, "invoke", "agent", agent_id, environment_id).await? {
        return Ok(());
    }
    Err(Error::denied(format!("{principal_id} lacks invoke on agent {agent_id}"))
        .with_details(json!({"permission": "invoke", "resource": {"kind": "agent", "id": agent_id}, "principal_id": principal_id}))
        .into())
}

/// Reads one input event body, checking the caller may author it.
async fn input_event(st: &AppState, caller: &Caller, v: &Value, field: &str) -> ApiResult<ss::InputEvent> {
    if !v.is_object() {
        return Err(Error::invalid_field(field, "an event must be an object").into());
    }
    let f = Fields(v);
    f.only(&["type", "payload", "authored_by", "caused_by"]).map_err(|e| Error { message: format!("{field}: {}", e.message), ..e })?;
    let authored_by = f
        .opt_str("authored_by")?
        .ok_or_else(|| Error::invalid_field(&format!("{field}.authored_by"), "authored_by is required on every input"))?;
    let caused_by =
        f.obj("caused_by")?.ok_or_else(|| Error::invalid_field(&format!("{field}.caused_by"), "caused_by is required on every input"))?;
    require_speaks_for(st, caller, authored_by, &format!("{field}.authored_by")).await?;
    Ok(ss::InputEvent {
        r#type: f.str("type")?.into(),
        payload_json: f.obj("payload")?.map(Value::to_string).unwrap_or_default(),
        authored_by: authored_by.into(),
        caused_by_json: caused_by.to_string(),
    })
}

pub async fn create_session(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let f = Fields(&body);
    f.only(&["agent_deployment_id", "principal_id", "initial_events", "title", "metadata", "budget", "instructions", "tools", "skills"])?;
    if f.obj("budget")?.is_some() {
        return Err(Error::invalid_field("budget", "budgets are not available on this installation yet").into());
    }
    let dep_id = f.str("agent_deployment_id")?.to_string();
    checkfu_core::id::check("agent_deployment_id", "dep", &dep_id)?;
    let principal_id = f.opt_str("principal_id")?.unwrap_or(&caller.principal_id).to_string();
    require_speaks_for(&st, &caller, &principal_id, "principal_id").await?;
    let dep = st.sessions.clone().get_deployment(ss::GetByIdRequest { id: dep_id.clone() }).await?.into_inner();
    require_invoke(&st, &principal_id, &dep.agent_id, &dep.environment_id).await?;
    let raw_events = f.arr("initial_events")?.cloned().unwrap_or_default();
    if raw_events.len() > 1 && key_of(&headers)?.is_none() {
        return Err(Error::invalid_field("Idempotency-Key", "more than one initial event requires an Idempotency-Key header").into());
    }
    if raw_events.len() > 50 {
        return Err(Error::invalid_field("initial_events", "at most 50 initial events").into());
    }
    let mut initial_events = Vec::with_capacity(raw_events.len());
    for (i, e) in raw_events.iter().enumerate() {
        initial_events.push(input_event(&st, &caller, e, &format!("initial_events[{i}]")).await?);
    }
    let instructions = f.opt_str("instructions")?.map(str::to_string);
    if instructions.as_ref().is_some_and(|i| i.len() > 64 * 1024) {
        return Err(Error::invalid_field("instructions", "instructions are limited to 64 KiB").into());
    }
    let req = ss::CreateSessionRequest {
        agent_deployment_id: dep_id,
        principal_id,
        title: f.opt_str("title")?.unwrap_or_default().into(),
        metadata_json: f.obj("metadata")?.map(Value::to_string).unwrap_or_default(),
        instructions,
        tools_json: f.arr("tools")?.map(|a| Value::Array(a.clone()).to_string()),
        skills_json: f.arr("skills")?.map(|a| Value::Array(a.clone()).to_string()),
        initial_events,
        created_by: caller.principal_id.clone(),
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/sessions", &body, || async {
        let s = st.sessions.clone().create_session(req).await?.into_inner();
        Ok((StatusCode::CREATED, views::session(&s)))
    })
    .await
}

#[derive(Debug, Default, serde::Deserialize)]
pub struct SessionQuery {
    #[serde(default)]
    status: String,
    #[serde(default)]
    agent_deployment_id: String,
    #[serde(flatten)]
    list: ListQuery,
}

/// Sessions in every Environment the caller reads, plus the caller's own.
pub async fn list_sessions(State(st): State<AppState>, caller: Caller, Query(q): Query<SessionQuery>) -> JsonResult {
    let envs = st.readable_envs(&caller, None).await?;
    let only_env = q.list.environment_id.clone().filter(|e| !e.is_empty());
    let (environment_ids, principal_id) = match (&only_env, envs.is_empty()) {
        (Some(e), _) if envs.contains(e) => (vec![e.clone()], String::new()),
        (Some(e), _) => (vec![e.clone()], caller.principal_id.clone()),
        (None, false) => (envs, String::new()),
        (None, true) => (st.all_envs().await?, caller.principal_id.clone()),
    };
    let req = ss::ListSessionsRequest {
        environment_ids,
        status: q.status,
        agent_deployment_id: q.agent_deployment_id,
        limit: q.list.limit(),
        page: q.list.page(),
        principal_id,
    };
    let r = st.sessions.clone().list_sessions(req).await?.into_inner();
    Ok(Json(views::list(r.data.iter().map(views::session).collect(), &r.next_page)))
}

pub async fn get_session(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    Ok(Json(views::session(&session_for(&st, &caller, &id, false).await?)))
}

pub async fn archive_session(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    session_for(&st, &caller, &id, true).await?;
    Ok(Json(views::session(&st.sessions.clone().archive_session(ss::GetByIdRequest { id }).await?.into_inner())))
}

pub async fn update_selection(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, JsonBody(body): JsonBody) -> JsonResult {
    let s = session_for(&st, &caller, &id, true).await?;
    require_invoke(&st, &s.principal_id, &s.agent_id, &s.environment_id).await?;
    let f = Fields(&body);
    f.only(&["tools", "skills"])?;
    let req = ss::UpdateSelectionRequest {
        id,
        tools_json: f.arr("tools")?.map(|a| Value::Array(a.clone()).to_string()),
        skills_json: f.arr("skills")?.map(|a| Value::Array(a.clone()).to_string()),
        actor_id: caller.principal_id,
    };
    Ok(Json(views::session(&st.sessions.clone().update_selection(req).await?.into_inner())))
}

pub async fn post_event(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let s = session_for(&st, &caller, &id, true).await?;
    let event = input_event(&st, &caller, &body, "event").await?;
    if event.r#type == "user.message" {
        require_invoke(&st, &s.principal_id, &s.agent_id, &s.environment_id).await?;
    }
    let route = format!("POST /v1/sessions/{id}/events");
    once(&st.idem, &caller.principal_id, &headers, &route, &body, || async {
        let r =
            st.sessions.clone().append_user_event(ss::AppendUserEventRequest { session_id: id, event: Some(event) }).await?.into_inner();
        let status = if r.replayed { StatusCode::OK } else { StatusCode::CREATED };
        Ok((status, views::event(&r.event.unwrap_or_default())))
    })
    .await
}

/// `?after_seq=&limit=&types[]=&page=`; repeated keys are kept.
fn event_query(raw: Option<String>) -> ApiResult<(i64, u32, Vec<String>)> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(raw.as_deref().unwrap_or_default()).map_err(|e| Error::invalid(format!("invalid query string: {e}")))?;
    let (mut after, mut limit, mut types) = (0i64, 0u32, vec![]);
    for (k, v) in pairs {
        match k.as_str() {
            "after_seq" => after = v.parse().map_err(|_| Error::invalid_field("after_seq", "after_seq must be a non-negative integer"))?,
            "limit" => {
                limit = v.parse().map_err(|_| Error::invalid_field("limit", "limit must be an integer"))?;
                if limit == 0 {
                    return Err(Error::invalid_field("limit", "limit must be between 1 and 1000").into());
                }
            }
            "types[]" | "types" => types.extend(v.split(',').filter(|t| !t.is_empty()).map(str::to_string)),
            "page" => {
                after = checkfu_core::page::decode_token(&v)?
                    .parse()
                    .map_err(|_| Error::invalid_field("page", "page is not a token this API issued"))?;
            }
            _ => {}
        }
    }
    Ok((after, limit, types))
}

pub async fn list_events(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, RawQuery(raw): RawQuery) -> JsonResult {
    session_for(&st, &caller, &id, false).await?;
    let (after_seq, limit, types) = event_query(raw)?;
    let r = st.sessions.clone().list_events(ss::ListEventsRequest { session_id: id, after_seq, limit, types }).await?.into_inner();
    let next = if r.has_more { r.data.last().map(|e| encode_token(&e.seq.to_string())).unwrap_or_default() } else { String::new() };
    Ok(Json(views::list(r.data.iter().map(views::event).collect(), &next)))
}

/// Server-Sent Events: replay after `Last-Event-ID` (or `?after_seq`), then
/// live, one frame per persisted event (`id: <seq>`); opted-in previews come
/// as `event_start`/`event_delta` frames without an id.
pub async fn stream_events(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    session_for(&st, &caller, &id, false).await?;
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(raw.as_deref().unwrap_or_default()).map_err(|e| Error::invalid(format!("invalid query string: {e}")))?;
    let mut after_seq = 0i64;
    let mut delta_types = vec![];
    for (k, v) in &pairs {
        match k.as_str() {
            "after_seq" => {
                after_seq = v.parse().map_err(|_| Error::invalid_field("after_seq", "after_seq must be a non-negative integer"))?
            }
            "event_deltas" => {
                for t in v.split(',').filter(|t| !t.is_empty()) {
                    if !DELTA_TYPES.contains(&t) {
                        return Err(Error::invalid_field("event_deltas", format!("previews exist for {}", DELTA_TYPES.join(", "))).into());
                    }
                    delta_types.push(t.to_string());
                }
            }
            _ => {}
        }
    }
    if let Some(v) = headers.get("last-event-id") {
        after_seq = v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| Error::invalid_field("Last-Event-ID", "Last-Event-ID must be a seq"))?;
    }
    if after_seq < 0 {
        return Err(Error::invalid_field("after_seq", "after_seq must not be negative").into());
    }
    let upstream =
        st.sessions.clone().subscribe_events(ss::SubscribeEventsRequest { session_id: id, after_seq, delta_types }).await?.into_inner();
    let frames = upstream.map_while(|item| {
        use ss::stream_item::Item;
        match item.ok()?.item? {
            Item::Event(e) => Some(Ok::<_, Infallible>(
                SseEvent::default().id(e.seq.to_string()).event(e.r#type.clone()).data(views::event(&e).to_string()),
            )),
            Item::Delta(d) => {
                let mut data = json!({"event_type": d.event_type, "preview_id": d.preview_id, "run_id": d.run_id});
                if d.kind == "event_delta" {
                    data["delta"] = json!({"text": d.text});
                }
                Some(Ok(SseEvent::default().event(d.kind).data(data.to_string())))
            }
        }
    });
    let frames = futures_util::StreamExt::take_until(frames, st.shutdown.clone().cancelled_owned());
    let sse = Sse::new(frames).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)).text("ping"));
    let mut resp = sse.into_response();
    resp.headers_mut().insert("cache-control", axum::http::HeaderValue::from_static("no-cache"));
    resp.headers_mut().insert("x-accel-buffering", axum::http::HeaderValue::from_static("no"));
    Ok(resp)
}

pub async fn list_runs(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, Query(q): Query<ListQuery>) -> JsonResult {
    session_for(&st, &caller, &id, false).await?;
    let r = st.sessions.clone().list_runs(ss::ListRunsRequest { session_id: id, limit: q.limit(), page: q.page() }).await?.into_inner();
    Ok(Json(views::list(r.data.iter().map(views::run).collect(), &r.next_page)))
}

pub async fn get_run(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> JsonResult {
    checkfu_core::id::check("id", "run", &id)?;
    let r = st.sessions.clone().get_run(ss::GetByIdRequest { id }).await?.into_inner();
    session_for(&st, &caller, &r.session_id, false).await?;
    Ok(Json(views::run(&r)))
}
