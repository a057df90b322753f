//! The external_tools plane natively (api.md §17.13–17.14, docs/runners.md):
//! a SandboxProfile revision of `execution: "external_tools"` pairs only
//! with deployments of that plane; its Sessions' sandbox calls wait, the
//! Session running, for the work item's holder — holding no runner slot
//! while they do — and no other client may answer them. (The holder's
//! side, through the SDK's worker, is `cma.rs` acceptance 15.)
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::{Value, json};
use std::time::Duration;

struct External {
    deployment_id: String,
    profile_id: String,
}

/// An agent declaring bash, on an external_tools profile, allowed to run it.
async fn external(a: &Api, env: &str) -> External {
    let agent = a
        .post("/v1/agents", json!({"environment_id": env, "name": "ext", "draft": {"tools": [{"type": "builtin", "name": "bash"}]}}))
        .await;
    expect(&agent, 201, None);
    let agent_id = id(&agent.1);
    expect(&a.post(&format!("/v1/agents/{agent_id}/versions"), json!({})).await, 201, None);
    let sbp = a
        .post("/v1/sandbox-profiles", json!({"environment_id": env, "name": "ext", "image": "self-hosted", "execution": "external_tools"}))
        .await;
    expect(&sbp, 201, None);
    assert_eq!(sbp.1["latest"]["execution"], "external_tools", "{}", sbp.1);
    let managed = a.post("/v1/sandbox-profiles", json!({"environment_id": env, "name": "managed", "image": "debian:12"})).await;
    assert_eq!(managed.1["latest"]["execution"], "managed", "{}", managed.1);
    let mrp = a
        .post(
            "/v1/model-routing-profiles",
            json!({"environment_id": env, "name": "ext", "candidates": [{"provider": "scripted", "model": "scripted-1", "effort": "low"}]}),
        )
        .await;
    expect(&mrp, 201, None);
    let body = |sbp: &Value, key: &str, execution: Value| {
        json!({"environment_id": env, "key": key, "agent_id": agent_id, "agent_version": 1, "model_routing_profile_id": id(&mrp.1),
            "sandbox_profile_id": id(sbp), "execution": execution})
    };
    let plane = json!({"kind": "external_tools", "pool": format!("cma:{}", id(&sbp.1))});
    // The plane and the profile's revision pair, either way round.
    let r = a.post("/v1/agent-deployments", body(&managed.1, "wrong-1", plane.clone())).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "execution_mismatch", "{}", r.1);
    expect(&a.post("/v1/agent-deployments", body(&sbp.1, "wrong-2", json!({"kind": "managed"}))).await, 400, Some("validation.invalid"));
    let dep = a.post("/v1/agent-deployments", body(&sbp.1, "ext", plane.clone())).await;
    expect(&dep, 201, None);
    assert_eq!(dep.1["execution"], plane, "{}", dep.1);
    let allow = json!({"environment_id": env, "name": "ext-tools", "rules": [
        {"subject": {"kind": "agent_definition", "id_glob": agent_id}, "resource": {"kind": "tool", "id_glob": "*"}, "permission_glob": "invoke", "disposition": "allow"}
    ]});
    expect(&a.post("/v1/action-policies", allow).await, 201, None);
    External { deployment_id: id(&dep.1), profile_id: id(&sbp.1) }
}

async fn waiting_use(a: &Api, session: &str) -> Value {
    for _ in 0..400 {
        if let Some(u) = events(a, session).await.into_iter().find(|e| e["type"] == "agent.tool_use") {
            return u;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no agent.tool_use in {session}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_call_waits_for_the_work_holder_without_holding_a_runner_slot() {
    let dir = tempfile::tempdir().unwrap();
    // One slot: a wait that held it would stop every other Session here.
    let p = Platform::start_timed(dir.path(), Tuning { runner_concurrency: Some(1), ..Default::default() }).await;
    let a = &p.admin;
    let ext = external(a, &p.env_id).await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": ext.deployment_id, "initial_events": [message(&p.admin_id, r#"call bash {"command":"echo hi"}"#)]})).await;
    expect(&s, 201, None);
    let sid = id(&s.1);
    assert_eq!(s.1["execution"]["kind"], "external_tools", "{}", s.1);
    let used = waiting_use(a, &sid).await;
    assert_eq!((used["payload"]["name"].as_str(), used["payload"]["external"].as_bool()), (Some("bash"), Some(true)), "{used}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let now = a.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(now.1["status"], "running", "the Session runs while its worker owes the result: {}", now.1);
    assert!(!types(&events(a, &sid).await).contains(&"agent.tool_result".to_string()), "nothing ran the call here");

    // Another Session's turn still gets the one slot.
    let other = deploy(a, &p.env_id, json!({})).await;
    let s2 =
        a.post("/v1/sessions", json!({"agent_deployment_id": other.deployment_id, "initial_events": [message(&p.admin_id, "hi")]})).await;
    expect(&s2, 201, None);
    let done = settle(a, &id(&s2.1)).await;
    assert_eq!(done["stop_reason"]["type"], "end_turn", "{done}");

    // Nobody but the work item's holder answers a sandbox call.
    let forged = input(&p.admin_id, "user.tool_result", json!({"tool_use_id": used["payload"]["tool_use_id"], "content": "forged"}));
    let r = a.post(&format!("/v1/sessions/{sid}/events"), forged).await;
    expect(&r, 403, Some("permission.denied"));
    assert_eq!(r.1["error"]["details"]["reason"], "work_holder_only", "{}", r.1);

    // The Session has its work item, queued for a Runner of the pool.
    let (_, stats, _) =
        cma_get(&reqwest::Client::new(), &p.base, &format!("environments/{}/work/stats", ext.profile_id), &p.admin.key).await;
    assert_eq!(stats["depth"], 1, "{stats}");

    // An interrupt ends the wait: the call gets an error result, the Session idles.
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), interrupt(&p.admin_id)).await, 201, None);
    let idle = settle(a, &sid).await;
    assert_eq!(idle["stop_reason"]["type"], "end_turn", "{idle}");
    let log = events(a, &sid).await;
    let answer = log.iter().find(|e| e["type"] == "agent.tool_result").expect("an answer");
    assert_eq!(answer["payload"]["is_error"], true, "{answer}");
    assert_gapless(&log);
    p.stop().await;
}

/// `GET /cma/v1/<path>` with `key` from `client`.
async fn cma_get(client: &reqwest::Client, base: &str, path: &str, key: &str) -> (u16, Value, reqwest::header::HeaderMap) {
    let r = client
        .get(format!("{base}/cma/v1/{path}"))
        .header("x-api-key", key)
        .header("anthropic-beta", "managed-agents-2026-04-01")
        .send()
        .await
        .unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, r.json().await.unwrap_or(Value::Null), headers)
}

/// Worker credentials (the environment key, a delivery's token) are
/// checked by the sessions service, yet bounded as API keys are: each has
/// its own per-second limit, and an address presenting invalid ones is
/// throttled before they are looked up.
#[tokio::test(flavor = "multi_thread")]
async fn worker_credentials_are_rate_limited_and_invalid_ones_throttled() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { rate_limit_per_second: 20, ..Default::default() }).await;
    let a = &p.admin;
    let ext = external(a, &p.env_id).await;
    let env_key = redeem(&p.base, &pairing(a, &p.env_id, &p.admin_id, &format!("cma:{}", ext.profile_id)).await).await.credential;
    let poll = format!("environments/{}/work/poll", ext.profile_id);

    // The environment key's own limit: a burst past it is 429 in CMA's
    // envelope, with retry-after.
    let c = reqwest::Client::new();
    let mut burst = vec![];
    for _ in 0..40 {
        burst.push(cma_get(&c, &p.base, &poll, &env_key).await);
    }
    assert_eq!(burst[0].0, 200, "{:?}", burst[0].1);
    let limited = burst.iter().find(|r| r.0 == 429).expect("a burst past 20/s is limited");
    assert_eq!(limited.1["error"]["type"], "rate_limit_error", "{}", limited.1);
    assert!(limited.2.contains_key("retry-after"));

    // Invalid environment keys and tokens from one address: 401, then
    // that address is throttled (even for a fresh guess) ...
    let from = reqwest::Client::builder().local_address(Some("127.0.0.3".parse().unwrap())).build().unwrap();
    let mut statuses = vec![];
    for i in 0..30 {
        let r = if i % 2 == 0 {
            cma_get(&from, &p.base, &poll, &format!("crr_bogus{i}")).await
        } else {
            cma_get(&from, &p.base, "sessions/sesn_01jx0000000000000000000001/events", &format!("cwt_bogus{i}")).await
        };
        statuses.push(r.0);
    }
    assert_eq!(statuses[0], 401, "{statuses:?}");
    assert!(statuses.iter().filter(|s| **s == 401).count() <= checkfu_gateway::auth::AUTH_FAILURES_PER_WINDOW as usize + 1, "{statuses:?}");
    let throttled = cma_get(&from, &p.base, &poll, "crr_another_guess").await;
    assert_eq!((throttled.0, throttled.1["error"]["type"].as_str()), (429, Some("rate_limit_error")), "{}", throttled.1);
    // ... while a key that worked before still passes from there.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(cma_get(&from, &p.base, &poll, &env_key).await.0, 200);
    p.stop().await;
}
