//! The conformance suite for [`SchedulerStore`]: SQLite always, PostgreSQL
//! when `CHECKFU_TEST_POSTGRES_URL` is set (a fresh schema per run).

use super::*;
use checkfu_core::testing::tid;
use checkfu_store::Location;
use serde_json::json;
use std::sync::Arc;

async fn backends() -> Vec<(&'static str, Arc<dyn SchedulerStore>, Option<tempfile::TempDir>)> {
    let mut out: Vec<(&'static str, Arc<dyn SchedulerStore>, Option<tempfile::TempDir>)> = vec![];
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(&Location::SqliteDir(dir.path().into()), "scheduler", &crate::MIGRATIONS).await.expect("sqlite");
    out.push(("sqlite", Arc::new(SqlSchedulerStore::new(db)), Some(dir)));
    if let Some(url) = checkfu_core::testing::postgres("the scheduler store on PostgreSQL") {
        let schema = checkfu_core::testing::fresh_schema("sched");
        let db = Db::open(&Location::Postgres(url), &schema, &crate::MIGRATIONS).await.expect("postgres");
        out.push(("postgres", Arc::new(SqlSchedulerStore::new(db)), None));
    }
    out
}

fn automation(id: &str, name: &str) -> Automation {
    Automation {
        id: tid(id),
        environment_id: tid("env_1"),
        name: name.into(),
        service_principal_id: tid("prin_svc"),
        status: AutomationStatus::Active,
        pause_reason: None,
        triggers: vec![],
        target: Target::Agent(
            AgentTarget::parse(&json!({"kind": "agent", "agent_deployment_id": "dep_01jx0000000000000000000001",
                "deployment_revision": 1, "prompt": "p"}))
            .expect("target"),
        ),
        managed_by: json!({"kind": "direct"}),
        metadata: json!({}),
        ingest_secret: String::new(),
        version: 1,
        deleted_ms: 0,
        created_ms: 1,
        updated_ms: 1,
        next_ms: None,
    }
}

fn firing(id: &str, automation_id: &str, source: FiringSource) -> Firing {
    Firing {
        id: tid(id),
        automation_id: tid(automation_id),
        environment_id: tid("env_1"),
        source,
        event: json!({"title": "Q"}),
        scheduled_for_ms: 0,
        dedupe_value: String::new(),
        actor_principal_id: "prin_admin".into(),
        automation_version: 1,
        state: FiringState::Running,
        child_session_ids: vec![],
        usage: Usage::default(),
        error: None,
        created_ms: 2,
        settled_ms: 0,
        program: None,
        graph: Value::Null,
        webhook_source_id: String::new(),
        version: 0,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn scheduler_store_conformance() {
    for (name, s, _guard) in backends().await {
        automations_compare_and_set_and_keep_names_unique(&*s).await;
        firings_keep_their_children(&*s).await;
        occurrences_have_one_firing(&*s).await;
        timers_are_taken_once(&*s).await;
        deliveries_dedupe(&*s).await;
        replicas_race_for_occurrences(s.clone()).await;
        graphs_keep_immutable_revisions(&*s).await;
        inputs_are_recorded_once_and_found_by_their_run(&*s).await;
        subscriptions_are_found_by_environment(&*s).await;
        frontiers_move_by_compare_and_set(&*s).await;
        skill_proposals_are_made_once_and_decided_once(&*s).await;
        webhook_sources_are_one_live_per_automation(&*s).await;
        eprintln!("scheduler store conformance passed on {name}");
    }
}

async fn automations_compare_and_set_and_keep_names_unique(s: &dyn SchedulerStore) {
    let a = automation("auto_1", "n1");
    s.insert_automation(&a, &[], Arm::Keep).await.expect("insert");
    let e = s.insert_automation(&automation("auto_2", "n1"), &[], Arm::Keep).await.expect_err("taken");
    assert_eq!(e.details["reason"], "name_taken");
    assert_eq!(s.get_automation(&tid("auto_1")).await.expect("get"), Some(a.clone()));

    let paused = Automation {
        status: AutomationStatus::Paused,
        pause_reason: Some(PauseReason { code: "manual".into(), note: Some("n".into()) }),
        version: 2,
        ..a.clone()
    };
    assert!(s.update_automation(&paused, 1, &[], Arm::Keep).await.expect("update"));
    assert!(
        !s.update_automation(&Automation { version: 3, ..paused.clone() }, 1, &[], Arm::Keep).await.expect("stale"),
        "a stale version loses"
    );
    assert_eq!(s.get_automation(&tid("auto_1")).await.expect("get"), Some(paused.clone()));
    let page = PageRequest { limit: 10, before_id: None };
    assert_eq!(s.list_automations(&["env_1".into()], "paused", &page).await.expect("list").len(), 1);
    assert!(s.list_automations(&["env_1".into()], "active", &page).await.expect("list").is_empty());

    // Deleted: gone from lists, its name free, itself still readable.
    let deleted = Automation { deleted_ms: 9, version: 3, ..paused.clone() };
    assert!(s.update_automation(&deleted, 2, &[], Arm::Keep).await.expect("delete"));
    assert!(s.list_automations(&["env_1".into()], "", &page).await.expect("list").is_empty());
    assert!(
        !s.update_automation(&Automation { version: 4, ..deleted.clone() }, 3, &[], Arm::Keep).await.expect("terminal"),
        "a deleted row is final"
    );
    s.insert_automation(&automation("auto_3", "n1"), &[], Arm::Keep).await.expect("the name is free again");
    assert_eq!(s.get_automation(&tid("auto_1")).await.expect("get").map(|a| a.deleted_ms), Some(9));
}

async fn firings_keep_their_children(s: &dyn SchedulerStore) {
    let mut f = firing("afire_1", "auto_1", FiringSource::Manual);
    let child = ChildRequest {
        session_id: "sess_c1".into(),
        step_id: String::new(),
        agent_deployment_id: "dep_1".into(),
        deployment_revision: Some(1),
        principal_id: "prin_svc".into(),
        title: "t".into(),
        metadata: json!({}),
        prompt: "p".into(),
        budget: None,
        firing_id: "afire_1".into(),
        // A reviewed step's Outcome is kept with the request.
        outcome: Some(json!({"rubric": "require: x", "max_iterations": 2})),
        continuation: None,
        // So is the screen its child will hold messages for (§18.8).
        delivery_screen: Some(crate::model::DeliveryScreen {
            model_routing_profile_id: "mrp_1".into(),
            tier: Some("low".into()),
            instructions: "block: X1".into(),
            on_failure: checkfu_core::delivery_screen::OnFailure::FailOpen,
        }),
    };
    assert!(s.insert_firing(&f, Some(&child), None).await.expect("insert"));
    assert!(s.insert_firing(&firing("afire_2", "auto_1", FiringSource::Schedule), None, None).await.expect("insert"));
    // Pending: found by Session and by recovery, not listed on the firing.
    assert_eq!(s.firing_of_child("sess_c1").await.expect("of child"), Some(tid("afire_1")));
    assert!(s.get_firing(&tid("afire_1")).await.expect("get").expect("firing").child_session_ids.is_empty());
    assert!(s.pending_children(1, 10).await.expect("pending").is_empty(), "younger than the cut-off");
    assert_eq!(s.pending_children(i64::MAX, 10).await.expect("pending"), vec![child.clone()]);
    s.confirm_child("sess_c1").await.expect("confirm");
    assert!(s.pending_children(i64::MAX, 10).await.expect("pending").is_empty());
    s.drop_child("sess_c1").await.expect("a confirmed child is not dropped");
    assert!(s.firing_of_child("sess_none").await.expect("of child").is_none());
    f.child_session_ids = vec!["sess_c1".into()];
    f.usage = Usage { input_tokens: 3, output_tokens: 4, model_spend_micro_usd: 0 };
    f.settle(FiringState::Succeeded, None, 10);
    s.update_firing(&f).await.expect("settle");
    assert_eq!(s.get_firing(&tid("afire_1")).await.expect("get"), Some(f.clone()));
    let page = PageRequest { limit: 10, before_id: None };
    let ids = |v: Vec<Firing>| v.into_iter().map(|f| f.id.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(s.list_firings(&tid("auto_1"), "", "", &page).await.expect("list")), ["afire_2", "afire_1"]);
    assert_eq!(ids(s.list_firings(&tid("auto_1"), "manual", "", &page).await.expect("list")), ["afire_1"]);
    assert_eq!(ids(s.list_firings(&tid("auto_1"), "", "running", &page).await.expect("list")), ["afire_2"]);

    // A refused child is forgotten.
    let mut g = firing("afire_3", "auto_1", FiringSource::Manual);
    let c3 = ChildRequest { session_id: "sess_c3".into(), firing_id: "afire_3".into(), ..child };
    assert!(s.insert_firing(&g, Some(&c3), None).await.expect("insert"));
    s.drop_child("sess_c3").await.expect("drop");
    assert!(s.firing_of_child("sess_c3").await.expect("of child").is_none());
    g.settle(FiringState::Failed, Some(("child_admission_denied", "no".into())), 11);
    s.update_firing(&g).await.expect("settle");
}

/// An occurrence has at most one firing; a scheduled firing is found by it.
async fn occurrences_have_one_firing(s: &dyn SchedulerStore) {
    let mut f = firing("afire_o1", "auto_o", FiringSource::Schedule);
    f.scheduled_for_ms = 5_000;
    f.event = Value::Null;
    assert!(s.insert_firing(&f, None, None).await.expect("first"));
    let again = Firing { id: tid("afire_o2"), ..f.clone() };
    assert!(!s.insert_firing(&again, None, None).await.expect("second"), "the occurrence already has its firing");
    assert!(s.get_firing(&tid("afire_o2")).await.expect("get").is_none(), "nothing written");
    assert_eq!(s.firing_for_occurrence(&tid("auto_o"), 5_000).await.expect("by occurrence").map(|f| f.id), Some(tid("afire_o1")));
    assert!(s.firing_for_occurrence(&tid("auto_o"), 6_000).await.expect("none").is_none());
    // Manual firings share no such key.
    let m1 = Firing { id: tid("afire_o3"), source: FiringSource::Manual, scheduled_for_ms: 0, ..f.clone() };
    let m2 = Firing { id: tid("afire_o4"), ..m1.clone() };
    assert!(s.insert_firing(&m1, None, None).await.expect("manual"));
    assert!(s.insert_firing(&m2, None, None).await.expect("manual again"));
}

/// Timers: armed by writes, taken once, finished by compare-and-set.
async fn timers_are_taken_once(s: &dyn SchedulerStore) {
    let mut a = automation("auto_t1", "t1");
    s.insert_automation(&a, &[], Arm::Set { at: 1_000, awake: true }).await.expect("armed");
    assert_eq!(s.get_automation(&a.id).await.expect("get").expect("a").next_ms, Some(1_000));
    assert_eq!(s.next_due().await.expect("next"), Some(1_000));
    assert!(s.claim_due("h1", 999, 60_000, 10).await.expect("claim").is_empty(), "not yet due");
    let taken = s.claim_due("h1", 1_000, 31_000, 10).await.expect("claim");
    assert_eq!(taken.len(), 1);
    assert_eq!((taken[0].scheduled_for_ms, taken[0].holder.as_str()), (1_000, "h1"));
    assert!(s.claim_due("h2", 1_500, 60_000, 10).await.expect("claim").is_empty(), "held until its lease ends");
    // The holder died: after the lease it is due again, and the old holder's
    // finish no longer counts.
    let retaken = s.claim_due("h2", 31_000, 61_000, 10).await.expect("claim");
    assert_eq!(retaken.len(), 1);
    assert!(!s.finish_timer(&taken[0], Arm::Clear).await.expect("stale holder"), "a lost lease finishes nothing");
    assert!(s.finish_timer(&retaken[0], Arm::Set { at: 2_000, awake: true }).await.expect("re-arm"));
    assert_eq!(s.get_automation(&a.id).await.expect("get").expect("a").next_ms, Some(2_000));

    // A write re-arms over a hold: the holder's finish loses.
    let held = s.claim_due("h3", 2_000, 32_000, 10).await.expect("claim");
    a.version = 2;
    assert!(s.update_automation(&a, 1, &[], Arm::Set { at: 9_000, awake: true }).await.expect("write"));
    assert!(!s.finish_timer(&held[0], Arm::Clear).await.expect("finish"), "the write stands");
    assert_eq!(s.get_automation(&a.id).await.expect("get").expect("a").next_ms, Some(9_000));

    // Dormant: kept (next_at shows) but never due until woken.
    a.version = 3;
    assert!(s.update_automation(&a, 2, &[], Arm::Sleep).await.expect("sleep"));
    assert!(s.claim_due("h4", i64::MAX - 1, i64::MAX - 1, 10).await.expect("claim").is_empty(), "dormant");
    assert_eq!(s.next_due().await.expect("next"), None);
    assert_eq!(s.get_automation(&a.id).await.expect("get").expect("a").next_ms, Some(9_000));
    a.version = 4;
    assert!(s.update_automation(&a, 3, &[], Arm::Wake).await.expect("wake"));
    assert_eq!(s.next_due().await.expect("next"), Some(9_000));
    a.version = 5;
    assert!(s.update_automation(&a, 4, &[], Arm::Clear).await.expect("clear"));
    assert_eq!(s.get_automation(&a.id).await.expect("get").expect("a").next_ms, None);
    assert_eq!(s.next_due().await.expect("next"), None);
}

/// Two replicas racing for the same due timers: each is taken exactly once.
async fn replicas_race_for_occurrences(s: Arc<dyn SchedulerStore>) {
    const N: usize = 120;
    for n in 0..N {
        let a = automation(&format!("auto_r{n:03}"), &format!("r{n}"));
        s.insert_automation(&a, &[], Arm::Set { at: 50_000 + n as i64, awake: true }).await.expect("arm");
    }
    let mut tasks = vec![];
    for replica in 0..2 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = vec![];
            for round in 0..40 {
                let holder = format!("replica{replica}:{round}");
                let got = s.claim_due(&holder, 60_000, 90_000, 7).await.expect("claim");
                mine.extend(got.into_iter().map(|t| t.id));
                tokio::task::yield_now().await;
            }
            mine
        }));
    }
    let mut all = vec![];
    for t in tasks {
        all.extend(t.await.expect("replica"));
    }
    let total = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), total, "no timer was taken by both replicas");
    assert_eq!(total, N, "every due timer was taken");
}

/// Signed ingest's identities: one delivery each, kept until swept.
async fn deliveries_dedupe(s: &dyn SchedulerStore) {
    let d = Delivery {
        automation_id: tid("auto_w"),
        dedupe_key: "\"e1\"".into(),
        body_sha256: "aa".into(),
        firing_id: "afire_w1".into(),
        filtered_id: String::new(),
        created_ms: 100,
    };
    let f = firing("afire_w1", "auto_w", FiringSource::Webhook);
    assert!(s.insert_firing(&f, None, Some(&d)).await.expect("admit"));
    let f2 = firing("afire_w2", "auto_w", FiringSource::Webhook);
    assert!(!s.insert_firing(&f2, None, Some(&Delivery { firing_id: "afire_w2".into(), ..d.clone() })).await.expect("dup"));
    assert!(s.get_firing(&tid("afire_w2")).await.expect("get").is_none(), "the losing firing is not written");
    assert_eq!(s.get_delivery(&tid("auto_w"), "\"e1\"").await.expect("get"), Some(d.clone()));
    assert!(s.get_delivery(&tid("auto_w"), "1").await.expect("get").is_none());

    let fd = FilteredDelivery {
        id: tid("afdl_1"),
        automation_id: tid("auto_w"),
        dedupe_value: "e3".into(),
        body_sha256: "bb".into(),
        predicate_index: 0,
        created_ms: 200,
    };
    let d3 = Delivery { dedupe_key: "\"e3\"".into(), firing_id: String::new(), filtered_id: "afdl_1".into(), created_ms: 200, ..d.clone() };
    assert!(s.insert_filtered(&fd, &d3).await.expect("filtered"));
    assert!(!s.insert_filtered(&FilteredDelivery { id: tid("afdl_2"), ..fd.clone() }, &d3).await.expect("dup"));
    assert_eq!(s.get_filtered("afdl_1").await.expect("get"), Some(fd.clone()));
    let page = PageRequest { limit: 10, before_id: None };
    assert_eq!(s.list_filtered(&tid("auto_w"), &page).await.expect("list"), vec![fd]);
    assert_eq!(s.sweep_deliveries(150).await.expect("sweep"), 1, "only identities older than the cut-off go");
    assert!(s.get_delivery(&tid("auto_w"), "\"e1\"").await.expect("get").is_none());
    assert!(s.get_delivery(&tid("auto_w"), "\"e3\"").await.expect("get").is_some());
}

/// Graph revisions are written with the graph's compare-and-set: one writer
/// makes revision n+1, the other is told the graph moved.
async fn graphs_keep_immutable_revisions(s: &dyn SchedulerStore) {
    use crate::graph::{Application, Graph, Revision};
    let g = Graph {
        id: tid("agph_1"),
        environment_id: tid("env_1"),
        name: "g".into(),
        service_principal_id: tid("prin_svc"),
        created_by_principal_id: "prin_admin".into(),
        latest_revision: 1,
        applied_revision: 0,
        applied_plan_sha256: String::new(),
        automation_id: String::new(),
        layout: json!({}),
        version: 1,
        deleted_ms: 0,
        created_ms: 1,
        updated_ms: 1,
    };
    let rev = |n: i64| Revision {
        graph_id: tid("agph_1"),
        revision: n,
        document: json!({"n": n}),
        document_sha256: format!("sha{n}"),
        layout: json!({}),
        created_by: "prin_admin".into(),
        created_ms: n,
    };
    s.insert_graph(&g, &rev(1)).await.expect("insert");
    let g2 = Graph { latest_revision: 2, version: 2, ..g.clone() };
    assert!(s.update_graph(&g2, 1, Some(&rev(2)), None).await.expect("revise"));
    assert!(!s.update_graph(&Graph { version: 3, ..g2.clone() }, 1, Some(&rev(3)), None).await.expect("stale"), "the second writer loses");
    assert!(s.get_revision(&tid("agph_1"), 3).await.expect("get").is_none(), "and writes no revision");
    assert_eq!(s.get_revision(&tid("agph_1"), 2).await.expect("get"), Some(rev(2)));
    let listed: Vec<i64> = s.list_revisions(&tid("agph_1"), None, 10).await.expect("list").into_iter().map(|r| r.revision).collect();
    assert_eq!(listed, [2, 1]);
    assert_eq!(s.list_revisions(&tid("agph_1"), Some(2), 10).await.expect("page").len(), 1);
    let app = Application {
        id: tid("agap_1"),
        graph_id: tid("agph_1"),
        revision: 2,
        plan_sha256: "p".into(),
        automation_id: "auto_9".into(),
        action: "create".into(),
        applied_by: "prin_admin".into(),
        created_ms: 5,
    };
    let g3 = Graph { applied_revision: 2, applied_plan_sha256: "p".into(), automation_id: "auto_9".into(), version: 3, ..g2.clone() };
    assert!(s.update_graph(&g3, 2, None, Some(&app)).await.expect("apply"));
    assert_eq!(s.get_graph(&tid("agph_1")).await.expect("get"), Some(g3.clone()));
    let page = PageRequest { limit: 10, before_id: None };
    assert_eq!(s.list_applications(&tid("agph_1"), &page).await.expect("journal"), vec![app]);
    assert_eq!(s.list_graphs(&["env_1".into()], &page).await.expect("list").len(), 1);
    let gone = Graph { deleted_ms: 9, version: 4, ..g3 };
    assert!(s.update_graph(&gone, 3, None, None).await.expect("delete"));
    assert!(s.list_graphs(&["env_1".into()], &page).await.expect("list").is_empty());
}

/// `continue_selected` inputs (§18.4): recorded once under their key,
/// pending until accepted, open while their firing runs and listed as the
/// firing's Sessions once accepted; a refused one is forgotten.
async fn inputs_are_recorded_once_and_found_by_their_run(s: &dyn SchedulerStore) {
    use crate::session_input::{Continuation, SessionInput};
    let f = firing("afire_i1", "auto_i", FiringSource::Manual);
    let k = Continuation { key: "afire_i1/-/1".into(), event_id: "evt_1".into() };
    let c = ChildRequest {
        session_id: "sess_kept".into(),
        step_id: String::new(),
        agent_deployment_id: "dep_1".into(),
        deployment_revision: None,
        principal_id: "prin_svc".into(),
        title: "t".into(),
        metadata: json!({}),
        prompt: "p".into(),
        budget: None,
        firing_id: "afire_i1".into(),
        outcome: None,
        continuation: Some(k.clone()),
        delivery_screen: None,
    };
    assert!(s.insert_firing(&f, Some(&c), None).await.expect("insert"));
    assert!(s.firing_of_child("sess_kept").await.expect("of child").is_none(), "a continued Session is no child");
    assert_eq!(s.get_firing(&f.id).await.expect("get").expect("f").child_session_ids, Vec::<String>::new(), "pending: not listed");
    assert_eq!(s.pending_inputs(i64::MAX, 10).await.expect("pending"), vec![c.clone()]);
    assert!(s.pending_inputs(0, 10).await.expect("pending").is_empty(), "only those recorded before");
    let open = s.open_inputs("sess_kept").await.expect("open");
    assert_eq!((open.len(), open[0].0.accepted.is_none(), open[0].1.clone()), (1, true, c.clone()));
    let input = SessionInput { session_id: "sess_kept".into(), event_id: "evt_1".into(), run_id: "run_1".into() };
    s.accept_input(&k.key, &input, 7).await.expect("accept");
    s.accept_input(&k.key, &input, 7).await.expect("accepting again changes nothing");
    let open = s.open_inputs("sess_kept").await.expect("open");
    let found = &open[0].0;
    assert_eq!((found.key.as_str(), found.event_seq, found.accepted.as_ref()), (k.key.as_str(), 7, Some(&input)));
    assert!(s.pending_inputs(i64::MAX, 10).await.expect("pending").is_empty());
    s.drop_input(&k.key).await.expect("an accepted input is kept");
    assert_eq!(s.get_firing(&f.id).await.expect("get").expect("f").child_session_ids, ["sess_kept"]);
    assert_eq!(s.firing_inputs("afire_i1").await.expect("inputs").len(), 1);
    // The same key again (a replay of the admitting write) records nothing new.
    let mut tx_again = f.clone();
    tx_again.version = 0;
    let next = Continuation { key: k.key.clone(), event_id: "evt_2".into() };
    assert!(s.update_program(&tx_again, 0, &[ChildRequest { continuation: Some(next), ..c.clone() }], &[]).await.expect("write"));
    assert_eq!(s.firing_inputs("afire_i1").await.expect("inputs")[0].accepted, Some(input));
    // Settled firings' inputs are not open.
    let mut settled = s.get_firing(&f.id).await.expect("get").expect("f");
    settled.settle(FiringState::Succeeded, None, 9);
    s.update_firing(&settled).await.expect("settle");
    assert!(s.open_inputs("sess_kept").await.expect("open").is_empty());
    // A refused input is forgotten.
    let g = firing("afire_i2", "auto_i", FiringSource::Manual);
    let refused = Continuation { key: "afire_i2/-/1".into(), event_id: "evt_3".into() };
    let c2 = ChildRequest { firing_id: "afire_i2".into(), continuation: Some(refused.clone()), ..c };
    assert!(s.insert_firing(&g, Some(&c2), None).await.expect("insert"));
    s.drop_input(&refused.key).await.expect("drop");
    assert!(s.firing_inputs("afire_i2").await.expect("inputs").is_empty());
}

/// The active subscribed Automations of an Environment are found without
/// reading the others; a Session is traced to the Automations whose
/// firings started or continued it.
async fn subscriptions_are_found_by_environment(s: &dyn SchedulerStore) {
    let triggers =
        crate::triggers::parse_triggers(&json!([{"kind": "subscription", "event_types": ["memory_store.*"]}])).expect("triggers");
    let mut on = automation("auto_s1", "s1");
    on.triggers = triggers.clone();
    s.insert_automation(&on, &[], Arm::Clear).await.expect("insert");
    let mut paused = Automation { id: tid("auto_s2"), name: "s2".into(), status: AutomationStatus::Paused, ..on.clone() };
    s.insert_automation(&paused, &[], Arm::Clear).await.expect("insert");
    s.insert_automation(&automation("auto_s3", "s3"), &[], Arm::Clear).await.expect("insert");
    let elsewhere = Automation { id: tid("auto_s4"), name: "s4".into(), environment_id: tid("env_2"), ..on.clone() };
    s.insert_automation(&elsewhere, &[], Arm::Clear).await.expect("insert");
    let ids = |v: Vec<Automation>| v.into_iter().map(|a| a.id.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(s.subscribed_automations("env_1").await.expect("list")), ["auto_s1"]);
    paused.status = AutomationStatus::Active;
    paused.version = 2;
    assert!(s.update_automation(&paused, 1, &[], Arm::Clear).await.expect("resume"));
    assert_eq!(ids(s.subscribed_automations("env_1").await.expect("list")), ["auto_s1", "auto_s2"]);
    on.triggers = vec![];
    on.version = 2;
    assert!(s.update_automation(&on, 1, &[], Arm::Clear).await.expect("unsubscribe"));
    assert_eq!(ids(s.subscribed_automations("env_1").await.expect("list")), ["auto_s2"], "a trigger removed is no subscription");
    assert_eq!(s.automations_of_session("sess_c1").await.expect("of session"), ["auto_1"], "a child's");
    assert_eq!(s.automations_of_session("sess_kept").await.expect("of session"), ["auto_i"], "a continued Session's");
    assert!(s.automations_of_session("sess_nobody").await.expect("of session").is_empty());
}

/// A frontier moves only from where its selection saw it; the firing that
/// moved it may ask again (a crash before it saved the move), another may
/// not.
async fn frontiers_move_by_compare_and_set(s: &dyn SchedulerStore) {
    assert_eq!(s.frontier("auto_f", "learn").await.expect("none"), None);
    assert_eq!(s.advance_frontier("auto_f", "learn", "", "sess_2", "fir_1", 1).await.expect("first"), Moved::Moved);
    assert_eq!(s.advance_frontier("auto_f", "learn", "", "sess_2", "fir_1", 2).await.expect("again"), Moved::Already);
    assert_eq!(s.advance_frontier("auto_f", "learn", "", "sess_3", "fir_2", 3).await.expect("stale"), Moved::Since);
    assert_eq!(s.advance_frontier("auto_f", "learn", "sess_2", "sess_4", "fir_2", 4).await.expect("on"), Moved::Moved);
    assert_eq!(s.advance_frontier("auto_f", "learn", "sess_2", "sess_5", "fir_3", 5).await.expect("moved since"), Moved::Since);
    s.advance_frontier("auto_f", "other", "", "sess_1", "fir_4", 6).await.expect("other");
    let all = s.frontiers("auto_f").await.expect("list");
    let seen: Vec<(&str, &str, &str)> = all.iter().map(|f| (f.name.as_str(), f.position.as_str(), f.firing_id.as_str())).collect();
    assert_eq!(seen, [("learn", "sess_4", "fir_2"), ("other", "sess_1", "fir_4")]);
    assert!(s.frontiers("auto_g").await.expect("none").is_empty());
}

/// One SkillProposal per firing and step, its event staged only when it is
/// made; decided once; adoptions found by Automation and skill.
async fn skill_proposals_are_made_once_and_decided_once(s: &dyn SchedulerStore) {
    use crate::skill_proposal::SkillProposal;
    let p = |id: &str, firing: &str| SkillProposal {
        id: id.into(),
        environment_id: tid("env_1"),
        automation_id: "auto_k".into(),
        firing_id: firing.into(),
        step_id: "prop".into(),
        skill_id: None,
        name: "triage".into(),
        status: "open".into(),
        content: "SKILL".into(),
        content_sha256: "sha".into(),
        adopted: None,
        decided_by: String::new(),
        decided_ms: 0,
        decision_note: String::new(),
        created_ms: 1,
        version: 1,
    };
    let event = |id: &str| checkfu_bus::resource_record("skill_proposal.created", "env_1", id);
    let (made, new) = s.propose_skill(&p("skprop_1", "fir_1"), &[event("skprop_1")]).await.expect("first");
    assert!(new && made.id == "skprop_1");
    let (again, new) = s.propose_skill(&p("skprop_2", "fir_1"), &[event("skprop_2")]).await.expect("again");
    assert!(!new && again.id == "skprop_1", "the first stands");
    assert_eq!(s.get_skill_proposal("skprop_2").await.expect("get"), None);
    s.propose_skill(&p("skprop_3", "fir_2"), &[]).await.expect("another firing");
    let page = PageRequest { limit: 10, before_id: None };
    let open: Vec<String> =
        s.list_skill_proposals(&["env_1".into()], "open", &page).await.expect("list").into_iter().map(|p| p.id).collect();
    assert_eq!(open, ["skprop_3", "skprop_1"], "newest first");

    let mut adopted = made.clone();
    adopted.status = "adopted".into();
    adopted.adopted = Some(("skl_1".into(), 2));
    adopted.decided_by = "prin_h".into();
    adopted.version = 2;
    assert!(s.decide_skill_proposal(&adopted, 1, &[]).await.expect("adopt"));
    assert!(!s.decide_skill_proposal(&adopted, 1, &[]).await.expect("twice"), "decided once");
    let got = s.get_skill_proposal("skprop_1").await.expect("get").expect("some");
    assert_eq!((got.status.as_str(), got.adopted.clone()), ("adopted", Some(("skl_1".to_string(), 2))));
    assert_eq!(s.adopted_skill_version("auto_k", "skl_1").await.expect("adopted"), Some(2));
    assert_eq!(s.adopted_skill_version("auto_other", "skl_1").await.expect("another's"), None);
    assert!(s.list_skill_proposals(&["env_1".into()], "rejected", &page).await.expect("none").is_empty());
}

async fn webhook_sources_are_one_live_per_automation(s: &dyn SchedulerStore) {
    use crate::webhook_source::{Health, Registration, SourceRow, WebhookSource};
    let row = |id: &str, reg: &str| SourceRow {
        source: WebhookSource {
            id: id.into(),
            environment_id: "env_1".into(),
            automation_id: "auto_w".into(),
            provider: "github".into(),
            connection_id: "conn_1".into(),
            resource: json!({"kind": "repository", "owner": "o", "name": "r"}),
            events: vec!["issues".into()],
            registration_id: reg.into(),
            created_by: "prin_1".into(),
            created_ms: 1,
            deleted_ms: 0,
        },
        registration: Registration {
            id: reg.into(),
            webhook_source_id: id.into(),
            environment_id: "env_1".into(),
            provider: "github".into(),
            mode: "automatic".into(),
            status: "pending".into(),
            provider_hook_id: None,
            callback_url: "https://x/cb".into(),
            sealed_secret: "sealed".into(),
            health: Health::default(),
            created_ms: 1,
            updated_ms: 1,
        },
        version: 1,
    };
    let first = row("whsrc_1", "pwreg_1");
    assert!(s.insert_webhook_source(&first, &[]).await.expect("insert"));
    assert!(!s.insert_webhook_source(&row("whsrc_2", "pwreg_2"), &[]).await.expect("second"), "one live source per Automation");
    assert_eq!(s.webhook_source_of_automation("auto_w").await.expect("of automation"), Some(first.clone()));
    assert_eq!(s.webhook_source_of_registration("pwreg_1").await.expect("of registration"), Some(first.clone()));

    // A compare-and-set on version, with the move's event.
    let mut active = first.clone();
    active.registration.status = "active".into();
    active.registration.provider_hook_id = Some("12".into());
    active.version = 2;
    let activated = checkfu_bus::resource_record("provider_webhook_registration.activated", "env_1", "pwreg_1");
    assert!(s.update_webhook_source(&active, 1, &[activated]).await.expect("update"));
    assert!(!s.update_webhook_source(&active, 1, &[]).await.expect("stale"), "a stale version writes nothing");
    assert_eq!(s.get_webhook_source("whsrc_1").await.expect("get"), Some(active.clone()));
    async fn listed(s: &dyn SchedulerStore, status: &str, live: bool) -> Vec<String> {
        let page = PageRequest { limit: 10, before_id: None };
        s.list_webhook_sources(&["env_1".into()], "", status, live, &page).await.expect("list").into_iter().map(|x| x.source.id).collect()
    }
    assert_eq!(listed(s, "active", false).await, ["whsrc_1"]);
    assert!(listed(s, "revoked", false).await.is_empty());

    // Deleted: no longer live, so another may be made; the old one stays listed.
    let mut gone = active.clone();
    gone.registration.status = "revoked".into();
    gone.source.deleted_ms = 5;
    gone.version = 3;
    assert!(s.update_webhook_source(&gone, 2, &[]).await.expect("delete"));
    assert_eq!(s.webhook_source_of_automation("auto_w").await.expect("of automation"), None);
    assert!(s.insert_webhook_source(&row("whsrc_3", "pwreg_3"), &[]).await.expect("a new one"));
    assert_eq!(listed(s, "", true).await, ["whsrc_3"], "live sources only");
    assert_eq!(listed(s, "revoked", false).await, ["whsrc_1"], "registrations, revoked ones too");
}
