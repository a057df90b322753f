//! OpenAI-compatible Chat Completions (OpenAI, vLLM, Ollama and the like),
//! streaming. The key comes from the gateway's configuration and is sent
//! only to the provider; it never appears in events, errors or logs.

use super::{ModelProvider, SseData, Target, require};
use crate::model::*;
use checkfu_core::{Error, Result};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use tokio::sync::mpsc;

pub struct OpenAi;

/// The effort scale as OpenAI reasoning models take it; other models get
/// no effort parameter (they would refuse one).
pub fn reasoning_effort(model: &str, effort: Effort) -> Option<&'static str> {
    let reasoning = ["o1", "o3", "o4", "gpt-5"].iter().any(|p| model.starts_with(p));
    reasoning.then_some(match effort {
        Effort::Minimal => "minimal",
        Effort::Low => "low",
        Effort::Medium => "medium",
        Effort::High | Effort::Max => "high",
    })
}

/// The request body for a provider-neutral request.
pub fn body(c: &Candidate, req: &ModelRequest) -> Value {
    let mut messages = vec![];
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": req.system}));
    }
    for m in &req.messages {
        match m.role {
            Role::User => {
                let text: Vec<String> = m
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::Text(t) => Some(t.clone()),
                        Block::File(f) if !f.is_image() => Some(f.as_text()),
                        _ => None,
                    })
                    .collect();
                // Images go natively, as data URLs beside the text.
                let images: Vec<Value> = m
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::File(f) if f.is_image() => {
                            use base64::Engine;
                            let data = base64::engine::general_purpose::STANDARD.encode(&f.data);
                            Some(json!({"type": "image_url", "image_url": {"url": format!("data:{};base64,{data}", f.media_type)}}))
                        }
                        _ => None,
                    })
                    .collect();
                if !images.is_empty() {
                    let mut parts = vec![json!({"type": "text", "text": text.join("\n")})];
                    parts.extend(images);
                    messages.push(json!({"role": "user", "content": parts}));
                } else if !text.is_empty() {
                    messages.push(json!({"role": "user", "content": text.join("\n")}));
                }
                for b in &m.content {
                    if let Block::ToolResult { tool_use_id, content, .. } = b {
                        messages.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
                    }
                }
            }
            Role::Assistant => {
                let text: String = m
                    .content
                    .iter()
                    .filter_map(|b| if let Block::Text(t) = b { Some(t.as_str()) } else { None })
                    .collect::<Vec<_>>()
                    .join("\n");
                let calls: Vec<Value> = m
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        Block::ToolUse { id, name, input } => {
                            Some(json!({"id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}}))
                        }
                        _ => None,
                    })
                    .collect();
                let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(calls);
                }
                messages.push(msg);
            }
        }
    }
    let mut b = json!({"model": c.model, "messages": messages, "stream": true, "stream_options": {"include_usage": true}});
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}))
            .collect();
        b["tools"] = Value::Array(tools);
    }
    if let Some(e) = reasoning_effort(&c.model, c.effort) {
        b["reasoning_effort"] = json!(e);
    }
    b
}

/// Classifies a provider's HTTP failure without echoing anything secret.
#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

#[async_trait::async_trait]
impl ModelProvider for OpenAi {
    async fn generate(
        &self,
        c: &Candidate,
        target: Option<&Target>,
        req: &ModelRequest,
        deltas: mpsc::Sender<String>,
    ) -> Result<ModelOutput> {
        let t = require(target)?;
        let mut rb = t.client.post(t.endpoint.url("chat/completions")).json(&body(c, req));
        if let Some(k) = t.endpoint.api_key() {
            rb = rb.bearer_auth(k);
        }
        let mut events = SseData::open(rb).await?;
        let (mut text, mut calls, mut usage, mut finish) = (String::new(), BTreeMap::<u64, Call>::new(), Usage::default(), String::new());
        while let Some(data) = events.next().await? {
            if data == "[DONE]" {
                break;
            }
            let v: Value = serde_json::from_str(&data).map_err(|_| Error::unavailable("the provider sent an unreadable stream chunk"))?;
            if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                usage.input_tokens = u["prompt_tokens"].as_i64().unwrap_or(0);
                usage.output_tokens = u["completion_tokens"].as_i64().unwrap_or(0);
            }
            let Some(choice) = v["choices"].get(0) else { continue };
            if let Some(f) = choice["finish_reason"].as_str() {
                finish = f.to_string();
            }
            let delta = &choice["delta"];
            if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                text.push_str(t);
                let _ = deltas.send(t.to_string()).await;
            }
            for tc in delta["tool_calls"].as_array().into_iter().flatten() {
                let call = calls.entry(tc["index"].as_u64().unwrap_or(0)).or_default();
                if let Some(id) = tc["id"].as_str() {
                    call.id = id.to_string();
                }
                if let Some(n) = tc["function"]["name"].as_str() {
                    call.name.push_str(n);
                }
                if let Some(a) = tc["function"]["arguments"].as_str() {
                    call.arguments.push_str(a);
                }
            }
        }
        let mut content = vec![];
        if !text.is_empty() {
            content.push(Block::Text(text));
        }
        for call in calls.into_values() {
            let input = if call.arguments.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({"_unparsed": call.arguments}))
            };
            content.push(Block::ToolUse { id: call.id, name: call.name, input });
        }
        let stop_reason =
            if finish == "tool_calls" || content.iter().any(|b| matches!(b, Block::ToolUse { .. })) { "tool_use" } else { "end_turn" };
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

    type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

    const STREAM: &[&str] = &[
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":\"{\\\"pa",
        "\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\":\\\"a\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7}}\n\ndata: [DONE]\n\n",
    ];

    /// A local server speaking the Chat Completions streaming wire format.
    async fn server(status: StatusCode) -> (String, Seen) {
        let seen: Seen = Arc::default();
        let s = seen.clone();
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(move |headers: HeaderMap, axum::Json(body): axum::Json<Value>| {
                let s = s.clone();
                async move {
                    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
                    s.lock().expect("lock").push((auth, body));
                    if status != StatusCode::OK {
                        return (status, "{\"error\":{\"message\":\"busy\"}}").into_response();
                    }
                    let chunks = futures_util::stream::iter(STREAM.iter().map(|c| Ok::<_, std::io::Error>(c.to_string())));
                    ([("content-type", "text/event-stream")], Body::from_stream(chunks)).into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}/v1"), seen)
    }

    fn candidate(model: &str) -> Candidate {
        Candidate {
            provider: Provider::OpenAi,
            model: model.into(),
            effort: Effort::Max,
            connection_id: None,
            endpoint: None,
            legacy_base_url: false,
        }
    }

    async fn at(base: &str, key: Option<&str>) -> super::super::Target {
        super::super::test_target(Provider::OpenAi, base, key).await
    }

    fn request() -> ModelRequest {
        ModelRequest {
            system: "Be brief.".into(),
            messages: vec![
                Message { role: Role::User, content: vec![Block::Text("read a".into())] },
                Message {
                    role: Role::Assistant,
                    content: vec![Block::ToolUse { id: "call_0".into(), name: "read".into(), input: json!({"path": "b"}) }],
                },
                Message {
                    role: Role::User,
                    content: vec![Block::ToolResult { tool_use_id: "call_0".into(), content: "bee".into(), is_error: false }],
                },
            ],
            tools: vec![ToolSpec { name: "read".into(), description: "Reads a file".into(), input_schema: json!({"type": "object"}) }],
        }
    }

    #[tokio::test]
    async fn streams_text_tool_calls_and_usage_over_the_real_wire_format() {
        let (base, seen) = server(StatusCode::OK).await;
        let (tx, mut rx) = mpsc::channel(16);
        let out = OpenAi.generate(&candidate("o3-mini"), Some(&at(&base, Some("sk-test")).await), &request(), tx).await.expect("generate");
        assert_eq!(
            out.content,
            vec![Block::Text("Hello".into()), Block::ToolUse { id: "call_1".into(), name: "read".into(), input: json!({"path": "a"}) }]
        );
        assert_eq!(out.usage, Usage { input_tokens: 12, output_tokens: 7 });
        assert_eq!(out.stop_reason, "tool_use");
        let mut previews = vec![];
        while let Ok(d) = rx.try_recv() {
            previews.push(d);
        }
        assert_eq!(previews, vec!["Hel", "lo"]);

        let (auth, body) = seen.lock().expect("lock")[0].clone();
        assert_eq!(auth.as_deref(), Some("Bearer sk-test"), "the configured key goes to the provider");
        assert_eq!(
            (body["model"].clone(), body["stream"].clone(), body["stream_options"]["include_usage"].clone()),
            (json!("o3-mini"), json!(true), json!(true))
        );
        assert_eq!(body["reasoning_effort"], "high", "max effort maps to the provider's highest");
        let roles: Vec<&str> = body["messages"].as_array().expect("messages").iter().map(|m| m["role"].as_str().expect("role")).collect();
        assert_eq!(roles, vec!["system", "user", "assistant", "tool"]);
        assert_eq!(body["messages"][2]["tool_calls"][0]["function"]["arguments"], "{\"path\":\"b\"}");
        assert_eq!(body["messages"][3]["tool_call_id"], "call_0");
        assert_eq!(body["tools"][0]["function"]["name"], "read");
    }

    #[tokio::test]
    async fn effort_is_sent_only_to_reasoning_models() {
        let (base, seen) = server(StatusCode::OK).await;
        let (tx, _rx) = mpsc::channel(16);
        OpenAi.generate(&candidate("gpt-4.1-mini"), Some(&at(&base, None).await), &request(), tx).await.expect("generate");
        let (auth, body) = seen.lock().expect("lock")[0].clone();
        assert!(body.get("reasoning_effort").is_none());
        assert_eq!(auth, None, "no key configured, none sent (a local vLLM or Ollama)");
    }

    #[tokio::test]
    async fn overload_is_unavailable_and_never_echoes_the_key() {
        let (base, _) = server(StatusCode::SERVICE_UNAVAILABLE).await;
        let (tx, _rx) = mpsc::channel(16);
        let e = OpenAi
            .generate(&candidate("gpt-4.1"), Some(&at(&base, Some("sk-secret")).await), &request(), tx)
            .await
            .expect_err("overloaded");
        assert_eq!(e.code, checkfu_core::Code::Unavailable);
        assert!(!e.message.contains("sk-secret"));
        let (tx, _rx) = mpsc::channel(16);
        let e = OpenAi
            .generate(&candidate("gpt-4.1"), Some(&at("http://127.0.0.1:9", Some("sk-secret")).await), &request(), tx)
            .await
            .expect_err("down");
        assert_eq!(e.code, checkfu_core::Code::Unavailable);
        assert!(!e.message.contains("sk-secret"));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_gateway_falls_back_to_the_next_candidate() {
        let (base, _) = server(StatusCode::TOO_MANY_REQUESTS).await;
        let dir = tempfile::tempdir().expect("tempdir");
        let db = checkfu_store::Db::open(&checkfu_store::Location::SqliteDir(dir.path().into()), "model_gateway", &crate::MIGRATIONS)
            .await
            .expect("db");
        let base_url = base.clone();
        let endpoint = crate::endpoints::Endpoint::new("flaky", Provider::OpenAi, &base_url, Some("sk-x".into()), true).expect("endpoint");
        let endpoints = crate::endpoints::Endpoints::new(None, None, vec![endpoint], false).expect("endpoints");
        let stores = crate::service::Stores {
            routing: Arc::new(crate::store::SqlRoutingStore::new(db.clone())),
            qualifications: Arc::new(crate::store::SqlQualificationStore::new(db)),
        };
        let svc = crate::ModelGatewayService::new(stores, endpoints);
        let first = StoredCandidate {
            provider: "openai".into(),
            model: "gpt-4.1".into(),
            effort: "low".into(),
            connection_id: None,
            endpoint: Some("flaky".into()),
            legacy_base_url: None,
        };
        let second = StoredCandidate {
            provider: "scripted".into(),
            model: "s".into(),
            effort: "low".into(),
            connection_id: None,
            endpoint: None,
            legacy_base_url: None,
        };
        let p = svc.create_profile("env_01m8n5w2381sjtydkyxnv11e90", "fallback", &[first, second]).await.expect("profile");
        let (started, mut started_rx) = mpsc::channel(4);
        let (deltas, _d) = mpsc::channel(64);
        let req =
            ModelRequest { messages: vec![Message { role: Role::User, content: vec![Block::Text("hi".into())] }], ..Default::default() };
        let m = svc.generate(&p.id, &req, started, deltas).await.expect("generate");
        assert_eq!(m.provider, Provider::Scripted);
        assert_eq!(m.output.content, vec![Block::Text("echo: hi".into())]);
        let mut tried = vec![];
        while let Ok((p, _)) = started_rx.try_recv() {
            tried.push(p);
        }
        assert_eq!(tried, vec![Provider::OpenAi, Provider::Scripted]);
    }
}
