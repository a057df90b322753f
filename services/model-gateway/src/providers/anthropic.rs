//! Anthropic Messages API, streaming. The key comes from the gateway's
//! configuration and is sent only to the provider.

use super::{ModelProvider, SseData, Target, require};
use crate::model::*;
use checkfu_core::{Error, Result};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use tokio::sync::mpsc;

const API_VERSION: &str = "2023-06-01";
/// Room for the answer beyond any thinking budget.
const ANSWER_TOKENS: i64 = 8_192;

pub struct Anthropic;

/// The effort scale as an extended-thinking budget; `minimal` thinks not at all.
pub fn thinking_budget(effort: Effort) -> Option<i64> {
    match effort {
        Effort::Minimal => None,
        Effort::Low => Some(1_024),
        Effort::Medium => Some(4_096),
        Effort::High => Some(16_384),
        Effort::Max => Some(32_000),
    }
}

fn block(b: &Block) -> Value {
    match b {
        Block::Text(t) => json!({"type": "text", "text": t}),
        Block::ToolUse { id, name, input } => json!({"type": "tool_use", "id": id, "name": name, "input": input}),
        Block::ToolResult { tool_use_id, content, is_error } => {
            json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": is_error})
        }
        // Images and PDFs natively; other Files as text or a line naming them.
        Block::File(f) if f.is_image() || f.is_pdf() => {
            use base64::Engine;
            let kind = if f.is_image() { "image" } else { "document" };
            let data = base64::engine::general_purpose::STANDARD.encode(&f.data);
            json!({"type": kind, "source": {"type": "base64", "media_type": f.media_type, "data": data}})
        }
        Block::File(f) => json!({"type": "text", "text": f.as_text()}),
    }
}

/// The request body. Messages alternate roles, so consecutive messages of
/// one role are merged into one.
pub fn body(c: &Candidate, req: &ModelRequest) -> Value {
    let mut messages: Vec<Value> = vec![];
    for m in &req.messages {
        let role = if m.role == Role::User { "user" } else { "assistant" };
        let blocks: Vec<Value> = m.content.iter().map(block).collect();
        match messages.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(arr) = last["content"].as_array_mut() {
                    arr.extend(blocks);
                }
            }
            _ => messages.push(json!({"role": role, "content": blocks})),
        }
    }
    let budget = thinking_budget(c.effort);
    let mut b = json!({"model": c.model, "messages": messages, "stream": true, "max_tokens": budget.unwrap_or(0) + ANSWER_TOKENS});
    if !req.system.is_empty() {
        b["system"] = json!(req.system);
    }
    if let Some(t) = budget {
        b["thinking"] = json!({"type": "enabled", "budget_tokens": t});
    }
    if !req.tools.is_empty() {
        b["tools"] = Value::Array(
            req.tools.iter().map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema})).collect(),
        );
    }
    b
}

enum Part {
    Text(String),
    Tool { id: String, name: String, json: String },
    Other,
}

#[async_trait::async_trait]
impl ModelProvider for Anthropic {
    async fn generate(
        &self,
        c: &Candidate,
        target: Option<&Target>,
        req: &ModelRequest,
        deltas: mpsc::Sender<String>,
    ) -> Result<ModelOutput> {
        let t = require(target)?;
        let mut rb = t.client.post(t.endpoint.url("v1/messages")).header("anthropic-version", API_VERSION).json(&body(c, req));
        if let Some(k) = t.endpoint.api_key() {
            rb = rb.header("x-api-key", k);
        }
        let mut events = SseData::open(rb).await?;
        let (mut parts, mut usage, mut stop) = (BTreeMap::<u64, Part>::new(), Usage::default(), String::new());
        while let Some(data) = events.next().await? {
            let v: Value = serde_json::from_str(&data).map_err(|_| Error::unavailable("the provider sent an unreadable stream event"))?;
            let index = v["index"].as_u64().unwrap_or(0);
            match v["type"].as_str().unwrap_or_default() {
                "message_start" => {
                    usage.input_tokens = v["message"]["usage"]["input_tokens"].as_i64().unwrap_or(0);
                    usage.output_tokens = v["message"]["usage"]["output_tokens"].as_i64().unwrap_or(0);
                }
                "content_block_start" => {
                    let cb = &v["content_block"];
                    let part = match cb["type"].as_str() {
                        Some("text") => Part::Text(cb["text"].as_str().unwrap_or_default().to_string()),
                        Some("tool_use") => Part::Tool {
                            id: cb["id"].as_str().unwrap_or_default().into(),
                            name: cb["name"].as_str().unwrap_or_default().into(),
                            json: String::new(),
                        },
                        _ => Part::Other,
                    };
                    parts.insert(index, part);
                }
                "content_block_delta" => match (parts.get_mut(&index), v["delta"]["type"].as_str()) {
                    (Some(Part::Text(t)), Some("text_delta")) => {
                        let d = v["delta"]["text"].as_str().unwrap_or_default();
                        t.push_str(d);
                        let _ = deltas.send(d.to_string()).await;
                    }
                    (Some(Part::Tool { json, .. }), Some("input_json_delta")) => {
                        json.push_str(v["delta"]["partial_json"].as_str().unwrap_or_default())
                    }
                    _ => {}
                },
                "message_delta" => {
                    if let Some(s) = v["delta"]["stop_reason"].as_str() {
                        stop = s.to_string();
                    }
                    if let Some(o) = v["usage"]["output_tokens"].as_i64() {
                        usage.output_tokens = o;
                    }
                }
                "message_stop" => break,
                "error" => {
                    return Err(Error::unavailable(format!("the provider reported {}", v["error"]["type"].as_str().unwrap_or("an error"))));
                }
                _ => {}
            }
        }
        let content = parts
            .into_values()
            .filter_map(|p| match p {
                Part::Text(t) if !t.is_empty() => Some(Block::Text(t)),
                Part::Tool { id, name, json } => {
                    let input = if json.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(&json).unwrap_or_else(|_| json!({"_unparsed": json}))
                    };
                    Some(Block::ToolUse { id, name, input })
                }
                _ => None,
            })
            .collect::<Vec<_>>();
        let stop_reason = if stop == "tool_use" { "tool_use" } else { "end_turn" };
        Ok(ModelOutput { content, usage, stop_reason: stop_reason.into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    use std::sync::{Arc, Mutex};

    type Seen = Arc<Mutex<Vec<(HeaderMap, Value)>>>;

    fn ev(name: &str, data: Value) -> String {
        format!("event: {name}\ndata: {data}\n\n")
    }

    fn stream() -> Vec<String> {
        let all = [
            ev("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 21, "output_tokens": 1}}})),
            ev("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}})),
            ev("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}})),
            ev("content_block_start", json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}})),
            ev("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "On "}})),
            ev("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "it."}})),
            ev("content_block_start", json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_9", "name": "grep", "input": {}}})),
            ev("content_block_delta", json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"pattern\": \"a"}})),
            ev("content_block_delta", json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "b\"}"}})),
            ev("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}})),
            ev("message_stop", json!({"type": "message_stop"})),
        ]
        .concat();
        // Split mid-line, as a network would.
        all.as_bytes().chunks(97).map(|c| String::from_utf8_lossy(c).into_owned()).collect()
    }

    async fn server(status: StatusCode, body: Vec<String>) -> (String, Seen) {
        let seen: Seen = Arc::default();
        let s = seen.clone();
        let app = axum::Router::new().route(
            "/v1/messages",
            axum::routing::post(move |headers: HeaderMap, axum::Json(req): axum::Json<Value>| {
                let (s, body) = (s.clone(), body.clone());
                async move {
                    s.lock().expect("lock").push((headers, req));
                    if status != StatusCode::OK {
                        return (status, "{\"type\":\"error\"}").into_response();
                    }
                    let chunks = futures_util::stream::iter(body.into_iter().map(Ok::<_, std::io::Error>));
                    ([("content-type", "text/event-stream")], Body::from_stream(chunks)).into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}"), seen)
    }

    fn candidate(effort: Effort) -> Candidate {
        Candidate {
            provider: Provider::Anthropic,
            model: "claude-sonnet-4-5".into(),
            effort,
            connection_id: None,
            endpoint: None,
            legacy_base_url: false,
        }
    }

    async fn at(base: &str, key: Option<&str>) -> super::super::Target {
        super::super::test_target(Provider::Anthropic, base, key).await
    }

    fn request() -> ModelRequest {
        ModelRequest {
            system: "Be brief.".into(),
            messages: vec![
                Message { role: Role::User, content: vec![Block::Text("first".into())] },
                Message { role: Role::User, content: vec![Block::Text("second".into())] },
                Message {
                    role: Role::Assistant,
                    content: vec![Block::ToolUse { id: "toolu_1".into(), name: "read".into(), input: json!({"path": "a"}) }],
                },
                Message {
                    role: Role::User,
                    content: vec![Block::ToolResult { tool_use_id: "toolu_1".into(), content: "aaa".into(), is_error: false }],
                },
            ],
            tools: vec![ToolSpec { name: "grep".into(), description: "Searches".into(), input_schema: json!({"type": "object"}) }],
        }
    }

    #[test]
    fn files_go_as_images_documents_or_text() {
        let file = |media_type: &str, text: &str, data: &[u8]| {
            Block::File(FileRef {
                file_id: "file_1".into(),
                filename: "n".into(),
                media_type: media_type.into(),
                path: "uploads/file_1/n".into(),
                text: text.into(),
                data: data.to_vec(),
                ..Default::default()
            })
        };
        let req = ModelRequest {
            messages: vec![Message {
                role: Role::User,
                content: vec![
                    file("image/png", "", b"png"),
                    file("application/pdf", "", b"pdf"),
                    file("text/plain", "alpha", b""),
                    file("application/zip", "", b""),
                ],
            }],
            ..Default::default()
        };
        let b = body(&candidate(Effort::Low), &req);
        let c = &b["messages"][0]["content"];
        assert_eq!(c[0], json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "cG5n"}}));
        assert_eq!(c[1]["type"], "document");
        assert_eq!(c[2]["text"], "<document name=\"n\" path=\"uploads/file_1/n\">\nalpha\n</document>");
        assert!(c[3]["text"].as_str().unwrap().contains("is in the workspace at uploads/file_1/n"), "{c}");
    }

    #[tokio::test]
    async fn streams_text_tool_use_and_usage_over_the_real_wire_format() {
        let (base, seen) = server(StatusCode::OK, stream()).await;
        let (tx, mut rx) = mpsc::channel(16);
        let out = Anthropic
            .generate(&candidate(Effort::High), Some(&at(&base, Some("sk-ant-test")).await), &request(), tx)
            .await
            .expect("generate");
        assert_eq!(
            out.content,
            vec![
                Block::Text("On it.".into()),
                Block::ToolUse { id: "toolu_9".into(), name: "grep".into(), input: json!({"pattern": "ab"}) }
            ]
        );
        assert_eq!(out.usage, Usage { input_tokens: 21, output_tokens: 9 });
        assert_eq!(out.stop_reason, "tool_use");
        let mut previews = vec![];
        while let Ok(d) = rx.try_recv() {
            previews.push(d);
        }
        assert_eq!(previews, vec!["On ", "it."], "text deltas preview; thinking does not");

        let (headers, body) = seen.lock().expect("lock")[0].clone();
        assert_eq!(headers.get("x-api-key").and_then(|v| v.to_str().ok()), Some("sk-ant-test"));
        assert_eq!(headers.get("anthropic-version").and_then(|v| v.to_str().ok()), Some(API_VERSION));
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 16_384}));
        assert_eq!(body["max_tokens"], 16_384 + ANSWER_TOKENS);
        let roles: Vec<&str> = body["messages"].as_array().expect("messages").iter().map(|m| m["role"].as_str().expect("role")).collect();
        assert_eq!(roles, vec!["user", "assistant", "user"], "consecutive user messages are merged");
        assert_eq!(body["messages"][0]["content"].as_array().map(Vec::len), Some(2));
        assert_eq!(body["messages"][2]["content"][0]["type"], "tool_result");
        assert_eq!((body["system"].clone(), body["tools"][0]["name"].clone()), (json!("Be brief."), json!("grep")));
    }

    #[tokio::test]
    async fn minimal_effort_does_not_think() {
        let (base, seen) = server(StatusCode::OK, stream()).await;
        let (tx, _rx) = mpsc::channel(16);
        Anthropic.generate(&candidate(Effort::Minimal), Some(&at(&base, None).await), &request(), tx).await.expect("generate");
        let (headers, body) = seen.lock().expect("lock")[0].clone();
        assert!(body.get("thinking").is_none());
        assert_eq!(body["max_tokens"], ANSWER_TOKENS);
        assert!(headers.get("x-api-key").is_none());
    }

    #[tokio::test]
    async fn overload_before_or_during_the_stream_is_unavailable() {
        let (base, _) = server(StatusCode::from_u16(529).expect("status"), vec![]).await;
        let (tx, _rx) = mpsc::channel(16);
        let e = Anthropic
            .generate(&candidate(Effort::Low), Some(&at(&base, Some("sk-ant-secret")).await), &request(), tx)
            .await
            .expect_err("overloaded");
        assert_eq!(e.code, checkfu_core::Code::Unavailable);
        assert!(!e.message.contains("sk-ant-secret"));
        let mid = vec![
            ev("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}})),
            ev("error", json!({"type": "error", "error": {"type": "overloaded_error"}})),
        ];
        let (base, _) = server(StatusCode::OK, mid).await;
        let (tx, _rx) = mpsc::channel(16);
        let e = Anthropic
            .generate(&candidate(Effort::Low), Some(&at(&base, None).await), &request(), tx)
            .await
            .expect_err("overloaded mid-stream");
        assert_eq!(e.code, checkfu_core::Code::Unavailable);
        assert!(e.message.contains("overloaded_error"));
    }
}
