//! The CMA-compatible projection (api.md §17) driven by the official
//! Anthropic Python SDK: one acceptance check of §17.15 per test, each on
//! its own embedded installation (`e2e/fixtures/cma/contract.py` holds the
//! checks; `checkfu_e2e::cma` runs them).
#![cfg(test)]

use checkfu_e2e::*;

/// Starts an installation and runs contract check `name` against it.
async fn contract(name: &'static str) {
    if !cma::sdk_present(&format!("the CMA contract check {name}")) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let (base, key) = (p.base.clone(), p.admin.key.clone());
    tokio::task::spawn_blocking(move || cma::check(name, &base, &key)).await.expect("the check ran");
    p.stop().await;
}

#[tokio::test]
async fn acceptance_1_a_turn_through_the_sdk() {
    contract("turn").await;
}

#[tokio::test]
async fn acceptance_3_transport_keys_betas_and_envelopes() {
    contract("transport").await;
}

#[tokio::test]
async fn acceptance_4_a_stale_version_is_one_unretried_409() {
    contract("conflict").await;
}

#[tokio::test]
async fn acceptance_5_models_tools_and_networking_map_or_refuse() {
    contract("mapping").await;
}

#[tokio::test]
async fn acceptance_6_grants_decide_who_runs_what() {
    contract("grants").await;
}

#[tokio::test]
async fn acceptance_16_refusals_are_400s_with_their_codes() {
    contract("refusals").await;
}

#[tokio::test]
async fn the_sdk_is_the_pinned_one_and_its_surface_unchanged() {
    contract("surface").await;
}

/// Switched off (`features_disabled = cma_projection`), every CMA route is
/// 503 `api_error` with `capability_unavailable`, told not to retry.
#[tokio::test]
async fn a_disabled_projection_answers_503_without_retry() {
    let dir = tempfile::tempdir().unwrap();
    let tuning = Tuning { features_disabled: vec!["cma_projection".into()], ..Default::default() };
    let p = Platform::start_timed(dir.path(), tuning).await;
    let r = reqwest::Client::new()
        .get(format!("{}/cma/v1/agents", p.base))
        .header("x-api-key", &p.admin.key)
        .header("anthropic-beta", "managed-agents-2026-04-01")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["x-should-retry"], "false");
    let request_id = r.headers()["request-id"].to_str().unwrap().to_string();
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "api_error");
    assert_eq!(body["error"]["details"]["error_code"], "capability_unavailable");
    assert_eq!(body["request_id"], request_id.as_str());
    let caps = p.admin.get("/v1/capabilities").await;
    let cma = caps.1["data"].as_array().unwrap().iter().find(|c| c["name"] == "cma_projection").cloned().unwrap();
    assert_eq!((cma["available"].as_bool(), cma["reason"].as_str()), (Some(false), Some("feature_disabled")));
    p.stop().await;
}

#[tokio::test]
async fn acceptance_7_require_approval_is_a_permission_confirmation() {
    contract("confirmation").await;
}

#[tokio::test]
async fn acceptance_8_the_agents_policy_and_the_environments_rules_decide() {
    contract("policy").await;
}

#[tokio::test]
async fn acceptance_9_custom_tools_resume_and_settle_once() {
    contract("custom_tool").await;
}

#[tokio::test]
async fn acceptance_10_budgets_bind_cma_sessions() {
    contract("budget").await;
}

/// Vaults, credentials and MCP servers, on `checkfu up
/// --allow-private-targets` (a process, logging at debug) against the real
/// MCP fixture: the contract asserts the calls and that the token is in no
/// response or event; here the log and every file of the data directory
/// are searched for it too.
#[tokio::test(flavor = "multi_thread")]
async fn acceptance_11_vault_credentials_reach_an_mcp_server() {
    const TOKEN: &str = "s3cret-XYZ";
    if !cma::sdk_present("the CMA contract check vault") {
        return;
    }
    let Some(mcp) = checkfu_e2e::mcp::McpFixture::start("the CMA contract check vault", TOKEN, &[]).await else { return };
    let dir = tempfile::tempdir().unwrap();
    let (mut proc, base) = procs::up_with(dir.path(), &["--allow-private-targets"], &[("RUST_LOG", "debug")]);
    wait_ready(&base).await;
    let key = std::fs::read_to_string(dir.path().join("admin.key")).unwrap().trim().to_string();
    let url = mcp.url.clone();
    let run = tokio::task::spawn_blocking(move || cma::check_with("vault", &base, &key, &["--mcp", &url])).await;
    proc.signal("TERM");
    let _ = proc.0.wait();
    run.expect("the check ran");
    let b64 = |s: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, s);
    let forms = [TOKEN.to_string(), b64(TOKEN), b64(&format!("Bearer {TOKEN}"))];
    let mut files = vec![dir.path().to_path_buf()];
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
            continue;
        }
        let bytes = std::fs::read(&p).unwrap_or_default();
        for f in &forms {
            assert!(!bytes.windows(f.len()).any(|w| w == f.as_bytes()), "{} holds the token (as {f:?})", p.display());
        }
    }
    let log = std::fs::read_to_string(dir.path().join("up.log")).unwrap();
    assert!(log.contains("DEBUG"), "the log was written at debug level");
}

/// The Environment Work API: a self_hosted environment, a Runner
/// credential redeemed by `checkfu runner redeem --print-credential`, the
/// lease rules, and the SDK's `EnvironmentWorker` answering a bash call.
#[tokio::test(flavor = "multi_thread")]
async fn acceptance_15_the_sdks_worker_runs_a_self_hosted_sessions_tools() {
    if !cma::sdk_present("the CMA contract check worker") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let (base, key) = (p.base.clone(), p.admin.key.clone());
    let bin = procs::binary().display().to_string();
    tokio::task::spawn_blocking(move || cma::check_with("worker", &base, &key, &["--checkfu", &bin])).await.expect("the check ran");
    p.stop().await;
}

#[tokio::test]
async fn acceptance_2_previews_name_the_message_they_become() {
    contract("previews").await;
}

#[tokio::test]
async fn acceptance_14_threads_and_outcomes_show_through() {
    contract("threads_outcome").await;
}

#[tokio::test]
async fn acceptance_12_memory_stores_compare_and_set_and_mount() {
    contract("memory").await;
}

#[tokio::test]
async fn acceptance_13_files_reach_the_sandbox_and_outputs_come_back() {
    contract("files").await;
}

#[tokio::test]
async fn acceptance_13_a_skills_agent_reads_its_skill() {
    contract("skills").await;
}

#[tokio::test]
async fn overrides_and_session_updates_only_narrow() {
    contract("narrowing").await;
}

#[tokio::test]
async fn dreams_read_a_store_and_sessions_into_a_new_store() {
    contract("dreams").await;
}

/// The first sessions of an (agent, environment) pair race to make its
/// deployment: every one of them starts, all on the one deployment the
/// winner made — a lost race is not the client's error.
#[tokio::test(flavor = "multi_thread")]
async fn first_creates_racing_for_their_deployment_all_start() {
    const BETA: [(&str, &str); 1] = [("anthropic-beta", "managed-agents-2026-04-01")];
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let agent = p.admin.post_with("/cma/v1/agents", serde_json::json!({"name": "racer", "model": "claude-sonnet-4-6"}), &BETA).await;
    assert!(agent.0.is_success(), "{}", agent.1);
    let env = p.admin.post_with("/cma/v1/environments", serde_json::json!({"name": "race", "config": {"type": "cloud"}}), &BETA).await;
    assert!(env.0.is_success(), "{}", env.1);
    let body = serde_json::json!({"agent": id(&agent.1), "environment_id": id(&env.1)});
    let creates = (0..8).map(|_| p.admin.post_with("/cma/v1/sessions", body.clone(), &BETA));
    let created = futures_util::future::join_all(creates).await;
    for c in &created {
        assert!(c.0.is_success(), "every racing create starts: {}", c.1);
        assert_eq!(c.1["agent"]["id"], agent.1["id"], "{}", c.1);
        assert_eq!(c.1["environment_id"], env.1["id"]);
    }
    let deployments = p.admin.get("/v1/agent-deployments?limit=100").await;
    expect(&deployments, 200, None);
    let cma: Vec<&serde_json::Value> =
        deployments.1["data"].as_array().unwrap().iter().filter(|d| d["key"].as_str().is_some_and(|k| k.starts_with("cma:"))).collect();
    assert_eq!(cma.len(), 1, "one deployment for the pair: {cma:?}");
    p.stop().await;
}
