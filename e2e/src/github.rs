//! A local stand-in of GitHub's repository-hooks REST API (api.md §18.9's
//! `G`): it records every request it is sent — method, path, the
//! `Authorization` header and the JSON body — and keeps the hooks made, so
//! a test can drop them (as a person deleting a hook on github.com would)
//! or make it refuse every call with 403.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One request the stand-in was sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub authorization: String,
    pub body: Value,
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    /// hook id → its config, per `owner/name`.
    hooks: BTreeMap<u64, Value>,
    next: u64,
    forbidden: bool,
}

#[derive(Clone)]
pub struct GitHub {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl GitHub {
    pub async fn start() -> GitHub {
        use axum::extract::{Path, State as S};
        use axum::http::{HeaderMap, Method, StatusCode};
        use axum::response::IntoResponse;
        let state: Arc<Mutex<State>> = Arc::default();
        let handle = |st: S<Arc<Mutex<State>>>, method: Method, Path(path): Path<String>, headers: HeaderMap, body: String| async move {
            let mut s = st.0.lock().unwrap();
            let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
            let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            s.seen.push(Seen { method: method.to_string(), path: format!("/{path}"), authorization, body: body.clone() });
            if s.forbidden {
                return (StatusCode::FORBIDDEN, axum::Json(json!({"message": "Resource not accessible by integration"}))).into_response();
            }
            let parts: Vec<&str> = path.split('/').collect();
            match (method.as_str(), parts.as_slice()) {
                ("POST", ["repos", _, _, "hooks"]) => {
                    s.next += 1;
                    let id = s.next;
                    s.hooks.insert(id, body["config"].clone());
                    (StatusCode::CREATED, axum::Json(json!({"id": id, "active": true, "config": {"url": body["config"]["url"]}})))
                        .into_response()
                }
                ("GET", ["repos", _, _, "hooks", id]) => match id.parse::<u64>().ok().filter(|i| s.hooks.contains_key(i)) {
                    Some(i) => (StatusCode::OK, axum::Json(json!({"id": i, "active": true}))).into_response(),
                    None => (StatusCode::NOT_FOUND, axum::Json(json!({"message": "Not Found"}))).into_response(),
                },
                ("DELETE", ["repos", _, _, "hooks", id]) => match id.parse::<u64>().ok().and_then(|i| s.hooks.remove(&i)) {
                    Some(_) => StatusCode::NO_CONTENT.into_response(),
                    None => (StatusCode::NOT_FOUND, axum::Json(json!({"message": "Not Found"}))).into_response(),
                },
                _ => (StatusCode::NOT_FOUND, axum::Json(json!({"message": "Not Found"}))).into_response(),
            }
        };
        let app = axum::Router::new().route("/{*path}", axum::routing::any(handle)).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        GitHub { url, state }
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// The config (`{url, content_type, secret, …}`) of each hook that exists.
    pub fn hooks(&self) -> BTreeMap<u64, Value> {
        self.state.lock().unwrap().hooks.clone()
    }

    /// Deletes every hook, as someone removing them on the provider would.
    pub fn drop_hooks(&self) {
        self.state.lock().unwrap().hooks.clear();
    }

    /// Answers every request 403 (or stops doing so).
    pub fn forbid(&self, on: bool) {
        self.state.lock().unwrap().forbidden = on;
    }
}

/// GitHub's headers for a delivery of `event` signed with `secret`.
pub fn delivery_headers(secret: &str, delivery: &str, event: &str, body: &[u8]) -> Vec<(String, String)> {
    vec![
        ("content-type".into(), "application/json".into()),
        ("x-github-delivery".into(), delivery.into()),
        ("x-github-event".into(), event.into()),
        ("x-hub-signature-256".into(), format!("sha256={}", checkfu_core::signature::body_mac_hex(secret, body))),
    ]
}
