//! Bad input, idempotency and the session-creation rules, through the API.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_gets_the_envelope_never_a_500() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;

    expect(&Api::new(&p.base, "").get("/v1/agents").await, 401, Some("auth.missing_key"));
    expect(&Api::new(&p.base, "ck_nope").get("/v1/agents").await, 401, Some("auth.invalid_key"));
    expect(&Api::new(&p.base, "not-even-a-key").get("/v1/agents").await, 401, Some("auth.invalid_key"));
    expect(&a.post_raw("/v1/agents", "{not json", &[]).await, 400, Some("validation.invalid"));
    expect(&a.post_raw("/v1/agents", "[1,2]", &[]).await, 400, Some("validation.invalid"));
    expect(&a.post("/v1/agents", json!({"environment_id": p.env_id, "name": "x", "colour": "red"})).await, 400, Some("validation.invalid"));
    expect(&a.post("/v1/agents", json!({"environment_id": p.env_id})).await, 400, Some("validation.invalid"));
    expect(&a.post("/v1/agents", json!({"environment_id": 7, "name": "x"})).await, 400, Some("validation.invalid"));
    let bad_tool = a
        .post("/v1/agents", json!({"environment_id": p.env_id, "name": "x", "draft": {"tools": [{"type": "builtin", "name": "teleport"}]}}))
        .await;
    expect(&bad_tool, 400, Some("validation.invalid"));
    let wrong_prefix = a.post("/v1/agents", json!({"environment_id": "agt_01m8n5w2381sjtydkyxnv11e90", "name": "x"})).await;
    expect(&wrong_prefix, 400, Some("validation.invalid"));
    assert_eq!(wrong_prefix.1["error"]["details"]["field"], "environment_id");
    expect(&a.get("/v1/agents/agt_01m8n5w2381sjtydkyxnv11e90").await, 404, Some("not_found"));
    expect(&a.get("/v1/agents/sess_01m8n5w2381sjtydkyxnv11e90").await, 400, Some("validation.invalid"));
    expect(&a.get("/v1/sessions/garbage").await, 400, Some("validation.invalid"));
    expect(&a.get("/v1/agents?limit=0").await, 400, Some("validation.invalid"));
    expect(&a.get("/v1/agents?limit=101").await, 400, Some("validation.invalid"));
    expect(&a.get("/v1/agents?limit=ten").await, 400, Some("validation.invalid"));
    expect(&a.get("/v1/agents?page=forged").await, 400, Some("validation.invalid"));
    expect(&a.get("/v1/nothing-here").await, 404, Some("not_found"));
    expect(&a.delete("/v1/agents").await, 405, Some("validation.invalid"));
    let big = format!("{{\"environment_id\":\"{}\",\"name\":\"{}\"}}", p.env_id, "x".repeat(1024 * 1024 + 10));
    expect(&a.post_raw("/v1/agents", big, &[]).await, 413, Some("validation.payload_too_large"));

    // Sandbox allowlist rules.
    let mcp_only = a
        .post(
            "/v1/sandbox-profiles",
            json!({"environment_id": p.env_id, "name": "m", "image": "x", "network": {"allow_mcp_servers": true}}),
        )
        .await;
    expect(&mcp_only, 400, Some("validation.invalid"));
    let bad_host = a
        .post(
            "/v1/sandbox-profiles",
            json!({"environment_id": p.env_id, "name": "m", "image": "x", "network": {"allowed_hosts": ["http://evil/"]}}),
        )
        .await;
    expect(&bad_host, 400, Some("validation.invalid"));
    let ok = a
        .post("/v1/sandbox-profiles", json!({"environment_id": p.env_id, "name": "m", "image": "x", "network": {"allow_mcp_servers": true, "allowed_hosts": ["MCP.example.com"]}}))
        .await;
    expect(&ok, 201, None);
    assert_eq!(ok.1["latest"]["network"]["allowed_hosts"], json!(["mcp.example.com"]));
    let sbp = id(&ok.1);
    let rev2 =
        a.post(&format!("/v1/sandbox-profiles/{sbp}/revisions"), json!({"image": "y", "network": {"allow_package_managers": true}})).await;
    expect(&rev2, 201, None);
    assert_eq!(rev2.1["revision"], 2);
    assert!(rev2.1["network"]["allowed_hosts"].as_array().unwrap().contains(&json!("pypi.org")), "package managers compile into hosts");
    let r1 = a.get(&format!("/v1/sandbox-profiles/{sbp}/revisions/1")).await;
    assert_eq!(r1.1["image"], "x", "revision 1 is immutable");
    expect(&a.get(&format!("/v1/sandbox-profiles/{sbp}/revisions/9")).await, 404, Some("not_found"));
    expect(
        &a.post("/v1/sandbox-profiles", json!({"environment_id": p.env_id, "name": "m", "image": "x"})).await,
        409,
        Some("validation.conflict"),
    );

    // Routing profiles.
    let bad_provider = a
        .post(
            "/v1/model-routing-profiles",
            json!({"environment_id": p.env_id, "name": "r", "candidates": [{"provider": "skynet", "model": "m"}]}),
        )
        .await;
    expect(&bad_provider, 400, Some("validation.invalid"));
    let bad_effort = a
        .post(
            "/v1/model-routing-profiles",
            json!({"environment_id": p.env_id, "name": "r", "candidates": [{"provider": "scripted", "model": "m", "effort": "extreme"}]}),
        )
        .await;
    expect(&bad_effort, 400, Some("validation.invalid"));
    expect(
        &a.post("/v1/model-routing-profiles", json!({"environment_id": p.env_id, "name": "r", "candidates": []})).await,
        400,
        Some("validation.invalid"),
    );
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn idempotent_creates_replay_and_refuse_key_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let body = json!({"environment_id": p.env_id, "name": "idem"});
    let first = a.post_with("/v1/agents", body.clone(), &[("Idempotency-Key", "k-1")]).await;
    expect(&first, 201, None);
    assert!(!first.2.contains_key("idempotent-replayed"));
    let again = a.post_with("/v1/agents", body.clone(), &[("Idempotency-Key", "k-1")]).await;
    expect(&again, 201, None);
    assert_eq!(again.1, first.1, "the first response is replayed");
    assert_eq!(again.2.get("idempotent-replayed").unwrap(), "true");
    let list = a.get(&format!("/v1/agents?environment_id={}", p.env_id)).await;
    assert_eq!(list.1["data"].as_array().unwrap().len(), 1, "created once");
    let reused = a.post_with("/v1/agents", json!({"environment_id": p.env_id, "name": "other"}), &[("Idempotency-Key", "k-1")]).await;
    expect(&reused, 409, Some("idempotency.key_reused"));

    // Keys are per principal: another principal's same key is independent.
    let bob = id(&a.post("/v1/principals", json!({"kind": "human", "name": "bob"})).await.1);
    a.post(
        "/v1/permission-assignments",
        json!({"subject": {"kind": "principal", "id": bob}, "permission": "manage", "resource": {"kind": "environment", "id": p.env_id}}),
    )
    .await;
    let bob_key = a.post(&format!("/v1/principals/{bob}/api-keys"), json!({})).await.1["secret"].as_str().unwrap().to_string();
    let bob_api = Api::new(&p.base, &bob_key);
    let bobs = bob_api.post_with("/v1/agents", body.clone(), &[("Idempotency-Key", "k-1")]).await;
    expect(&bobs, 201, None);
    assert_ne!(bobs.1["id"], first.1["id"]);

    // A failed request does not burn its key.
    let failing = a
        .post_with("/v1/agents", json!({"environment_id": "env_01m8n5w2381sjtydkyxnv11e90", "name": "n"}), &[("Idempotency-Key", "k-2")])
        .await;
    expect(&failing, 404, Some("not_found"));
    let fixed = a
        .post_with("/v1/agents", json!({"environment_id": "env_01m8n5w2381sjtydkyxnv11e90", "name": "n"}), &[("Idempotency-Key", "k-2")])
        .await;
    expect(&fixed, 404, Some("not_found"));

    // Replays survive a restart: the records are durable.
    p.stop().await;
    let p = Platform::start(dir.path()).await;
    let after = p.admin.post_with("/v1/agents", body, &[("Idempotency-Key", "k-1")]).await;
    expect(&after, 201, None);
    assert_eq!(after.1, first.1);
    assert_eq!(after.2.get("idempotent-replayed").unwrap(), "true");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn session_creation_rules() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let d = deploy(
        a,
        &p.env_id,
        json!({
            "instructions": "Base.",
            "tools": [{"type": "builtin", "name": "read"}, {"type": "builtin", "name": "bash"}, {"type": "custom", "name": "lookup", "input_schema": {"type": "object"}}],
            "session_variable": {"tools": {"allowed": ["bash", "lookup"]}}
        }),
    )
    .await;
    let new = |extra: serde_json::Value| {
        let mut b = json!({"agent_deployment_id": d.deployment_id, "principal_id": me});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };

    // More than one initial event needs an Idempotency-Key.
    let two = new(json!({"initial_events": [message(&me, "a"), message(&me, "b")]}));
    expect(&a.post("/v1/sessions", two.clone()).await, 400, Some("validation.invalid"));
    let s = a.post_with("/v1/sessions", two, &[("Idempotency-Key", "two")]).await;
    expect(&s, 201, None);
    let sid = id(&s.1);
    settle(a, &sid).await;
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    let texts: Vec<_> = evs.iter().filter(|e| e["type"] == "user.message").map(|e| e["payload"]["content"][0]["text"].clone()).collect();
    assert_eq!(texts, vec![json!("a"), json!("b")], "initial events are processed in order");
    assert_eq!(evs.iter().rev().find(|e| e["type"] == "agent.message").unwrap()["payload"]["content"][0]["text"], "echo: b");

    // At most 50.
    let many: Vec<_> = (0..51).map(|i| message(&me, &format!("m{i}"))).collect();
    expect(
        &a.post_with("/v1/sessions", new(json!({"initial_events": many})), &[("Idempotency-Key", "many")]).await,
        400,
        Some("validation.invalid"),
    );

    // define_outcome only first, and once.
    let outcome = input(&me, "user.define_outcome", json!({"description": "d", "rubric": "r", "max_iterations": 3}));
    let late = new(json!({"initial_events": [message(&me, "a"), outcome.clone()]}));
    expect(&a.post_with("/v1/sessions", late, &[("Idempotency-Key", "late")]).await, 400, Some("validation.invalid"));
    let twice = new(json!({"initial_events": [outcome.clone(), outcome.clone()]}));
    expect(&a.post_with("/v1/sessions", twice, &[("Idempotency-Key", "twice")]).await, 400, Some("validation.invalid"));
    expect(&a.post("/v1/sessions", new(json!({"initial_events": [outcome]}))).await, 201, None);

    // Attribution is required on every input.
    let unattributed = json!({"type": "user.message", "payload": {"content": [{"type": "text", "text": "x"}]}});
    expect(&a.post("/v1/sessions", new(json!({"initial_events": [unattributed.clone()]}))).await, 400, Some("validation.invalid"));
    let plain = id(&a.post("/v1/sessions", new(json!({}))).await.1);
    expect(&a.post(&format!("/v1/sessions/{plain}/events"), unattributed).await, 400, Some("validation.invalid"));
    let no_cause = json!({"type": "user.message", "payload": {"content": [{"type": "text", "text": "x"}]}, "authored_by": me});
    expect(&a.post(&format!("/v1/sessions/{plain}/events"), no_cause).await, 400, Some("validation.invalid"));
    let unknown_type = input(&me, "user.shout", json!({}));
    expect(&a.post(&format!("/v1/sessions/{plain}/events"), unknown_type).await, 400, Some("validation.invalid"));
    let empty = input(&me, "user.message", json!({"content": []}));
    expect(&a.post(&format!("/v1/sessions/{plain}/events"), empty).await, 400, Some("validation.invalid"));
    let nothing_waiting = input(&me, "user.tool_confirmation", json!({"tool_use_id": "toolu_1", "result": "allow"}));
    expect(&a.post(&format!("/v1/sessions/{plain}/events"), nothing_waiting).await, 409, Some("validation.conflict"));

    // Instructions: at most 64 KiB, pinned by digest.
    expect(&a.post("/v1/sessions", new(json!({"instructions": "x".repeat(64 * 1024 + 1)}))).await, 400, Some("validation.invalid"));
    let extra = a.post("/v1/sessions", new(json!({"instructions": "Also be kind.", "initial_events": [message(&me, "hi")]}))).await;
    expect(&extra, 201, None);
    let xid = id(&extra.1);
    settle(a, &xid).await;
    let pins = events(a, &xid).await.into_iter().find(|e| e["type"] == "run.created").unwrap()["payload"]["execution_pins"].clone();
    let plain_pins = {
        a.post(&format!("/v1/sessions/{plain}/events"), message(&me, "hi")).await;
        settle(a, &plain).await;
        events(a, &plain).await.into_iter().find(|e| e["type"] == "run.created").unwrap()["payload"]["execution_pins"].clone()
    };
    assert_ne!(pins["instructions_sha256"], plain_pins["instructions_sha256"]);
    assert_ne!(pins["release_sha256"], plain_pins["release_sha256"]);

    // Tools may only narrow the release's variable set.
    expect(&a.post("/v1/sessions", new(json!({"tools": ["read"]}))).await, 400, Some("validation.invalid"));
    expect(&a.post("/v1/sessions", new(json!({"tools": ["teleport"]}))).await, 400, Some("validation.invalid"));
    let narrowed = a.post("/v1/sessions", new(json!({"tools": ["lookup"]}))).await;
    expect(&narrowed, 201, None);

    // The selection endpoint narrows an idle session and records both digests.
    let sel = a.post(&format!("/v1/sessions/{plain}/selection"), json!({"tools": ["bash"]})).await;
    expect(&sel, 200, None);
    let updated = events(a, &plain).await.into_iter().rev().find(|e| e["type"] == "session.updated").unwrap();
    assert_ne!(updated["payload"]["release_sha256_before"], updated["payload"]["release_sha256_after"]);
    assert_eq!(updated["payload"]["tools"], json!(["bash"]));
    expect(&a.post(&format!("/v1/sessions/{plain}/selection"), json!({"tools": ["read"]})).await, 400, Some("validation.invalid"));

    // Publication refuses a variable entry the definition does not grant.
    let bad = a
        .post(
            "/v1/agents",
            json!({"environment_id": p.env_id, "name": "b", "draft": {"session_variable": {"tools": {"allowed": ["bash"]}}}}),
        )
        .await;
    expect(&bad, 201, None);
    expect(&a.post(&format!("/v1/agents/{}/versions", id(&bad.1)), json!({})).await, 400, Some("validation.invalid"));

    // Deployment revisions: running sessions keep theirs; new ones get the new pins.
    let rev = a
        .post(
            &format!("/v1/agent-deployments/{}/revisions", d.deployment_id),
            json!({"agent_version": 1, "model_routing_profile_id": d.routing_profile_id, "sandbox_profile_id": d.sandbox_profile_id}),
        )
        .await;
    expect(&rev, 201, None);
    assert_eq!(rev.1["revision"], 2);
    assert_eq!(a.get(&format!("/v1/sessions/{sid}")).await.1["deployment_revision"], 1);
    let s3 = a.post("/v1/sessions", new(json!({}))).await;
    assert_eq!(s3.1["deployment_revision"], 2);
    let dup_key = a
        .post(
            "/v1/agent-deployments",
            json!({"environment_id": p.env_id, "key": format!("k-{}", d.agent_id), "agent_id": d.agent_id, "agent_version": 1, "model_routing_profile_id": d.routing_profile_id, "sandbox_profile_id": d.sandbox_profile_id}),
        )
        .await;
    expect(&dup_key, 409, Some("validation.conflict"));
    let no_version = a
        .post(
            "/v1/agent-deployments",
            json!({"environment_id": p.env_id, "key": "v9", "agent_id": d.agent_id, "agent_version": 9, "model_routing_profile_id": d.routing_profile_id, "sandbox_profile_id": d.sandbox_profile_id}),
        )
        .await;
    expect(&no_version, 400, Some("validation.invalid"));

    // Concurrency on agents: a stale expected_version conflicts.
    let upd = a.post(&format!("/v1/agents/{}", d.agent_id), json!({"name": "renamed", "expected_version": 1})).await;
    expect(&upd, 409, Some("validation.conflict"));
    let cur = a.get(&format!("/v1/agents/{}", d.agent_id)).await.1["version"].as_i64().unwrap();
    expect(&a.post(&format!("/v1/agents/{}", d.agent_id), json!({"name": "renamed", "expected_version": cur})).await, 200, None);

    // Environments: disabling one stops new resources in it.
    let env2 = id(&a.post("/v1/environments", json!({"name": "staging"})).await.1);
    expect(
        &a.post(&format!("/v1/environments/{env2}"), json!({"disabled": true, "expected_version": 7})).await,
        409,
        Some("validation.conflict"),
    );
    expect(&a.post(&format!("/v1/environments/{env2}"), json!({"disabled": true, "expected_version": 1})).await, 200, None);
    expect(&a.post("/v1/agents", json!({"environment_id": env2, "name": "z"})).await, 409, Some("validation.conflict"));
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn each_principal_is_rate_limited_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { rate_limit_per_second: 5, ..Default::default() }).await;
    let a = &p.admin;
    // The other principal first, while its window is fresh.
    let prin = a.post("/v1/principals", json!({"kind": "service", "name": "calm"})).await;
    let key = a.post(&format!("/v1/principals/{}/api-keys", id(&prin.1)), json!({"name": "k"})).await;
    let calm = Api::new(&p.base, key.1["secret"].as_str().unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let mut limited = None;
    for _ in 0..8 {
        let r = a.get("/v1/environments").await;
        if r.0 == 429 {
            limited = Some(r);
            break;
        }
    }
    let r = limited.expect("more than 5 requests in a second are refused");
    expect(&r, 429, Some("rate_limited"));
    let retry: u64 = r.2.get("retry-after").unwrap().to_str().unwrap().parse().unwrap();
    assert!((1..=1).contains(&retry), "retry-after in whole seconds: {retry}");
    assert_eq!(r.1["error"]["details"]["limit_per_second"], 5);
    expect(&calm.get(&format!("/v1/principals/{}", id(&prin.1))).await, 200, None);
    // Unauthenticated probes are not counted against anyone and stay open.
    assert_eq!(reqwest::get(format!("{}/healthz", p.base)).await.unwrap().status(), 200);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    expect(&a.get("/v1/environments").await, 200, None);
    p.stop().await;
}
