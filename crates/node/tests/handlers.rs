//! The gateway's handlers without a network: every role but the runner is
//! assembled in this process from the role table, and requests go straight
//! into the router (`tower::ServiceExt::oneshot`), reaching the other roles
//! through their in-process transports. Fast, and exact about status codes,
//! the error envelope and replays.
#![cfg(test)]

use axum::body::Body;
use checkfu_node::config::{Config, Env, Mode};
use checkfu_node::roles::{Assembly, Started, TABLE};
use checkfu_node::{NodeOptions, Role};
use http::{Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

struct Api {
    router: axum::Router,
    key: String,
    _dir: tempfile::TempDir,
}

async fn api() -> Api {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::from([("CHECKFU_DATA_DIR", dir.path().to_str().unwrap())]);
    let config = Config::load(Mode::Up, None, &env, &[]).unwrap();
    let roles = Role::ALL.into_iter().filter(|r| *r != Role::Runner).collect();
    let opts = NodeOptions::from_config(&config, roles, true).unwrap();
    let mut node = Assembly::new(&opts, tokio_util::sync::CancellationToken::new()).await.unwrap();
    for play in TABLE.iter().filter(|p| opts.roles.contains(&p.role())) {
        play.start(&mut node).await.unwrap();
    }
    let Started { api, .. } = node.finish();
    let router = checkfu_gateway::finish(api.expect("the gateway role serves the API"));
    let key = std::fs::read_to_string(config.bootstrap_key_file()).unwrap().trim().to_string();
    Api { router, key, _dir: dir }
}

impl Api {
    async fn call(&self, method: &str, path: &str, key: Option<&str>, body: Option<Value>, idem: Option<&str>) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(k) = key {
            req = req.header("authorization", format!("Bearer {k}"));
        }
        if let Some(i) = idem {
            req = req.header("idempotency-key", i);
        }
        let body = match body {
            Some(b) => {
                req = req.header("content-type", "application/json");
                Body::from(b.to_string())
            }
            None => Body::empty(),
        };
        let mut req = req.body(body).unwrap();
        req.extensions_mut().insert(axum::extract::ConnectInfo(std::net::SocketAddr::from(([127, 0, 0, 1], 9))));
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call("GET", path, Some(&self.key.clone()), None, None).await
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call("POST", path, Some(&self.key.clone()), Some(body), None).await
    }
}

fn error_type(v: &Value) -> &str {
    v["error"]["type"].as_str().unwrap_or_else(|| panic!("not the error envelope: {v}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn authentication_and_the_error_envelope() {
    let api = api().await;
    let (status, body) = api.call("GET", "/v1/environments", None, None, None).await;
    assert_eq!((status, error_type(&body)), (StatusCode::UNAUTHORIZED, "auth.missing_key"), "{body}");
    assert!(body["request_id"].is_string(), "every error carries its request id");
    let (status, body) = api.call("GET", "/v1/environments", Some("ck_not_a_key"), None, None).await;
    assert_eq!((status, error_type(&body)), (StatusCode::UNAUTHORIZED, "auth.invalid_key"), "{body}");

    let (status, body) = api.get("/v1/environments").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["data"][0]["name"], "default");

    let (status, body) = api.get("/v1/nothing-here").await;
    assert_eq!((status, error_type(&body)), (StatusCode::NOT_FOUND, "not_found"), "{body}");
    let (status, body) = api.call("DELETE", "/v1/environments", Some(&api.key), None, None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_a_400_naming_the_field() {
    let api = api().await;
    let (status, body) = api.post("/v1/principals", json!({"kind": "robot", "name": "x"})).await;
    assert_eq!((status, error_type(&body)), (StatusCode::BAD_REQUEST, "validation.invalid"), "{body}");
    assert_eq!(body["error"]["details"]["field"], "kind", "{body}");

    let (status, body) = api.post("/v1/principals", json!({"kind": "human"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a missing name: {body}");

    let (status, body) = api.call("POST", "/v1/principals", Some(&api.key), None, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "no body at all: {body}");

    let (status, body) = api.get("/v1/sessions/not-an-id").await;
    assert_eq!((status, error_type(&body)), (StatusCode::BAD_REQUEST, "validation.invalid"), "a malformed id: {body}");
    let (status, body) = api.get("/v1/sessions/sess_00000000000000000000000000").await;
    assert_eq!((status, error_type(&body)), (StatusCode::NOT_FOUND, "not_found"), "a well-formed id of nothing: {body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idempotent_create_replays_and_refuses_a_reused_key() {
    let api = api().await;
    let key = api.key.clone();
    let first = api.call("POST", "/v1/principals", Some(&key), Some(json!({"kind": "service", "name": "bot"})), Some("k-1")).await;
    assert_eq!(first.0, StatusCode::CREATED, "{}", first.1);
    let again = api.call("POST", "/v1/principals", Some(&key), Some(json!({"kind": "service", "name": "bot"})), Some("k-1")).await;
    assert_eq!((again.0, &again.1["id"]), (StatusCode::CREATED, &first.1["id"]), "the same answer, not a second principal");
    let (_, listed) = api.get("/v1/principals?limit=100").await;
    assert_eq!(listed["data"].as_array().unwrap().iter().filter(|p| p["name"] == "bot").count(), 1);
    let other = api.call("POST", "/v1/principals", Some(&key), Some(json!({"kind": "service", "name": "other"})), Some("k-1")).await;
    assert_eq!((other.0, error_type(&other.1)), (StatusCode::CONFLICT, "idempotency.key_reused"), "{}", other.1);
}
