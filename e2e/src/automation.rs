//! The fixture of the Automations acceptance checks (api.md §12.11) and
//! the helpers their tests share: a service Principal with `invoke` on a
//! deployed Agent, a receiver of `automation.*` webhooks, and signed ingest.

use crate::*;
use serde_json::{Value, json};
use std::time::Duration;

/// The fixture of §12.11: service Principal `svc` holding `invoke` on the
/// published Agent `a` (deployment `dep_a`), and a receiver of `automation.*`.
pub struct Fixture {
    pub p: Platform,
    pub svc: String,
    pub invoke: String,
    pub d: Deployed,
    pub hooks: Deliveries,
    pub dir: tempfile::TempDir,
}

pub async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let a = &p.admin;
    let svc = id(&a.post("/v1/principals", json!({"kind": "service", "name": "svc"})).await.1);
    let d = deploy(a, &p.env_id, json!({})).await;
    let invoke = grant(&p, &svc, &d.agent_id).await;
    let (hooks, url) = hook_receiver().await;
    let ep = a.post("/v1/webhook-endpoints", json!({"environment_id": p.env_id, "url": url, "event_types": ["automation.created", "automation.paused", "automation.resumed", "automation.deleted"]})).await;
    expect(&ep, 201, None);
    Fixture { p, svc, invoke, d, hooks, dir }
}

/// A `checkfu up` process of its own (for the crash tests, which kill it)
/// with a service Principal allowed to invoke a deployed Agent.
pub struct Crashable {
    pub proc: crate::procs::Proc,
    pub base: String,
    pub key: String,
    pub i: Installation,
    pub svc: String,
    pub d: Deployed,
}

/// `draft` is the deployed Agent's (`{}` for none).
pub async fn crashable(dir: &std::path::Path, draft: Value) -> Crashable {
    let (proc, base) = crate::procs::up(dir);
    wait_ready(&base).await;
    let key = std::fs::read_to_string(dir.join("admin.key")).unwrap().trim().to_string();
    let i = Installation::discover(&base, &key).await;
    let a = &i.admin;
    let svc = id(&a.post("/v1/principals", json!({"kind": "service", "name": "svc"})).await.1);
    let d = deploy(a, &i.env_id, draft).await;
    let g = json!({"subject": {"kind": "principal", "id": svc}, "permission": "invoke", "resource": {"kind": "agent", "id": d.agent_id}});
    expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    Crashable { proc, base, key, i, svc, d }
}

pub async fn grant(p: &Platform, svc: &str, agent: &str) -> String {
    let g = json!({"subject": {"kind": "principal", "id": svc}, "permission": "invoke", "resource": {"kind": "agent", "id": agent}});
    let r = p.admin.post("/v1/permission-assignments", g).await;
    expect(&r, 201, None);
    id(&r.1)
}

pub fn a0(dep: &str) -> Value {
    json!({"kind": "agent", "agent_deployment_id": dep, "prompt": "Summarize {{event.title}}"})
}

pub async fn create(f: &Fixture, name: &str, target: Value) -> Reply {
    f.p.admin
        .post(
            "/v1/automations",
            json!({"name": name, "environment_id": f.p.env_id, "service_principal_id": f.svc, "triggers": [], "target": target}),
        )
        .await
}

/// The firing once it left `running` (or as it is after 30 s).
pub async fn settled(api: &Api, firing: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        last = api.get(&format!("/v1/automation-firings/{firing}")).await.1;
        if last["state"] != "running" {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last
}

pub async fn wait_for_hook(hooks: &Deliveries, t: &str, resource: &str) {
    for _ in 0..300 {
        let seen: Vec<Value> = hooks.lock().unwrap().iter().filter_map(|b| serde_json::from_str(b).ok()).collect();
        if seen.iter().any(|b| b["type"] == t && b["data"]["resource_id"] == resource) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no {t} webhook for {resource}");
}

pub fn check<'a>(readiness: &'a Value, name: &str) -> &'a Value {
    readiness["checks"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap()
}

impl Fixture {
    /// Runs the built `checkfu` binary against the installation as the
    /// admin; its stdout (the command must succeed).
    pub fn cli(&self, args: &[&str]) -> String {
        let out = self.run_cli(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Runs a command that must fail; what it said on stderr.
    pub fn cli_fails(&self, args: &[&str]) -> String {
        let out = self.run_cli(args);
        assert!(!out.status.success(), "{args:?} succeeded: {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stderr).to_string()
    }

    fn run_cli(&self, args: &[&str]) -> std::process::Output {
        let key = std::fs::read_to_string(self.dir.path().join("admin.key")).unwrap().trim().to_string();
        std::process::Command::new(crate::procs::binary()).args(args).args(["--server", &self.p.base, "--key", &key]).output().unwrap()
    }

    /// Publishes version 2 of `a` and moves `dep_a` to it (its revision 2).
    pub async fn publish_revision_2(&self) {
        let (a, d) = (&self.p.admin, &self.d);
        expect(&a.post(&format!("/v1/agents/{}/versions", d.agent_id), json!({})).await, 201, None);
        let body =
            json!({"agent_version": 2, "model_routing_profile_id": d.routing_profile_id, "sandbox_profile_id": d.sandbox_profile_id});
        expect(&a.post(&format!("/v1/agent-deployments/{}/revisions", d.deployment_id), body).await, 201, None);
    }
}

/// Creates an Automation with these triggers (and optional secret).
pub async fn create_with(f: &Fixture, name: &str, triggers: Value, target: Value, secret: Option<&str>) -> Reply {
    let mut body =
        json!({"name": name, "environment_id": f.p.env_id, "service_principal_id": f.svc, "triggers": triggers, "target": target});
    if let Some(s) = secret {
        body["ingest_secret"] = json!(s);
    }
    f.p.admin.post("/v1/automations", body).await
}

/// `t=<t>,v1=hex(HMAC-SHA256(secret, "<t>.<body>"))`.
pub fn sig(secret: &str, t: i64, body: &[u8]) -> String {
    checkfu_core::signature::sign(secret, t, body)
}

pub fn now_s() -> i64 {
    checkfu_core::time::now_ms() / 1000
}

/// POSTs `body` to the Automation's ingest URL with no API key, the given
/// signature header (none when empty) and `Checkfu-Version: 1`.
pub async fn ingest(base: &str, automation: &str, body: &[u8], signature: &str) -> Reply {
    ingest_with(base, automation, body, &[("checkfu-signature", signature), ("checkfu-version", "1"), ("content-type", "application/json")])
        .await
}

pub async fn ingest_with(base: &str, automation: &str, body: &[u8], headers: &[(&str, &str)]) -> Reply {
    let mut rb = reqwest::Client::new().post(format!("{base}/v1/ingest/automations/{automation}")).body(body.to_vec());
    for (k, v) in headers {
        if !v.is_empty() {
            rb = rb.header(*k, *v);
        }
    }
    let r = rb.send().await.unwrap();
    let status = r.status();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)), headers)
}

/// Signed with `secret` now.
pub async fn ingest_signed(base: &str, automation: &str, secret: &str, body: &str) -> Reply {
    ingest(base, automation, body.as_bytes(), &sig(secret, now_s(), body.as_bytes())).await
}

/// An Automation's firings, oldest first.
pub async fn firings(api: &Api, automation: &str) -> Vec<Value> {
    let r = api.get(&format!("/v1/automations/{automation}/firings?limit=100")).await;
    let mut v = r.1["data"].as_array().cloned().unwrap_or_default();
    v.reverse();
    v
}

/// Waits until the Automation has at least `n` firings (up to `within`).
pub async fn wait_firings(api: &Api, automation: &str, n: usize, within: Duration) -> Vec<Value> {
    let end = std::time::Instant::now() + within;
    loop {
        let f = firings(api, automation).await;
        if f.len() >= n || std::time::Instant::now() > end {
            return f;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What admission records before it asks for a child — a manual firing of
/// `automation`, a minute old — in the scheduler's store of the stopped
/// installation in `dir`: the state a crash in between leaves. The caller
/// inserts it with the child it was about to ask for.
pub async fn crashed_firing(
    dir: &std::path::Path,
    automation: &str,
    env: &str,
    svc: &str,
) -> (checkfu_scheduler::store::SqlSchedulerStore, checkfu_scheduler::firing::Firing) {
    use checkfu_core::id::{FiringId, TypedId};
    use checkfu_scheduler::model::{FiringSource, FiringState, Usage};
    let db = checkfu_store::Db::open(&checkfu_store::Location::SqliteDir(dir.into()), "scheduler", &checkfu_scheduler::MIGRATIONS)
        .await
        .unwrap();
    let firing = checkfu_scheduler::firing::Firing {
        id: FiringId::mint(),
        automation_id: TypedId::stored(automation.to_string()),
        environment_id: TypedId::stored(env.to_string()),
        source: FiringSource::Manual,
        event: json!({"title": "after the crash"}),
        scheduled_for_ms: 0,
        dedupe_value: String::new(),
        actor_principal_id: svc.to_string(),
        automation_version: 1,
        state: FiringState::Running,
        child_session_ids: vec![],
        usage: Usage::default(),
        error: None,
        created_ms: checkfu_core::time::now_ms() - 60_000,
        settled_ms: 0,
        program: None,
        graph: Value::Null,
        webhook_source_id: String::new(),
        version: 0,
    };
    (checkfu_scheduler::store::SqlSchedulerStore::new(db), firing)
}

/// A graph document in the fixture's Environment for `svc`.
pub fn graph_document(f: &Fixture, name: &str, nodes: Value, edges: Value) -> Value {
    json!({"name": name, "environment_id": f.p.env_id, "service_principal_id": f.svc, "nodes": nodes, "edges": edges})
}

/// A webhook trigger node `hook`, deduplicating on `/id`.
pub fn hook_node() -> Value {
    json!({"kind": "trigger", "id": "hook", "trigger": {"kind": "webhook", "dedupe_key": "/id"}})
}

pub fn graph_edge(kind: &str, from: &str, to: &str) -> Value {
    json!({"kind": kind, "from": from, "to": to})
}

/// Saves a graph; its id.
pub async fn save_graph(f: &Fixture, doc: Value) -> String {
    let r = f.p.admin.post("/v1/automation-graphs", json!({"created_by_principal_id": f.p.admin_id, "document": doc})).await;
    expect(&r, 201, None);
    id(&r.1)
}

/// The codes of a saved graph's plan errors.
pub async fn plan_errors(f: &Fixture, graph: &str) -> Vec<String> {
    let r = f.p.admin.post(&format!("/v1/automation-graphs/{graph}/plan"), json!({"revision": 1})).await;
    expect(&r, 200, None);
    r.1["errors"].as_array().into_iter().flatten().map(|e| e["code"].as_str().unwrap_or_default().to_string()).collect()
}

/// Saves, plans (no blockers) and applies a graph: its Automation as
/// applied and the ingest secret.
pub async fn apply_graph(f: &Fixture, doc: Value) -> (Value, String) {
    let a = &f.p.admin;
    let g = save_graph(f, doc).await;
    let p = a.post(&format!("/v1/automation-graphs/{g}/plan"), json!({"revision": 1})).await.1;
    assert_eq!(p["blockers"], json!([]), "{p}");
    let r = a.post(&format!("/v1/automation-graphs/{g}/apply"), json!({"revision": 1, "plan_sha256": p["plan_sha256"]})).await;
    expect(&r, 200, None);
    let auto = a.get(&format!("/v1/automations/{}", r.1["automation_id"].as_str().unwrap())).await.1;
    (auto, r.1["ingest_secret"].as_str().unwrap_or_default().to_string())
}

/// Fires through signed ingest: the firing's id.
pub async fn fire_signed(f: &Fixture, automation: &str, secret: &str, body: Value) -> String {
    let r = ingest_signed(&f.p.base, automation, secret, &body.to_string()).await;
    expect(&r, 201, None);
    id(&r.1)
}

/// A firing's step by id.
pub fn firing_step<'a>(firing: &'a Value, step: &str) -> &'a Value {
    firing["program"]["steps"].as_array().and_then(|s| s.iter().find(|s| s["id"] == step)).unwrap_or(&Value::Null)
}

/// `svc`'s Session on `dep`, idle after one Run; `extra` adds fields to its
/// creation.
pub async fn idle_session(a: &Api, svc: &str, dep: &str, extra: Value) -> String {
    let mut body = json!({"agent_deployment_id": dep, "principal_id": svc,
        "initial_events": [input(svc, "user.message", json!({"content": [{"type": "text", "text": "first"}]}))]});
    if let (Some(b), Some(x)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(x.clone());
    }
    let s = a.post("/v1/sessions", body).await;
    expect(&s, 201, None);
    let sid = id(&s.1);
    settle(a, &sid).await;
    sid
}

/// Answers, as `svc`, the `lookup` call a child parked on with `text`.
pub async fn answer_lookup(a: &Api, svc: &str, child: &str, text: &str) {
    assert_eq!(settle(a, child).await["stop_reason"]["type"], "requires_action");
    let evs = events(a, child).await;
    let use_id = evs.iter().find(|e| e["type"] == "agent.custom_tool_use").unwrap()["payload"]["custom_tool_use_id"].clone();
    let result = input(svc, "user.custom_tool_result", json!({"custom_tool_use_id": use_id, "content": [{"type": "text", "text": text}]}));
    expect(&a.post(&format!("/v1/sessions/{child}/events"), result).await, 201, None);
}
