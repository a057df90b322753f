//! The revocation contract, driven through the public API while the
//! gateways keep decisions (services/gateway/src/decisions.rs): a request
//! that starts after a revoking call has been answered is decided on the
//! new rows — a revoked key, a disabled Principal, a removed grant or group
//! membership, a disabled Environment — and a new grant counts as soon as
//! it is answered too. Each
//! change is made while clients keep asking through `reader` (another
//! gateway replica, or the same one), so their answers are the kept ones
//! until the change.

use crate::{Api, id};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Concurrent clients asking while a change is made.
const CLIENTS: usize = 4;

/// Requests each side of a change must see before the test goes on.
const ENOUGH: usize = 40;

/// Requests after a change that makes a key invalid: two such changes,
/// each overshot by the clients in flight, stay under the address throttle.
const REFUSED: usize = 6;

/// Every kind of change, each against a Principal of its own. `admin`
/// makes the changes; `reader_base` is the gateway the clients ask.
pub async fn every_change_counts_for_every_later_request(admin: &Api, reader_base: &str, env: &str) {
    let path = format!("/v1/environments/{env}");
    // The admin's key passes the reader's address throttle, should the
    // refusals below set it off.
    assert_eq!(Api::new(reader_base, &admin.key).get(&path).await.0, StatusCode::OK);

    // A removed grant: 403.
    let (p, _, key) = principal_with_key(admin, "ungranted").await;
    let grant = grant_read(admin, "principal", &p, env).await;
    let reader = Api::new(reader_base, &key);
    race(&reader, &path, StatusCode::OK, &[StatusCode::FORBIDDEN], ENOUGH, || async {
        let r = admin.delete(&format!("/v1/permission-assignments/{grant}")).await;
        assert_eq!(r.0, StatusCode::OK, "deleting the grant: {}", r.1);
    })
    .await;

    // A removed group membership: 403.
    let (p, _, key) = principal_with_key(admin, "ex-member").await;
    let group = id(&created(admin.post("/v1/groups", json!({"name": format!("readers-{p}")})).await, "a group"));
    created(admin.post(&format!("/v1/groups/{group}/members"), json!({"principal_id": p})).await, "a membership");
    grant_read(admin, "group", &group, env).await;
    let reader = Api::new(reader_base, &key);
    race(&reader, &path, StatusCode::OK, &[StatusCode::FORBIDDEN], ENOUGH, || async {
        let r = admin.delete(&format!("/v1/groups/{group}/members/{p}")).await;
        assert!(r.0.is_success(), "removing the member: {}", r.1);
    })
    .await;

    // A new grant: refusals are kept too, and a grant ends them at once.
    let (p, _, key) = principal_with_key(admin, "granted").await;
    let reader = Api::new(reader_base, &key);
    race(&reader, &path, StatusCode::FORBIDDEN, &[StatusCode::OK], ENOUGH, || async {
        grant_read(admin, "principal", &p, env).await;
    })
    .await;

    // A disabled Environment: no Session starts in it (409).
    let name = format!("to-disable-{}", checkfu_core::id::new_id("x"));
    let doomed = id(&created(admin.post("/v1/environments", json!({"name": name})).await, "an environment"));
    let deployment = crate::deploy(admin, &doomed, json!({})).await.deployment_id;
    let start = move |api: Api, path: String| {
        let body = json!({"agent_deployment_id": deployment});
        async move { api.post(&path, body).await.0 }
    };
    let reader = Api::new(reader_base, &admin.key);
    race_with(&reader, "/v1/sessions", start, StatusCode::CREATED, &[StatusCode::CONFLICT], ENOUGH, || async {
        let r = admin.post(&format!("/v1/environments/{doomed}"), json!({"disabled": true})).await;
        assert_eq!(r.0, StatusCode::OK, "disabling the environment: {}", r.1);
    })
    .await;

    // Last, and fewer requests after: every 401 counts against the
    // client's address, which is throttled (429) past 20 in 10 s for every
    // key not seen lately — a revoked key, then a disabled Principal.
    let refused = [StatusCode::UNAUTHORIZED, StatusCode::TOO_MANY_REQUESTS];
    let (p, key_id, key) = principal_with_key(admin, "revoked-key").await;
    grant_read(admin, "principal", &p, env).await;
    let (p2, _, key2) = principal_with_key(admin, "disabled").await;
    grant_read(admin, "principal", &p2, env).await;
    // A key that authenticated lately passes its address's throttle.
    assert_eq!(Api::new(reader_base, &key2).get(&path).await.0, StatusCode::OK);
    let reader = Api::new(reader_base, &key);
    race(&reader, &path, StatusCode::OK, &refused, REFUSED, || async {
        let r = admin.delete(&format!("/v1/api-keys/{key_id}")).await;
        assert_eq!(r.0, StatusCode::OK, "revoking the key: {}", r.1);
    })
    .await;
    let reader = Api::new(reader_base, &key2);
    race(&reader, &path, StatusCode::OK, &refused, REFUSED, || async {
        let r = admin.post(&format!("/v1/principals/{p2}"), json!({"disabled": true})).await;
        assert_eq!(r.0, StatusCode::OK, "disabling the principal: {}", r.1);
    })
    .await;
}

/// Clients ask `path` through `reader` until [`ENOUGH`] answers were
/// `before`; then `change` is made, and every request that started after it
/// returned must be answered one of `after` (and `after_count` of them are
/// made, give or take the clients in flight).
pub async fn race<F, Fut>(reader: &Api, path: &str, before: StatusCode, after: &[StatusCode], after_count: usize, change: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()>,
{
    let ask = |api: Api, path: String| async move { api.get(&path).await.0 };
    race_with(reader, path, ask, before, after, after_count, change).await
}

/// [`race`] with the clients' request made by `ask(reader, path)`.
pub async fn race_with<A, AFut, F, Fut>(
    reader: &Api,
    path: &str,
    ask: A,
    before: StatusCode,
    after: &[StatusCode],
    after_count: usize,
    change: F,
) where
    A: Fn(Api, String) -> AFut + Clone + Send + 'static,
    AFut: Future<Output = StatusCode> + Send,
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()>,
{
    let seen: Arc<Mutex<Vec<(Instant, StatusCode)>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = vec![];
    for _ in 0..CLIENTS {
        let (reader, path, seen, stop, ask) = (reader.clone(), path.to_string(), seen.clone(), stop.clone(), ask.clone());
        clients.push(tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let started = Instant::now();
                let status = ask(reader.clone(), path.clone()).await;
                seen.lock().unwrap().push((started, status));
                // Well under the per-Principal rate limit.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }));
    }
    let count = |pred: &dyn Fn(&(Instant, StatusCode)) -> bool| seen.lock().unwrap().iter().filter(|s| pred(s)).count();
    wait_until(|| count(&|(_, s)| *s == before) >= ENOUGH, &format!("{ENOUGH} answers {before} before the change")).await;
    change().await;
    let returned = Instant::now();
    wait_until(|| count(&|(t, _)| *t > returned) >= after_count, &format!("{after_count} requests after the change")).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for c in clients {
        c.await.unwrap();
    }
    let seen = seen.lock().unwrap();
    let wrong: Vec<_> =
        seen.iter().filter(|(t, s)| *t > returned && !after.contains(s)).map(|(t, s)| (t.duration_since(returned), *s)).collect();
    assert!(
        wrong.is_empty(),
        "{path}: requests that started after the change returned were answered as before it (time after, status): {wrong:?}"
    );
    assert!(seen.iter().any(|(t, s)| *t < returned && *s == before), "the answer before the change was {before}");
}

async fn wait_until(mut done: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "never saw {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn created(r: crate::Reply, what: &str) -> Value {
    assert!(r.0.is_success(), "creating {what}: {} {}", r.0, r.1);
    r.1
}

/// A new service Principal, one API key of its (id, secret).
async fn principal_with_key(admin: &Api, name: &str) -> (String, String, String) {
    let p = id(&created(admin.post("/v1/principals", json!({"kind": "service", "name": name})).await, "a principal"));
    let key = created(admin.post(&format!("/v1/principals/{p}/api-keys"), json!({"name": name})).await, "an API key");
    (p, id(&key), key["secret"].as_str().expect("the secret, once").to_string())
}

/// `read` on the Environment for the subject; the grant's id.
async fn grant_read(admin: &Api, subject_kind: &str, subject_id: &str, env: &str) -> String {
    let body =
        json!({"subject": {"kind": subject_kind, "id": subject_id}, "permission": "read", "resource": {"kind": "environment", "id": env}});
    id(&created(admin.post("/v1/permission-assignments", body).await, "a grant"))
}
