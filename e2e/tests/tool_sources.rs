//! MCP ToolSources through the public API (api.md §16.4), against a real
//! MCP server from the official Python SDK: discovery, per-tool enablement,
//! publication pinning the Connection, and calls governed by
//! use_connection, ActionPolicy (require_approval by default, rules over a
//! ToolSource or a Connection) and approvals — with the credential injected
//! by the capability gateway alone and redacted when a server echoes it.
#![cfg(test)]

use checkfu_e2e::mcp::McpFixture;
use checkfu_e2e::*;
use serde_json::{Value, json};
use sha2::Digest;

const S: &str = "s3cret-XYZ";
const TOOLS: [&str; 6] = ["add", "whoami", "leak", "big", "slow", "fail"];

struct Fixture {
    p: Platform,
    mcp: McpFixture,
    connection: String,
    source: String,
    d: Deployed,
    _dir: tempfile::TempDir,
}

/// `checkfu up --allow-private-targets`, Connection `C` to the fixture with
/// `S`, ToolSource `T` (2 s calls), agent `a` declaring T's tools plus read,
/// write and bash (the last two allowed by a rule), holding use_connection.
async fn fixture(what: &str) -> Option<Fixture> {
    fixture_tuned(what, tempfile::tempdir().unwrap(), Tuning { allow_private_targets: true, ..Default::default() }).await
}

/// [`fixture`] in `dir`, with `tuning`.
async fn fixture_tuned(what: &str, dir: tempfile::TempDir, tuning: Tuning) -> Option<Fixture> {
    let mcp = McpFixture::start(what, S, &[]).await?;
    let p = Platform::start_timed(dir.path(), tuning).await;
    let a = &p.admin;
    let c = a
        .post(
            "/v1/connections",
            json!({"environment_id": p.env_id, "name": "C", "kind": "mcp", "endpoint": {"url": mcp.url},
                "credential": {"type": "static_bearer", "token": S}}),
        )
        .await;
    expect(&c, 201, None);
    assert_eq!(c.1["credential"]["state"], "ok");
    let connection = id(&c.1);
    let t = a
        .post(
            "/v1/tool-sources",
            json!({"environment_id": p.env_id, "name": "T", "connection_id": connection, "default_config": {"enabled": true}, "call_timeout_seconds": 2}),
        )
        .await;
    expect(&t, 201, None);
    assert_eq!(t.1["sync_status"], "ok", "{}", t.1);
    let source = id(&t.1);
    let draft = json!({"tools": [
        {"type": "tool_source", "tool_source_id": source, "tools": TOOLS},
        {"type": "builtin", "name": "read"}, {"type": "builtin", "name": "write"}, {"type": "builtin", "name": "bash"}]});
    let d = deploy(a, &p.env_id, draft).await;
    let allow = json!({"environment_id": p.env_id, "name": "sandbox-tools", "rules": [
        {"subject": {"kind": "agent_definition", "id_glob": d.agent_id}, "resource": {"kind": "tool", "id_glob": "write"}, "disposition": "allow"},
        {"subject": {"kind": "agent_definition", "id_glob": d.agent_id}, "resource": {"kind": "tool", "id_glob": "bash"}, "disposition": "allow"}]});
    expect(&a.post("/v1/action-policies", allow).await, 201, None);
    grant_agent(&p, &d.agent_id, &connection).await;
    Some(Fixture { p, mcp, connection, source, d, _dir: dir })
}

async fn grant_agent(p: &Platform, agent: &str, connection: &str) -> String {
    let g = json!({"subject": {"kind": "agent_definition", "id": agent}, "permission": "use_connection", "resource": {"kind": "connection", "id": connection}});
    let r = p.admin.post("/v1/permission-assignments", g).await;
    expect(&r, 201, None);
    id(&r.1)
}

/// A rule allowing every call through ToolSource `source`.
async fn allow_source(p: &Platform, source: &str) -> String {
    let rule = json!({"environment_id": p.env_id, "name": format!("allow-{source}"), "rules": [
        {"subject": {"kind": "*"}, "resource": {"kind": "tool_source", "id_glob": source}, "disposition": "allow"}]});
    let r = p.admin.post("/v1/action-policies", rule).await;
    expect(&r, 201, None);
    id(&r.1)
}

/// A Session whose first message is `text`, settled.
async fn run(f: &Fixture, text: &str) -> (String, Value, Vec<Value>) {
    let a = &f.p.admin;
    let s =
        a.post("/v1/sessions", json!({"agent_deployment_id": f.d.deployment_id, "initial_events": [message(&f.p.admin_id, text)]})).await;
    expect(&s, 201, None);
    let sid = id(&s.1);
    let done = settle(a, &sid).await;
    let evs = events(a, &sid).await;
    (sid, done, evs)
}

fn of_type<'a>(evs: &'a [Value], t: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == t).collect()
}

fn result_text(evs: &[Value]) -> String {
    let r = of_type(evs, "agent.tool_result");
    assert_eq!(r.len(), 1, "{evs:?}");
    match &r[0]["payload"]["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn discovery_lists_the_servers_tools_and_refuses_other_transports() {
    let Some(f) = fixture("MCP discovery").await else { return };
    let a = &f.p.admin;
    let t = a.get(&format!("/v1/tool-sources/{}", f.source)).await;
    expect(&t, 200, None);
    let tools = t.1["tools"].as_array().unwrap();
    let mut names: Vec<&str> = tools.iter().map(|x| x["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["add", "big", "fail", "leak", "slow", "whoami"]);
    let add = tools.iter().find(|x| x["name"] == "add").unwrap();
    assert_eq!(add["input_schema"]["properties"]["a"]["type"], "integer", "{add}");
    assert_eq!(add["annotations"]["readOnlyHint"], true);
    assert_eq!((add["enabled"].clone(), add["offered"].clone()), (Value::Null, json!(true)));
    assert_eq!(t.1["connection_id"], f.connection.as_str());
    assert_eq!(t.1["transport"], "streamable_http");
    assert_eq!(t.1["default_config"], json!({"enabled": true}));
    assert!(t.1["synced_at"].is_string());

    let stdio = a
        .post(
            "/v1/tool-sources",
            json!({"environment_id": f.p.env_id, "name": "T3", "connection_id": f.connection, "default_config": {"enabled": true}, "transport": "stdio"}),
        )
        .await;
    expect(&stdio, 400, Some("validation.invalid"));
    assert_eq!(stdio.1["error"]["details"]["reason"], "transport_unsupported");
    let no_config = a.post("/v1/tool-sources", json!({"environment_id": f.p.env_id, "name": "T3", "connection_id": f.connection})).await;
    expect(&no_config, 400, Some("validation.invalid"));

    // A reader reads but cannot manage; the sync is audited with what changed.
    let audit = a.get(&format!("/v1/audit-events?resource_id={}", f.source)).await.1["data"].as_array().unwrap().clone();
    let synced = audit.iter().find(|e| e["action"] == "tool_source.synced").unwrap();
    assert_eq!(synced["details"]["added"].as_array().unwrap().len(), 6, "{synced}");

    // The Session pins the Connection its release reaches.
    let (sid, _, _) = run(&f, "hello").await;
    assert_eq!(a.get(&format!("/v1/sessions/{sid}")).await.1["connection_ids"], json!([f.connection]));
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_asks_for_approval_by_default_and_runs_once_approved() {
    let Some(f) = fixture("MCP calls under approval").await else { return };
    let a = &f.p.admin;
    let (sid, done, evs) = run(&f, r#"call add {"a":2,"b":3}"#).await;
    assert_eq!(done["stop_reason"]["type"], "requires_action", "{done}");
    let use_ = of_type(&evs, "agent.tool_use")[0];
    assert_eq!(use_["payload"]["evaluated_permission"], "require_approval");
    assert_eq!(use_["payload"]["tool_source_id"], f.source.as_str());
    assert_eq!(use_["payload"]["connection_id"], f.connection.as_str());
    assert_eq!(of_type(&evs, "action_approval.pending").len(), 1);
    let pending = a.get(&format!("/v1/action-approvals?status=pending&session_id={sid}")).await.1["data"][0].clone();
    assert_eq!(pending["frozen"]["connection_id"], f.connection.as_str());
    assert_eq!(f.mcp.stats().await["tool_calls"], 0, "nothing went upstream before the approval");
    let token = pending["response_token"].as_str().unwrap();
    let ok =
        a.post(&format!("/v1/action-approvals/{}/responses", id(&pending)), json!({"decision": "approve", "response_token": token})).await;
    expect(&ok, 200, None);
    settle(a, &sid).await;
    let evs = events(a, &sid).await;
    assert_eq!(result_text(&evs), "5");
    let last = of_type(&evs, "agent.message").last().unwrap()["payload"].to_string();
    assert!(last.contains("tool add returned: 5"), "{last}");
    assert_gapless(&evs);
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_on_a_source_or_connection_decide_and_use_connection_is_required_of_both() {
    let Some(f) = fixture("MCP policy").await else { return };
    let a = &f.p.admin;
    let allow = allow_source(&f.p, &f.source).await;
    let (_, done, evs) = run(&f, r#"call add {"a":2,"b":3}"#).await;
    assert_eq!(done["stop_reason"]["type"], "end_turn", "{done}");
    assert_eq!(of_type(&evs, "agent.tool_use")[0]["payload"]["evaluated_permission"], "allow");
    assert_eq!(result_text(&evs), "5");

    // A deny on the Connection beats the allow on the ToolSource.
    let deny = json!({"environment_id": f.p.env_id, "name": "deny-c", "rules": [
        {"subject": {"kind": "*"}, "resource": {"kind": "connection", "id_glob": f.connection}, "disposition": "deny"}]});
    let deny = id(&a.post("/v1/action-policies", deny).await.1);
    let (_, _, evs) = run(&f, r#"call add {"a":2,"b":3}"#).await;
    assert_eq!(of_type(&evs, "agent.tool_use")[0]["payload"]["evaluated_permission"], "deny");
    assert_eq!(of_type(&evs, "policy.denied").len(), 1);
    expect(&a.delete(&format!("/v1/action-policies/{deny}")).await, 200, None);

    // The agent's row deleted: denied naming use_connection, nothing upstream, audited.
    let rows = a.get(&format!("/v1/permission-assignments?subject_id={}", f.d.agent_id)).await.1["data"].as_array().unwrap().clone();
    for r in rows {
        expect(&a.delete(&format!("/v1/permission-assignments/{}", id(&r))).await, 200, None);
    }
    let before = f.mcp.stats().await["mcp_requests"].clone();
    let (sid, _, evs) = run(&f, r#"call add {"a":2,"b":3}"#).await;
    assert_eq!(of_type(&evs, "agent.tool_use")[0]["payload"]["evaluated_permission"], "deny");
    let denied = of_type(&evs, "policy.denied")[0]["payload"]["guidance"].as_str().unwrap().to_string();
    assert!(denied.contains("use_connection") && denied.contains(&f.d.agent_id), "{denied}");
    assert!(of_type(&evs, "action_approval.pending").is_empty());
    assert_eq!(f.mcp.stats().await["mcp_requests"], before, "no request upstream");
    let audit = a.get(&format!("/v1/audit-events?resource_id={sid}")).await.1["data"].as_array().unwrap().clone();
    assert!(
        audit
            .iter()
            .any(|e| e["action"] == "action.denied" && e["details"]["reason"].as_str().unwrap_or_default().contains("use_connection")),
        "{audit:?}"
    );

    // Likewise a Principal holding only invoke (the agent has its row again).
    grant_agent(&f.p, &f.d.agent_id, &f.connection).await;
    let prin = id(&a.post("/v1/principals", json!({"kind": "service", "name": "invoker"})).await.1);
    let g =
        json!({"subject": {"kind": "principal", "id": prin}, "permission": "invoke", "resource": {"kind": "agent", "id": f.d.agent_id}});
    expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    let s = a
        .post("/v1/sessions", json!({"agent_deployment_id": f.d.deployment_id, "principal_id": prin, "initial_events": [message(&prin, r#"call add {"a":1,"b":1}"#)]}))
        .await;
    expect(&s, 201, None);
    let sid = id(&s.1);
    settle(a, &sid).await;
    let evs = events(a, &sid).await;
    let denied = of_type(&evs, "policy.denied")[0]["payload"]["guidance"].as_str().unwrap().to_string();
    assert!(denied.contains("use_connection") && denied.contains(&prin), "{denied}");
    let _ = allow;
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_credential_is_injected_by_the_gateway_alone_and_redacted_when_echoed() {
    let Some(f) = fixture("MCP credential injection").await else { return };
    allow_source(&f.p, &f.source).await;
    let (_, _, evs) = run(&f, "call whoami {}").await;
    assert_eq!(result_text(&evs), hex::encode(sha2::Sha256::digest(format!("Bearer {S}"))));
    let (_, _, evs) = run(&f, "call leak {}").await;
    assert_eq!(result_text(&evs), "Bearer [redacted]");
    // Nowhere the sandbox can read: its environment, workspace, /tmp, /etc
    // and every other writable or configuration tree. The host's read-only
    // system files are left out: /usr, and /bin, /lib, /lib64 and /sbin,
    // which the sandbox mounts as directories even where the host has them
    // as links into /usr (too slow to grep here: a machine with Chromium
    // and Python packages holds gigabytes there).
    let grep = "env; grep -rs s3cret / --exclude-dir=proc --exclude-dir=usr --exclude-dir=sys --exclude-dir=dev \
                --exclude-dir=bin --exclude-dir=lib --exclude-dir=lib64 --exclude-dir=sbin; echo done";
    let a = &f.p.admin;
    let body = json!({"agent_deployment_id": f.d.deployment_id, "initial_events": [message(&f.p.admin_id, &format!(r#"call bash {{"command":"{grep}"}}"#))]});
    let sid = id(&a.post("/v1/sessions", body).await.1);
    // The grep reads a whole filesystem: longer than `settle` waits.
    for _ in 0..240 {
        if a.get(&format!("/v1/sessions/{sid}")).await.1["status"] == "idle" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let out = result_text(&events(a, &sid).await);
    assert!(out.contains("done") && !out.contains(S), "{out}");
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn large_failing_and_slow_calls_become_bounded_error_results() {
    let Some(f) = fixture("MCP failures").await else { return };
    allow_source(&f.p, &f.source).await;
    let (_, _, evs) = run(&f, "call big {}").await;
    let r = &of_type(&evs, "agent.tool_result")[0]["payload"];
    assert_eq!(r["content"]["type"], "result_truncated", "{r}");
    assert_eq!(r["content"]["original_chars"], 150_000);
    let (_, _, evs) = run(&f, "call fail {}").await;
    let r = &of_type(&evs, "agent.tool_result")[0]["payload"];
    assert_eq!(r["is_error"], true, "{r}");
    assert!(r["content"].as_str().unwrap().contains("the fixture failed on purpose"), "{r}");
    let started = std::time::Instant::now();
    let (_, _, evs) = run(&f, "call slow {}").await;
    let r = &of_type(&evs, "agent.tool_result")[0]["payload"];
    assert_eq!(r["is_error"], true);
    assert!(r["content"].as_str().unwrap().starts_with("mcp.timeout"), "{r}");
    assert!(started.elapsed() < std::time::Duration::from_secs(4), "the 2 s timeout bit: {:?}", started.elapsed());
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_credential_fails_sync_keeps_the_list_and_disable_and_revoke_bite() {
    let Some(f) = fixture("MCP credential rotation").await else { return };
    let a = &f.p.admin;
    allow_source(&f.p, &f.source).await;
    let cred = |t: &str| json!({"type": "static_bearer", "token": t});
    expect(&a.post(&format!("/v1/connections/{}/credential", f.connection), cred("wrong")).await, 200, None);
    let t = a.post(&format!("/v1/tool-sources/{}/sync", f.source), json!({})).await;
    expect(&t, 200, None);
    assert_eq!(t.1["sync_status"], "failed");
    assert_eq!(t.1["sync_error"]["type"], "authentication_failed", "{}", t.1);
    assert_eq!(t.1["tools"].as_array().unwrap().len(), 6, "the last good list is kept");
    let (_, _, evs) = run(&f, r#"call add {"a":2,"b":3}"#).await;
    assert!(result_text(&evs).starts_with("mcp.authentication_failed"), "{evs:?}");
    let back = a.post(&format!("/v1/connections/{}/credential", f.connection), cred(S)).await;
    assert!(back.1["credential"]["rotated_at"].is_string());
    let (_, _, evs) = run(&f, r#"call add {"a":2,"b":3}"#).await;
    assert_eq!(result_text(&evs), "5");

    // Disabled: denied until enabled again; a stale version changes nothing.
    let v = a.get(&format!("/v1/connections/{}", f.connection)).await.1["version"].as_i64().unwrap();
    expect(&a.post(&format!("/v1/connections/{}", f.connection), json!({"disabled": true, "expected_version": v - 1})).await, 409, None);
    expect(&a.post(&format!("/v1/connections/{}", f.connection), json!({"disabled": true, "expected_version": v})).await, 200, None);
    let (_, _, evs) = run(&f, r#"call add {"a":2,"b":3}"#).await;
    assert_eq!(of_type(&evs, "agent.tool_use")[0]["payload"]["evaluated_permission"], "deny");
    expect(&a.post(&format!("/v1/connections/{}", f.connection), json!({"disabled": false})).await, 200, None);
    let (_, _, evs) = run(&f, r#"call add {"a":2,"b":3}"#).await;
    assert_eq!(result_text(&evs), "5");

    // Revoked: the credential is gone, calls are denied, credential writes conflict.
    let r = a.post(&format!("/v1/connections/{}/revoke", f.connection), json!({})).await;
    assert_eq!(r.1["credential"], Value::Null);
    let (_, _, evs) = run(&f, r#"call add {"a":2,"b":3}"#).await;
    assert_eq!(of_type(&evs, "agent.tool_use")[0]["payload"]["evaluated_permission"], "deny");
    expect(&a.post(&format!("/v1/connections/{}/credential", f.connection), cred(S)).await, 409, Some("validation.conflict"));
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn explicit_enablement_governs_publication_and_survives_syncs() {
    let Some(f) = fixture("MCP enablement").await else { return };
    let a = &f.p.admin;
    let t2 = a
        .post(
            "/v1/tool-sources",
            json!({"environment_id": f.p.env_id, "name": "T2", "connection_id": f.connection, "default_config": {"enabled": false}}),
        )
        .await;
    expect(&t2, 201, None);
    let t2 = id(&t2.1);
    let draft = json!({"tools": [{"type": "tool_source", "tool_source_id": t2, "tools": ["add"]}]});
    let agent = id(&a.post("/v1/agents", json!({"environment_id": f.p.env_id, "name": "b", "draft": draft})).await.1);
    let refused = a.post(&format!("/v1/agents/{agent}/versions"), json!({})).await;
    expect(&refused, 400, Some("validation.invalid"));
    assert_eq!(refused.1["error"]["details"]["reason"], "tool_not_offered");
    let on = a.post(&format!("/v1/tool-sources/{t2}/tools/add"), json!({"enabled": true})).await;
    expect(&on, 200, None);
    let published = a.post(&format!("/v1/agents/{agent}/versions"), json!({})).await;
    expect(&published, 201, None);
    assert_eq!(published.1["definition"]["tools"][0]["connection_id"], f.connection.as_str(), "{}", published.1);
    let synced = a.post(&format!("/v1/tool-sources/{t2}/sync"), json!({})).await;
    let add = synced.1["tools"].as_array().unwrap().iter().find(|x| x["name"] == "add").cloned().unwrap();
    assert_eq!((add["enabled"].clone(), add["offered"].clone()), (json!(true), json!(true)));
    expect(&a.post(&format!("/v1/tool-sources/{t2}/tools/nope"), json!({"enabled": true})).await, 404, Some("not_found"));

    // Archived: new publications are refused; a reader cannot archive.
    expect(&a.post(&format!("/v1/tool-sources/{t2}/archive"), json!({})).await, 200, None);
    let again = a.post(&format!("/v1/agents/{agent}/versions"), json!({})).await;
    expect(&again, 409, Some("validation.conflict"));
    assert_eq!(again.1["error"]["details"]["reason"], "tool_source_archived");
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn oauth_refresh_tokens_are_traded_by_the_gateway_and_a_failed_refresh_is_reported() {
    let (refresh, client_secret) = ("rt-INITIAL-5d1c9a", "cs-CLIENT-7e2b44");
    let extra = ["--refresh-token", refresh, "--client-secret", client_secret, "--token-ttl", "2"];
    let Some(mcp) = McpFixture::start("MCP OAuth refresh", "never-used-static", &extra).await else { return };
    let (seen, hook) = hook_receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let a = &p.admin;
    expect(
        &a.post(
            "/v1/webhook-endpoints",
            json!({"url": hook, "event_types": ["connection.*", "vault_credential.*"], "environment_id": p.env_id}),
        )
        .await,
        201,
        None,
    );
    let credential = json!({"type": "oauth2_refresh", "token_endpoint": format!("{}/token", mcp.base), "client_id": "checkfu",
        "client_secret": client_secret, "refresh_token": refresh});
    let c = a
        .post(
            "/v1/connections",
            json!({"environment_id": p.env_id, "name": "oauth", "kind": "mcp", "endpoint": {"url": mcp.url}, "credential": credential}),
        )
        .await;
    expect(&c, 201, None);
    let connection = id(&c.1);
    // A vault listing it (a CMA vault's credential): its failures are
    // reported per vault too.
    let v = a
        .post("/v1/connection-vaults", json!({"environment_id": p.env_id, "name": "cma", "connection_ids": [connection], "grantees": []}))
        .await;
    expect(&v, 201, None);
    let vault = id(&v.1);
    let t = a
        .post(
            "/v1/tool-sources",
            json!({"environment_id": p.env_id, "name": "T", "connection_id": connection, "default_config": {"enabled": true}}),
        )
        .await;
    expect(&t, 201, None);
    assert_eq!(t.1["sync_status"], "ok", "{}", t.1);
    let source = id(&t.1);
    let d = deploy(a, &p.env_id, json!({"tools": [{"type": "tool_source", "tool_source_id": source, "tools": ["add"]}]})).await;
    grant_agent(&p, &d.agent_id, &connection).await;
    allow_source(&p, &source).await;
    let f = Fixture { p, mcp, connection: connection.clone(), source, d, _dir: dir };
    let refreshes = || async { f.mcp.stats().await["refreshes"].as_i64().unwrap() };
    assert_eq!(refreshes().await, 1, "the first sync traded the refresh token");

    // Access tokens live 2 s: calls 3 s apart each need (and get) one refresh.
    let mut replies = vec![];
    for n in 0..2 {
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let (_, _, evs) = run(&f, r#"call add {"a":2,"b":3}"#).await;
        assert_eq!(result_text(&evs), "5");
        assert_eq!(refreshes().await, 2 + n);
        replies.push(serde_json::to_string(&evs).unwrap());
    }
    let k = f.p.admin.get(&format!("/v1/connections/{connection}")).await;
    assert_eq!(k.1["credential"]["state"], "ok");
    assert!(k.1["credential"]["last_used_at"].is_string());

    // The token endpoint now refuses: the call fails, the credential says so.
    f.mcp.deny_refreshes().await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let (_, _, evs) = run(&f, r#"call add {"a":2,"b":3}"#).await;
    let text = result_text(&evs);
    assert!(text.starts_with("credential.refresh_failed"), "{text}");
    let k = f.p.admin.get(&format!("/v1/connections/{connection}")).await;
    assert_eq!(k.1["credential"]["state"], "refresh_failed", "{}", k.1);
    wait_for_hook(&seen, "connection.refresh_failed").await;
    let hooks = wait_for_hook(&seen, "vault_credential.refresh_failed").await;
    let by_vault: Vec<serde_json::Value> = hooks
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|h| h["type"] == "vault_credential.refresh_failed")
        .collect();
    assert_eq!(by_vault.len(), 1, "{hooks}");
    assert_eq!(
        (by_vault[0]["data"]["vault_id"].as_str(), by_vault[0]["data"]["resource_id"].as_str()),
        (Some(vault.as_str()), Some(connection.as_str()))
    );
    let audit = f.p.admin.get(&format!("/v1/audit-events?resource_id={connection}")).await;
    assert!(audit.1["data"].as_array().unwrap().iter().any(|e| e["action"] == "connection.refresh_failed"));
    replies.extend([serde_json::to_string(&evs).unwrap(), k.1.to_string(), audit.1.to_string(), hooks]);
    for r in &replies {
        for secret in [refresh, client_secret, "at-", "rt-1-", "rt-2-"] {
            assert!(!r.contains(secret), "{secret} shown: {r}");
        }
    }
    f.p.stop().await;
}

/// Every delivery so far, once one of type `t` arrived.
/// Acceptance 18 (its second half): after a restart, and after a key
/// rotation and `checkfu credentials rewrap` with only the new key left,
/// the credential still opens and `add` still runs upstream.
#[tokio::test(flavor = "multi_thread")]
async fn acceptance_18_a_call_still_works_after_a_restart_and_a_rewrap_to_the_new_key_alone() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("credential.keys");
    let b64 = |b: u8| base64::engine::general_purpose::STANDARD.encode([b; 32]);
    std::fs::write(&keys, format!("old:{}\n", b64(7))).unwrap();
    let tuning = || Tuning { allow_private_targets: true, credential_key_file: Some(keys.clone()), ..Default::default() };
    let Some(f) = fixture_tuned("MCP after a rewrap", dir, tuning()).await else { return };
    allow_source(&f.p, &f.source).await;
    let add = |d: &str, admin: &str| json!({"agent_deployment_id": d, "initial_events": [message(admin, r#"call add {"a":2,"b":3}"#)]});
    let Fixture { p, mcp, d, _dir: dir, .. } = f;
    let calls = |p: &Platform| {
        let body = add(&d.deployment_id, &p.admin_id);
        let admin = Api::new(&p.base, &p.admin.key);
        async move {
            let s = admin.post("/v1/sessions", body).await;
            expect(&s, 201, None);
            settle(&admin, &id(&s.1)).await;
            let evs = events(&admin, &id(&s.1)).await;
            result_text(&evs)
        }
    };
    assert_eq!(calls(&p).await, "5");
    p.stop().await;

    // Restarted on the same key.
    let p = Platform::start_timed(dir.path(), tuning()).await;
    assert_eq!(calls(&p).await, "5", "after a restart");
    p.stop().await;

    // The new key first, rewrapped by the command line, then the old line dropped.
    std::fs::write(&keys, format!("new:{}\nold:{}\n", b64(9), b64(7))).unwrap();
    let out = std::process::Command::new(procs::binary())
        .args(["credentials", "--data-dir", dir.path().to_str().unwrap(), "rewrap", "--json"])
        .env("CHECKFU_CREDENTIAL_KEY_FILE", &keys)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((done["rewrapped"].as_u64(), done["unreadable"].as_u64()), (Some(1), Some(0)), "{done}");
    std::fs::write(&keys, format!("new:{}\n", b64(9))).unwrap();
    let p = Platform::start_timed(dir.path(), tuning()).await;
    assert_eq!(calls(&p).await, "5", "with only the new key");
    let stats = mcp.stats().await;
    assert_eq!(stats["tool_calls"], 3, "each call reached the server: {stats}");
    p.stop().await;
}

async fn wait_for_hook(seen: &Deliveries, t: &str) -> String {
    for _ in 0..200 {
        let got = seen.lock().unwrap().join("\n");
        if got.contains(&format!("\"type\":\"{t}\"")) {
            return got;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no {t} delivery: {:?}", seen.lock().unwrap());
}
