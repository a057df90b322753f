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
        target: AgentTarget::parse(&json!({"kind": "agent", "agent_deployment_id": "dep_01jx0000000000000000000001",
            "deployment_revision": 1, "prompt": "p"}))
        .expect("target"),
        managed_by: json!({"kind": "direct"}),
        metadata: json!({}),
        ingest_secret: String::new(),
        version: 1,
        deleted_ms: 0,
        created_ms: 1,
        updated_ms: 1,
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
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn scheduler_store_conformance() {
    for (name, s, _guard) in backends().await {
        automations_compare_and_set_and_keep_names_unique(&*s).await;
        firings_keep_their_children(&*s).await;
        eprintln!("scheduler store conformance passed on {name}");
    }
}

async fn automations_compare_and_set_and_keep_names_unique(s: &dyn SchedulerStore) {
    let a = automation("auto_1", "n1");
    s.insert_automation(&a, &[]).await.expect("insert");
    let e = s.insert_automation(&automation("auto_2", "n1"), &[]).await.expect_err("taken");
    assert_eq!(e.details["reason"], "name_taken");
    assert_eq!(s.get_automation(&tid("auto_1")).await.expect("get"), Some(a.clone()));

    let paused = Automation {
        status: AutomationStatus::Paused,
        pause_reason: Some(PauseReason { code: "manual".into(), note: Some("n".into()) }),
        version: 2,
        ..a.clone()
    };
    assert!(s.update_automation(&paused, 1, &[]).await.expect("update"));
    assert!(!s.update_automation(&Automation { version: 3, ..paused.clone() }, 1, &[]).await.expect("stale"), "a stale version loses");
    assert_eq!(s.get_automation(&tid("auto_1")).await.expect("get"), Some(paused.clone()));
    let page = PageRequest { limit: 10, before_id: None };
    assert_eq!(s.list_automations(&["env_1".into()], "paused", &page).await.expect("list").len(), 1);
    assert!(s.list_automations(&["env_1".into()], "active", &page).await.expect("list").is_empty());

    // Deleted: gone from lists, its name free, itself still readable.
    let deleted = Automation { deleted_ms: 9, version: 3, ..paused.clone() };
    assert!(s.update_automation(&deleted, 2, &[]).await.expect("delete"));
    assert!(s.list_automations(&["env_1".into()], "", &page).await.expect("list").is_empty());
    assert!(!s.update_automation(&Automation { version: 4, ..deleted.clone() }, 3, &[]).await.expect("terminal"), "a deleted row is final");
    s.insert_automation(&automation("auto_3", "n1"), &[]).await.expect("the name is free again");
    assert_eq!(s.get_automation(&tid("auto_1")).await.expect("get").map(|a| a.deleted_ms), Some(9));
}

async fn firings_keep_their_children(s: &dyn SchedulerStore) {
    let mut f = firing("afire_1", "auto_1", FiringSource::Manual);
    s.insert_firing(&f).await.expect("insert");
    s.insert_firing(&firing("afire_2", "auto_1", FiringSource::Schedule)).await.expect("insert");
    s.add_child(&f, "sess_c1", "").await.expect("child");
    assert_eq!(s.firing_of_child("sess_c1").await.expect("of child"), Some(tid("afire_1")));
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
}
