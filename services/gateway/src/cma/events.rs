//! CMA session events (api.md §17.4, §17.8): sending as native appends,
//! reading the native log through the mapping table, and the live stream.

use super::cx::{Cx, Native, encode};
use super::wire::{self, CmaResult, refuse};
use axum::Json;
use axum::extract::{Path, RawQuery};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use checkfu_core::Error;
use futures_util::StreamExt;
use serde_json::{Map, Value, json};

/// CMA event types a client may send (others → 400).
const SENDABLE: &[&str] = &["user.message", "user.interrupt", "user.tool_confirmation", "user.custom_tool_result"];

/// Native types never shown to a CMA client (§17.8).
fn hidden(t: &str) -> bool {
    t == "session.created" || t.starts_with("run.") || t == "action_approval.pending" || t.starts_with("memory.") || t == "egress.denied"
}

/// A CMA input event → a native input authored by (and caused by) the caller.
pub fn native_input(principal_id: &str, e: &Value) -> CmaResult<Value> {
    let t = e["type"].as_str().unwrap_or_default();
    if t == "system.message" {
        return Err(refuse("model_does_not_support_mid_conversation_system", "system messages cannot be sent mid-conversation"));
    }
    if !SENDABLE.contains(&t) {
        return Err(Error::invalid_field("type", format!("unknown event type {t:?}; accepted: {}", SENDABLE.join(", "))).into());
    }
    let mut payload = e.as_object().cloned().unwrap_or_default();
    payload.remove("type");
    if t == "user.message"
        && let Some(blocks) = payload.get("content").and_then(Value::as_array)
    {
        for b in blocks {
            if matches!(b["type"].as_str(), Some("image" | "document")) && b["source"]["type"] != "file" {
                return Err(refuse("source_unsupported", "image and document blocks take source {type:\"file\", file_id}"));
            }
        }
    }
    Ok(json!({"type": t, "payload": Value::Object(payload), "authored_by": principal_id,
        "caused_by": {"kind": "principal", "id": principal_id}}))
}

/// A native event as CMA shows it; `None` for what CMA leaves out.
/// `start_ids` remembers each thread's open model request, so an `_end`
/// names its `_start`.
pub fn to_cma(e: &Value, start_ids: &mut Map<String, Value>) -> Option<Value> {
    let t = e["type"].as_str().unwrap_or_default();
    if hidden(t) {
        return None;
    }
    let thread = e["session_thread_id"].as_str().unwrap_or_default().to_string();
    let mut out = Map::new();
    out.insert("id".into(), e["id"].clone());
    out.insert("type".into(), json!(t));
    out.insert("processed_at".into(), e["created_at"].clone());
    if let Some(p) = e["payload"].as_object() {
        for (k, v) in p {
            out.insert(k.clone(), v.clone());
        }
    }
    out.insert("session_thread_id".into(), e["session_thread_id"].clone());
    match t {
        "span.model_request_start" => {
            start_ids.insert(thread, e["id"].clone());
        }
        "span.model_request_end" => {
            out.insert("model_request_start_id".into(), start_ids.remove(&thread).unwrap_or(Value::Null));
        }
        "session.error" => {
            let kind = out.get("error").and_then(|x| x["type"].as_str()).unwrap_or_default().to_string();
            let mapped = match kind.as_str() {
                "model_overloaded"
                | "model_rate_limited"
                | "model_request_failed"
                | "mcp_connection_failed"
                | "mcp_authentication_failed" => kind,
                _ => "unknown_error".into(),
            };
            if let Some(err) = out.get_mut("error").and_then(Value::as_object_mut) {
                err.insert("type".into(), json!(mapped));
                err.entry("retry_status").or_insert(json!({"type": "exhausted"}));
            }
        }
        _ => {}
    }
    Some(Value::Object(out))
}

/// `GET /v1/sessions/{id}/events`: ascending `seq`, CMA types only.
pub async fn list(cx: Cx, Path(id): Path<String>, RawQuery(raw): RawQuery) -> CmaResult<Json<Value>> {
    let id = super::sessions::checked(&id)?;
    let q = wire::query_pairs(raw.as_deref())?;
    let limit = wire::limit(&q, 1000, 1000)? as usize;
    if wire::param(&q, "order").is_some_and(|o| o != "asc") {
        return Err(refuse("unsupported", "events are listed in ascending order"));
    }
    let types = wire::params(&q, "types");
    if let Some(t) = types.iter().find(|t| hidden(t) || t.is_empty()) {
        return Err(Error::invalid_field("types", format!("{t:?} is not a CMA event type")).into());
    }
    // The page token is the last seq read.
    let mut after: i64 = match wire::param(&q, "page") {
        Some(p) => p.parse().map_err(|_| Error::invalid_field("page", "page is not a token this list gave"))?,
        None => 0,
    };
    let mut data = vec![];
    let mut starts = Map::new();
    let more = loop {
        let r = cx.native.get(&format!("/v1/sessions/{id}/events?after_seq={after}&limit=1000")).await?;
        let batch = r["data"].as_array().cloned().unwrap_or_default();
        if batch.is_empty() {
            break false;
        }
        let mut full = false;
        for e in &batch {
            after = e["seq"].as_i64().unwrap_or(after);
            if let Some(c) = to_cma(e, &mut starts)
                && (types.is_empty() || types.contains(&c["type"].as_str().unwrap_or_default()))
            {
                data.push(c);
                if data.len() == limit {
                    full = true;
                    break;
                }
            }
        }
        if full {
            break true;
        }
        if r["next_page"].is_null() {
            break false;
        }
    };
    Ok(Json(wire::page(data, more.then(|| after.to_string()))))
}

/// `POST /v1/sessions/{id}/events`: validated whole, then appended in
/// order; a batch stopped midway names what was accepted.
pub async fn send(cx: Cx, Path(id): Path<String>, Json(body): Json<Value>) -> CmaResult<Json<Value>> {
    let id = super::sessions::checked(&id)?;
    let events = body["events"].as_array().cloned().unwrap_or_default();
    if events.is_empty() || events.len() > 50 {
        return Err(Error::invalid_field("events", "send 1 to 50 events").into());
    }
    let inputs: Vec<Value> = events.iter().map(|e| native_input(&cx.caller.principal_id, e)).collect::<CmaResult<_>>()?;
    let mut echoes = vec![];
    let mut accepted: Vec<Value> = vec![];
    for input in inputs {
        match cx.native.post(&format!("/v1/sessions/{id}/events"), &input).await {
            Ok(e) => {
                accepted.push(e["id"].clone());
                echoes.push(to_cma(&e, &mut Map::new()).unwrap_or(e));
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

/// `GET /v1/sessions/{id}/events/stream`: from the head (CMA has no
/// replay) or after `Last-Event-ID`; one frame per persisted event with an
/// `event:` line; it ends after `session.status_terminated`.
pub async fn stream(cx: Cx, Path(id): Path<String>, headers: HeaderMap, RawQuery(raw): RawQuery) -> CmaResult<Response> {
    let id = super::sessions::checked(&id)?;
    let q = wire::query_pairs(raw.as_deref())?;
    let deltas = wire::params(&q, "event_deltas");
    if deltas.len() > 100 || deltas.iter().any(|d| !matches!(*d, "agent.message" | "agent.thinking")) {
        return Err(Error::invalid_field("event_deltas", "event_deltas are agent.message and agent.thinking").into());
    }
    let after = match headers.get("last-event-id").and_then(|v| v.to_str().ok()) {
        Some(v) => v.trim().parse::<i64>().map_err(|_| Error::invalid_field("Last-Event-ID", "Last-Event-ID must be a seq"))?,
        None => head(&cx.native, &id).await?,
    };
    let mut url = format!("/v1/sessions/{id}/events/stream?after_seq={after}");
    if !deltas.is_empty() {
        url.push_str(&format!("&event_deltas={}", encode(&deltas.join(","))));
    }
    let native = cx.native.raw(Method::GET, &url, None, &[]).await?;
    let body = translate(native.into_body().into_data_stream());
    let mut resp = axum::body::Body::from_stream(body).into_response();
    let h = resp.headers_mut();
    h.insert("content-type", axum::http::HeaderValue::from_static("text/event-stream"));
    h.insert("cache-control", axum::http::HeaderValue::from_static("no-cache"));
    Ok(resp)
}

/// The last seq of the Session's log (the stream's head).
async fn head(native: &Native, id: &str) -> CmaResult<i64> {
    let mut after = 0;
    loop {
        let r = native.get(&format!("/v1/sessions/{id}/events?after_seq={after}&limit=1000")).await?;
        let batch = r["data"].as_array().cloned().unwrap_or_default();
        match batch.last() {
            Some(e) => after = e["seq"].as_i64().unwrap_or(after),
            None => return Ok(after),
        }
        if r["next_page"].is_null() {
            return Ok(after);
        }
    }
}

/// Native SSE frames → CMA frames: events through the mapping table,
/// previews in CMA's `event_start`/`event_delta` shape, pings kept; the
/// stream ends after `session.status_terminated`.
fn translate(
    native: impl futures_util::Stream<Item = Result<Bytes, axum::Error>> + Send + 'static,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
    struct St<S> {
        native: std::pin::Pin<Box<S>>,
        buf: String,
        starts: Map<String, Value>,
        done: bool,
    }
    let st = St { native: Box::pin(native), buf: String::new(), starts: Map::new(), done: false };
    futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            if let Some(end) = st.buf.find("\n\n") {
                let frame: String = st.buf.drain(..end + 2).collect();
                let (out, last) = frame_to_cma(&frame, &mut st.starts);
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
fn frame_to_cma(frame: &str, starts: &mut Map<String, Value>) -> (String, bool) {
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
        _ => match to_cma(&data, starts) {
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

    fn native(seq: i64, t: &str, payload: Value) -> Value {
        json!({"id": format!("evt_{seq}"), "seq": seq, "type": t, "created_at": "2026-12-02T00:00:00.000Z", "session_thread_id": null,
            "run_id": "run_1", "authored_by": null, "caused_by": {"kind": "run", "id": "run_1"}, "payload": payload})
    }

    #[test]
    fn the_log_reads_through_the_mapping_table() {
        let mut starts = Map::new();
        assert!(to_cma(&native(1, "session.created", json!({})), &mut starts).is_none());
        assert!(to_cma(&native(2, "run.created", json!({})), &mut starts).is_none());
        let start = to_cma(&native(3, "span.model_request_start", json!({"model": "m"})), &mut starts).expect("shown");
        let end = to_cma(&native(4, "span.model_request_end", json!({"model_usage": {}})), &mut starts).expect("shown");
        assert_eq!(end["model_request_start_id"], start["id"]);
        let msg = to_cma(&native(5, "agent.message", json!({"content": [{"type": "text", "text": "hi"}]})), &mut starts).expect("shown");
        assert_eq!(msg["content"][0]["text"], "hi");
        assert_eq!(msg["processed_at"], "2026-12-02T00:00:00.000Z");
        for k in ["seq", "run_id", "authored_by", "caused_by", "payload"] {
            assert!(msg.get(k).is_none(), "{k} is left out");
        }
    }

    #[test]
    fn inputs_are_authored_by_the_caller_and_system_messages_refused() {
        let e = native_input("prin_1", &json!({"type": "user.message", "content": [{"type": "text", "text": "hi"}]})).expect("ok");
        assert_eq!((e["authored_by"].as_str(), e["payload"]["content"][0]["text"].as_str()), (Some("prin_1"), Some("hi")));
        let refused = native_input("prin_1", &json!({"type": "system.message"})).expect_err("refused");
        assert_eq!(refused.0.details["reason"], "model_does_not_support_mid_conversation_system");
        assert!(native_input("prin_1", &json!({"type": "session.created"})).is_err());
    }

    #[test]
    fn frames_carry_an_event_line_and_end_after_termination() {
        let mut starts = Map::new();
        let f = format!("id: 7\nevent: agent.message\ndata: {}\n\n", native(7, "agent.message", json!({"content": []})));
        let (out, last) = frame_to_cma(&f, &mut starts);
        assert!(out.starts_with("id: 7\nevent: agent.message\ndata: {") && !last, "{out}");
        let f = format!("id: 8\nevent: run.completed\ndata: {}\n\n", native(8, "run.completed", json!({})));
        assert_eq!(frame_to_cma(&f, &mut starts), (String::new(), false));
        let f = format!("id: 9\nevent: session.status_terminated\ndata: {}\n\n", native(9, "session.status_terminated", json!({})));
        assert!(frame_to_cma(&f, &mut starts).1);
        assert_eq!(frame_to_cma(": ping\n\n", &mut starts).0, ": ping\n\n");
    }
}
