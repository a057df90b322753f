//! The production topology on real services: PostgreSQL, a Kafka-protocol
//! broker (tansu) and Redis behind separate processes — two gateways, two
//! sessions replicas (each with a runner) and one of every other role. The
//! journey runs with its stream on the other gateway; a broker stopped
//! mid-journey delays webhook deliveries but loses none; a sessions replica
//! killed with SIGKILL mid-Run is taken over and the Session settles with a
//! gapless log; a revoke, a disabled Principal and a removed grant or
//! membership made through one gateway count at once on the other. With
//! both sessions replicas in each gateway's `[endpoints]`, the creates
//! spread over the two and move to the survivor when one dies. Runs
//! when `CHECKFU_TEST_POSTGRES_URL`, `CHECKFU_TEST_REDIS_URL` and
//! `CHECKFU_TANSU_BIN` are set (CI sets them).
#![cfg(test)]

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use checkfu_e2e::procs::{Proc, broker, fresh_database, serve};
use checkfu_e2e::sse::Stream;
use checkfu_e2e::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Seen = Arc<Mutex<Vec<Value>>>;

async fn receiver() -> (Seen, String) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let app = Router::new().route(
        "/hook",
        post(move |body: Bytes| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push(serde_json::from_slice(&body).unwrap());
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}/hook", listener.local_addr().unwrap().port());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (seen, url)
}

fn delivered(seen: &Seen, session: &str) -> Vec<String> {
    seen.lock().unwrap().iter().filter(|v| v["data"]["session_id"] == session).map(|v| v["type"].as_str().unwrap().to_string()).collect()
}

async fn wait_delivered(seen: &Seen, session: &str, types: &[&str], within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        let got = delivered(seen, session);
        if types.iter().all(|t| got.iter().any(|g| g == t)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("webhooks for {session} never all arrived: want {types:?}, got {:?}", delivered(seen, session));
}

/// The shared part of both topologies: PostgreSQL, Redis and a tansu
/// broker, one control process (governance, model-gateway, webhooks) and
/// two sessions replicas, each with a runner.
struct Mesh {
    dir: tempfile::TempDir,
    db: String,
    kafka: Proc,
    env: Vec<(&'static str, String)>,
    key_file: std::path::PathBuf,
    control: (Proc, checkfu_e2e::procs::Addrs),
    runner_ids: [String; 2],
    replicas: Vec<(Proc, checkfu_e2e::procs::Addrs)>,
}

impl Mesh {
    /// `None` when a service is missing and the run does not require them.
    async fn start(what: &str, name: &str, extra_env: &[(&'static str, &str)]) -> Option<Mesh> {
        let (Some(pg), Some(redis), Some(_)) = (
            checkfu_core::testing::postgres(what),
            checkfu_core::testing::service("CHECKFU_TEST_REDIS_URL", what),
            checkfu_core::testing::service("CHECKFU_TANSU_BIN", what),
        ) else {
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let db = fresh_database(&pg, name).await;
        let (kafka, brokers) = broker(dir.path()).expect("a tansu broker");
        let key_file = dir.path().join("admin.key");
        let mut env =
            vec![("CHECKFU_KAFKA_BROKERS", brokers), ("CHECKFU_REDIS_URL", redis), ("CHECKFU_ALLOW_PRIVATE_TARGETS", "true".into())];
        env.extend(extra_env.iter().map(|(k, v)| (*k, v.to_string())));
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let control = serve(
            dir.path(),
            "control",
            "governance,model-gateway,webhooks",
            &format!("storage = \"{db}\"\nbootstrap_key_file = \"{}\"\n", key_file.display()),
            &pairs,
        );
        let runner_ids = [checkfu_core::id::new_id("rnr"), checkfu_core::id::new_id("rnr")];
        let mut replicas = vec![];
        for (i, rid) in runner_ids.iter().enumerate() {
            let ws = dir.path().join(format!("ws{i}"));
            let mut env = pairs.clone();
            env.push(("CHECKFU_RUNNER_ID", rid));
            env.push(("CHECKFU_WORKSPACES", ws.to_str().unwrap()));
            replicas.push(serve(
                dir.path(),
                &format!("sessions-{i}"),
                "sessions,runner,capability-gateway,scheduler,memory",
                &format!("storage = \"{db}\"\n[endpoints]\nmodel-gateway = \"{c}\"\ngovernance = \"{c}\"\n", c = control.1.mesh()),
                &env,
            ));
        }
        Some(Mesh { dir, db, kafka, env, key_file, control, runner_ids, replicas })
    }

    /// A gateway process `name` whose sessions-side roles are at `sessions`
    /// (one replica's mesh address, or a list).
    fn gateway(&self, name: &str, sessions: &str) -> (Proc, checkfu_e2e::procs::Addrs) {
        let cfg = format!(
            "storage = \"{db}\"\n[endpoints]\ngovernance = \"{c}\"\nmodel-gateway = \"{c}\"\nwebhooks = \"{c}\"\nsessions = \"{s}\"\ncapability-gateway = \"{s}\"\nscheduler = \"{s}\"\nmemory = \"{s}\"\n",
            db = self.db,
            s = sessions,
            c = self.control.1.mesh()
        );
        let pairs: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        serve(self.dir.path(), name, "gateway", &cfg, &pairs)
    }

    fn admin_key(&self) -> String {
        std::fs::read_to_string(&self.key_file).unwrap().trim().to_string()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_mesh_survives_a_broker_stop_and_a_replica_kill() {
    let extra = [("CHECKFU_RUN_LEASE_MS", "4000"), ("CHECKFU_RUNNER_HEARTBEAT_MS", "1000")];
    let Some(mut mesh) = Mesh::start("the distributed e2e (PostgreSQL, Redis, tansu)", "dist", &extra).await else { return };
    // Each gateway on one sessions replica.
    let gateways: Vec<_> = (0..2).map(|i| mesh.gateway(&format!("gateway-{i}"), mesh.replicas[i].1.mesh())).collect();
    let (g0, g1) = (gateways[0].1.public.clone(), gateways[1].1.public.clone());
    wait_ready(&g0).await;
    wait_ready(&g1).await;
    let key = mesh.admin_key();
    let a0 = Api::new(&g0, &key);
    let a1 = Api::new(&g1, &key);
    let envs = a0.get("/v1/environments").await;
    let env_id = id(&envs.1["data"][0]);
    let me = a0.get("/v1/principals").await.1["data"][0]["id"].as_str().unwrap().to_string();

    // 1. The journey through one gateway, its stream through the other.
    run_journey(&g0, &g1, &a0, &env_id).await;

    // Each gateway keeps keys and permission answers while governance's
    // epoch in Redis stands: a change made through one gateway counts on
    // the other for every request that starts after it was answered.
    checkfu_e2e::revocation::every_change_counts_for_every_later_request(&a0, &g1, &env_id).await;
    // And the catalog rows a create reads, which the sessions replicas
    // announce to the same epoch.
    checkfu_e2e::catalog_changes::every_catalog_change_counts_for_the_next_create(&a0, &a1, &env_id).await;

    // 2. Webhooks keep every event across a broker stop.
    let (seen, url) = receiver().await;
    let ep = a0
        .post("/v1/webhook-endpoints", json!({"url": url, "event_types": ["session.status_*", "run.completed"], "environment_id": env_id}))
        .await;
    expect(&ep, 201, None);
    let d = deploy(&a0, &env_id, json!({"tools": [{"type": "builtin", "name": "bash"}]})).await;
    let before = a0.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "before")]})).await;
    let before = id(&before.1);
    settle(&a0, &before).await;
    wait_delivered(&seen, &before, &["session.status_running", "session.status_idle", "run.completed"], Duration::from_secs(60)).await;

    // An Automation subscribed to new memory stores, read by both scheduler
    // replicas from Kafka: one firing per event (api.md §18.10).
    let subs = id(&a0.post("/v1/principals", json!({"kind": "service", "name": "subs"})).await.1);
    for (permission, kind, resource) in [("invoke", "agent", &d.agent_id), ("read", "environment", &env_id)] {
        let g = json!({"subject": {"kind": "principal", "id": subs}, "permission": permission, "resource": {"kind": kind, "id": resource}});
        expect(&a0.post("/v1/permission-assignments", g).await, 201, None);
    }
    let auto = a0
        .post(
            "/v1/automations",
            json!({"name": "stores", "environment_id": env_id, "service_principal_id": subs,
            "triggers": [{"kind": "subscription", "event_types": ["memory_store.created"]}],
            "target": {"kind": "agent", "agent_deployment_id": d.deployment_id, "prompt": "A new store"}}),
        )
        .await;
    expect(&auto, 201, None);
    assert_eq!(auto.1["status"], "active", "{}", auto.1);
    let auto = id(&auto.1);
    let new_store = |api: Api, name: &'static str| {
        let (env_id, me) = (env_id.clone(), me.clone());
        async move {
            let r = api
                .post("/v1/memory-stores", json!({"environment_id": env_id, "name": name, "owner": {"kind": "principal", "id": me}}))
                .await;
            expect(&r, 201, None);
            id(&r.1)
        }
    };
    let first_store = new_store(a0.clone(), "before").await;
    let subscribed = |n: usize, within: Duration| {
        let a0 = a0.clone();
        let auto = auto.clone();
        async move { checkfu_e2e::automation::wait_firings(&a0, &auto, n, within).await }
    };
    assert_eq!(subscribed(1, Duration::from_secs(60)).await.len(), 1);

    mesh.kafka.signal("STOP");
    // Published once the broker is back: it fires then.
    let stopped_store = new_store(a1.clone(), "during").await;
    let during = a1.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "during")]})).await;
    expect(&during, 201, None);
    let during = id(&during.1);
    assert_eq!(settle(&a1, &during).await["stop_reason"]["type"], "end_turn", "work goes on with the broker stopped");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(delivered(&seen, &during).is_empty(), "nothing can pass a stopped broker");
    mesh.kafka.signal("CONT");
    wait_delivered(&seen, &during, &["session.status_running", "session.status_idle", "run.completed"], Duration::from_secs(90)).await;
    // Nothing is delivered twice once the broker is back (the receiver
    // always answered 200, so no retry was owed).
    tokio::time::sleep(Duration::from_secs(3)).await;
    for s in [&before, &during] {
        let mut kinds = delivered(&seen, s);
        kinds.sort();
        let n = kinds.len();
        kinds.dedup();
        assert_eq!(kinds.len(), n, "{s}: an event was delivered twice: {:?}", delivered(&seen, s));
    }
    let ids: Vec<String> = seen.lock().unwrap().iter().map(|v| v["id"].as_str().unwrap().to_string()).collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "a delivery id arrived twice");
    let fired = subscribed(2, Duration::from_secs(90)).await;
    let mut stores: Vec<String> = fired.iter().map(|f| f["event"]["data"]["resource_id"].as_str().unwrap().to_string()).collect();
    stores.sort();
    let mut expected = vec![first_store.clone(), stopped_store.clone()];
    expected.sort();
    assert_eq!(stores, expected, "each store fired once, the one made while the broker was stopped too: {fired:?}");

    // 3. SIGKILL the sessions replica running a Run: another takes it over.
    let allow = json!({"environment_id": env_id, "name": "bash-ok", "rules": [
        {"subject": {"kind": "*", "id_glob": "*"}, "resource": {"kind": "tool", "id_glob": "bash"}, "permission_glob": "*", "disposition": "allow"}
    ]});
    expect(&a0.post("/v1/action-policies", allow).await, 201, None);
    let s = a0.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    let sid = id(&s.1);
    let mut stream = Stream::open(&g1, &key, &format!("/v1/sessions/{sid}/events/stream"), None).await;
    expect(
        &a0.post(
            &format!("/v1/sessions/{sid}/events"),
            message(&me, "call bash {\"command\": \"sleep 3; echo survived | tee -a proof.txt\"}"),
        )
        .await,
        201,
        None,
    );
    stream.until(Duration::from_secs(30), |f| f.event == "run.action_authorized").await;
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&mesh.db).await.unwrap();
    let holder: String = sqlx::query_scalar("SELECT runner_id FROM sessions.runs WHERE session_id = $1 AND status = 'running'")
        .bind(&sid)
        .fetch_one(&pool)
        .await
        .unwrap();
    let victim = mesh.runner_ids.iter().position(|r| *r == holder).expect("a replica's runner holds the Run");
    mesh.replicas[victim].0.kill_hard();
    let survivor = if victim == 0 { &a1 } else { &a0 };
    let mut settled = Value::Null;
    for _ in 0..300 {
        settled = survivor.get(&format!("/v1/sessions/{sid}")).await.1;
        if settled["status"] == "idle" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(settled["stop_reason"]["type"], "end_turn", "the Run was taken over and settled: {settled}");
    let all = events(survivor, &sid).await;
    assert_gapless(&all);
    let uses: Vec<&Value> = all.iter().filter(|e| e["type"] == "agent.tool_use").collect();
    assert_eq!(uses.len(), 1);
    let answers =
        all.iter().filter(|e| e["type"] == "agent.tool_result" && e["payload"]["tool_use_id"] == uses[0]["payload"]["tool_use_id"]).count();
    assert_eq!(answers, 1, "answered exactly once");
    assert_eq!(all.iter().filter(|e| e["type"] == "run.created").count(), 1, "the same Run resumed");
    let new_holder: String =
        sqlx::query_scalar("SELECT runner_id FROM sessions.runs WHERE session_id = $1").bind(&sid).fetch_one(&pool).await.unwrap();
    assert_ne!(new_holder, holder, "the other replica settled it");
    // The orphaned call ran again on the survivor: its effect is there.
    // (Whether the victim got as far as writing its own copy depends on
    // where the kill landed: a call is run at least once, never answered
    // twice.)
    let result = all.iter().find(|e| e["type"] == "agent.tool_result").unwrap();
    assert!(result["payload"]["content"].to_string().contains("survived"), "{result}");
    let survivor_ws = mesh.dir.path().join(format!("ws{}", 1 - victim)).join(&sid).join("proof.txt");
    assert_eq!(std::fs::read_to_string(&survivor_ws).unwrap(), "survived\n", "the call ran (once) on the survivor");
    // The subscription kept its one firing per event through the replica's
    // death (its partitions moved to the survivor), and goes on there.
    let last_store = {
        let r = survivor
            .post("/v1/memory-stores", json!({"environment_id": env_id, "name": "after", "owner": {"kind": "principal", "id": me}}))
            .await;
        expect(&r, 201, None);
        id(&r.1)
    };
    let fired = checkfu_e2e::automation::wait_firings(survivor, &auto, 3, Duration::from_secs(90)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let fired_now = checkfu_e2e::automation::firings(survivor, &auto).await;
    assert_eq!(fired_now.len(), 3, "one firing per event, none twice: {fired:?}");
    assert!(fired_now.iter().any(|f| f["event"]["data"]["resource_id"] == last_store.as_str()));
}

/// How many calls to `route` the process at `public` has served on the
/// mesh, from its `/metrics`.
async fn served(public: &str, route: &str) -> u64 {
    let text = reqwest::get(format!("{public}/metrics")).await.unwrap().text().await.unwrap();
    let series = format!("checkfu_mesh_requests_total{{route=\"{route}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&series)).map_or(0, |n| n.trim().parse().unwrap())
}

const CREATE: &str = "/checkfu.sessions.v1.SessionsService/CreateSession";

/// Two gateways each reach both sessions replicas through one
/// `[endpoints]` list (what a headless Service's name resolves to): the
/// creates spread over the two — each serves a share — and every created
/// Session settles with a gapless log. A replica killed with SIGKILL leaves
/// the callers' channels within a resolving round, after which every call
/// lands on the survivor and nothing created before is lost.
#[tokio::test(flavor = "multi_thread")]
async fn work_spreads_over_every_replica_and_survives_losing_one() {
    let Some(mut mesh) = Mesh::start("the spread e2e (PostgreSQL, Redis, tansu)", "spread", &[]).await else { return };
    // Each gateway on both sessions replicas.
    let both = format!("{}, {}", mesh.replicas[0].1.mesh(), mesh.replicas[1].1.mesh());
    let gateways: Vec<_> = (0..2).map(|i| mesh.gateway(&format!("gateway-{i}"), &both)).collect();
    for (_, g) in &gateways {
        wait_ready(&g.public).await;
    }
    let key = mesh.admin_key();
    let apis: Vec<Api> = gateways.iter().map(|(_, g)| Api::new(&g.public, &key)).collect();
    let env_id = id(&apis[0].get("/v1/environments").await.1["data"][0]);
    let me = apis[0].get("/v1/principals").await.1["data"][0]["id"].as_str().unwrap().to_string();
    let d = deploy(&apis[0], &env_id, json!({"instructions": "Be brief."})).await;
    let before = [served(&mesh.replicas[0].1.public, CREATE).await, served(&mesh.replicas[1].1.public, CREATE).await];

    const N: u64 = 40;
    let mut created = vec![];
    for i in 0..N {
        let api = &apis[i as usize % 2];
        let s = api.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "hello")]})).await;
        expect(&s, 201, None);
        created.push(id(&s.1));
    }
    let shares =
        [served(&mesh.replicas[0].1.public, CREATE).await - before[0], served(&mesh.replicas[1].1.public, CREATE).await - before[1]];
    assert_eq!(shares[0] + shares[1], N, "every create reached one replica once: {shares:?}");
    // Each side of a fair coin, 40 times: fewer than 8 happens once in ~10⁴ runs.
    assert!(shares.iter().all(|s| *s >= N / 5), "each replica serves a share of the creates: {shares:?}");
    for (i, sid) in created.iter().enumerate() {
        let api = &apis[(i + 1) % 2];
        assert_eq!(settle(api, sid).await["stop_reason"]["type"], "end_turn", "{sid}");
        let all = events(api, sid).await;
        assert_gapless(&all);
        assert!(all.iter().any(|e| e["type"] == "agent.message"), "{sid} was answered");
    }

    // Lose a replica: once its callers have probed it (a resolving round),
    // every create lands on the survivor.
    mesh.replicas[1].0.kill_hard();
    let survivor_before = served(&mesh.replicas[0].1.public, CREATE).await;
    let deadline = tokio::time::Instant::now() + checkfu_node::peers::RESOLVE_EVERY * 4;
    let mut in_a_row = 0;
    while in_a_row < 20 {
        assert!(tokio::time::Instant::now() < deadline, "calls still fail long after the replica died");
        let s = apis[in_a_row % 2]
            .post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&me, "after")]}))
            .await;
        if s.0 == 201 {
            in_a_row += 1;
            created.push(id(&s.1));
        } else {
            in_a_row = 0;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert!(served(&mesh.replicas[0].1.public, CREATE).await >= survivor_before + 20, "the survivor served them");
    // Nothing created before the kill is lost, and the survivor answers
    // what was created after it.
    for sid in &created {
        let s = settle(&apis[0], sid).await;
        assert_eq!(s["stop_reason"]["type"], "end_turn", "{sid}: {s}");
        assert_gapless(&events(&apis[1], sid).await);
    }
}
