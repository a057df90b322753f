//! The conformance suite for [`SessionsStore`]: SQLite always, PostgreSQL when
//! `CHECKFU_TEST_POSTGRES_URL` is set (a fresh schema per run).

use super::ClaimGuard;
use super::*;
use checkfu_core::testing::tid;
use checkfu_store::{Db, Location};
use serde_json::json;
use std::sync::Arc;

async fn backends() -> Vec<(&'static str, Arc<dyn SessionsStore>, Option<tempfile::TempDir>)> {
    let mut out: Vec<(&'static str, Arc<dyn SessionsStore>, Option<tempfile::TempDir>)> = vec![];
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(&Location::SqliteDir(dir.path().into()), "sessions", &crate::MIGRATIONS).await.expect("sqlite");
    out.push(("sqlite", Arc::new(SqlSessionsStore::new(db)), Some(dir)));
    if let Some(url) = checkfu_core::testing::postgres("the sessions store on PostgreSQL") {
        let schema = checkfu_core::testing::fresh_schema("sess");
        let db = Db::open(&Location::Postgres(url), &schema, &crate::MIGRATIONS).await.expect("postgres");
        out.push(("postgres", Arc::new(SqlSessionsStore::new(db)), None));
    }
    out
}

fn pins() -> Pins {
    Pins {
        agent_version: 1,
        release_sha256: "r".into(),
        harness: BUILTIN_HARNESS.into(),
        model_routing_profile_id: tid("mrp_01jx0000000000000000000001"),
        sandbox_profile_id: tid("sbp_01jx0000000000000000000001"),
        sandbox_profile_revision: 1,
        execution: Execution::Managed,
    }
}

pub(crate) fn session(id: &str) -> Session {
    Session {
        id: tid(id),
        environment_id: tid("env_1"),
        agent_id: tid("agt_1"),
        deployment_id: tid("dep_1"),
        deployment_revision: 1,
        principal_id: tid("prin_1"),
        status: SessionStatus::Idle,
        stop_reason: None,
        title: "t".into(),
        metadata: json!({"k": "v"}),
        budget: None,
        usage: Usage::default(),
        selection: Selection::default(),
        pins: pins(),
        last_seq: 0,
        last_user_message_seq: 0,
        outcome: None,
        threads: vec![],
        connection_vault_ids: vec!["cvlt_1".into()],
        delivery_screen: Some(checkfu_core::delivery_screen::DeliveryScreen {
            model_routing_profile_id: "mrp_1".into(),
            tier: None,
            instructions: "block: X1".into(),
            on_failure: checkfu_core::delivery_screen::OnFailure::FailOpen,
        }),
        created_ms: 1,
        updated_ms: 1,
        version: 1,
    }
}

pub(crate) fn ev(t: &str) -> NewEvent {
    NewEvent {
        id: checkfu_core::id::EventId::mint(),
        event_type: t.into(),
        run_id: None,
        thread_id: None,
        origin_event_id: None,
        authored_by: json!(null),
        caused_by: json!({"kind": "principal", "id": "prin_1"}),
        payload: json!({"n": t}),
        created_ms: 5,
    }
}

pub(crate) fn run(id: &str, session: &str, status: RunStatus, expires: i64) -> Run {
    Run {
        id: tid(id),
        session_id: tid(session),
        status,
        stop_reason: None,
        execution_pins: ExecutionPins { agent_id: "agt_a".into(), agent_version: 1, ..ExecutionPins::default() },
        usage: Usage::default(),
        start_seq: 1,
        lease_id: "lease_a".into(),
        generation: 1,
        lease_expires_ms: expires,
        runner_id: "r1".into(),
        created_ms: 3,
        completed_ms: None,
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
        placement: String::new(),
        thread_id: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_store_conformance() {
    for (name, s, _guard) in backends().await {
        catalog_compare_and_set(&*s).await;
        session_log_is_gapless(&*s).await;
        concurrent_commits_never_share_a_seq(s.clone()).await;
        a_failing_change_takes_no_other_down(s.clone()).await;
        runs_leases(&*s).await;
        budgets_travel_with_their_session(&*s).await;
        runners_pair_once_and_claim_only_their_pool(&*s).await;
        files_replace_by_path_and_sandboxes_expire(&*s).await;
        uploads_expire_and_sessions_keep_their_copies(&*s).await;
        skills_keep_one_active_name_and_immutable_versions(s.clone()).await;
        threads_travel_with_their_session_and_views_filter_the_log(&*s).await;
        sessions_list_in_either_order(&*s).await;
        work_items_are_one_per_session_and_compare_and_set(s.clone()).await;
        eprintln!("sessions store conformance passed on {name}");
    }
}

async fn sessions_list_in_either_order(s: &dyn SessionsStore) {
    for id in ["sess_l1", "sess_l2", "sess_l3"] {
        let se = Session { environment_id: tid("env_list"), ..session(id) };
        s.insert_session(&se, &[ev("session.created")], &[]).await.expect("insert");
    }
    let f = |ascending| SessionFilter { environment_ids: vec!["env_list".into()], ascending, ..Default::default() };
    let ids = |rows: Vec<Session>| rows.into_iter().map(|s| s.id.to_string()).collect::<Vec<_>>();
    let first = PageRequest::standard(2, "").expect("page");
    assert_eq!(ids(s.list_sessions(&f(false), &first).await.expect("desc")), ["sess_l3", "sess_l2", "sess_l1"]);
    assert_eq!(ids(s.list_sessions(&f(true), &first).await.expect("asc")), ["sess_l1", "sess_l2", "sess_l3"]);
    let after = PageRequest { limit: 2, before_id: Some("sess_l1".into()) };
    assert_eq!(ids(s.list_sessions(&f(true), &after).await.expect("asc after")), ["sess_l2", "sess_l3"]);
    let before = PageRequest { limit: 2, before_id: Some("sess_l3".into()) };
    assert_eq!(ids(s.list_sessions(&f(false), &before).await.expect("desc before")), ["sess_l2", "sess_l1"]);
    let listed = s.list_sessions(&f(false), &first).await.expect("desc");
    assert_eq!(listed[0].connection_vault_ids, ["cvlt_1"], "the vaults it was created with travel with it");
    assert_eq!(listed[0].delivery_screen.as_ref().map(|s| s.instructions.as_str()), Some("block: X1"), "so does its screen");
}

async fn work_items_are_one_per_session_and_compare_and_set(s: Arc<dyn SessionsStore>) {
    let profile: checkfu_core::id::SandboxProfileId = tid("sbp_01jxwork000000000000000001");
    let item = |session: &str, at: i64| Work::new(profile.clone(), tid("env_1"), tid(session), at);
    // One live item per Session, whoever enqueues first; racing enqueues
    // all answer the same item.
    let first = s.enqueue_work(&item("sess_w1", 10)).await.expect("enqueue");
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let s = s.clone();
            let w = item("sess_w1", 11);
            tokio::spawn(async move { s.enqueue_work(&w).await.expect("enqueue again").id })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.expect("task"), first.id, "the live item is the answer");
    }
    let second = s.enqueue_work(&item("sess_w2", 20)).await.expect("another session");
    assert_ne!(second.id, first.id);
    // Claimable: queued, oldest first; a delivered one only once it is old enough.
    let ids = |rows: Vec<Work>| rows.into_iter().map(|w| w.id.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(s.claimable_work(profile.as_str(), 100, 10).await.expect("claimable")), [first.id.to_string(), second.id.to_string()]);
    let mut d = first.clone();
    d.rev = 1;
    d.generation = 1;
    d.delivered_ms = Some(50);
    d.runner_id = Some("rnr_1".into());
    assert!(s.deliver_work(&d, 0, "tok_a").await.expect("deliver"));
    assert!(!s.deliver_work(&Work { rev: 1, generation: 1, ..first.clone() }, 0, "tok_b").await.expect("raced"), "a stale rev loses");
    assert_eq!(s.work_token("tok_a").await.expect("token"), Some((first.id.clone(), 1)));
    assert_eq!(s.work_token("tok_b").await.expect("token"), None, "the losing delivery's token was never recorded");
    assert_eq!(ids(s.claimable_work(profile.as_str(), 40, 10).await.expect("claimable")), [second.id.to_string()]);
    assert_eq!(ids(s.claimable_work(profile.as_str(), 60, 10).await.expect("reclaimable")), [first.id.to_string(), second.id.to_string()]);
    // Held with a lease: lapsed once it is past.
    let mut held = s.get_work(&first.id).await.expect("get").expect("found");
    assert_eq!((held.generation, held.runner_id.as_deref(), held.delivered_ms), (1, Some("rnr_1"), Some(50)));
    held.state = WorkState::Active;
    held.lease_expires_ms = Some(1_000);
    held.heartbeat_ms = Some(900);
    held.metadata.insert("host".into(), "a".into());
    held.rev = 2;
    assert!(s.update_work(&held, 1).await.expect("update"));
    assert!(!s.update_work(&held, 1).await.expect("stale"), "compare-and-set on rev");
    assert!(s.lapsed_work(999, 10).await.expect("lapsed").is_empty());
    let lapsed = s.lapsed_work(1_001, 10).await.expect("lapsed");
    assert_eq!(ids(lapsed.clone()), [first.id.to_string()]);
    assert_eq!(lapsed[0].metadata.get("host").map(String::as_str), Some("a"), "metadata round-trips");
    assert_eq!(s.live_work(&tid("sess_w1")).await.expect("live").map(|w| w.id), Some(first.id.clone()));
    // Stopped: no longer live; the Session may have a new one.
    let mut stopped = held.clone();
    stopped.stop(1_100);
    stopped.rev = 3;
    assert!(s.update_work(&stopped, 2).await.expect("stop"));
    assert_eq!(s.live_work(&tid("sess_w1")).await.expect("live"), None);
    let fresh = s.enqueue_work(&item("sess_w1", 1_200)).await.expect("a new item");
    assert_ne!(fresh.id, first.id);
    let page = PageRequest::standard(10, "").expect("page");
    assert_eq!(s.list_work(profile.as_str(), &page).await.expect("list").len(), 3, "every item of the profile, stopped too");
    assert!(s.list_work("sbp_other", &page).await.expect("list").is_empty());
}

async fn catalog_compare_and_set(s: &dyn SessionsStore) {
    let a = Agent {
        id: tid("agt_1"),
        environment_id: tid("env_1"),
        name: "a".into(),
        draft: AgentDefinition::default(),
        latest_version: 0,
        version: 1,
        archived: false,
        created_ms: 1,
        updated_ms: 1,
    };
    s.insert_agent(&a).await.expect("insert");
    let edited = Agent { name: "b".into(), version: 2, ..a.clone() };
    assert!(s.update_agent(&edited, 1).await.expect("cas"));
    assert!(!s.update_agent(&edited, 1).await.expect("cas"), "stale version refused");
    let v = AgentVersion {
        agent_id: tid("agt_1"),
        environment_id: tid("env_1"),
        version: 1,
        release_sha256: "h".into(),
        definition: AgentDefinition::default(),
        published_by: "prin_1".into(),
        published_ms: 2,
    };
    assert!(s.publish_agent_version(&v, 2).await.expect("publish"));
    assert!(!s.publish_agent_version(&v, 2).await.expect("publish"), "a second publish of version 1 is refused");
    let got = s.get_agent(&tid("agt_1")).await.expect("get").expect("exists");
    assert_eq!((got.latest_version, got.version), (1, 3));
    assert_eq!(s.get_agent_version(&tid("agt_1"), 1).await.expect("get"), Some(v));
    assert_eq!(s.list_agent_versions(&tid("agt_1"), None, 10).await.expect("list").len(), 1);

    let p = SandboxProfile {
        id: tid("sbp_01jx0000000000000000000001"),
        environment_id: tid("env_1"),
        name: "default".into(),
        latest_revision: 1,
        created_ms: 1,
        archived_ms: None,
    };
    let spec = SandboxSpec::compile(json!({"image": "debian"})).expect("spec");
    s.insert_sandbox_profile(
        &p,
        &SandboxRevision { profile_id: tid("sbp_01jx0000000000000000000001"), revision: 1, spec: spec.clone(), created_ms: 1 },
    )
    .await
    .expect("insert");
    let r2 = SandboxRevision { profile_id: tid("sbp_01jx0000000000000000000001"), revision: 2, spec, created_ms: 2 };
    assert!(s.insert_sandbox_revision(&r2).await.expect("rev"));
    assert!(!s.insert_sandbox_revision(&r2).await.expect("rev"), "revisions are immutable");
    assert_eq!(s.get_sandbox_profile(&tid("sbp_01jx0000000000000000000001")).await.expect("get").expect("exists").latest_revision, 2);
    let archived = s.archive_sandbox_profile(&tid("sbp_01jx0000000000000000000001"), 5).await.expect("archive").expect("exists");
    assert_eq!(archived.archived_ms, Some(5));
    let again = s.archive_sandbox_profile(&tid("sbp_01jx0000000000000000000001"), 9).await.expect("archive").expect("exists");
    assert_eq!(again.archived_ms, Some(5), "archiving twice keeps the first time");
    assert!(s.archive_sandbox_profile(&tid("sbp_01jx0000000000000000000009"), 9).await.expect("archive").is_none());

    let d = Deployment {
        id: tid("dep_1"),
        environment_id: tid("env_1"),
        key: "prod".into(),
        agent_id: tid("agt_1"),
        revision: 1,
        pins: pins(),
        created_ms: 1,
        updated_ms: 1,
    };
    s.insert_deployment(&d).await.expect("insert");
    assert!(s.insert_deployment(&Deployment { id: tid("dep_2"), ..d.clone() }).await.is_err(), "keys unique per environment");
    let d2 = Deployment { revision: 2, pins: Pins { sandbox_profile_revision: 2, ..pins() }, ..d.clone() };
    assert!(s.insert_deployment_revision(&d2).await.expect("rev"));
    assert_eq!(s.get_deployment(&tid("dep_1")).await.expect("get"), Some(d2));
    let page = PageRequest::standard(10, "").expect("page");
    assert_eq!(s.list_deployments(&["env_1".into()], &page).await.expect("list").len(), 1);
    assert!(s.list_deployments(&["env_2".into()], &page).await.expect("list").is_empty());
}

async fn session_log_is_gapless(s: &dyn SessionsStore) {
    let se = session("sess_1");
    let first = s.insert_session(&se, &[ev("session.created"), ev("user.message")], &[]).await.expect("insert");
    assert_eq!(first.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
    let stored = s.get_session(&tid("sess_1")).await.expect("get").expect("exists");
    assert_eq!(stored.last_seq, 2);
    let change = Change {
        expected_version: stored.version,
        session: Session { status: SessionStatus::Running, ..stored.clone() },
        events: vec![ev("run.created"), ev("session.status_running")],
        runs: vec![],
        claim_guard: None,
        flush: true,
        outcome_changed: false,
    };
    let (after, events) = s.commit(change.clone()).await.expect("commit").expect("applied");
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![3, 4]);
    assert_eq!((after.last_seq, after.version, after.status), (4, stored.version + 1, SessionStatus::Running));
    assert!(s.commit(change).await.expect("commit").is_none(), "a change decided from a stale read is refused");
    let all = s.list_events(&tid("sess_1"), &View::All, 0, 100, &[]).await.expect("list");
    assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
    let typed = s.list_events(&tid("sess_1"), &View::All, 0, 100, &["user.message".into(), "run.created".into()]).await.expect("list");
    assert_eq!(typed.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2, 3]);
    assert_eq!(s.list_events(&tid("sess_1"), &View::All, 2, 1, &[]).await.expect("list")[0].seq, 3);
    assert_eq!(all[1].payload, json!({"n": "user.message"}));
}

/// Child threads live on the Session's row; each Run names its thread; a
/// view returns its thread's events (the primary's adds the cross-posts).
async fn threads_travel_with_their_session_and_views_filter_the_log(s: &dyn SessionsStore) {
    let child = "sthr_01jx00000000000000000000c1".to_string();
    let mut se = session("sess_t");
    se.threads = vec![SessionThread {
        id: child.clone(),
        agent: ThreadAgent { agent_id: "agt_b".into(), version: 1, release_sha256: None, name: "B".into() },
        status: SessionStatus::Running,
        stop_reason: None,
        usage: Usage { input_tokens: 1, output_tokens: 2, model_spend_micro_usd: 3 },
        last_user_message_seq: 2,
        queued: 0,
        spawned_by_tool_use_id: "toolu_1".into(),
        created_ms: 1,
        updated_ms: 2,
        archived_ms: None,
    }];
    let primary_run = run("run_tp", "sess_t", RunStatus::Queued, 0);
    let child_run = Run { thread_id: Some(child.clone()), ..run("run_tc", "sess_t", RunStatus::Queued, 0) };
    let own = ev("agent.message");
    let in_child = NewEvent { thread_id: Some(child.clone()), ..ev("agent.message") };
    let posted =
        NewEvent { thread_id: Some(child.clone()), origin_event_id: Some(in_child.id.clone()), ..ev("session.thread_status_idle") };
    s.insert_session(&se, &[own, in_child, posted], &[primary_run, child_run]).await.expect("insert");
    assert_eq!(s.get_session(&tid("sess_t")).await.expect("get").expect("exists").threads, se.threads);
    assert_eq!(s.active_run(&tid("sess_t")).await.expect("active").map(|r| r.id), Some(tid("run_tp")), "the primary's");
    let children = s.child_runs(&tid("sess_t")).await.expect("children");
    assert_eq!(children.iter().map(|r| (r.id.as_str(), r.thread_id.clone())).collect::<Vec<_>>(), vec![("run_tc", Some(child.clone()))]);
    let seqs = |v: Vec<Event>| v.iter().map(|e| e.seq).collect::<Vec<_>>();
    let view = |v: View| async move { seqs(s.list_events(&tid("sess_t"), &v, 0, 100, &[]).await.expect("list")) };
    assert_eq!(view(View::All).await, vec![1, 2, 3]);
    assert_eq!(view(View::Primary).await, vec![1, 3], "the primary's own and the cross-post");
    assert_eq!(view(View::PrimaryOwn).await, vec![1]);
    assert_eq!(view(View::Child(child.clone())).await, vec![2]);
    let typed = s.list_events(&tid("sess_t"), &View::Primary, 0, 100, &["session.thread_status_idle".into()]).await.expect("list");
    assert_eq!((typed.len(), typed[0].origin_event_id.is_some()), (1, true));
}

async fn concurrent_commits_never_share_a_seq(s: Arc<dyn SessionsStore>) {
    s.insert_session(&session("sess_2"), &[ev("session.created")], &[]).await.expect("insert");
    let mut tasks = vec![];
    for _ in 0..8 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                loop {
                    let cur = s.get_session(&tid("sess_2")).await.expect("get").expect("exists");
                    let c = Change {
                        expected_version: cur.version,
                        session: cur,
                        events: vec![ev("agent.message")],
                        runs: vec![],
                        claim_guard: None,
                        flush: true,
                        outcome_changed: false,
                    };
                    if s.commit(c).await.expect("commit").is_some() {
                        break;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let seqs: Vec<i64> = s.list_events(&tid("sess_2"), &View::All, 0, 1000, &[]).await.expect("list").iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=41).collect::<Vec<i64>>(), "41 events, seq 1..41, no gap or duplicate");
}

/// Changes committed side by side (the embedded store groups them into one
/// transaction) each get their own answer: one that fails (its event id is
/// taken) writes nothing and leaves the others committed.
async fn a_failing_change_takes_no_other_down(s: Arc<dyn SessionsStore>) {
    let taken = ev("agent.message");
    s.insert_session(&session("sess_f0"), &[ev("session.created"), taken.clone()], &[]).await.expect("insert");
    let mut tasks = vec![];
    for n in 1..=12 {
        let sid = format!("sess_f{n}");
        s.insert_session(&session(&sid), &[ev("session.created")], &[]).await.expect("insert");
        let cur = s.get_session(&tid(&sid)).await.expect("get").expect("exists");
        let event = if n == 6 { taken.clone() } else { ev("agent.message") };
        let change = Change {
            expected_version: cur.version,
            session: cur,
            events: vec![event],
            runs: vec![],
            claim_guard: None,
            flush: n % 2 == 0,
            outcome_changed: false,
        };
        let s = s.clone();
        tasks.push(tokio::spawn(async move { (sid, s.commit(change).await) }));
    }
    for t in tasks {
        let (sid, outcome) = t.await.expect("task");
        let logged = s.list_events(&tid(&sid), &View::All, 0, 10, &[]).await.expect("list").len();
        if sid == "sess_f6" {
            assert!(outcome.is_err(), "a taken event id fails its change");
            assert_eq!(logged, 1, "and writes nothing");
            assert_eq!(s.get_session(&tid(&sid)).await.expect("get").expect("exists").last_seq, 1);
        } else {
            assert!(outcome.expect("commits").is_some(), "{sid} commits despite its neighbour");
            assert_eq!(logged, 2, "{sid}");
        }
    }
}

async fn runs_leases(s: &dyn SessionsStore) {
    s.insert_session(&session("sess_3"), &[ev("session.created")], &[run("run_q", "sess_3", RunStatus::Queued, 0)]).await.expect("insert");
    s.insert_session(&session("sess_4"), &[ev("session.created")], &[run("run_r", "sess_4", RunStatus::Running, 1_000)])
        .await
        .expect("insert");
    let ids = |v: Vec<Run>| v.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(ids(s.claimable_runs("", 500, 10).await.expect("claimable")), vec!["run_q"], "a live lease is not claimable");
    assert_eq!(ids(s.claimable_runs("", 2_000, 10).await.expect("claimable")), vec!["run_q", "run_r"], "an expired lease is");
    assert!(!s.extend_lease(&tid("run_r"), "lease_a", 1, 2_000, 5_000).await.expect("extend"), "an expired lease is not revived");
    assert!(s.extend_lease(&tid("run_r"), "lease_a", 1, 900, 5_000).await.expect("extend"));
    assert!(!s.extend_lease(&tid("run_r"), "lease_a", 0, 900, 9_000).await.expect("extend"), "stale generation refused");
    assert!(!s.extend_lease(&tid("run_r"), "lease_b", 1, 900, 9_000).await.expect("extend"), "another lease refused");
    // A claim decided from a stale read yields to the renewed lease.
    let cur = s.get_session(&tid("sess_4")).await.expect("get").expect("exists");
    let mut stolen = s.get_run(&tid("run_r")).await.expect("get").expect("exists");
    stolen.generation = 2;
    stolen.lease_id = "lease_thief".into();
    let guard = ClaimGuard { run_id: tid("run_r"), generation: 1, now_ms: 2_000 };
    let attempt = Change {
        expected_version: cur.version,
        session: cur.clone(),
        events: vec![],
        runs: vec![stolen.clone()],
        claim_guard: Some(guard),
        flush: true,
        outcome_changed: false,
    };
    assert!(s.commit(attempt).await.expect("commit").is_none(), "the lease was renewed to 5000, so a claim at 2000 fails");
    assert_eq!(s.get_run(&tid("run_r")).await.expect("get").expect("exists").lease_id, "lease_a");
    assert_eq!(s.get_session(&tid("sess_4")).await.expect("get").expect("exists").version, cur.version, "a lost claim moves nothing");
    let guard = ClaimGuard { run_id: tid("run_r"), generation: 1, now_ms: 6_000 };
    let attempt = Change {
        expected_version: cur.version,
        session: cur,
        events: vec![],
        runs: vec![stolen],
        claim_guard: Some(guard),
        flush: false,
        outcome_changed: false,
    };
    assert!(s.commit(attempt).await.expect("commit").is_some(), "after expiry the claim succeeds");
    assert_eq!(s.get_run(&tid("run_r")).await.expect("get").expect("exists").generation, 2);
    assert_eq!(s.get_run(&tid("run_r")).await.expect("get").expect("exists").lease_expires_ms, 5_000);
    assert_eq!(s.active_run(&tid("sess_3")).await.expect("active").map(|r| r.id), Some(tid("run_q")));
    assert!(s.expire_all_leases().await.expect("expire") >= 1);
    assert!(ids(s.claimable_runs("", 1, 10).await.expect("claimable")).contains(&tid("run_r")));
    let mut done = run("run_r", "sess_4", RunStatus::Completed, 0);
    done.generation = 2;
    done.completed_ms = Some(9);
    let cur = s.get_session(&tid("sess_4")).await.expect("get").expect("exists");
    s.commit(Change {
        expected_version: cur.version,
        session: cur,
        events: vec![],
        runs: vec![done],
        claim_guard: None,
        flush: false,
        outcome_changed: false,
    })
    .await
    .expect("commit")
    .expect("applied");
    assert!(s.active_run(&tid("sess_4")).await.expect("active").is_none());
    assert_eq!(s.list_runs(&tid("sess_4"), &PageRequest::standard(10, "").expect("page")).await.expect("list").len(), 1);
}

async fn budgets_travel_with_their_session(s: &dyn SessionsStore) {
    let budget = crate::model::Budget::new(100, "model_spend", 1, "").expect("budget");
    let se = Session { budget: Some(budget.clone()), ..session("sess_b1") };
    s.insert_session(&se, &[ev("session.created")], &[]).await.expect("insert");
    s.insert_session(&session("sess_b2"), &[ev("session.created")], &[]).await.expect("insert");
    let found = s.session_by_budget(&budget.id).await.expect("by budget").expect("found");
    assert_eq!((found.id.as_str(), found.budget.as_ref()), ("sess_b1", Some(&budget)));
    assert!(s.session_by_budget(&tid("bud_missing")).await.expect("by budget").is_none());
    // A commit moves the Budget with the session row.
    let mut charged = budget.clone();
    charged.consumed = 60;
    let change = Change {
        expected_version: found.version,
        session: Session { budget: Some(charged.clone()), ..found.clone() },
        events: vec![ev("span.model_request_end")],
        runs: vec![],
        claim_guard: None,
        flush: true,
        outcome_changed: false,
    };
    s.commit(change).await.expect("commit").expect("applied");
    let page = PageRequest::standard(10, "").expect("page");
    let listed = s.list_budget_sessions(&["env_1".into()], &page).await.expect("list");
    assert_eq!(listed.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), vec!["sess_b1"], "only sessions holding a budget");
    assert_eq!(listed[0].budget.as_ref().map(|b| b.consumed), Some(60));
}

/// A Session every service test can work on.
pub(crate) const SID: &str = "sess_01jx0000000000000000000001";

/// A service on a fresh embedded store holding the Session [`SID`].
pub(crate) async fn service() -> (crate::SessionsService, Arc<dyn SessionsStore>, tempfile::TempDir) {
    service_with(|b| b).await
}

/// [`service`] with settings of the test's own: `settings` is given a
/// builder that already signs capability tokens, and the blob directory
/// `blobs` beside the store is the test's to use.
pub(crate) async fn service_with(
    settings: impl FnOnce(crate::builder::Builder) -> crate::builder::Builder,
) -> (crate::SessionsService, Arc<dyn SessionsStore>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(&Location::SqliteDir(dir.path().into()), "sessions", &crate::MIGRATIONS).await.expect("db");
    let store: Arc<dyn SessionsStore> = Arc::new(SqlSessionsStore::new(db));
    store.insert_session(&session(SID), &[ev("session.created")], &[]).await.expect("insert");
    // The sandbox the Session pins, so its Runs can be handed out.
    let profile = SandboxProfile {
        id: pins().sandbox_profile_id,
        environment_id: tid("env_1"),
        name: "sbp".into(),
        latest_revision: 1,
        created_ms: 1,
        archived_ms: None,
    };
    let spec = SandboxSpec::compile(json!({"image": "debian:12"})).expect("spec");
    let rev = SandboxRevision { profile_id: profile.id.clone(), revision: 1, spec, created_ms: 1 };
    store.insert_sandbox_profile(&profile, &rev).await.expect("profile");
    let key = checkfu_core::capability::TokenKey::new([1; 32]);
    (settings(crate::Builder::new(store.clone()).with_token_key(key)).build(), store, dir)
}

/// A `user.message` from a fresh principal.
pub(crate) fn message() -> crate::input::Input {
    let me = checkfu_core::id::PrincipalId::mint();
    crate::input::Input::parse(
        "user.message",
        json!({"content": [{"type": "text", "text": "hi"}]}),
        &me,
        json!({"kind": "principal", "id": me}),
    )
    .expect("input")
}

async fn runners_pair_once_and_claim_only_their_pool(s: &dyn SessionsStore) {
    let pairing = Pairing {
        id: tid("rpair_1"),
        environment_id: tid("env_1"),
        principal_id: tid("prin_1"),
        pool: "gpu".into(),
        code_sha256: "c0de".into(),
        created_by: "prin_admin".into(),
        created_ms: 1,
        expires_ms: 10_000,
    };
    s.insert_pairing(&pairing).await.expect("pairing");
    let draft = |id: &str, cred: &str| Runner {
        id: tid(id),
        environment_id: tid("env_x"),
        pool: String::new(),
        principal_id: tid("prin_x"),
        pairing_id: tid("rpair_x"),
        name: "laptop".into(),
        credential_sha256: cred.into(),
        status: RunnerStatus::Active,
        created_ms: 5,
        last_seen_ms: None,
        revoked_ms: None,
    };
    assert!(s.redeem_pairing("c0de", 20_000, draft("rnr_late", "late")).await.expect("redeem").is_none(), "an expired code is refused");
    let made = s.redeem_pairing("c0de", 5, draft("rnr_1", "cred1")).await.expect("redeem").expect("redeemed");
    assert_eq!(
        (made.environment_id.as_str(), made.pool.as_str(), made.principal_id.as_str()),
        ("env_1", "gpu", "prin_1"),
        "from the pairing"
    );
    assert!(s.redeem_pairing("c0de", 6, draft("rnr_2", "cred2")).await.expect("redeem").is_none(), "a code is spent once");
    assert_eq!(s.runner_by_credential("cred1").await.expect("by credential").map(|r| r.id), Some(tid("rnr_1")));
    assert!(s.runner_by_credential("cred2").await.expect("by credential").is_none());
    s.touch_runner(&tid("rnr_1"), 77).await.expect("touch");
    assert_eq!(s.get_runner(&tid("rnr_1")).await.expect("get").expect("exists").last_seen_ms, Some(77));
    let page = checkfu_core::page::PageRequest { limit: 10, before_id: None };
    assert_eq!(s.list_runners(&["env_1".into()], &page).await.expect("list").len(), 1);
    assert!(s.list_runners(&["env_2".into()], &page).await.expect("list").is_empty());

    // Runs are claimable only where they are placed.
    let mut placed = run("run_pool", "sess_pool", RunStatus::Queued, 0);
    placed.placement = "env_1/gpu".into();
    s.insert_session(&session("sess_pool"), &[ev("session.created")], &[placed]).await.expect("insert");
    let ids = |v: Vec<Run>| v.into_iter().map(|r| r.id.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(s.claimable_runs("env_1/gpu", 1, 10).await.expect("claimable")), vec!["run_pool"]);
    assert!(!ids(s.claimable_runs("", 1, 10).await.expect("claimable")).contains(&"run_pool".to_string()), "never on the managed plane");
    assert!(s.claimable_runs("env_2/gpu", 1, 10).await.expect("claimable").is_empty(), "nor another Environment's pool");

    let mut held = run("run_held", "sess_held", RunStatus::Running, 9_000);
    held.runner_id = "rnr_1".into();
    s.insert_session(&session("sess_held"), &[ev("session.created")], &[held]).await.expect("insert");
    assert_eq!(s.runs_held_by("rnr_1").await.expect("held"), vec![(tid("run_held"), tid("sess_held"))]);
    assert!(s.revoke_runner(&tid("rnr_1"), 80).await.expect("revoke"));
    assert!(!s.revoke_runner(&tid("rnr_1"), 81).await.expect("revoke"), "once");
    let r = s.get_runner(&tid("rnr_1")).await.expect("get").expect("exists");
    assert_eq!((r.status, r.revoked_ms), (RunnerStatus::Revoked, Some(80)));
}

async fn files_replace_by_path_and_sandboxes_expire(s: &dyn SessionsStore) {
    let file = |path: &str, status: FileStatus, at: i64| SessionFile {
        id: checkfu_core::id::FileId::mint(),
        session_id: tid("sess_files"),
        path: path.into(),
        size: 3,
        sha256: "ab".repeat(32),
        status,
        run_id: tid("run_1"),
        captured_ms: at,
    };
    s.put_files(&[file("a.txt", FileStatus::Captured, 1), file("b.bin", FileStatus::TooLarge, 1)]).await.expect("put");
    s.put_files(&[file("a.txt", FileStatus::OverCapacity, 2)]).await.expect("replace");
    let all = s.all_files(&tid("sess_files")).await.expect("all");
    assert_eq!(
        all.iter().map(|f| (f.path.as_str(), f.status)).collect::<Vec<_>>(),
        [("a.txt", FileStatus::OverCapacity), ("b.bin", FileStatus::TooLarge)]
    );
    let page = checkfu_core::page::PageRequest { limit: 1, before_id: None };
    let first = s.list_files(&tid("sess_files"), &page).await.expect("list");
    assert_eq!(first.len(), 2, "one page and the look-ahead row");
    assert_eq!(first[0].path, "a.txt", "newest capture first");
    assert!(s.get_file(&tid("sess_files"), "nope").await.expect("get").is_none());
    assert!(s.list_files(&tid("sess_other"), &page).await.expect("list").is_empty());

    let sb = SandboxState {
        session_id: tid("sess_files"),
        snapshot_sha256: "cd".repeat(32),
        materialized_ms: 10,
        expires_ms: 100,
        unenforced: vec![Unenforced { field: "image".into(), reason: "host".into() }],
        updated_ms: 10,
    };
    s.put_sandbox(&sb).await.expect("sandbox");
    assert_eq!(s.get_sandbox(&tid("sess_files")).await.expect("get"), Some(sb.clone()));
    let both = s.get_sandboxes(&[tid("sess_files"), tid("sess_none")]).await.expect("batch");
    assert_eq!(both, vec![sb.clone()], "one query for a page, missing ones absent");
    assert!(s.get_sandboxes(&[]).await.expect("empty").is_empty());
    assert!(s.expired_sandboxes(50, 10).await.expect("expired").is_empty());
    assert_eq!(s.expired_sandboxes(101, 10).await.expect("expired").len(), 1);
    s.put_sandbox(&SandboxState { snapshot_sha256: String::new(), ..sb }).await.expect("cleared");
    assert!(s.expired_sandboxes(101, 10).await.expect("expired").is_empty(), "a sandbox without a snapshot has nothing left to delete");
}

async fn uploads_expire_and_sessions_keep_their_copies(s: &dyn SessionsStore) {
    let upload = |id: &str, by: &str, expires_ms: i64| UploadedFile {
        id: tid(id),
        environment_id: tid("env_up"),
        filename: "notes.txt".into(),
        media_type: "text/plain".into(),
        size_bytes: 10,
        sha256: "ab".repeat(32),
        created_by: tid(by),
        created_ms: 1,
        expires_ms,
    };
    s.insert_upload(&upload("file_1", "prin_a", 100)).await.expect("insert");
    s.insert_upload(&upload("file_2", "prin_b", 0)).await.expect("insert");
    assert_eq!(s.get_upload(&tid("file_1")).await.expect("get"), Some(upload("file_1", "prin_a", 100)));
    let page = checkfu_core::page::PageRequest { limit: 10, before_id: None };
    let ids = |v: Vec<UploadedFile>| v.into_iter().map(|f| f.id.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(s.list_uploads(&["env_up".into()], "", &page).await.expect("list")), ["file_2", "file_1"], "newest first");
    assert_eq!(ids(s.list_uploads(&["env_up".into()], "prin_a", &page).await.expect("list")), ["file_1"], "one uploader's");
    assert!(s.list_uploads(&["env_other".into()], "", &page).await.expect("list").is_empty());
    assert!(s.expired_uploads(100, 10).await.expect("expired").is_empty());
    assert_eq!(ids(s.expired_uploads(101, 10).await.expect("expired")), ["file_1"], "0 never expires");

    let copy = SessionUpload {
        session_id: tid("sess_up"),
        file_id: tid("file_1"),
        filename: "notes.txt".into(),
        media_type: "text/plain".into(),
        size_bytes: 10,
        sha256: "ab".repeat(32),
        added_ms: 2,
    };
    s.add_session_upload(&copy).await.expect("copy");
    s.add_session_upload(&SessionUpload { added_ms: 3, ..copy.clone() }).await.expect("a second record is ignored");
    assert!(s.delete_upload(&tid("file_1")).await.expect("delete"));
    assert!(!s.delete_upload(&tid("file_1")).await.expect("delete"), "once");
    assert!(s.get_upload(&tid("file_1")).await.expect("get").is_none());
    assert_eq!(s.session_uploads(&tid("sess_up")).await.expect("copies"), vec![copy], "the Session keeps its copy");
}

async fn skills_keep_one_active_name_and_immutable_versions(s: Arc<dyn SessionsStore>) {
    let skill = |id: &str, name: &str| Skill {
        id: tid(id),
        environment_id: tid("env_sk"),
        name: name.into(),
        description: "d".into(),
        latest_version: 1,
        status: SkillStatus::Active,
        created_by: tid("prin_a"),
        created_ms: 1,
        updated_ms: 1,
    };
    let version = |id: &str, v: i64, sha: &str| SkillVersion {
        skill_id: tid(id),
        version: v,
        name: "greeting".into(),
        description: format!("v{v}"),
        files: vec![
            SkillFile { path: "SKILL.md".into(), size_bytes: 3, sha256: sha.repeat(64) },
            SkillFile { path: "scripts/hi.sh".into(), size_bytes: 7, sha256: "f".repeat(64) },
        ],
        created_by: tid("prin_a"),
        created_ms: v,
    };
    s.insert_skill(&skill("skl_1", "greeting"), &version("skl_1", 1, "a")).await.expect("insert");
    let e = s.insert_skill(&skill("skl_2", "greeting"), &version("skl_2", 1, "a")).await.expect_err("the name is taken");
    assert_eq!(e.details["reason"], "name_taken");
    assert!(s.get_skill(&tid("skl_2")).await.expect("get").is_none(), "nothing of the refused skill is kept");

    // Two writers race for version 2: one wins.
    let (a, b) = (s.clone(), s.clone());
    let (x, y) = tokio::join!(async move { a.insert_skill_version(&version("skl_1", 2, "b")).await.expect("v2") }, async move {
        b.insert_skill_version(&version("skl_1", 2, "c")).await.expect("v2")
    });
    assert!(x ^ y, "exactly one writer wins version 2");
    let got = s.get_skill(&tid("skl_1")).await.expect("get").expect("exists");
    assert_eq!((got.latest_version, got.description.as_str()), (2, "v2"));
    assert_eq!(s.get_skill_version(&tid("skl_1"), 1).await.expect("v1"), Some(version("skl_1", 1, "a")), "version 1 is unchanged");
    let listed = s.list_skill_versions(&tid("skl_1"), None, 10).await.expect("versions");
    assert_eq!(listed.iter().map(|v| v.version).collect::<Vec<_>>(), [2, 1]);
    assert_eq!(s.list_skill_versions(&tid("skl_1"), Some(2), 10).await.expect("before 2").len(), 1);
    let mut holding = s.skill_versions_holding(&"f".repeat(64)).await.expect("holding");
    holding.sort();
    assert_eq!(holding, vec![(tid("skl_1"), 1), (tid("skl_1"), 2)]);

    // Archived: no new version; the name is free among active skills.
    s.archive_skill(&tid("skl_1"), 5).await.expect("archive");
    assert!(!s.insert_skill_version(&version("skl_1", 3, "d")).await.expect("v3"), "an archived skill takes no version");
    let page = checkfu_core::page::PageRequest { limit: 10, before_id: None };
    assert!(s.list_skills(&["env_sk".into()], false, &page).await.expect("list").is_empty());
    assert_eq!(s.list_skills(&["env_sk".into()], true, &page).await.expect("list").len(), 1);
    s.insert_skill(&skill("skl_3", "greeting"), &version("skl_3", 1, "a")).await.expect("the name is free again");
}
