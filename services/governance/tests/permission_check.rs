//! The permission check on a real (SQLite) store, below the API: grants
//! reach a principal directly or through a group, on the resource, its
//! Environment or the installation; a revoke or a removed membership counts
//! at once; an Agent's own grants never count for a principal.
#![cfg(test)]

use checkfu_governance::service::NewAssignment;
use checkfu_store::Location;

#[tokio::test(flavor = "multi_thread")]
async fn grants_reach_principals_directly_through_groups_and_up_the_scope() {
    let dir = tempfile::tempdir().unwrap();
    let (svc, _db) = checkfu_governance::open(&Location::SqliteDir(dir.path().into())).await.unwrap();
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
        async move { svc.check(&alice, permission, kind, &id, &in_env).await.unwrap() }
    };

    assert!(!can("invoke", "agent", agent.into(), env.clone()).await.0, "nothing granted yet");

    // Through a group, on the Environment: covers the agent in it, not elsewhere.
    let via_team = svc.create_assignment(&grant("group", &team, "invoke", "environment", &env), &admin).await.unwrap();
    assert!(!can("invoke", "agent", agent.into(), env.clone()).await.0, "alice is not in the team yet");
    svc.add_group_member(&team, &alice, &admin).await.unwrap();
    let (allowed, matched) = can("invoke", "agent", agent.into(), env.clone()).await;
    assert!(allowed);
    assert_eq!(matched, vec![via_team.id.clone()], "the check names the grant that matched");
    assert!(!can("invoke", "agent", agent.into(), other_env.clone()).await.0, "another Environment is not covered");
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
    assert!(can("read", "agent", agent.into(), other_env.clone()).await.0, "manage grants read");
    assert!(!can("invoke", "agent", agent.into(), other_env.clone()).await.0, "but not invoke");

    // An Agent's own grant is the Agent's, never its caller's.
    svc.create_assignment(&grant("agent_definition", agent, "read", "environment", &env), &admin).await.unwrap();
    assert!(!can("read", "environment", env.clone(), env.clone()).await.0, "the agent's grant does not reach alice");

    // The bootstrap admin holds admin on the installation: everything.
    let admin_can = svc.check(&admin, "invoke", "agent", agent, &other_env).await.unwrap();
    assert!(admin_can.0, "admin on the installation covers every Environment");
}
