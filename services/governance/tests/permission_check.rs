//! The permission check on a real (SQLite) store, below the API: grants
//! reach a principal directly or through a group, on the resource, its
//! Environment or the installation; a revoke or a removed membership counts
//! at once; an Agent's own grants never count for a principal.
#![cfg(test)]

use checkfu_governance::service::NewAssignment;
use checkfu_store::Location;

#[tokio::test(flavor = "multi_thread")]
async fn grants_reach_principals_directly_through_groups_and_up_the_scope() {
    checks_follow_the_rows(false).await;
}

/// The same with keys and grants kept in memory (the embedded store): every
/// change still counts at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_cache_changes_no_answer() {
    checks_follow_the_rows(true).await;
}

async fn checks_follow_the_rows(cached: bool) {
    let dir = tempfile::tempdir().unwrap();
    let (svc, _db) = checkfu_governance::open(&Location::SqliteDir(dir.path().into())).await.unwrap();
    let svc = if cached { svc.with_read_cache() } else { svc };
    let made = svc.bootstrap(|_| Ok(())).await.unwrap();
    let admin = made.admin_principal_id;
    let env = made.environment_id;
    let other_env = svc.create_environment("other", &admin).await.unwrap().id;
    let alice = svc.create_principal("human", "alice", &admin).await.unwrap().id;
    let team = svc.create_group("team", &admin).await.unwrap().id;
    let agent = "agt_0000000000000000000000000a";
    let grant = |subject_kind: &str, subject_id: &str, permission: &str, resource_kind: &str, resource_id: &str| NewAssignment {
        subject_kind: subject_kind.into(),
        subject_id: subject_id.into(),
        permission: permission.into(),
        resource_kind: resource_kind.into(),
        resource_id: resource_id.into(),
        environment_id: if resource_kind == "environment" { resource_id.into() } else { env.clone() },
    };
    let can = |permission: &'static str, kind: &'static str, id: String, in_env: String| {
        let svc = svc.clone();
        let alice = alice.clone();
        async move { svc.check(&alice, permission, kind, &id, Some(&in_env)).await.unwrap() }
    };

    assert!(!can("invoke", "agent", agent.into(), env.clone()).await.0, "nothing granted yet");

    // Through a group, on the Environment: covers the agent in it, not elsewhere.
    let via_team = svc.create_assignment(&grant("group", &team, "invoke", "environment", &env), &admin).await.unwrap();
    assert!(!can("invoke", "agent", agent.into(), env.clone()).await.0, "alice is not in the team yet");
    svc.add_group_member(&team, &alice, &admin).await.unwrap();
    let (allowed, matched) = can("invoke", "agent", agent.into(), env.clone()).await;
    assert!(allowed);
    assert_eq!(matched, vec![via_team.id.clone()], "the check names the grant that matched");
    assert!(!can("invoke", "agent", agent.into(), other_env.clone().into()).await.0, "another Environment is not covered");
    assert!(!can("manage", "agent", agent.into(), env.clone()).await.0, "invoke does not grant manage");

    // Removing the membership counts at once.
    svc.remove_group_member(&team, &alice, &admin).await.unwrap();
    assert!(!can("invoke", "agent", agent.into(), env.clone()).await.0);

    // Directly on the resource: that agent only.
    let direct = svc.create_assignment(&grant("principal", &alice, "invoke", "agent", agent), &admin).await.unwrap();
    assert!(can("invoke", "agent", agent.into(), env.clone()).await.0);
    assert!(!can("invoke", "agent", "agt_0000000000000000000000000b".into(), env.clone()).await.0, "only that agent");
    assert!(!can("read", "agent", agent.into(), env.clone()).await.0, "invoke does not grant read");

    // A revoke counts at once.
    svc.delete_assignment(&direct.id, &admin).await.unwrap();
    assert!(!can("invoke", "agent", agent.into(), env.clone()).await.0);

    // manage on an Environment grants read there, not invoke.
    svc.create_assignment(&grant("principal", &alice, "manage", "environment", &other_env), &admin).await.unwrap();
    assert!(can("read", "agent", agent.into(), other_env.clone().into()).await.0, "manage grants read");
    assert!(!can("invoke", "agent", agent.into(), other_env.clone().into()).await.0, "but not invoke");

    // An Agent's own grant is the Agent's, never its caller's.
    svc.create_assignment(&grant("agent_definition", agent, "read", "environment", &env), &admin).await.unwrap();
    assert!(!can("read", "environment", env.clone(), env.clone()).await.0, "the agent's grant does not reach alice");

    // Keys: a revoked key and a disabled principal stop authenticating at once.
    let (key, secret) = svc.create_api_key(&alice, "k", &admin).await.unwrap();
    assert_eq!(svc.authenticate(&secret).await.unwrap().0, alice);
    assert_eq!(svc.authenticate(&secret).await.unwrap().0, alice, "twice (a cache hit when cached)");
    svc.update_principal(&alice, Some(true), &admin).await.unwrap();
    assert!(svc.authenticate(&secret).await.is_err(), "a disabled principal's key fails");
    svc.update_principal(&alice, Some(false), &admin).await.unwrap();
    assert!(svc.authenticate(&secret).await.is_ok());
    svc.revoke_api_key(&key.id, &admin).await.unwrap();
    assert!(svc.authenticate(&secret).await.is_err(), "a revoked key fails at once");

    // The bootstrap admin holds admin on the installation: everything.
    let admin_can = svc.check(&admin, "invoke", "agent", agent, Some(&other_env)).await.unwrap();
    assert!(admin_can.0, "admin on the installation covers every Environment");
}
