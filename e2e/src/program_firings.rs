//! The firing lag of Automations whose graphs mix a Check, a for-each and
//! a join (`bench --only programs`): `n` Automations, each
//! `hook → c (step_check) ┐
//!  hook → e (step_agent forEach items, 2 at a time) ┘→ j (step_join)`,
//! fired by signed ingest at `n / 60` events a second for `seconds` (each
//! Automation once a minute, as the scheduled figure's are). A scheduled
//! firing's event is null, so a for-each over the event has nothing to
//! iterate: signed ingest carries the items. Per firing it takes the lag
//! from the firing's creation to its first child Session's creation (the
//! Check evaluated, the fan-out admitted), and the time to settle.

use crate::automation::ingest_signed;
use crate::{Api, Deployed, Installation, expect, id};
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct ProgramFirings {
    pub automations: usize,
    pub created_in: Duration,
    /// Firing created → its first child Session created, sorted.
    pub lags: Vec<Duration>,
    /// Firing created → settled, sorted (settled firings only).
    pub settles: Vec<Duration>,
    pub fired: usize,
    pub by_state: BTreeMap<String, usize>,
    pub without_child: usize,
}

/// A view's RFC 3339 timestamp `field`, in ms (0 when absent).
pub fn ms_of(v: &Value, field: &str) -> i64 {
    v[field].as_str().and_then(|t| checkfu_core::time::parse_rfc3339(t, 3)).unwrap_or(0)
}

fn since(from: i64, to: i64) -> Duration {
    Duration::from_millis(u64::try_from(to - from).unwrap_or(0))
}

async fn each<T, R, Fut>(items: Vec<T>, clients: usize, op: impl Fn(T) -> Fut) -> Vec<R>
where
    Fut: std::future::Future<Output = R>,
{
    futures_util::stream::iter(items).map(op).buffer_unordered(clients).collect().await
}

/// A graph document of the mixed program.
fn document(i: &Installation, d: &Deployed, svc: &str, k: usize) -> Value {
    let check = json!({"modelRoutingProfileId": d.routing_profile_id, "rule": {"all": ["billing", "tech"]},
        "questions": [{"name": "billing", "question": "require: invoice"}, {"name": "tech", "question": "uncertain: maybe"}]});
    json!({"name": format!("program-{k}"), "environment_id": i.env_id, "service_principal_id": svc,
        "nodes": [{"kind": "trigger", "id": "hook", "trigger": {"kind": "webhook", "dedupe_key": "/id"}},
            {"kind": "step_check", "id": "c", "check": check},
            {"kind": "step_agent", "id": "e", "agent": d.deployment_id, "prompt": "tick {{item}}",
                "forEach": {"items": {"sourceNodeId": "hook", "pointer": "/items"}, "maxItems": 3, "concurrency": 2}},
            {"kind": "step_join", "id": "j", "mode": "all_completed", "collect": {"check": "c", "each": "e"}}],
        "edges": [{"kind": "starts", "from": "hook", "to": "c"}, {"kind": "starts", "from": "hook", "to": "e"},
            {"kind": "then", "from": "c", "to": "j"}, {"kind": "then", "from": "e", "to": "j"}]})
}

pub async fn run(i: &Installation, d: &Deployed, n: usize, seconds: u64) -> ProgramFirings {
    let api = Arc::new(i.admin.clone());
    let svc = id(&api.post("/v1/principals", json!({"kind": "service", "name": "bench-programs"})).await.1);
    let g = json!({"subject": {"kind": "principal", "id": svc}, "permission": "invoke", "resource": {"kind": "agent", "id": d.agent_id}});
    expect(&api.post("/v1/permission-assignments", g).await, 201, None);
    let now = checkfu_core::time::now_ms();
    let q = json!({"provider": "scripted", "model": "scripted-1", "purpose": "decision", "evidence": "the benchmark's own",
        "reviewed_at": checkfu_core::time::rfc3339(now - 60_000), "expires_at": checkfu_core::time::rfc3339(now + 86_400_000)});
    expect(&api.post("/v1/evaluator-qualifications", q).await, 201, None);
    let t = Instant::now();
    let made: Vec<(String, String)> = each((0..n).collect(), 16, |k| {
        let (api, doc) = (api.clone(), document(i, d, &svc, k));
        let admin = i.admin_id.clone();
        async move {
            let g = id(&api.post("/v1/automation-graphs", json!({"created_by_principal_id": admin, "document": doc})).await.1);
            let p = api.post(&format!("/v1/automation-graphs/{g}/plan"), json!({"revision": 1})).await.1;
            let r = api.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
            assert_eq!(r.0.as_u16(), 200, "{}", r.1);
            (r.1["automation_id"].as_str().unwrap_or_default().to_string(), r.1["ingest_secret"].as_str().unwrap_or_default().to_string())
        }
    })
    .await;
    let created_in = t.elapsed();
    // n / 60 events a second, each Automation once a minute.
    let total = (n as u64 * seconds / 60).max(1) as usize;
    let interval = Duration::from_secs_f64(seconds as f64 / total as f64);
    let start = tokio::time::Instant::now();
    let base = api.base.clone();
    let fired: Vec<Option<String>> = each((0..total).collect(), 64, |k| {
        let (auto, secret) = made[k % made.len()].clone();
        let base = base.clone();
        async move {
            tokio::time::sleep_until(start + interval * k as u32).await;
            let body = json!({"id": format!("e{k}"), "t": "invoice", "items": ["a", "b"]}).to_string();
            let r = ingest_signed(&base, &auto, &secret, &body).await;
            (r.0.as_u16() == 201).then(|| id(&r.1))
        }
    })
    .await;
    // Let the last firings finish before reading.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let firings: Vec<Value> = each(fired.into_iter().flatten().collect(), 32, |f: String| {
        let api = api.clone();
        async move { api.get(&format!("/v1/automation-firings/{f}")).await.1 }
    })
    .await;
    let created = session_times(&api, &d.deployment_id).await;
    let mut out = ProgramFirings {
        automations: n,
        created_in,
        lags: vec![],
        settles: vec![],
        fired: firings.len(),
        by_state: BTreeMap::new(),
        without_child: 0,
    };
    for f in &firings {
        *out.by_state.entry(f["state"].as_str().unwrap_or("?").to_string()).or_default() += 1;
        let first = f["child_session_ids"].as_array().into_iter().flatten().filter_map(|c| c.as_str().and_then(|c| created.get(c))).min();
        match first {
            Some(c) => out.lags.push(since(ms_of(f, "created_at"), *c)),
            None => out.without_child += 1,
        }
        if f["settled_at"].is_string() {
            out.settles.push(since(ms_of(f, "created_at"), ms_of(f, "settled_at")));
        }
    }
    out.lags.sort();
    out.settles.sort();
    out
}

/// Every Session of a deployment: its `created_at`, by id (both firing-lag
/// figures time children by it).
pub async fn session_times(api: &Api, deployment: &str) -> HashMap<String, i64> {
    let mut created = HashMap::new();
    let mut page = String::new();
    loop {
        let r = api.get(&format!("/v1/sessions?agent_deployment_id={deployment}&limit=100&page={page}")).await;
        for s in r.1["data"].as_array().into_iter().flatten() {
            created.insert(s["id"].as_str().unwrap_or_default().to_string(), ms_of(s, "created_at"));
        }
        match r.1["next_page"].as_str() {
            Some(p) if !p.is_empty() => page = p.to_string(),
            _ => break,
        }
    }
    created
}
