//! The conformance suite for [`GovernanceStore`]: one body of assertions run
//! against every backend. SQLite always; PostgreSQL when
//! `CHECKFU_TEST_POSTGRES_URL` is set (each run gets a fresh schema).

use super::*;
use checkfu_core::testing::tid;
use checkfu_store::{Db, Location};
use std::sync::Arc;

async fn backends() -> Vec<(String, Arc<dyn GovernanceStore>, Option<tempfile::TempDir>)> {
    let mut out: Vec<(String, Arc<dyn GovernanceStore>, Option<tempfile::TempDir>)> = Vec::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(&Location::SqliteDir(dir.path().into()), "governance", &crate::MIGRATIONS).await.expect("sqlite");
    out.push(("sqlite".into(), Arc::new(SqlGovernanceStore::new(db)), Some(dir)));
    if let Some(url) = checkfu_core::testing::postgres("the governance store on PostgreSQL") {
        let schema = checkfu_core::testing::fresh_schema("gov");
        let db = Db::open(&Location::Postgres(url), &schema, &crate::MIGRATIONS).await.expect("postgres");
        out.push(("postgres".into(), Arc::new(SqlGovernanceStore::new(db)), None));
    }
    out
}

fn principal(id: &str) -> Principal {
    Principal { id: tid(id), kind: PrincipalKind::Service, name: format!("svc-{id}"), disabled: false, created_ms: 1 }
}

fn grant(id: &str, subject: &str, perm: Permission, kind: ResourceKind, res: &str) -> Assignment {
    Assignment {
        id: tid(id),
        subject_kind: SubjectKind::Principal,
        subject_id: subject.into(),
        permission: perm,
        resource_kind: kind,
        resource_id: res.into(),
        environment_id: None,
        created_by: "prin_admin".into(),
        created_ms: 2,
        via: None,
    }
}

/// Two replicas bootstrapping a fresh store at once: exactly one wins.
#[tokio::test(flavor = "multi_thread")]
async fn bootstrap_happens_once_under_a_race() {
    for (name, s, _guard) in backends().await {
        let attempt = |n: usize| {
            let s = s.clone();
            async move {
                let admin = principal(&format!("prin_race{n:021}"));
                let g = grant(&format!("pa_race{n}"), &admin.id, Permission::Admin, ResourceKind::Installation, "*");
                let e =
                    Environment { id: tid(&format!("env_race{n}")), name: "default".into(), version: 1, disabled: false, created_ms: 1 };
                let k = ApiKey {
                    id: tid(&format!("key_race{n}")),
                    principal_id: admin.id.clone(),
                    name: "b".into(),
                    created_ms: 1,
                    revoked_ms: None,
                };
                s.bootstrap(&admin, &g, &e, &k, &format!("h-race{n}")).await.expect("bootstrap")
            }
        };
        let (a, b) = tokio::join!(attempt(1), attempt(2));
        assert!(a ^ b, "{name}: exactly one bootstrap wins ({a}, {b})");
        assert!(!attempt(3).await, "{name}: and later ones do nothing");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn governance_store_conformance() {
    for (name, s, _guard) in backends().await {
        principals_and_paging(&*s).await;
        keys_hash_lookup_and_revoke(&*s).await;
        groups_membership(&*s).await;
        environments_compare_and_set(&*s).await;
        assignments_unique_filter_delete(&*s).await;
        policies_compare_and_set(&*s).await;
        audit_filters(&*s).await;
        approvals_decide_once(&*s).await;
        standing_exact_tuple(&*s).await;
        bootstrap_only_once(&*s).await;
        console_sessions_follow_their_key(&*s).await;
        eprintln!("governance store conformance passed on {name}");
    }
}

async fn principals_and_paging(s: &dyn GovernanceStore) {
    for i in 0..5 {
        s.insert_principal(&principal(&format!("prin_{i:026}"))).await.expect("insert");
    }
    let p1 = PageRequest::standard(2, "").expect("page");
    let rows = s.list_principals(&p1).await.expect("list");
    assert_eq!(rows.len(), 3, "fetches one extra to detect the next page");
    let (rows, next) = p1.finish(rows, |p| &p.id);
    assert_eq!(rows[0].id, format!("prin_{:026}", 4), "newest (largest id) first");
    let p2 = PageRequest::standard(2, &next).expect("page");
    let rows2 = s.list_principals(&p2).await.expect("list");
    assert_eq!(rows2[0].id, format!("prin_{:026}", 2));
    let d = s.set_principal_disabled(&tid(&format!("prin_{:026}", 1)), true).await.expect("disable").expect("exists");
    assert!(d.disabled);
    assert!(s.get_principal(&tid("prin_missing")).await.expect("get").is_none());
    assert!(s.insert_principal(&principal(&format!("prin_{:026}", 1))).await.is_err(), "duplicate id refused");
}

async fn keys_hash_lookup_and_revoke(s: &dyn GovernanceStore) {
    let key =
        ApiKey { id: tid("key_1"), principal_id: tid(&format!("prin_{:026}", 0)), name: "ci".into(), created_ms: 3, revoked_ms: None };
    assert_eq!(s.count_active_api_keys(&key.principal_id).await.expect("count"), 0);
    s.insert_api_key(&key, "hash-1").await.expect("insert");
    assert_eq!(s.count_active_api_keys(&key.principal_id).await.expect("count"), 1);
    assert_eq!(s.get_api_key(&tid("key_1")).await.expect("get"), Some(key.clone()));
    assert_eq!(s.authenticate("hash-1").await.expect("auth"), Some((key.principal_id.to_string(), "key_1".to_string())));
    assert_eq!(s.authenticate("hash-2").await.expect("auth"), None);
    let revoked = s.revoke_api_key(&tid("key_1"), 9).await.expect("revoke").expect("exists");
    assert_eq!(s.authenticate("hash-1").await.expect("auth"), None, "a revoked key authenticates nothing");
    assert_eq!(revoked.revoked_ms, Some(9));
    assert_eq!(s.count_active_api_keys(&key.principal_id).await.expect("count"), 0, "a revoked key is not active");
    let again = s.revoke_api_key(&tid("key_1"), 10).await.expect("revoke").expect("exists");
    assert_eq!(again.revoked_ms, Some(9), "a second revoke keeps the first time");
    let listed = s.list_api_keys(&key.principal_id, &PageRequest::standard(10, "").expect("page")).await.expect("list");
    assert_eq!(listed.len(), 1);
}

/// A console session is live only while it is open, unexpired, recently
/// used, and its key and Principal still authenticate.
async fn console_sessions_follow_their_key(s: &dyn GovernanceStore) {
    let owner = principal(&format!("prin_csn{:023}", 1));
    s.insert_principal(&owner).await.expect("principal");
    let key = ApiKey { id: tid("key_csn1"), principal_id: owner.id.clone(), name: "console".into(), created_ms: 1, revoked_ms: None };
    s.insert_api_key(&key, "hash-csn1").await.expect("key");
    let session = |id: &str| ConsoleSession {
        id: tid(id),
        key_id: key.id.clone(),
        principal_id: owner.id.clone(),
        created_ms: 1_000,
        expires_ms: 100_000,
        last_seen_ms: 1_000,
    };
    let idle = 10_000;
    s.insert_console_session(&session("csn_a"), "tok-a", "csrf-a").await.expect("insert");
    s.insert_console_session(&session("csn_b"), "tok-b", "csrf-b").await.expect("insert");
    let live = s.live_console_session("tok-a", 5_000, idle).await.expect("read").expect("live");
    assert_eq!(live.session, session("csn_a"));
    assert_eq!(live.csrf_sha256, "csrf-a");
    assert!(s.live_console_session("tok-x", 5_000, idle).await.expect("read").is_none(), "an unknown token");
    assert!(s.live_console_session("tok-a", 11_001, idle).await.expect("read").is_none(), "idle past the limit");
    s.touch_console_session("csn_a", 9_000).await.expect("touch");
    s.touch_console_session("csn_a", 8_000).await.expect("an older touch changes nothing");
    let live = s.live_console_session("tok-a", 11_001, idle).await.expect("read").expect("a touch keeps it");
    assert_eq!(live.session.last_seen_ms, 9_000);
    assert!(s.live_console_session("tok-a", 100_000, 1_000_000).await.expect("read").is_none(), "past its expiry");
    assert!(s.end_console_session("tok-b", 6_000).await.expect("end"));
    assert!(!s.end_console_session("tok-b", 7_000).await.expect("end"), "ending twice");
    assert!(s.live_console_session("tok-b", 6_500, idle).await.expect("read").is_none(), "ended");
    s.set_principal_disabled(&owner.id, true).await.expect("disable");
    assert!(s.live_console_session("tok-a", 9_500, idle).await.expect("read").is_none(), "its Principal disabled");
    s.set_principal_disabled(&owner.id, false).await.expect("enable");
    assert!(s.live_console_session("tok-a", 9_500, idle).await.expect("read").is_some(), "enabled again");
    s.revoke_api_key(&key.id, 9_600).await.expect("revoke");
    assert!(s.live_console_session("tok-a", 9_700, idle).await.expect("read").is_none(), "its key revoked");
    assert_eq!(s.purge_console_sessions(7_000).await.expect("purge"), 1, "the ended one goes");
    assert_eq!(s.purge_console_sessions(200_000).await.expect("purge"), 1, "then the expired one");
}

async fn groups_membership(s: &dyn GovernanceStore) {
    let g = Group { id: tid("grp_1"), name: "ops".into(), member_ids: vec![], created_ms: 4 };
    s.insert_group(&g).await.expect("insert");
    assert!(s.insert_group(&Group { id: tid("grp_2"), ..g.clone() }).await.is_err(), "names are unique");
    let m = format!("prin_{:026}", 3);
    s.add_group_member(&tid("grp_1"), &tid(&m)).await.expect("add");
    s.add_group_member(&tid("grp_1"), &tid(&m)).await.expect("adding twice is harmless");
    assert_eq!(s.get_group(&tid("grp_1")).await.expect("get").expect("exists").member_ids, vec![m.clone()]);
    assert_eq!(s.groups_of(&m).await.expect("groups"), vec!["grp_1".to_string()]);
    assert!(s.remove_group_member(&tid("grp_1"), &tid(&m)).await.expect("remove"));
    assert!(!s.remove_group_member(&tid("grp_1"), &tid(&m)).await.expect("remove"));
    assert!(s.groups_of(&m).await.expect("groups").is_empty());
}

async fn environments_compare_and_set(s: &dyn GovernanceStore) {
    let e = Environment { id: tid("env_1"), name: "staging".into(), version: 1, disabled: false, created_ms: 5 };
    s.insert_environment(&e).await.expect("insert");
    let next = Environment { disabled: true, version: 2, ..e.clone() };
    assert!(s.update_environment(&next, 1).await.expect("cas"));
    assert!(!s.update_environment(&next, 1).await.expect("cas"), "stale version refused");
    assert_eq!(s.get_environment(&tid("env_1")).await.expect("get").expect("exists"), next);
}

async fn assignments_unique_filter_delete(s: &dyn GovernanceStore) {
    let who = format!("prin_{:026}", 2);
    let a = grant("pa_1", &who, Permission::Invoke, ResourceKind::Agent, "agt_1");
    s.insert_assignment(&a).await.expect("insert");
    let dup = Assignment { id: tid("pa_2"), ..a.clone() };
    assert!(s.insert_assignment(&dup).await.is_err(), "the same grant twice is refused");
    s.insert_assignment(&grant("pa_3", &who, Permission::Read, ResourceKind::Environment, "env_1")).await.expect("insert");
    let all = PageRequest::standard(100, "").expect("page");
    let f = AssignmentFilter { permission: Some(Permission::Invoke), ..Default::default() };
    assert_eq!(s.list_assignments(&f, &all).await.expect("list").len(), 1);
    let f = AssignmentFilter { subject_id: Some(who.clone()), ..Default::default() };
    assert_eq!(s.list_assignments(&f, &all).await.expect("list").len(), 2);
    assert_eq!(s.reach_of(&who).await.expect("reach").len(), 2);
    // Reach: own grants plus the groups', none once disabled.
    let g = Group { id: tid("grp_r"), name: "reach".into(), member_ids: vec![], created_ms: 1 };
    s.insert_group(&g).await.expect("group");
    s.add_group_member(&tid("grp_r"), &tid(&who)).await.expect("member");
    let mut via_group = grant("pa_g", "grp_r", Permission::Approve, ResourceKind::Environment, "env_1");
    via_group.subject_kind = SubjectKind::Group;
    s.insert_assignment(&via_group).await.expect("insert");
    let mut reach: Vec<String> = s.reach_of(&who).await.expect("reach").into_iter().map(|a| a.id.to_string()).collect();
    reach.sort();
    assert_eq!(reach, vec!["pa_1", "pa_3", "pa_g"]);
    s.set_principal_disabled(&tid(&who), true).await.expect("disable");
    assert!(s.reach_of(&who).await.expect("reach").is_empty(), "a disabled principal reaches nothing");
    s.set_principal_disabled(&tid(&who), false).await.expect("enable");
    assert!(s.delete_assignment(&tid("pa_1")).await.expect("delete"));
    assert!(!s.delete_assignment(&tid("pa_1")).await.expect("delete"));
    assert!(s.get_assignment(&tid("pa_1")).await.expect("get").is_none());
}

async fn bootstrap_only_once(s: &dyn GovernanceStore) {
    // The store already holds principals, so bootstrap must refuse.
    assert!(!s.is_empty().await.expect("empty"));
    let admin = principal("prin_zzzzzzzzzzzzzzzzzzzzzzzzzz");
    let g = grant("pa_boot", &admin.id, Permission::Admin, ResourceKind::Installation, "*");
    let e = Environment { id: tid("env_boot"), name: "default".into(), version: 1, disabled: false, created_ms: 1 };
    let k = ApiKey { id: tid("key_boot"), principal_id: admin.id.clone(), name: "b".into(), created_ms: 1, revoked_ms: None };
    assert!(!s.bootstrap(&admin, &g, &e, &k, "h-boot").await.expect("bootstrap"));
    assert!(s.get_principal(&admin.id).await.expect("get").is_none(), "nothing written");
}

async fn policies_compare_and_set(s: &dyn GovernanceStore) {
    use crate::policy::{ActionPolicy, parse_rules};
    let rules = serde_json::json!([{"subject": {"kind": "*"}, "resource": {"kind": "tool", "id_glob": "bash"}, "disposition": "deny"}]);
    let p = ActionPolicy {
        id: tid("apol_1"),
        environment_id: tid("env_p"),
        name: "no-bash".into(),
        rules: parse_rules("apol_1", rules).expect("rules"),
        version: 1,
        created_ms: 1,
        updated_ms: 1,
    };
    s.insert_policy(&p).await.expect("insert");
    assert!(s.insert_policy(&ActionPolicy { id: tid("apol_2"), ..p.clone() }).await.is_err(), "names are unique per environment");
    assert_eq!(s.get_policy(&tid("apol_1")).await.expect("get"), Some(p.clone()), "rule ids are re-derived on read");
    let next = ActionPolicy { name: "renamed".into(), version: 2, updated_ms: 2, ..p.clone() };
    assert!(s.update_policy(&next, 1).await.expect("cas"));
    assert!(!s.update_policy(&next, 1).await.expect("cas"), "stale version refused");
    assert_eq!(s.policies_in("env_p").await.expect("in").len(), 1);
    assert_eq!(s.policy_named("env_p", "renamed").await.expect("named").map(|p| p.id), Some(tid("apol_1")));
    assert!(s.policy_named("env_p", "no-bash").await.expect("named").is_none(), "the old name is gone");
    assert!(s.policy_named("env_q", "renamed").await.expect("named").is_none(), "names are per environment");
    assert!(s.policies_in("env_q").await.expect("in").is_empty());
    assert_eq!(s.list_policies(&["env_p".into()], &PageRequest::standard(10, "").expect("page")).await.expect("list").len(), 1);
    assert!(s.delete_policy(&tid("apol_1")).await.expect("delete"));
    assert!(!s.delete_policy(&tid("apol_1")).await.expect("delete"));
}

async fn audit_filters(s: &dyn GovernanceStore) {
    for (i, (actor, res)) in [("prin_x", "pa_a"), ("prin_y", "pa_a"), ("prin_x", "pa_b")].iter().enumerate() {
        let r = AuditRecord {
            id: tid(&format!("aud_{i}")),
            actor_id: actor.to_string(),
            action: "t".into(),
            resource_kind: "k".into(),
            resource_id: res.to_string(),
            details: serde_json::json!({"i": i}),
            created_ms: 1,
        };
        s.insert_audit(&r).await.expect("insert");
    }
    let page = PageRequest::standard(10, "").expect("page");
    assert_eq!(s.list_audit("pa_a", "", &page).await.expect("list").len(), 2);
    assert_eq!(s.list_audit("", "prin_x", &page).await.expect("list").len(), 2);
    let both = s.list_audit("pa_a", "prin_x", &page).await.expect("list");
    assert_eq!((both.len(), both[0].details.clone()), (1, serde_json::json!({"i": 0})));
}

fn pending(id: &str, tool_use_id: &str, expires_ms: i64) -> crate::model::ActionApproval {
    use crate::model::*;
    ActionApproval {
        id: tid(id),
        environment_id: tid("env_a"),
        status: ApprovalStatus::Pending,
        session_id: tid("sess_a"),
        run_id: tid("run_a"),
        tool_use_id: tool_use_id.into(),
        frozen: Frozen {
            principal_id: "prin_p".into(),
            agent_id: "agt_a".into(),
            tool: "write".into(),
            connection_id: String::new(),
            arguments: serde_json::json!({"path": "x"}),
            arguments_sha256: "h".into(),
        },
        response_token: "art_t".into(),
        expires_ms,
        responder_principal_id: String::new(),
        responded_ms: None,
        decision: String::new(),
        standing_approval_id: String::new(),
        settled: false,
        created_ms: 1,
        deny_message: String::new(),
        automation_firing_id: String::new(),
        step_id: String::new(),
    }
}

async fn approvals_decide_once(s: &dyn GovernanceStore) {
    use crate::model::ApprovalStatus;
    let a = pending("aapr_1", "tu_1", 100);
    assert!(s.insert_approval(&a).await.expect("insert"));
    assert!(!s.insert_approval(&pending("aapr_2", "tu_1", 100)).await.expect("insert"), "one approval per tool use");
    assert_eq!(s.approval_for("sess_a", "tu_1").await.expect("for"), Some(a.clone()));
    assert!(s.insert_approval(&pending("aapr_3", "tu_3", 1_000)).await.expect("insert"));
    let page = PageRequest::standard(10, "").expect("page");
    assert_eq!(s.list_approvals(&["env_a".into()], "pending", "", &page).await.expect("list").len(), 2);
    assert_eq!(s.list_approvals(&["env_a".into()], "", "sess_b", &page).await.expect("list").len(), 0);
    let overdue = s.overdue_approvals(500, 10).await.expect("overdue");
    assert_eq!(overdue.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(), vec!["aapr_1"]);
    assert!(s.unsettled_approvals(false, 10).await.expect("unsettled").is_empty(), "pending ones are not settled yet");
    assert!(!s.mark_settled("aapr_1").await.expect("mark"), "a pending approval cannot be settled");
    let approved = crate::model::ActionApproval {
        status: ApprovalStatus::Approved,
        decision: "approve".into(),
        responder_principal_id: "prin_r".into(),
        responded_ms: Some(50),
        response_token: String::new(),
        ..a.clone()
    };
    assert!(s.decide_approval(&approved).await.expect("decide"));
    let denied = crate::model::ActionApproval { status: ApprovalStatus::Denied, ..approved.clone() };
    assert!(!s.decide_approval(&denied).await.expect("decide"), "only one decision wins");
    assert_eq!(s.get_approval("aapr_1").await.expect("get"), Some(approved));
    // A denial keeps its message for the Session.
    let with_message = crate::model::ActionApproval {
        status: ApprovalStatus::Denied,
        decision: "deny".into(),
        responded_ms: Some(60),
        deny_message: "not that file".into(),
        ..pending("aapr_3", "tu_3", 1_000)
    };
    assert!(s.decide_approval(&with_message).await.expect("decide"));
    assert_eq!(s.get_approval("aapr_3").await.expect("get").expect("kept").deny_message, "not that file");
    assert_eq!(s.unsettled_approvals(false, 10).await.expect("unsettled").len(), 2);
    assert!(s.mark_settled("aapr_1").await.expect("mark"));
    assert!(s.mark_settled("aapr_3").await.expect("mark"));
    assert!(s.unsettled_approvals(false, 10).await.expect("unsettled").is_empty());
    assert!(s.unsettled_approvals(true, 10).await.expect("steps").is_empty(), "a Session's approvals are not a step's");
}

async fn standing_exact_tuple(s: &dyn GovernanceStore) {
    let st = crate::model::StandingApproval {
        id: tid("sapr_1"),
        environment_id: tid("env_a"),
        principal_id: tid("prin_p"),
        agent_id: tid("agt_a"),
        tool: "write".into(),
        connection_id: String::new(),
        expires_ms: 1_000,
        created_from_approval_id: tid("aapr_1"),
        created_by: "prin_r".into(),
        revoked_ms: None,
        created_ms: 1,
    };
    s.insert_standing(&st).await.expect("insert");
    let cover = |tool: &'static str, agent: &'static str, now: i64| async move {
        s.covering_standing("env_a", "prin_p", agent, tool, "", now).await.expect("cover").map(|x| x.id)
    };
    assert_eq!(cover("write", "agt_a", 10).await, Some(tid("sapr_1")));
    assert_eq!(cover("edit", "agt_a", 10).await, None, "another tool");
    assert_eq!(cover("write", "agt_b", 10).await, None, "another agent");
    assert_eq!(cover("write", "agt_a", 1_000).await, None, "expired");
    assert!(s.revoke_standing("sapr_1", 20).await.expect("revoke"));
    assert!(!s.revoke_standing("sapr_1", 30).await.expect("revoke"));
    assert_eq!(cover("write", "agt_a", 10).await, None, "revoked");
    let page = PageRequest::standard(10, "").expect("page");
    let listed = s.list_standing(&["env_a".into()], &page).await.expect("list");
    assert_eq!(listed[0].revoked_ms, Some(20));
}

/// A vault and its compiled rows change together; a direct row on the same
/// tuple stands beside a compiled one and outlives the vault.
#[tokio::test(flavor = "multi_thread")]
async fn vault_rows_change_with_their_vault_only() {
    for (name, s, _guard) in backends().await {
        let v = ConnectionVault {
            id: tid("cvlt_1"),
            environment_id: tid("env_1"),
            name: "platform".into(),
            connection_ids: vec!["conn_1".into()],
            grantees: vec![Grantee { kind: "principal".into(), id: "prin_r".into() }],
            metadata: [("team".to_string(), "core".to_string())].into(),
            archived_ms: None,
            created_by: "prin_admin".into(),
            created_ms: 1,
            updated_ms: 1,
            version: 1,
        };
        let via = Some(Via { kind: VAULT_KIND.into(), id: "cvlt_1".into() });
        let compiled =
            Assignment { via: via.clone(), ..grant("pa_v1", "prin_r", Permission::UseConnection, ResourceKind::Connection, "conn_1") };
        let direct = grant("pa_d1", "prin_r", Permission::UseConnection, ResourceKind::Connection, "conn_1");
        s.insert_vault(&v, std::slice::from_ref(&compiled)).await.expect("vault");
        s.insert_assignment(&direct).await.expect("a direct row beside the compiled one");
        assert_eq!(s.get_vault("cvlt_1").await.expect("get"), Some(v.clone()), "{name}");
        assert_eq!(s.vaults_holding("conn_1").await.expect("holding"), ["cvlt_1"], "{name}");
        assert!(s.vaults_holding("conn_").await.expect("holding").is_empty(), "{name}: whole ids only");
        assert_eq!(s.rows_via("cvlt_1").await.expect("rows"), vec![compiled.clone()], "{name}");
        let dup = ConnectionVault { id: tid("cvlt_2"), ..v.clone() };
        assert_eq!(s.insert_vault(&dup, &[]).await.expect_err("name").details["reason"], "name_taken", "{name}");

        let next = ConnectionVault { connection_ids: vec!["conn_2".into()], version: 2, ..v.clone() };
        let added =
            Assignment { via: via.clone(), ..grant("pa_v2", "prin_r", Permission::UseConnection, ResourceKind::Connection, "conn_2") };
        assert!(
            !s.update_vault(&next, 7, std::slice::from_ref(&added), std::slice::from_ref(&compiled.id)).await.expect("stale"),
            "{name}"
        );
        assert!(
            s.update_vault(&next, 1, std::slice::from_ref(&added), &[compiled.id.clone(), direct.id.clone()]).await.expect("update"),
            "{name}"
        );
        assert_eq!(s.rows_via("cvlt_1").await.expect("rows"), vec![added.clone()], "{name}");
        assert!(s.get_assignment(&direct.id).await.expect("direct").is_some(), "{name}: only the vault's own rows go");

        // Archiving is an edit: the record stays, with its metadata; the rows go.
        let archived = ConnectionVault { archived_ms: Some(5), version: 3, ..next.clone() };
        assert!(s.update_vault(&archived, 2, &[], std::slice::from_ref(&added.id)).await.expect("archive"), "{name}");
        assert_eq!(s.get_vault("cvlt_1").await.expect("get"), Some(archived), "{name}");
        assert!(s.vaults_holding("conn_2").await.expect("holding").is_empty(), "{name}: an archived vault holds nothing");
        assert!(s.rows_via("cvlt_1").await.expect("rows").is_empty(), "{name}");

        assert!(s.delete_vault("cvlt_1").await.expect("delete"), "{name}");
        assert!(s.rows_via("cvlt_1").await.expect("rows").is_empty(), "{name}");
        assert!(s.get_assignment(&direct.id).await.expect("direct").is_some(), "{name}");
        assert!(!s.delete_vault("cvlt_1").await.expect("again"), "{name}");
    }
}
