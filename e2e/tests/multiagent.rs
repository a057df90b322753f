//! Multiagent through the public API (api.md §15): a coordinator's roster,
//! frozen at publication (acceptance 15.6 #1), and every Session's primary
//! SessionThread (#2).
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::{Value, json};

async fn agent(p: &Platform, name: &str, draft: Value) -> String {
    let r = p.admin.post("/v1/agents", json!({"environment_id": p.env_id, "name": name, "draft": draft})).await;
    expect(&r, 201, None);
    id(&r.1)
}

async fn publish(p: &Platform, agent_id: &str) -> Reply {
    p.admin.post(&format!("/v1/agents/{agent_id}/versions"), json!({})).await
}

async fn set_draft(p: &Platform, agent_id: &str, draft: Value) {
    expect(&p.admin.post(&format!("/v1/agents/{agent_id}"), json!({"draft": draft})).await, 200, None);
}

fn coordinator(agents: Value) -> Value {
    json!({"multiagent": {"type": "coordinator", "agents": agents}})
}

#[track_caller]
fn refused(r: &Reply, reason: &str) {
    expect(r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], reason, "{}", r.1);
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_1_rosters_are_checked_and_frozen_at_publication() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let b = agent(&p, "B", json!({})).await;
    expect(&publish(&p, &b).await, 201, None);
    let c = agent(&p, "C", json!({})).await;
    expect(&publish(&p, &c).await, 201, None);
    let a = agent(&p, "A", coordinator(json!([b]))).await;

    // Refusals, each with its reason.
    set_draft(&p, &a, coordinator(json!([]))).await;
    refused(&publish(&p, &a).await, "roster_empty");
    let many: Vec<String> = (0..21).map(|i| format!("agt_01jx00000000000000000000{:02}", i)).collect();
    set_draft(&p, &a, coordinator(json!(many))).await;
    refused(&publish(&p, &a).await, "roster_too_large");
    set_draft(&p, &a, coordinator(json!([b, {"type": "agent", "id": b, "version": 1}]))).await;
    refused(&publish(&p, &a).await, "roster_duplicate");
    set_draft(&p, &a, coordinator(json!([a, {"type": "self"}]))).await;
    refused(&publish(&p, &a).await, "roster_duplicate");
    let nested = agent(&p, "N", coordinator(json!([c]))).await;
    expect(&publish(&p, &nested).await, 201, None);
    set_draft(&p, &a, coordinator(json!([nested]))).await;
    refused(&publish(&p, &a).await, "nested_coordinator");
    let unpublished = agent(&p, "U", json!({})).await;
    set_draft(&p, &a, coordinator(json!([unpublished]))).await;
    refused(&publish(&p, &a).await, "roster_member_unavailable");
    set_draft(&p, &a, coordinator(json!(["agt_01jx0000000000000000000000"]))).await;
    refused(&publish(&p, &a).await, "roster_member_unavailable");
    set_draft(&p, &a, coordinator(json!([{"type": "agent", "id": b, "version": 9}]))).await;
    refused(&publish(&p, &a).await, "roster_member_unavailable");
    // Shape errors are the draft's.
    let bad = p.admin.post(&format!("/v1/agents/{a}"), json!({"draft": {"multiagent": {"type": "team", "agents": []}}})).await;
    expect(&bad, 400, Some("validation.invalid"));

    // Published: bare ids take the member's latest version, exact ones stay, self is this version.
    set_draft(&p, &a, coordinator(json!([b, {"type": "agent", "id": c, "version": 1}, {"type": "self"}]))).await;
    let v1 = publish(&p, &a).await;
    expect(&v1, 201, None);
    let resolved = |v: &Value| v["definition"]["multiagent"]["resolved_agents"].as_array().unwrap().clone();
    let r1 = resolved(&v1.1);
    assert_eq!(
        (r1[0]["agent_id"].clone(), r1[0]["version"].clone(), r1[0]["name"].clone(), r1[0]["self"].clone()),
        (json!(b), json!(1), json!("B"), json!(false))
    );
    assert!(r1[0]["release_sha256"].as_str().is_some_and(|s| s.len() == 64));
    assert_eq!((r1[1]["agent_id"].clone(), r1[1]["version"].clone()), (json!(c), json!(1)));
    assert_eq!(
        (r1[2]["agent_id"].clone(), r1[2]["self"].clone(), r1[2]["version"].clone()),
        (json!(a), json!(true), v1.1["version"].clone())
    );
    // B v2 and C v2: only republishing A moves bare B; exact C stays at 1.
    set_draft(&p, &b, json!({"instructions": "v2"})).await;
    expect(&publish(&p, &b).await, 201, None);
    expect(&publish(&p, &c).await, 201, None);
    let still = p.admin.get(&format!("/v1/agents/{a}/versions/{}", v1.1["version"])).await;
    assert_eq!(resolved(&still.1)[0]["version"], 1, "a published roster never moves");
    let v2 = publish(&p, &a).await;
    expect(&v2, 201, None);
    let r2 = resolved(&v2.1);
    assert_eq!((r2[0]["version"].clone(), r2[1]["version"].clone()), (json!(2), json!(1)));
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_2_a_single_agent_session_has_one_primary_thread_whose_events_are_the_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let sid = id(&p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": p.admin_id})).await.1);
    expect(&p.admin.post(&format!("/v1/sessions/{sid}/events"), message(&p.admin_id, "hello")).await, 201, None);
    let session = settle(&p.admin, &sid).await;
    let listed = p.admin.get(&format!("/v1/sessions/{sid}/threads")).await;
    expect(&listed, 200, None);
    let threads = listed.1["data"].as_array().unwrap();
    assert_eq!(threads.len(), 1);
    let t = &threads[0];
    let tid = t["id"].as_str().unwrap();
    assert!(tid.starts_with("sthr_"), "{t}");
    assert_eq!(
        (t["type"].clone(), t["session_id"].clone(), t["parent_thread_id"].clone()),
        (json!("session_thread"), json!(sid), Value::Null)
    );
    assert_eq!((t["status"].clone(), t["stop_reason"].clone()), (session["status"].clone(), session["stop_reason"].clone()));
    assert_eq!(
        (t["agent"]["agent_id"].clone(), t["agent"]["name"].clone(), t["agent"]["version"].clone()),
        (json!(d.agent_id), json!("helper"), json!(1))
    );
    expect(&p.admin.get(&format!("/v1/sessions/{sid}/threads/{tid}")).await, 200, None);
    assert_eq!(p.admin.get(&format!("/v1/sessions/{sid}/threads?status=running")).await.1["data"], json!([]));
    // The primary's view is the Session's events.
    let mine = p.admin.get(&format!("/v1/sessions/{sid}/threads/{tid}/events?limit=1000")).await;
    expect(&mine, 200, None);
    assert_eq!(mine.1["data"].as_array().unwrap(), &events(&p.admin, &sid).await);
    // The primary is archived only with its Session; another Session's thread is 404.
    let archived = p.admin.post(&format!("/v1/sessions/{sid}/threads/{tid}/archive"), json!({})).await;
    expect(&archived, 409, Some("validation.conflict"));
    let other = id(&p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": p.admin_id})).await.1);
    expect(&p.admin.get(&format!("/v1/sessions/{other}/threads/{tid}")).await, 404, Some("not_found"));
    expect(&p.admin.get(&format!("/v1/sessions/{other}/threads/{tid}/events")).await, 404, Some("not_found"));
    expect(&p.admin.get(&format!("/v1/sessions/{sid}/threads/nope")).await, 400, Some("validation.invalid"));
}
