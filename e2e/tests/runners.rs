//! Self-hosted Runners through the public port, as a Runner on another
//! network would use it: pairing, routing by pool, capability tokens and
//! fencing, revocation; and the real `checkfu runner` process.
#![cfg(test)]

use checkfu_e2e::*;
use checkfu_proto::governance::v1 as gov;
use checkfu_proto::governance::v1::governance_service_client::GovernanceServiceClient;
use checkfu_proto::modelgateway::v1 as mg;
use checkfu_proto::modelgateway::v1::model_gateway_service_client::ModelGatewayServiceClient;
use checkfu_proto::runner::v1 as rp;
use checkfu_proto::runner::v1::runner_service_client::RunnerServiceClient;
use serde_json::{Value, json};
use std::time::Duration;

/// `msg` with the Runner credential and, when given, a capability token.
fn call<T>(msg: T, credential: &str, token: Option<&str>) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert("authorization", format!("Bearer {credential}").parse().unwrap());
    if let Some(t) = token {
        r.metadata_mut().insert("x-checkfu-capability", t.parse().unwrap());
    }
    r
}

async fn claim(base: &str, credential: &str) -> Option<rp::WorkItem> {
    let mut c = RunnerServiceClient::new(public(base));
    c.claim(call(rp::ClaimRequest { runner_id: String::new(), wait_ms: 3000 }, credential, None)).await.unwrap().into_inner().work
}

fn generate_req(run: &str, profile: &str) -> mg::GenerateRequest {
    mg::GenerateRequest {
        run_id: run.into(),
        routing_profile_id: profile.into(),
        system: String::new(),
        messages: vec![mg::Message {
            role: "user".into(),
            content: vec![mg::ContentBlock { block: Some(mg::content_block::Block::Text("hi".into())) }],
        }],
        tools: vec![],
    }
}

async fn generate(base: &str, credential: &str, token: &str, w: &rp::WorkItem, profile: &str) -> Result<(), tonic::Status> {
    let mut m = ModelGatewayServiceClient::new(public(base));
    let mut s = m.generate(call(generate_req(&w.run_id, profile), credential, Some(token))).await?.into_inner();
    while s.message().await?.is_some() {}
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_runner_protocol_on_the_public_port_is_fenced_by_credential_lease_and_token() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let d = deploy_on(a, &p.env_id, json!({}), json!({}), json!({"kind": "runner", "pool": "edge"})).await;

    // Minting needs `manage` on the Environment; ttl is bounded.
    let nobody = a.post("/v1/principals", json!({"kind": "service", "name": "nobody"})).await;
    let nobody_id = id(&nobody.1);
    let key = a.post(&format!("/v1/principals/{nobody_id}/api-keys"), json!({"name": "k"})).await;
    let nobody_api = Api::new(&p.base, key.1["secret"].as_str().unwrap());
    let body = json!({"environment_id": p.env_id, "principal_id": nobody_id, "pool": "edge"});
    expect(&nobody_api.post("/v1/runner-pairings", body).await, 403, Some("permission.denied"));
    for ttl in [901, 0] {
        let bad = json!({"environment_id": p.env_id, "principal_id": p.admin_id, "pool": "edge", "ttl_seconds": ttl});
        expect(&a.post("/v1/runner-pairings", bad).await, 400, Some("validation.invalid"));
    }
    let replayed = a
        .post_with(
            "/v1/runner-pairings",
            json!({"environment_id": p.env_id, "principal_id": p.admin_id, "pool": "edge"}),
            &[("Idempotency-Key", "pair-1")],
        )
        .await;
    let again = a
        .post_with(
            "/v1/runner-pairings",
            json!({"environment_id": p.env_id, "principal_id": p.admin_id, "pool": "edge"}),
            &[("Idempotency-Key", "pair-1")],
        )
        .await;
    assert_eq!(again.1["id"], replayed.1["id"]);
    assert!(again.1["code"].is_null() && again.1["code_redacted"] == true, "a replay never shows the code again: {}", again.1);

    // Redeem once; the credential is shown once and works only for this Runner.
    let code = pairing(a, &p.env_id, &p.admin_id, "edge").await;
    let x = redeem(&p.base, &code).await;
    assert!(x.credential.starts_with("crr_") && x.runner_id.starts_with("rnr_"));
    assert_eq!((x.pool.as_str(), x.environment_id.as_str()), ("edge", p.env_id.as_str()));
    let mut c = RunnerServiceClient::new(public(&p.base));
    let spent = c.redeem(rp::RedeemRequest { pairing_code: code.clone(), name: String::new() }).await.unwrap_err();
    assert_eq!(spent.code(), tonic::Code::Unauthenticated, "a code is single-use");
    let listed = a.get("/v1/runners").await;
    expect(&listed, 200, None);
    assert!(!listed.1.to_string().contains(&x.credential), "the credential is never listed");
    let unauth = c.claim(rp::ClaimRequest { runner_id: x.runner_id.clone(), wait_ms: 0 }).await.unwrap_err();
    assert_eq!(unauth.code(), tonic::Code::Unauthenticated, "a claim needs the credential");

    // A Session of the runner plane waits for its pool; the managed runner never takes it.
    let s1 = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&p.admin_id, "one")]})).await;
    expect(&s1, 201, None);
    let s1 = id(&s1.1);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let runs = a.get(&format!("/v1/sessions/{s1}/runs")).await;
    assert_eq!(runs.1["data"][0]["status"], "queued", "{}", runs.1);
    let got = a.get(&format!("/v1/sessions/{s1}")).await;
    assert_eq!(got.1["status"], "running");
    assert_eq!(got.1["execution"], json!({"kind": "runner", "pool": "edge", "queued_for_pool": true}), "{}", got.1);

    // The Runner claims it, with a token for this Run only.
    let w1 = claim(&p.base, &x.credential).await.expect("the pool's run");
    assert_eq!(w1.session_id, s1);
    let l1 = w1.lease.clone().unwrap();
    assert!(!w1.capability_token.is_empty());
    let seen = a.get(&format!("/v1/runners/{}", x.runner_id)).await;
    assert_eq!(seen.1["status"], "active");
    assert!(seen.1["last_seen_at"].is_string(), "{}", seen.1);
    generate(&p.base, &x.credential, &w1.capability_token, &w1, &w1.routing_profile_id).await.expect("the Run's own model call");
    let other_profile = generate(&p.base, &x.credential, &w1.capability_token, &w1, "mrp_01jx0000000000000000000000").await.unwrap_err();
    assert_eq!(other_profile.code(), tonic::Code::PermissionDenied, "only the Run's pinned route");
    let mut forged = w1.capability_token.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == '0' { '1' } else { '0' });
    assert_eq!(
        generate(&p.base, &x.credential, &forged, &w1, &w1.routing_profile_id).await.unwrap_err().code(),
        tonic::Code::PermissionDenied
    );
    assert_eq!(generate(&p.base, &x.credential, "", &w1, &w1.routing_profile_id).await.unwrap_err().code(), tonic::Code::PermissionDenied);

    // A token of another Run cannot act on this Session.
    let s2 = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&p.admin_id, "two")]})).await;
    let s2 = id(&s2.1);
    let w2 = claim(&p.base, &x.credential).await.expect("the second run");
    assert_eq!(w2.session_id, s2);
    let mut g = GovernanceServiceClient::new(public(&p.base));
    let eval = |session: &str| gov::EvaluateActionRequest {
        environment_id: p.env_id.clone(),
        subject: Some(gov::ResourceRef { kind: "principal".into(), id: p.admin_id.clone() }),
        resource: Some(gov::ResourceRef { kind: "tool".into(), id: "read".into() }),
        permission: "invoke".into(),
        tool: Some(gov::CalledTool { r#type: "builtin".into(), name: "read".into(), ..Default::default() }),
        also: vec![],
        record: false,
        session_id: session.into(),
        tool_use_id: "toolu_1".into(),
        ..Default::default()
    };
    let wrong = g.evaluate_action(call(eval(&s1), &x.credential, Some(&w2.capability_token))).await.unwrap_err();
    assert_eq!(wrong.code(), tonic::Code::PermissionDenied, "another Run's token: {wrong:?}");
    g.evaluate_action(call(eval(&s2), &x.credential, Some(&w2.capability_token))).await.expect("its own Session");
    let other_run = generate(&p.base, &x.credential, &w2.capability_token, &w1, &w1.routing_profile_id).await.unwrap_err();
    assert_eq!(other_run.code(), tonic::Code::PermissionDenied, "a model call for a Run with another Run's token");
    let mut cap = checkfu_proto::capability::v1::capability_gateway_service_client::CapabilityGatewayServiceClient::new(public(&p.base));
    let fetch =
        |session: &str| checkfu_proto::capability::v1::WebFetchRequest { session_id: session.into(), url: "http://127.0.0.1:9/".into() };
    let wrong = cap.web_fetch(call(fetch(&s1), &x.credential, Some(&w2.capability_token))).await.unwrap_err();
    assert_eq!(wrong.code(), tonic::Code::PermissionDenied, "web_fetch for another Session: {wrong:?}");
    let not_pinned = cap.web_fetch(call(fetch(&s2), &x.credential, Some(&w2.capability_token))).await.unwrap_err();
    assert_eq!(not_pinned.code(), tonic::Code::PermissionDenied, "the agent declares no web_fetch: {not_pinned:?}");
    let unknown = format!("crr_{}", "0".repeat(64));
    let stranger = cap.web_fetch(call(fetch(&s2), &unknown, Some(&w2.capability_token))).await.unwrap_err();
    assert_eq!(stranger.code(), tonic::Code::Unauthenticated, "a token is good only with its Runner's credential");

    // Handing a Run back moves its lease: the old generation writes nothing
    // and its token is refused.
    c.release(call(l1.clone(), &x.credential, None)).await.unwrap();
    let w1b = claim(&p.base, &x.credential).await.expect("claimed again");
    let l1b = w1b.lease.clone().unwrap();
    assert_eq!((w1b.run_id.as_str(), l1b.generation), (w1.run_id.as_str(), l1.generation + 1));
    let stale = rp::AppendEventsRequest {
        lease: Some(l1.clone()),
        events: vec![rp::NewEvent {
            r#type: "agent.message".into(),
            payload_json: json!({"content": [{"type": "text", "text": "late"}]}).to_string(),
            id: String::new(),
        }],
    };
    let refused = c.append_events(call(stale, &x.credential, None)).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "a stale generation writes nothing");
    assert_eq!(
        generate(&p.base, &x.credential, &w1.capability_token, &w1, &w1.routing_profile_id).await.unwrap_err().code(),
        tonic::Code::PermissionDenied
    );
    generate(&p.base, &x.credential, &w1b.capability_token, &w1b, &w1.routing_profile_id).await.expect("the new lease's token");

    // Revocation fences at once, and its Runs are queued again.
    let revoked = a.post(&format!("/v1/runners/{}/revoke", x.runner_id), json!({})).await;
    expect(&revoked, 200, None);
    assert_eq!(revoked.1["status"], "revoked");
    let beat = c.heartbeat(call(l1b.clone(), &x.credential, None)).await.unwrap_err();
    assert_eq!(beat.code(), tonic::Code::Unauthenticated);
    assert_eq!(claim_err(&p.base, &x.credential).await, tonic::Code::Unauthenticated);
    let runs = a.get(&format!("/v1/sessions/{s1}/runs")).await;
    assert_eq!(runs.1["data"][0]["status"], "queued", "re-queued for another Runner: {}", runs.1);
    let y = redeem(&p.base, &pairing(a, &p.env_id, &p.admin_id, "edge").await).await;
    let taken = claim(&p.base, &y.credential).await.expect("another Runner takes it");
    assert!(taken.lease.unwrap().generation > l1b.generation);
    let other_pool = redeem(&p.base, &pairing(a, &p.env_id, &p.admin_id, "gpu").await).await;
    assert!(claim(&p.base, &other_pool.credential).await.is_none(), "another pool's Runner never takes them");
    let evs = events(a, &s1).await;
    assert_gapless(&evs);
    assert!(!evs.iter().any(|e| e.to_string().contains("late")));
    p.stop().await;
}

async fn claim_err(base: &str, credential: &str) -> tonic::Code {
    let mut c = RunnerServiceClient::new(public(base));
    c.claim(call(rp::ClaimRequest { runner_id: String::new(), wait_ms: 0 }, credential, None)).await.unwrap_err().code()
}

fn text_of(v: &Value) -> String {
    v["payload"]["content"][0]["text"].as_str().unwrap_or_default().to_string()
}

/// A site whose `/slow` answers after `delay`, so a Run can be caught mid-tool.
async fn site(delay: Duration) -> u16 {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().route("/fast", get(|| async { "fast body" })).route(
        "/slow",
        get(move || async move {
            tokio::time::sleep(delay).await;
            "slow body"
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

/// `checkfu runner` as a platform team would start it; returns once it
/// says it is serving.
fn start_runner(base: &str, code: Option<&str>, data_dir: &std::path::Path) -> (checkfu_e2e::procs::Proc, std::path::PathBuf) {
    use std::io::{BufRead, BufReader};
    let log = data_dir.with_extension("log");
    let mut cmd = std::process::Command::new(checkfu_e2e::procs::binary());
    cmd.args(["runner", "--server", &format!("{base}/v1"), "--pool", "edge", "--data-dir", data_dir.to_str().unwrap()]);
    if let Some(code) = code {
        cmd.args(["--pairing-code", code]);
    }
    let mut child =
        cmd.stdout(std::process::Stdio::piped()).stderr(std::fs::File::create(&log).unwrap()).spawn().expect("checkfu runner starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first =
        lines.next().and_then(Result::ok).unwrap_or_else(|| panic!("the runner exited: {}", std::fs::read_to_string(&log).unwrap()));
    assert!(first.contains("serving pool \"edge\""), "{first}");
    std::thread::spawn(move || for _ in lines {});
    (checkfu_e2e::procs::Proc(child), log)
}

fn exit_within(p: &mut checkfu_e2e::procs::Proc, within: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(status) = p.0.try_wait().unwrap() {
            return status;
        }
        assert!(std::time::Instant::now() < deadline, "the runner did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_checkfu_runner_process_serves_its_pool_and_a_revoked_one_hands_over_mid_run() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let a = &p.admin;
    let port = site(Duration::from_secs(3)).await;
    let d = deploy_on(
        a,
        &p.env_id,
        json!({"tools": [{"type": "builtin", "name": "web_fetch"}, {"type": "builtin", "name": "write"}, {"type": "builtin", "name": "read"}]}),
        json!({"allowed_hosts": ["127.0.0.1"]}),
        json!({"kind": "runner", "pool": "edge"}),
    )
    .await;
    let allow = json!({"environment_id": p.env_id, "name": "write-ok", "rules": [
        {"subject": {"kind": "agent_definition", "id_glob": d.agent_id}, "resource": {"kind": "tool", "id_glob": "write"}, "permission_glob": "invoke", "disposition": "allow"}
    ]});
    expect(&a.post("/v1/action-policies", allow).await, 201, None);
    let fetch = |path: &str| format!("call web_fetch {}", json!({"url": format!("http://127.0.0.1:{port}/{path}")}));

    // Runner A pairs, and runs a Session of its pool (model calls and
    // web_fetch through the installation, with the Run's token).
    let dir_a = dir.path().join("runner-a");
    let code = pairing(a, &p.env_id, &p.admin_id, "edge").await;
    let (mut runner_a, log_a) = start_runner(&p.base, Some(&code), &dir_a);
    let paired: Value = serde_json::from_str(&std::fs::read_to_string(dir_a.join("runner.json")).unwrap()).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(dir_a.join("runner.json")).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let runner_a_id = paired["runner_id"].as_str().unwrap().to_string();
    let s = a
        .post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&p.admin_id, &fetch("fast"))]}))
        .await;
    let s1 = id(&s.1);
    assert_eq!(settle(a, &s1).await["stop_reason"]["type"], "end_turn");
    let evs = events(a, &s1).await;
    let last = evs.iter().rev().find(|e| e["type"] == "agent.message").unwrap();
    assert!(text_of(last).contains("tool web_fetch returned: HTTP 200"), "{last}");
    assert!(evs.iter().any(|e| e["type"] == "agent.tool_result" && e.to_string().contains("fast body")));

    // A writes a file in the Session's workspace; in the next turn, mid-Run
    // (A is inside the slow fetch), A is revoked: the Run is queued again,
    // A's late result is refused, and Runner B finishes it on the workspace
    // A left (restored from its snapshot).
    let write = format!("call write {}", json!({"path": "notes.txt", "content": "kept across runners"}));
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "initial_events": [message(&p.admin_id, &write)]})).await;
    let s2 = id(&s.1);
    assert_eq!(settle(a, &s2).await["stop_reason"]["type"], "end_turn");
    assert!(dir_a.join("workspaces").join(&s2).join("notes.txt").exists(), "A ran the turn in its own workspace");
    let next = format!("{}\ncall read {}", fetch("slow"), json!({"path": "notes.txt"}));
    expect(&a.post(&format!("/v1/sessions/{s2}/events"), message(&p.admin_id, &next)).await, 201, None);
    for _ in 0..400 {
        if events(a, &s2).await.iter().filter(|e| e["type"] == "agent.tool_use").count() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    expect(&a.post(&format!("/v1/runners/{runner_a_id}/revoke"), json!({})).await, 200, None);
    let status = exit_within(&mut runner_a, Duration::from_secs(20));
    assert!(!status.success(), "a revoked runner stops with an error");
    assert!(std::fs::read_to_string(&log_a).unwrap().contains("refused"), "it says why");
    let dir_b = dir.path().join("runner-b");
    let (mut runner_b, _) = start_runner(&p.base, Some(&pairing(a, &p.env_id, &p.admin_id, "edge").await), &dir_b);
    let mut settled = Value::Null;
    for _ in 0..3 {
        settled = settle(a, &s2).await;
        if settled["status"] == "idle" {
            break;
        }
    }
    assert_eq!(settled["stop_reason"]["type"], "end_turn", "{settled}");
    let evs = events(a, &s2).await;
    assert_gapless(&evs);
    let results: Vec<&Value> = evs.iter().filter(|e| e["type"] == "agent.tool_result").collect();
    assert_eq!(results.len(), 3, "one result per call (write, then fetch and read): {evs:?}");
    assert!(results[1].to_string().contains("slow body"));
    assert!(results[2].to_string().contains("kept across runners"), "B sees the workspace A left: {}", results[2]);
    assert!(dir_b.join("workspaces").join(&s2).join("notes.txt").exists());
    let runs = a.get(&format!("/v1/sessions/{s2}/runs")).await;
    assert_eq!(runs.1["data"].as_array().unwrap().len(), 2, "the first turn's Run, and the one B finished");

    // SIGTERM: B stops claiming and exits 0; restarted, it reuses its
    // credential, and refuses to serve a pool it was not paired for.
    runner_b.signal("TERM");
    assert!(exit_within(&mut runner_b, Duration::from_secs(20)).success());
    let (mut again, _) = start_runner(&p.base, None, &dir_b);
    again.signal("TERM");
    assert!(exit_within(&mut again, Duration::from_secs(20)).success());
    let wrong = std::process::Command::new(checkfu_e2e::procs::binary())
        .args(["runner", "--server", &p.base, "--pool", "gpu", "--data-dir", dir_b.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("paired for pool \"edge\""), "{}", String::from_utf8_lossy(&wrong.stderr));
    let listed = a.get(&format!("/v1/runners?environment_id={}", p.env_id)).await;
    let statuses: Vec<&str> = listed.1["data"].as_array().unwrap().iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, vec!["active", "revoked"], "newest first: B, then the revoked A");
    p.stop().await;
}

/// `checkfu runner redeem`: a code becomes a Runner credential without
/// running one — written where `checkfu runner` keeps it, or printed alone
/// (for a worker that is not `checkfu runner`); a spent code is refused.
#[tokio::test(flavor = "multi_thread")]
async fn checkfu_runner_redeem_keeps_or_prints_the_credential() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let a = &p.admin;
    let redeem = |code: &str, extra: &[&str]| {
        std::process::Command::new(checkfu_e2e::procs::binary())
            .args(["runner", "redeem", "--server", &p.base, "--pairing-code", code])
            .args(extra)
            .output()
            .expect("checkfu runner redeem runs")
    };
    let kept = dir.path().join("kept");
    let code = pairing(a, &p.env_id, &p.admin_id, "edge").await;
    let out = redeem(&code, &["--data-dir", kept.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(kept.join("runner.json")).unwrap()).unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(file["runner_id"].as_str().unwrap()) && !said.contains("crr_"), "the credential is not printed: {said}");
    assert!(claim(&p.base, file["credential"].as_str().unwrap()).await.is_none(), "the kept credential authenticates (nothing queued)");

    let code = pairing(a, &p.env_id, &p.admin_id, "edge").await;
    let out = redeem(&code, &["--print-credential"]);
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success() && printed.starts_with("crr_") && printed.trim_end().lines().count() == 1, "{printed}");
    assert!(claim(&p.base, printed.trim()).await.is_none(), "the printed credential authenticates");
    let again = redeem(&code, &["--print-credential"]);
    assert!(!again.status.success() && again.stdout.is_empty(), "a spent code gives nothing");
    assert!(String::from_utf8_lossy(&again.stderr).contains("pairing failed"), "{}", String::from_utf8_lossy(&again.stderr));
    p.stop().await;
}
