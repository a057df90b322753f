//! Sessions, their events (paged and streamed over SSE) and Runs.

use super::{Paging, created};
use crate::AppState;
use crate::auth::Caller;
use crate::authz::{facts_for, require_speaks_for, session_for};
use crate::bodies::{self, parse};
use crate::error::ApiResult;
use crate::extract::{JsonBody, Query};
use crate::idempotency::{key_of, once};
use crate::threads_wire::{self, Outcome, SessionThread};
use crate::views::{self, ErrorEnvelope, Page};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use checkfu_core::Error;
use checkfu_core::events::EventType;
use checkfu_core::page::encode_token;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::sessions::v1 as ss;
use serde_json::{Value, json};
use utoipa::IntoParams;

type J<T> = ApiResult<Json<T>>;

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

/// Converts one input event, checking the caller may author it.
async fn input_event(st: &AppState, caller: &Caller, e: bodies::InputEvent, field: &str) -> ApiResult<ss::InputEvent> {
    let authored_by =
        e.authored_by.ok_or_else(|| Error::invalid_field(&format!("{field}.authored_by"), "authored_by is required on every input"))?;
    let caused_by = e
        .caused_by
        .filter(Value::is_object)
        .ok_or_else(|| Error::invalid_field(&format!("{field}.caused_by"), "caused_by is required on every input, as {kind, id}"))?;
    require_speaks_for(st, caller, &authored_by, &format!("{field}.authored_by")).await?;
    check_cause(st, caller, &caused_by, &format!("{field}.caused_by")).await?;
    if e.kind == EventType::UserMessage.as_str()
        && let Some(p) = &e.payload
    {
        super::uploads::check_file_blocks(st, &authored_by, p).await?;
    }
    // `caused_by_json` too, for a 0.1.0 sessions service until the release after it.
    #[allow(deprecated)]
    let event = ss::InputEvent {
        r#type: e.kind,
        payload_json: e.payload.as_ref().map(Value::to_string).unwrap_or_default(),
        authored_by,
        caused_by: ss::Cause::from_json(&caused_by),
        caused_by_json: caused_by.to_string(),
    };
    Ok(event)
}

/// The causes a client may name: a Principal it speaks for (itself, or one
/// it holds `act_as` on), the surface it is (`{kind:"surface", id:"cli"}`,
/// a label), or an earlier event. Other kinds (`automation_firing`,
/// `outcome`, `runner`, ...) are the platform's to set.
async fn check_cause(st: &AppState, caller: &Caller, cause: &Value, field: &str) -> ApiResult<()> {
    let (kind, id) = (cause["kind"].as_str().unwrap_or_default(), cause["id"].as_str().unwrap_or_default());
    if id.is_empty() || id.len() > 255 {
        return Err(Error::invalid_field(&format!("{field}.id"), "caused_by.id must be a string of 1 to 255 characters").into());
    }
    match kind {
        "principal" => require_speaks_for(st, caller, id, &format!("{field}.id")).await,
        "surface" => Ok(()),
        "event" => Ok(checkfu_core::id::EventId::check(&format!("{field}.id"), id)?),
        _ => Err(Error::invalid_field(&format!("{field}.kind"), "caused_by.kind must be principal, surface or event").into()),
    }
}

fn selection(field: &str, v: &Option<Vec<Value>>) -> ApiResult<Option<ss::Selection>> {
    Ok(v.as_deref().map(|entries| ss::Selection::from_json(field, entries)).transpose()?)
}

/// The 0.1.0 text of a selection.
fn names(v: &Option<Vec<Value>>) -> Option<String> {
    v.as_ref().map(|a| Value::Array(a.clone()).to_string())
}

#[utoipa::path(post, path = "/v1/sessions", tag = "sessions", operation_id = "sessions.createSession", request_body = bodies::CreateSession,
    params(("Idempotency-Key" = Option<String>, Header, description = "Required with more than one initial event")),
    responses((status = 201, body = views::Session), (status = "4XX", body = ErrorEnvelope)))]
pub async fn create_session(
    State(st): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let b: bodies::CreateSession = parse(&body)?;
    checkfu_core::id::DeploymentId::check("agent_deployment_id", &b.agent_deployment_id)?;
    let principal_id = b.principal_id.clone().unwrap_or_else(|| caller.principal_id.clone());
    require_speaks_for(&st, &caller, &principal_id, "principal_id").await?;
    let dep = st.catalog.deployment(&st, &b.agent_deployment_id).await?;
    require_invoke(&st, &principal_id, &dep.agent_id, &dep.environment_id).await?;
    let env_id = dep.environment_id.clone();
    let ask = async { Ok(st.gov.clone().get_environment(gov::GetByIdRequest { id: env_id.clone() }).await?.into_inner().disabled) };
    if st.decisions.environment_disabled(&dep.environment_id, ask).await? {
        return Err(Error::conflict(format!("environment {} is disabled: no new Sessions start in it", dep.environment_id))
            .with_details(json!({"environment_id": dep.environment_id}))
            .into());
    }
    let raw_events = b.initial_events.clone().unwrap_or_default();
    if raw_events.len() > 1 && key_of(&headers)?.is_none() {
        return Err(Error::invalid_field("Idempotency-Key", "more than one initial event requires an Idempotency-Key header").into());
    }
    if raw_events.len() > 50 {
        return Err(Error::invalid_field("initial_events", "at most 50 initial events").into());
    }
    let mut initial_events = Vec::with_capacity(raw_events.len());
    for (i, e) in raw_events.into_iter().enumerate() {
        initial_events.push(input_event(&st, &caller, e, &format!("initial_events[{i}]")).await?);
    }
    let resource_file_ids = super::uploads::resource_files(&st, &caller.principal_id, b.resources.as_deref().unwrap_or_default()).await?;
    let memory_mounts = super::uploads::memory_mounts(b.resources.as_deref().unwrap_or_default())?;
    if b.instructions.as_ref().is_some_and(|i| i.len() > 64 * 1024) {
        return Err(Error::invalid_field("instructions", "instructions are limited to 64 KiB").into());
    }
    let connection_vault_ids = b.connection_vault_ids.unwrap_or_default();
    super::vaults::check_session_vaults(&st, &caller, &dep.environment_id, &connection_vault_ids).await?;
    // `tools_json` and `skills_json` too, for a 0.1.0 sessions service until the release after it.
    #[allow(deprecated)]
    let req = ss::CreateSessionRequest {
        agent_deployment_id: b.agent_deployment_id,
        principal_id,
        title: b.title.unwrap_or_default(),
        metadata_json: b.metadata.as_ref().map(Value::to_string).unwrap_or_default(),
        instructions: b.instructions,
        tools: selection("tools", &b.tools)?,
        skills: selection("skills", &b.skills)?,
        tools_json: names(&b.tools),
        skills_json: names(&b.skills),
        initial_events,
        created_by: caller.principal_id.clone(),
        budget: b.budget.map(|x| ss::NewBudget { limit: x.limit, metric: x.metric.unwrap_or_default() }),
        resource_file_ids,
        // The revision read above, whose agent `invoke` was checked on:
        // the sessions service keeps revisions, so it need not read the
        // Deployment again.
        deployment_revision: Some(dep.revision),
        session_id: None,
        memory_mounts,
        connection_vault_ids,
        // Only an Automation's child is screened (§18.8).
        delivery_screen: None,
    };
    once(&st.idem, &caller.principal_id, &headers, "POST /v1/sessions", &body, || async {
        created(views::session(&st.sessions.clone().create_session(req).await?.into_inner()))
    })
    .await
}

#[derive(Debug, Default, serde::Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SessionQuery {
    /// `idle`, `running`, `rescheduling` or `terminated`.
    #[serde(default)]
    status: String,
    #[serde(default)]
    agent_deployment_id: String,
    #[serde(default)]
    environment_id: Option<String>,
    /// `desc` (default: newest first) or `asc`; a page token continues in
    /// the order it was given for.
    #[serde(default)]
    #[param(inline)]
    order: Option<SortOrder>,
}

/// A list's direction by id (creation order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SortOrder {
    Asc,
    Desc,
}

/// Sessions in every Environment the caller reads, or else the caller's own.
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions", operation_id = "sessions.listSessions", params(SessionQuery, Paging),
    responses((status = 200, body = Page<views::Session>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_sessions(
    State(st): State<AppState>,
    caller: Caller,
    Query(q): Query<SessionQuery>,
    paging: Paging,
) -> J<Page<views::Session>> {
    let envs = st.readable_envs(&caller, None).await?;
    let only_env = q.environment_id.clone().filter(|e| !e.is_empty());
    let (environment_ids, principal_id) = match (&only_env, envs.is_empty()) {
        (Some(e), _) if envs.contains(e) => (vec![e.clone()], String::new()),
        (Some(e), _) => (vec![e.clone()], caller.principal_id.clone()),
        (None, false) => (envs, String::new()),
        (None, true) => (st.all_envs().await?, caller.principal_id.clone()),
    };
    let ascending = q.order == Some(SortOrder::Asc);
    let req = ss::ListSessionsRequest {
        environment_ids,
        status: q.status,
        agent_deployment_id: q.agent_deployment_id,
        limit: paging.limit(),
        page: paging.page(),
        principal_id,
        ascending,
    };
    let r = st.sessions.clone().list_sessions(req).await?.into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::session)))
}

#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "sessions", operation_id = "sessions.getSession", params(("id" = String, Path)),
    responses((status = 200, body = views::Session), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_session(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Session> {
    Ok(Json(views::session(&session_for(&st, &caller, &id, false).await?)))
}

#[utoipa::path(post, path = "/v1/sessions/{id}/archive", tag = "sessions", operation_id = "sessions.archiveSession", params(("id" = String, Path)),
    responses((status = 200, description = "The Session, terminated", body = views::Session), (status = "4XX", body = ErrorEnvelope)))]
pub async fn archive_session(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Session> {
    session_for(&st, &caller, &id, true).await?;
    Ok(Json(views::session(
        &st.sessions.clone().archive_session(ss::ArchiveSessionRequest { id, actor_id: caller.principal_id }).await?.into_inner(),
    )))
}

/// Changes the title or metadata (`session.updated`); whoever may write
/// to the Session may.
#[utoipa::path(post, path = "/v1/sessions/{id}", tag = "sessions", operation_id = "sessions.updateSession", params(("id" = String, Path)), request_body = bodies::UpdateSession,
    responses((status = 200, body = views::Session), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_session(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> J<views::Session> {
    session_for(&st, &caller, &id, true).await?;
    let b: bodies::UpdateSession = parse(&body)?;
    let req = ss::UpdateSessionRequest {
        id,
        title: b.title,
        metadata_json: b.metadata.as_ref().map(Value::to_string),
        actor_id: caller.principal_id,
    };
    Ok(Json(views::session(&st.sessions.clone().update_session(req).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/sessions/{id}/selection", tag = "sessions", operation_id = "sessions.updateSessionSelection", params(("id" = String, Path)), request_body = bodies::UpdateSelection,
    responses((status = 200, body = views::Session), (status = "4XX", body = ErrorEnvelope)))]
pub async fn update_selection(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> J<views::Session> {
    let s = session_for(&st, &caller, &id, true).await?;
    require_invoke(&st, &s.principal_id, &s.agent_id, &s.environment_id).await?;
    let b: bodies::UpdateSelection = parse(&body)?;
    // `tools_json` and `skills_json` too, for a 0.1.0 sessions service until the release after it.
    #[allow(deprecated)]
    let req = ss::UpdateSelectionRequest {
        id,
        tools: selection("tools", &b.tools)?,
        skills: selection("skills", &b.skills)?,
        tools_json: names(&b.tools),
        skills_json: names(&b.skills),
        actor_id: caller.principal_id,
    };
    Ok(Json(views::session(&st.sessions.clone().update_selection(req).await?.into_inner())))
}

#[utoipa::path(post, path = "/v1/sessions/{id}/events", tag = "sessions", operation_id = "sessions.sendSessionEvent", params(crate::idempotency::IdempotencyKeyHeader, ("id" = String, Path)), request_body = bodies::InputEvent,
    responses((status = 201, body = views::Event), (status = 200, description = "An exact duplicate of an accepted settle event: the first one", body = views::Event),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn post_event(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let s = facts_for(&st, &caller, &id, true).await?;
    let event = input_event(&st, &caller, parse(&body)?, "event").await?;
    if event.r#type == EventType::UserMessage.as_str() {
        require_invoke(&st, &s.principal_id, &s.agent_id, &s.environment_id).await?;
    }
    let route = format!("POST /v1/sessions/{id}/events");
    once(&st.idem, &caller.principal_id, &headers, &route, &body, || async {
        let r = st
            .sessions
            .clone()
            .append_user_event(ss::AppendUserEventRequest { session_id: id, event: Some(event), continuation_event_id: String::new() })
            .await?
            .into_inner();
        let status = if r.replayed { StatusCode::OK } else { StatusCode::CREATED };
        Ok((status, crate::json_text::value(views::event(&r.event.unwrap_or_default()))?))
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
    if types.len() > MAX_TYPE_FILTERS {
        return Err(Error::invalid_field("types[]", format!("at most {MAX_TYPE_FILTERS} event types per filter")).into());
    }
    if let Some(t) = types.iter().find(|t| t.len() > 64 || !t.bytes().all(|b| b.is_ascii_lowercase() || b == b'.' || b == b'_')) {
        return Err(Error::invalid_field("types[]", format!("{t:?} is not an event type")).into());
    }
    types.sort();
    types.dedup();
    Ok((after, limit, types))
}

/// Event types one `types[]` filter may name (there are fewer than 40).
pub const MAX_TYPE_FILTERS: usize = 100;

/// Documents the query of the events list (parsed by hand: `types[]` repeats).
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct EventsQuery {
    /// Only events after this seq.
    after_seq: Option<i64>,
    /// 1 to 1000; default 100.
    limit: Option<u32>,
    /// Only these types; repeat the parameter (`types[]=a&types[]=b`).
    #[param(rename = "types[]")]
    types: Option<Vec<String>>,
    /// The `next_page` token of the previous page.
    page: Option<String>,
}

#[utoipa::path(get, path = "/v1/sessions/{id}/events", tag = "sessions", operation_id = "sessions.listSessionEvents", params(("id" = String, Path), EventsQuery),
    responses((status = 200, description = "Events in seq order", body = Page<views::Event>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_events(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> J<Page<views::Event>> {
    facts_for(&st, &caller, &id, false).await?;
    list_view(&st, id, String::new(), raw).await
}

/// A page of one view of the log: `""` the primary view, else a thread's.
async fn list_view(st: &AppState, id: String, view: String, raw: Option<String>) -> J<Page<views::Event>> {
    let (after_seq, limit, types) = event_query(raw)?;
    let r = st.sessions.clone().list_events(ss::ListEventsRequest { session_id: id, after_seq, limit, types, view }).await?.into_inner();
    let next = if r.has_more { r.data.last().map(|e| encode_token(&e.seq.to_string())).unwrap_or_default() } else { String::new() };
    Ok(Json(views::page(&r.data, &next, views::event)))
}

#[utoipa::path(get, path = "/v1/sessions/{id}/events/stream", tag = "sessions", operation_id = "sessions.streamSessionEvents",
    params(("id" = String, Path), ("after_seq" = Option<i64>, Query), ("event_deltas" = Option<String>, Query, description = "agent.message,agent.thinking"),
        ("Last-Event-ID" = Option<i64>, Header, description = "Resume after this seq")),
    responses((status = 200, description = "text/event-stream: `id: <seq>` / `event: <type>` / `data: <event>`; previews as `event_start`/`event_delta` without id; `: ping` every 15 s", content_type = "text/event-stream", body = String),
        (status = "4XX", body = ErrorEnvelope)))]
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
    facts_for(&st, &caller, &id, false).await?;
    stream_view(st, caller, id, None, headers, raw).await
}

/// The SSE stream of one view: `None` the primary view, else a child's.
async fn stream_view(
    st: AppState,
    caller: Caller,
    id: String,
    view: Option<String>,
    headers: HeaderMap,
    raw: Option<String>,
) -> ApiResult<Response> {
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
                    if !EventType::PREVIEWED.contains(&t) {
                        return Err(Error::invalid_field(
                            "event_deltas",
                            format!("previews exist for {}", EventType::PREVIEWED.join(", ")),
                        )
                        .into());
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
    let slot = st.streams.admit(&caller.principal_id)?;
    // Followers of one Session share this gateway's one feed of rendered frames.
    let feed = st.feeds.follow(st.sessions.clone(), id.clone(), view, after_seq, delta_types).await?;
    // The stream ends when the node drains or the caller's access is revoked.
    let (stop, gone) = (st.shutdown.child_token(), tokio_util::sync::CancellationToken::new());
    let credential = crate::auth::credential(&headers);
    tokio::spawn(crate::streams::watch(st.clone(), credential, caller, id, stop.clone(), gone.clone()));
    let body = crate::live::sse_body(feed, st.sse_ping, stop, (slot, gone.drop_guard()));
    let mut resp = axum::body::Body::from_stream(body).into_response();
    let h = resp.headers_mut();
    h.insert("content-type", axum::http::HeaderValue::from_static("text/event-stream"));
    h.insert("cache-control", axum::http::HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", axum::http::HeaderValue::from_static("no"));
    Ok(resp)
}

#[utoipa::path(get, path = "/v1/sessions/{id}/runs", tag = "sessions", operation_id = "sessions.listSessionRuns", params(("id" = String, Path), Paging),
    responses((status = 200, body = Page<views::Run>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_runs(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, paging: Paging) -> J<Page<views::Run>> {
    facts_for(&st, &caller, &id, false).await?;
    let r = st
        .sessions
        .clone()
        .list_runs(ss::ListRunsRequest { session_id: id, limit: paging.limit(), page: paging.page() })
        .await?
        .into_inner();
    Ok(Json(views::page(&r.data, &r.next_page, views::run)))
}

#[utoipa::path(get, path = "/v1/runs/{id}", tag = "sessions", operation_id = "sessions.getRun", params(("id" = String, Path)),
    responses((status = 200, body = views::Run), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_run(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<views::Run> {
    checkfu_core::id::RunId::check("id", &id)?;
    let r = st.sessions.clone().get_run(ss::GetByIdRequest { id }).await?.into_inner();
    facts_for(&st, &caller, &r.session_id, false).await?;
    Ok(Json(views::run(&r)))
}

#[utoipa::path(get, path = "/v1/sessions/{id}/outcomes", tag = "sessions", operation_id = "sessions.listSessionOutcomes", params(("id" = String, Path), Paging),
    responses((status = 200, description = "The Session's Outcomes, newest first", body = crate::views::Page<crate::threads_wire::Outcome>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_outcomes(State(st): State<AppState>, caller: Caller, Path(id): Path<String>, paging: Paging) -> J<Page<Outcome>> {
    facts_for(&st, &caller, &id, false).await?;
    let r = st
        .sessions
        .clone()
        .list_outcomes(ss::ListRunsRequest { session_id: id, limit: paging.limit(), page: paging.page() })
        .await?
        .into_inner();
    let data = threads_wire::outcomes_of(&r)?;
    Ok(Json(Page { data, next_page: (!r.next_page.is_empty()).then_some(r.next_page) }))
}

#[utoipa::path(get, path = "/v1/outcomes/{id}", tag = "sessions", operation_id = "sessions.getOutcome", params(("id" = String, Path)),
    responses((status = 200, description = "An Outcome, for whoever may read its Session", body = crate::threads_wire::Outcome), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_outcome(State(st): State<AppState>, caller: Caller, Path(id): Path<String>) -> J<Outcome> {
    checkfu_core::id::OutcomeId::check("id", &id)?;
    let r = st.sessions.clone().get_outcome(ss::GetByIdRequest { id }).await?.into_inner();
    facts_for(&st, &caller, &r.session_id, false).await?;
    Ok(Json(threads_wire::outcome_of(&r)?))
}

/// `?status=`.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ThreadQuery {
    /// `running`, `idle`, `rescheduling` or `terminated`.
    #[serde(default)]
    pub status: Option<String>,
}

#[utoipa::path(get, path = "/v1/sessions/{id}/threads", tag = "sessions", operation_id = "sessions.listSessionThreads", params(("id" = String, Path), ThreadQuery),
    responses((status = 200, description = "The Session's threads: the primary first, then children in spawn order", body = crate::views::Page<crate::threads_wire::SessionThread>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_threads(
    State(st): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<ThreadQuery>,
) -> J<Page<SessionThread>> {
    facts_for(&st, &caller, &id, false).await?;
    let r = st
        .sessions
        .clone()
        .list_threads(ss::ListThreadsRequest { session_id: id, status: q.status.unwrap_or_default() })
        .await?
        .into_inner();
    Ok(Json(Page { data: threads_wire::threads_of(&r)?, next_page: None }))
}

/// The thread, if it is the Session's (404 else).
async fn thread_of(st: &AppState, caller: &Caller, session_id: &str, thread_id: &str, write: bool) -> ApiResult<SessionThread> {
    facts_for(st, caller, session_id, write).await?;
    let req = ss::ThreadRequest { session_id: session_id.into(), thread_id: thread_id.into(), actor_id: caller.principal_id.clone() };
    let r = st.sessions.clone().get_thread(req).await?.into_inner();
    Ok(threads_wire::thread_of(&r)?)
}

#[utoipa::path(get, path = "/v1/sessions/{id}/threads/{thread_id}", tag = "sessions", operation_id = "sessions.getSessionThread", params(("id" = String, Path), ("thread_id" = String, Path)),
    responses((status = 200, body = crate::threads_wire::SessionThread), (status = "4XX", body = ErrorEnvelope)))]
pub async fn get_thread(State(st): State<AppState>, caller: Caller, Path((id, thread_id)): Path<(String, String)>) -> J<SessionThread> {
    Ok(Json(thread_of(&st, &caller, &id, &thread_id, false).await?))
}

#[utoipa::path(post, path = "/v1/sessions/{id}/threads/{thread_id}/archive", tag = "sessions", operation_id = "sessions.archiveSessionThread", params(("id" = String, Path), ("thread_id" = String, Path)),
    responses((status = 200, description = "An idle, unparked child, terminated; the primary is 409", body = crate::threads_wire::SessionThread), (status = "4XX", body = ErrorEnvelope)))]
pub async fn archive_thread(State(st): State<AppState>, caller: Caller, Path((id, thread_id)): Path<(String, String)>) -> J<SessionThread> {
    facts_for(&st, &caller, &id, true).await?;
    let req = ss::ThreadRequest { session_id: id, thread_id, actor_id: caller.principal_id };
    let r = st.sessions.clone().archive_thread(req).await?.into_inner();
    Ok(Json(threads_wire::thread_of(&r)?))
}

#[utoipa::path(get, path = "/v1/sessions/{id}/threads/{thread_id}/events", tag = "sessions", operation_id = "sessions.listSessionThreadEvents",
    params(("id" = String, Path), ("thread_id" = String, Path), ("after_seq" = Option<i64>, Query), ("limit" = Option<u32>, Query), ("types[]" = Option<Vec<String>>, Query)),
    responses((status = 200, description = "The thread's view of the log (the primary's: the Session's events)", body = Page<views::Event>), (status = "4XX", body = ErrorEnvelope)))]
pub async fn list_thread_events(
    State(st): State<AppState>,
    caller: Caller,
    Path((id, thread_id)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> J<Page<views::Event>> {
    thread_of(&st, &caller, &id, &thread_id, false).await?;
    list_view(&st, id, thread_id, raw).await
}

#[utoipa::path(get, path = "/v1/sessions/{id}/threads/{thread_id}/events/stream", tag = "sessions", operation_id = "sessions.streamSessionThreadEvents",
    params(("id" = String, Path), ("thread_id" = String, Path), ("after_seq" = Option<i64>, Query), ("event_deltas" = Option<String>, Query, description = "agent.message,agent.thinking"),
        ("Last-Event-ID" = Option<i64>, Header, description = "Resume after this seq")),
    responses((status = 200, description = "text/event-stream of the thread's view, as the Session's stream", content_type = "text/event-stream", body = String),
        (status = "4XX", body = ErrorEnvelope)))]
pub async fn stream_thread_events(
    State(st): State<AppState>,
    caller: Caller,
    Path((id, thread_id)): Path<(String, String)>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let thread = thread_of(&st, &caller, &id, &thread_id, false).await?;
    // The primary's view is the Session's.
    let view = thread.parent_thread_id.is_some().then_some(thread_id);
    stream_view(st, caller, id, view, headers, raw).await
}
