//! An in-memory Kubernetes API server behind kube's mock service
//! (tower-test), for the reconcilers' scenario tests: objects are kept by
//! path, and it does what the operator relies on — create, get, list by
//! label, replace with `resourceVersion` preconditions, server-side apply
//! (as a deep merge), merge and JSON patches, the status subresource,
//! finalizers holding a deletion, owner-reference garbage collection and
//! events — so a test can delete a child behind the operator's back, make a
//! pod ready as the kubelet would, or fail the next calls.

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

/// `(api prefix, namespace, plural, name)`, e.g. `("api/v1", "ns", "pods", "p")`.
type Key = (String, String, String, String);

#[derive(Default)]
struct State {
    objects: BTreeMap<Key, Value>,
    version: u64,
    failures: VecDeque<u16>,
    requests: Vec<String>,
}

/// The API server; clone it freely (one state).
#[derive(Clone, Default)]
pub struct MockApi {
    state: Arc<Mutex<State>>,
}

/// A path, taken apart.
struct Target {
    prefix: String,
    namespace: String,
    plural: String,
    name: Option<String>,
    status: bool,
    query: BTreeMap<String, String>,
}

fn parse(uri: &http::Uri) -> Option<Target> {
    let segs: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let (prefix, rest) = match *segs.first()? {
        "api" => (segs.get(..2)?.join("/"), &segs[2..]),
        "apis" => (segs.get(..3)?.join("/"), &segs[3..]),
        _ => return None,
    };
    let query = form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()).into_owned().collect();
    match rest {
        ["namespaces", ns, plural, tail @ ..] => Some(Target {
            prefix,
            namespace: ns.to_string(),
            plural: plural.to_string(),
            name: tail.first().map(|s| s.to_string()),
            status: tail.get(1) == Some(&"status"),
            query,
        }),
        [plural] => Some(Target { prefix, namespace: String::new(), plural: plural.to_string(), name: None, status: false, query }),
        _ => None,
    }
}

fn reply(code: StatusCode, body: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut r = Response::new(Body::from(bytes));
    *r.status_mut() = code;
    r.headers_mut().insert("content-type", http::HeaderValue::from_static("application/json"));
    r
}

fn failure(code: u16, reason: &str, message: &str) -> Response<Body> {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": message, "code": code});
    reply(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), &status)
}

/// Objects merge key by key; anything else is replaced.
fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (into, from) => *into = from.clone(),
    }
}

fn matches(obj: &Value, selector: Option<&String>) -> bool {
    let Some(sel) = selector else { return true };
    sel.split(',').filter(|s| !s.is_empty()).all(|pair| match pair.split_once('=') {
        Some((k, v)) => obj["metadata"]["labels"][k].as_str() == Some(v),
        None => !obj["metadata"]["labels"][pair].is_null(),
    })
}

impl MockApi {
    /// The API server and a client of it (default namespace `default`).
    pub fn start() -> (MockApi, kube::Client) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let api = MockApi::default();
        let server = api.clone();
        tokio::spawn(async move {
            while let Some((req, send)) = handle.next_request().await {
                let resp = server.handle(req).await;
                send.send_response(resp);
            }
        });
        (api, kube::Client::new(service, "default"))
    }

    /// The next `n` calls fail with `code`.
    pub fn fail_next(&self, n: usize, code: u16) {
        self.lock().failures.extend(std::iter::repeat_n(code, n));
    }

    /// Every call so far, as `METHOD path`.
    pub fn requests(&self) -> Vec<String> {
        self.lock().requests.clone()
    }

    /// An object, e.g. `get("api/v1", "ns", "pods", "p")`.
    pub fn get(&self, prefix: &str, namespace: &str, plural: &str, name: &str) -> Option<Value> {
        self.lock().objects.get(&(prefix.into(), namespace.into(), plural.into(), name.into())).cloned()
    }

    /// Every object of a kind in a namespace.
    pub fn list(&self, prefix: &str, namespace: &str, plural: &str) -> Vec<Value> {
        let s = self.lock();
        s.objects.iter().filter(|((p, n, k, _), _)| p == prefix && n == namespace && k == plural).map(|(_, v)| v.clone()).collect()
    }

    /// Puts an object as another actor would (a kubelet, a person with
    /// kubectl): created or replaced, with a new resourceVersion.
    pub fn put(&self, prefix: &str, namespace: &str, plural: &str, mut obj: Value) {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let mut s = self.lock();
        s.version += 1;
        let v = s.version;
        if obj["metadata"]["uid"].is_null() {
            obj["metadata"]["uid"] = json!(format!("uid-{v}"));
        }
        obj["metadata"]["resourceVersion"] = json!(v.to_string());
        s.objects.insert((prefix.into(), namespace.into(), plural.into(), name), obj);
    }

    /// Deletes an object as another actor would (finalizers honoured,
    /// children collected).
    pub fn delete(&self, prefix: &str, namespace: &str, plural: &str, name: &str) {
        let mut s = self.lock();
        Self::remove(&mut s, &(prefix.into(), namespace.into(), plural.into(), name.into()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks for deletion (finalizers) or removes, with the children.
    fn remove(s: &mut State, key: &Key) -> Option<Value> {
        let obj = s.objects.get_mut(key)?;
        let held = obj["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
        if held {
            if obj["metadata"]["deletionTimestamp"].is_null() {
                obj["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            return Some(obj.clone());
        }
        let gone = s.objects.remove(key)?;
        let uid = gone["metadata"]["uid"].clone();
        let children: Vec<Key> = s
            .objects
            .iter()
            .filter(|(_, o)| o["metadata"]["ownerReferences"].as_array().is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid)))
            .map(|(k, _)| k.clone())
            .collect();
        for child in children {
            Self::remove(s, &child);
        }
        Some(gone)
    }

    async fn handle(&self, req: Request<Body>) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let bytes = body.collect_bytes().await.unwrap_or_default();
        let content_type = parts.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        let mut s = self.lock();
        s.requests.push(format!("{} {}", parts.method, parts.uri.path()));
        if let Some(code) = s.failures.pop_front() {
            return failure(code, "InternalError", "injected failure");
        }
        let Some(t) = parse(&parts.uri) else { return failure(404, "NotFound", "no such path") };
        let body: Value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        let key = |name: &str| (t.prefix.clone(), t.namespace.clone(), t.plural.clone(), name.to_string());
        s.version += 1;
        let version = s.version.to_string();
        match (parts.method, t.name.clone()) {
            (Method::GET, Some(name)) => match s.objects.get(&key(&name)) {
                Some(o) => reply(StatusCode::OK, o),
                None => failure(404, "NotFound", &format!("{} {name} not found", t.plural)),
            },
            (Method::GET, None) => {
                let items: Vec<Value> = s
                    .objects
                    .iter()
                    .filter(|((p, n, k, _), o)| {
                        *p == t.prefix
                            && (t.namespace.is_empty() || *n == t.namespace)
                            && *k == t.plural
                            && matches(o, t.query.get("labelSelector"))
                    })
                    .map(|(_, o)| o.clone())
                    .collect();
                reply(
                    StatusCode::OK,
                    &json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": version}, "items": items}),
                )
            }
            (Method::POST, None) => {
                let mut obj = body;
                let name = match obj["metadata"]["name"].as_str() {
                    Some(n) => n.to_string(),
                    None => {
                        let n = format!("{}{version}", obj["metadata"]["generateName"].as_str().unwrap_or("obj-"));
                        obj["metadata"]["name"] = json!(n);
                        n
                    }
                };
                if s.objects.contains_key(&key(&name)) {
                    return failure(409, "AlreadyExists", &format!("{} {name} already exists", t.plural));
                }
                obj["metadata"]["uid"] = json!(format!("uid-{version}"));
                obj["metadata"]["resourceVersion"] = json!(version);
                obj["metadata"]["generation"] = json!(1);
                obj["metadata"]["namespace"] = json!(t.namespace);
                s.objects.insert(key(&name), obj.clone());
                reply(StatusCode::CREATED, &obj)
            }
            (Method::PUT, Some(name)) => {
                let Some(existing) = s.objects.get(&key(&name)).cloned() else {
                    return failure(404, "NotFound", &format!("{} {name} not found", t.plural));
                };
                let given = &body["metadata"]["resourceVersion"];
                if !given.is_null() && *given != existing["metadata"]["resourceVersion"] {
                    return failure(409, "Conflict", "the object has been modified; please apply your changes to the latest version");
                }
                let mut obj = body;
                obj["metadata"]["uid"] = existing["metadata"]["uid"].clone();
                obj["metadata"]["resourceVersion"] = json!(version);
                s.objects.insert(key(&name), obj.clone());
                reply(StatusCode::OK, &obj)
            }
            (Method::PATCH, Some(name)) => {
                let existing = s.objects.get(&key(&name)).cloned();
                let apply = content_type.starts_with("application/apply-patch");
                let mut obj = match (existing.clone(), apply) {
                    (Some(o), _) => o,
                    (None, true) if !t.status => {
                        json!({"metadata": {"name": name, "namespace": t.namespace, "uid": format!("uid-{version}"), "generation": 1}})
                    }
                    (None, _) => return failure(404, "NotFound", &format!("{} {name} not found", t.plural)),
                };
                let before_spec = obj["spec"].clone();
                if content_type.starts_with("application/json-patch") {
                    let Ok(mut p) = serde_json::from_value::<json_patch::Patch>(body) else {
                        return failure(400, "BadRequest", "not a JSON patch");
                    };
                    // As the API server does: a missing field tests as null.
                    p.0.retain(|op| match op {
                        json_patch::PatchOperation::Test(t) => !(t.value.is_null() && obj.pointer(t.path.as_str()).is_none()),
                        _ => true,
                    });
                    if json_patch::patch(&mut obj, &p).is_err() {
                        return failure(422, "Invalid", "the JSON patch does not apply");
                    }
                } else if t.status {
                    let status = body["status"].clone();
                    if apply { obj["status"] = status } else { json_patch::merge(&mut obj["status"], &status) }
                } else if apply {
                    let mut b = body;
                    if let Some(m) = b.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("resourceVersion");
                        m.remove("uid");
                    }
                    merge(&mut obj, &b);
                } else {
                    json_patch::merge(&mut obj, &body);
                }
                if obj["spec"] != before_spec && existing.is_some() {
                    let g = obj["metadata"]["generation"].as_i64().unwrap_or(1);
                    obj["metadata"]["generation"] = json!(g + 1);
                }
                obj["metadata"]["resourceVersion"] = json!(version);
                let deleting = !obj["metadata"]["deletionTimestamp"].is_null();
                let held = obj["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
                s.objects.insert(key(&name), obj.clone());
                if deleting && !held {
                    Self::remove(&mut s, &key(&name));
                }
                reply(StatusCode::OK, &obj)
            }
            (Method::DELETE, Some(name)) => match Self::remove(&mut s, &key(&name)) {
                Some(o) => reply(StatusCode::OK, &o),
                None => failure(404, "NotFound", &format!("{} {name} not found", t.plural)),
            },
            _ => failure(405, "MethodNotAllowed", "not supported by the mock API"),
        }
    }
}
