//! CMA session events (api.md §17.4, §17.8): sending as native appends,
//! reading the native log through the mapping table, and the live stream.

use super::cx::{Cx, Native, encode};
use super::facts;
use super::mapping::{self, Mapper, hidden, native_input};
use super::wire::{self, CmaResult, refuse};
use crate::views::Page;
use axum::Json;
use axum::extract::{Path, RawQuery};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use checkfu_core::{Code, Error};
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;

/// At most this many events are read to map one Session's log.
const MAX_LOG: usize = 200_000;

/// The native events path of a Session's view: its own (the primary's),
/// or `threads/<tid>`'s.
fn events_path(id: &str, view: &Option<String>) -> String {
    match view {
        Some(v) => format!("/v1/sessions/{id}/{v}/events"),
        None => format!("/v1/sessions/{id}/events"),
    }
}

/// One view of the Session's log, whole, oldest first.
async fn log(native: &Native, id: &str, view: &Option<String>) -> CmaResult<Vec<Value>> {
    log_after(native, id, view, 0).await
}

/// One view of the Session's log after `seq`, oldest first.
async fn log_after(native: &Native, id: &str, view: &Option<String>, seq: i64) -> CmaResult<Vec<Value>> {
    let path = events_path(id, view);
    let mut out: Vec<Value> = vec![];
    loop {
        let after = out.last().and_then(|e| e["seq"].as_i64()).unwrap_or(seq);
        // Events stay JSON: the mapping table reads each one as a client
        // would, its payload (free JSON) included.
        let r: Page<Value> = native.get(&format!("{path}?after_seq={after}&limit=1000")).await?;
        let done = r.data.is_empty() || r.next_page.is_none();
        out.extend(r.data);
        if done || out.len() >= MAX_LOG {
            return Ok(out);
        }
    }
}

/// The memo of a Session view's mapped log.
fn memo_key(id: &str, view: &Option<String>) -> String {
    format!("{id}/{}", view.as_deref().unwrap_or_default())
}

/// Maps the events after what `memo` holds into it.
async fn extend(native: &Native, id: &str, view: &Option<String>, memo: &mut super::logcache::Entry) -> CmaResult<()> {
    for e in log_after(native, id, view, memo.last_seq).await? {
        let seq = e["seq"].as_i64().unwrap_or(0);
        if let Some(c) = memo.mapper.map(&e) {
            memo.mapped.push((seq, c));
        }
        memo.last_seq = seq;
    }
    Ok(())
}

/// A mapper for the Session: the rules the projection compiled for its
/// agent, and its ToolSources' names (read as the caller: a Session the
/// caller may not read is an error here, before anything is shown).
async fn mapper_for(cx: &Cx, id: &str) -> CmaResult<Mapper> {
    let s: crate::views::Session = cx.native.get(&format!("/v1/sessions/{id}")).await?;
    let d = facts::deployment(&cx.state, &s.agent_deployment_id).await?;
    let (agent, env) = (d.agent_id.as_str(), d.environment_id.as_str());
    let rules = match facts::policy_named(&cx.state, env, &format!("cma:{agent}")).await? {
        Some(p) => p.rules.as_array().map(|rs| rs.iter().filter_map(|r| r["id"].as_str().map(String::from)).collect()).unwrap_or_default(),
        None => vec![],
    };
    Ok(Mapper::new(rules, facts::tool_source_names(&cx.state, env).await.unwrap_or_default()))
}

/// `GET /v1/sessions/{id}/events`: ascending `seq`, CMA types only.
pub async fn list(cx: Cx, Path(id): Path<String>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    list_view(cx, super::wire::path_id::<checkfu_core::id::SessionId>("session", &id)?, None, raw).await
}

/// A page of one view of the log (`None`: the Session's own).
pub async fn list_view(cx: Cx, id: String, view: Option<String>, raw: Option<String>) -> CmaResult<Json<Value>> {
    let q = wire::query_pairs(raw.as_deref())?;
    let limit = wire::limit(&q, 1000, 1000)? as usize;
    let descending = wire::descending(&q, false)?;
    let types = wire::params(&q, "types");
    let created = wire::created_at_filter(&q)?;
    if let Some(t) = types.iter().find(|t| hidden(t) || t.is_empty()) {
        return Err(Error::invalid_field("types", format!("{t:?} is not a CMA event type")).into());
    }
    // The page token is the last seq listed, `d`-prefixed when descending:
    // a cursor keeps its order.
    let cursor: Option<i64> = match wire::param(&q, "page") {
        Some(p) => Some(page_token(p, descending)?),
        None => None,
    };
    let fresh = mapper_for(&cx, &id).await?;
    // The log is mapped in order from its start (a page's calls and
    // results name the events that made them, however far back); the memo
    // keeps what earlier reads mapped, so only newer events are read.
    let key = memo_key(&id, &view);
    let mut memo = cx.logs.take(&key).unwrap_or_default();
    memo.mapper.refresh(fresh);
    extend(&cx.native, &id, &view, &mut memo).await?;
    let mut data = vec![];
    let mut last = 0;
    let mut more = false;
    let in_order: Box<dyn Iterator<Item = &(i64, Value)>> = match (descending, cursor) {
        (false, c) => Box::new(memo.mapped.iter().filter(move |(seq, _)| *seq > c.unwrap_or(0))),
        (true, c) => Box::new(memo.mapped.iter().rev().filter(move |(seq, _)| *seq < c.unwrap_or(i64::MAX))),
    };
    for (seq, c) in in_order {
        if !(types.is_empty() || types.contains(&c["type"].as_str().unwrap_or_default())) || !created(&c["processed_at"]) {
            continue;
        }
        if data.len() == limit {
            more = true;
            break;
        }
        data.push(c.clone());
        last = *seq;
    }
    cx.logs.put(key, memo);
    let next = more.then(|| if descending { format!("d{last}") } else { last.to_string() });
    Ok(Json(wire::page(data, next)))
}

/// A page token of an events list in the order asked (another order's
/// token → 400).
fn page_token(p: &str, descending: bool) -> CmaResult<i64> {
    let bad = || Error::invalid_field("page", "page is not a token this list gave for this order");
    let digits = match (descending, p.strip_prefix('d')) {
        (true, Some(d)) => d,
        (false, None) => p,
        _ => return Err(bad().into()),
    };
    Ok(digits.parse().map_err(|_| bad())?)
}

/// `POST /v1/sessions/{id}/events`: validated whole, then appended in
/// order; a batch stopped midway names what was accepted.
pub async fn send(cx: Cx, Path(id): Path<String>, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let id = super::wire::path_id::<checkfu_core::id::SessionId>("session", &id)?;
    let events = body["events"].as_array().cloned().unwrap_or_default();
    if events.is_empty() || events.len() > 50 {
        return Err(Error::invalid_field("events", "send 1 to 50 events").into());
    }
    if let Some((_, scope)) = &cx.work {
        // A worker's token sends tool results for its own Session only.
        let other = events.iter().find(|e| !matches!(e["type"].as_str(), Some("user.tool_result" | "user.custom_tool_result")));
        if scope.session_id != id || other.is_some() {
            return Err(Error::new(Code::PermissionDenied, "a work token sends only tool results of its own Session")
                .with_reason("work_token_scope")
                .into());
        }
    }
    let settles = events
        .iter()
        .any(|e| matches!(e["type"].as_str(), Some("user.tool_confirmation" | "user.custom_tool_result" | "user.tool_result")));
    // The Session's view holds every wait: a child's as cross-posts.
    let uses = if settles { mapping::uses_of(&log(&cx.native, &id, &None).await?) } else { Default::default() };
    let mut read = vec![];
    for e in &events {
        read.push(read_rubric(&cx, e).await?);
    }
    let inputs: Vec<Option<Value>> = read
        .iter()
        .map(|e| if e["type"] == "user.tool_result" { Ok(None) } else { native_input(&cx.caller.principal_id, e, &uses).map(Some) })
        .collect::<CmaResult<_>>()?;
    let mut echoes = vec![];
    let mut accepted: Vec<Value> = vec![];
    for (input, sent) in inputs.iter().zip(&events) {
        let appended = match input {
            Some(input) => cx.native.post(&format!("/v1/sessions/{id}/events"), input).await,
            None => tool_result(&cx, &id, sent, &uses).await,
        };
        match appended {
            Ok(e) => {
                accepted.push(e["id"].clone());
                // The echo names calls as the client did.
                let mut echo = Mapper::default().map(&e).unwrap_or(e);
                for k in ["tool_use_id", "custom_tool_use_id"] {
                    if let Some(v) = sent.get(k) {
                        echo[k] = v.clone();
                    }
                }
                echoes.push(echo);
            }
            Err(mut err) if !accepted.is_empty() => {
                let mut details = err.0.details.as_object().cloned().unwrap_or_default();
                details.insert("accepted_event_ids".into(), json!(accepted));
                err.0.details = Value::Object(details);
                return Err(err);
            }
            Err(err) => return Err(err),
        }
    }
    Ok(Json(json!({"data": echoes})))
}

/// A `user.tool_result` (§17.13): only a worker holding the Session's work
/// item sends one, fenced by its delivery (a superseded token → 409).
async fn tool_result(cx: &Cx, session_id: &str, e: &Value, uses: &HashMap<String, (String, Option<String>)>) -> CmaResult<Value> {
    let Some((token, _)) = &cx.work else {
        return Err(Error::new(Code::PermissionDenied, "user.tool_result is sent only by the worker holding the Session's work item")
            .with_reason("work_holder_only")
            .into());
    };
    let id = e["tool_use_id"].as_str().unwrap_or_default();
    let (native_id, _) = uses.get(id).cloned().ok_or_else(|| {
        Error::invalid_field("tool_use_id", format!("{id:?} is not a tool use of this session")).with_reason("no_such_wait")
    })?;
    let content = e.get("content").cloned().unwrap_or_else(|| json!([]));
    let req = checkfu_proto::sessions::v1::SendToolResultRequest {
        token: token.clone(),
        session_id: session_id.to_string(),
        tool_use_id: native_id,
        content_json: content.to_string(),
        is_error: e["is_error"].as_bool().unwrap_or(false),
    };
    let r = cx.state.sessions.clone().send_tool_result(req).await.map_err(Error::from)?.into_inner();
    let event = r.event.ok_or_else(|| Error::internal("the sessions service answered no event"))?;
    Ok(crate::json_text::value(crate::views::event(&event))?)
}

/// A `user.define_outcome` whose rubric is a File gets the File's text
/// (a text File the caller may read; at most the native rubric's 64 KiB).
pub async fn read_rubric(cx: &Cx, e: &Value) -> CmaResult<Value> {
    if e["type"] != "user.define_outcome" || e["rubric"]["type"] != "file" {
        return Ok(e.clone());
    }
    let file = e["rubric"]["file_id"].as_str().unwrap_or_default();
    if checkfu_core::id::FileId::check("rubric.file_id", file).is_err() {
        return Err(Error::invalid_field("rubric.file_id", "rubric.file_id must name a File (file_…)").into());
    }
    let resp = cx.native.raw(Method::GET, &format!("/v1/files/{file}/content"), None, &[]).await?;
    let bytes = axum::body::to_bytes(resp.into_body(), 64 * 1024 + 1)
        .await
        .map_err(|_| refuse("rubric_too_large", "a rubric File holds at most 64 KiB of text"))?;
    let text = String::from_utf8(bytes.to_vec()).map_err(|_| refuse("rubric_not_text", "a rubric File must be UTF-8 text"))?;
    let mut out = e.clone();
    out["rubric"] = json!({"type": "text", "content": text});
    Ok(out)
}

/// `GET /v1/sessions/{id}/events/stream`: from the head (CMA has no
/// replay) or after `Last-Event-ID`; one frame per persisted event with an
/// `event:` line; it ends after `session.status_terminated`.
pub async fn stream(cx: Cx, Path(id): Path<String>, headers: HeaderMap, RawQuery(raw): RawQuery) -> CmaResult<Response> {
    stream_view(cx, super::wire::path_id::<checkfu_core::id::SessionId>("session", &id)?, None, headers, raw).await
}

/// The live stream of one view (`None`: the Session's own; previews are
/// the primary's only).
pub async fn stream_view(cx: Cx, id: String, view: Option<String>, headers: HeaderMap, raw: Option<String>) -> CmaResult<Response> {
    let q = wire::query_pairs(raw.as_deref())?;
    let deltas = wire::params(&q, "event_deltas");
    if deltas.len() > 100 || deltas.iter().any(|d| !matches!(*d, "agent.message" | "agent.thinking")) {
        return Err(Error::invalid_field("event_deltas", "event_deltas are agent.message and agent.thinking").into());
    }
    let resume = match headers.get("last-event-id").and_then(|v| v.to_str().ok()) {
        Some(v) => Some(v.trim().parse::<i64>().map_err(|_| Error::invalid_field("Last-Event-ID", "Last-Event-ID must be a seq"))?),
        None => None,
    };
    // The mapper reads the log up to where the stream starts, so calls
    // made before it are named by their events. From the head (no
    // `Last-Event-ID`, or one at or past what the memo mapped) the memo's
    // mapper, brought up to date, starts the stream; an earlier resume
    // point replays the log up to it.
    let fresh = mapper_for(&cx, &id).await?;
    let key = memo_key(&id, &view);
    let mut memo = cx.logs.take(&key).unwrap_or_default();
    memo.mapper.refresh(fresh.clone());
    extend(&cx.native, &id, &view, &mut memo).await?;
    let head = memo.last_seq;
    let after = resume.unwrap_or(head).min(head);
    let mapper = if after == head {
        memo.mapper.clone()
    } else {
        let mut m = fresh;
        for e in log(&cx.native, &id, &view).await?.iter().take_while(|e| e["seq"].as_i64().unwrap_or(0) <= after) {
            m.map(e);
        }
        m
    };
    cx.logs.put(key, memo);
    let mut url = format!("{}/stream?after_seq={after}", events_path(&id, &view));
    if !deltas.is_empty() && view.is_none() {
        url.push_str(&format!("&event_deltas={}", encode(&deltas.join(","))));
    }
    let native = cx.native.raw(Method::GET, &url, None, &[]).await?;
    let body = translate(native.into_body().into_data_stream(), mapper);
    let mut resp = axum::body::Body::from_stream(body).into_response();
    let h = resp.headers_mut();
    h.insert("content-type", axum::http::HeaderValue::from_static("text/event-stream"));
    h.insert("cache-control", axum::http::HeaderValue::from_static("no-cache"));
    Ok(resp)
}

/// Native SSE frames → CMA frames: events through the mapping table,
/// previews in CMA's `event_start`/`event_delta` shape, pings kept; the
/// stream ends after `session.status_terminated`.
fn translate(
    native: impl futures_util::Stream<Item = Result<Bytes, axum::Error>> + Send + 'static,
    mapper: Mapper,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
    struct St<S> {
        native: std::pin::Pin<Box<S>>,
        buf: String,
        mapper: Mapper,
        done: bool,
    }
    let st = St { native: Box::pin(native), buf: String::new(), mapper, done: false };
    futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            if let Some(end) = st.buf.find("\n\n") {
                let frame: String = st.buf.drain(..end + 2).collect();
                let (out, last) = frame_to_cma(&frame, &mut st.mapper);
                st.done = last;
                if out.is_empty() {
                    continue;
                }
                return Some((Ok(Bytes::from(out)), st));
            }
            match st.native.next().await {
                Some(Ok(chunk)) => st.buf.push_str(&String::from_utf8_lossy(&chunk)),
                Some(Err(_)) | None => {
                    let e = Error::unavailable("the event stream ended; reconnect with Last-Event-ID");
                    let (_, obj) = wire::error_object(&e);
                    st.done = true;
                    let data = json!({"type": "error", "error": obj});
                    return Some((Ok(Bytes::from(format!("event: error\ndata: {data}\n\n"))), st));
                }
            }
        }
    })
}

/// One native frame's CMA text (empty: nothing to send) and whether the
/// stream ends after it.
fn frame_to_cma(frame: &str, mapper: &mut Mapper) -> (String, bool) {
    let (mut id, mut event, mut data) = (None, None, None);
    for line in frame.lines() {
        if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("event: ") {
            event = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("data: ") {
            data = serde_json::from_str::<Value>(v).ok();
        } else if line.starts_with(':') {
            return (": ping\n\n".into(), false);
        }
    }
    let (Some(event), Some(data)) = (event, data) else { return (String::new(), false) };
    match event.as_str() {
        "event_start" | "event_delta" => {
            if !data["session_thread_id"].is_null() && data.get("session_thread_id").is_some() {
                return (String::new(), false);
            }
            let preview_id = data["preview_id"].clone();
            let v = if event == "event_start" {
                json!({"type": "event_start", "event": {"type": data["event_type"], "id": preview_id}})
            } else {
                json!({"type": "event_delta", "event_id": preview_id,
                    "delta": {"type": "content_delta", "index": 0, "content": {"type": "text", "text": data["delta"]["text"]}}})
            };
            (format!("event: {event}\ndata: {v}\n\n"), false)
        }
        "error" => (format!("event: error\ndata: {}\n\n", json!({"type": "error", "error": data["error"]})), true),
        _ => match mapper.map(&data) {
            Some(v) => {
                let t = v["type"].as_str().unwrap_or_default().to_string();
                let id = id.map(|i| format!("id: {i}\n")).unwrap_or_default();
                (format!("{id}event: {t}\ndata: {v}\n\n"), t == "session.status_terminated")
            }
            None => (String::new(), false),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native(seq: i64, t: &str) -> Value {
        json!({"id": format!("evt_{seq}"), "seq": seq, "type": t, "created_at": "2026-12-02T00:00:00.000Z", "session_thread_id": null, "payload": {}})
    }

    #[test]
    fn a_page_token_keeps_its_order() {
        assert_eq!(page_token("12", false).expect("asc"), 12);
        assert_eq!(page_token("d12", true).expect("desc"), 12);
        assert!(page_token("d12", false).is_err() && page_token("12", true).is_err(), "another order's token → 400");
        assert!(page_token("x", false).is_err());
    }

    #[test]
    fn frames_carry_an_event_line_and_end_after_termination() {
        let mut m = Mapper::default();
        let f = format!("id: 7\nevent: agent.message\ndata: {}\n\n", native(7, "agent.message"));
        let (out, last) = frame_to_cma(&f, &mut m);
        assert!(out.starts_with("id: 7\nevent: agent.message\ndata: {") && !last, "{out}");
        let f = format!("id: 8\nevent: run.completed\ndata: {}\n\n", native(8, "run.completed"));
        assert_eq!(frame_to_cma(&f, &mut m), (String::new(), false));
        let f = format!("id: 9\nevent: session.status_terminated\ndata: {}\n\n", native(9, "session.status_terminated"));
        assert!(frame_to_cma(&f, &mut m).1);
        assert_eq!(frame_to_cma(": ping\n\n", &mut m).0, ": ping\n\n");
    }
}
