//! Archiving a SandboxProfile through the public API: nothing new pins it
//! (revisions, deployments), Sessions already running keep theirs, and only
//! a manager of its Environment may archive it.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn an_archived_profile_is_pinned_by_nothing_new() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let d = deploy(a, &p.env_id, json!({})).await;
    let running =
        a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&p.admin_id, "hi")]})).await;
    expect(&running, 201, None);

    let stranger = a.post("/v1/principals", json!({"kind": "human", "name": "stranger"})).await;
    let key = a.post(&format!("/v1/principals/{}/api-keys", id(&stranger.1)), json!({})).await;
    let stranger = Api::new(&p.base, key.1["secret"].as_str().unwrap());
    let refused = stranger.post(&format!("/v1/sandbox-profiles/{}/archive", d.sandbox_profile_id), json!({})).await;
    assert!(matches!(refused.0.as_u16(), 403 | 404), "{:?}", refused.1);

    let archived = a.post(&format!("/v1/sandbox-profiles/{}/archive", d.sandbox_profile_id), json!({})).await;
    expect(&archived, 200, None);
    let at = archived.1["archived_at"].as_str().expect("archived_at").to_string();
    let again = a.post(&format!("/v1/sandbox-profiles/{}/archive", d.sandbox_profile_id), json!({})).await;
    assert_eq!(again.1["archived_at"].as_str(), Some(at.as_str()), "idempotent");
    assert_eq!(a.get(&format!("/v1/sandbox-profiles/{}", d.sandbox_profile_id)).await.1["archived_at"].as_str(), Some(at.as_str()));

    let rev = a.post(&format!("/v1/sandbox-profiles/{}/revisions", d.sandbox_profile_id), json!({"image": "debian:12"})).await;
    expect(&rev, 409, Some("validation.conflict"));
    assert_eq!(rev.1["error"]["details"]["reason"], "archived");
    let dep = a
        .post(
            "/v1/agent-deployments",
            json!({"environment_id": p.env_id, "key": "another", "agent_id": d.agent_id, "agent_version": 1,
                "model_routing_profile_id": d.routing_profile_id, "sandbox_profile_id": d.sandbox_profile_id}),
        )
        .await;
    expect(&dep, 409, Some("validation.conflict"));
    // The Session that was running keeps its pins.
    assert_eq!(settle(a, &id(&running.1)).await["stop_reason"]["type"], "end_turn");
    p.stop().await;
}
