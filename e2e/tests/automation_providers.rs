//! Provider events through the public API (api.md §18.9): a GitHub
//! repository's events start an Automation. The `github` adapter registers
//! its hook through an `http` Connection via the capability gateway — here
//! against a local stand-in of GitHub's REST API (`G`) that records what it
//! was sent — and provider ingest verifies, dedupes and admits deliveries.
//! Acceptance checks 20–22 of §18.13, and `fake` under test providers.
#![cfg(test)]

use checkfu_e2e::automation::*;
use checkfu_e2e::github::{GitHub, delivery_headers};
use checkfu_e2e::*;
use serde_json::{Value, json};
use std::time::Duration;

const TOKEN: &str = "ghp_stand_in_token_0123456789";

/// The fixture, `G`, a bearer `http` Connection to it, an Automation with a
/// webhook trigger and A0's target, and a receiver of the registration's
/// webhooks.
struct Provided {
    f: Fixture,
    g: GitHub,
    connection: String,
    automation: String,
    hooks: Deliveries,
}

async fn provided() -> Provided {
    let f = fixture().await;
    let a = &f.p.admin;
    let g = GitHub::start().await;
    let c = a
        .post(
            "/v1/connections",
            json!({"environment_id": f.p.env_id, "name": "gh", "kind": "http", "endpoint": {"url": g.url},
                "credential": {"type": "static_bearer", "token": TOKEN}}),
        )
        .await;
    expect(&c, 201, None);
    let hook = json!([{"kind": "webhook", "dedupe_key": "/id"}]);
    let automation = id(&create_with(&f, "on issues", hook, a0(&f.d.deployment_id), None).await.1);
    let (hooks, url) = hook_receiver().await;
    let types =
        ["provider_webhook_registration.activated", "provider_webhook_registration.degraded", "provider_webhook_registration.revoked"];
    expect(&a.post("/v1/webhook-endpoints", json!({"environment_id": f.p.env_id, "url": url, "event_types": types})).await, 201, None);
    Provided { connection: id(&c.1), g, automation, hooks, f }
}

fn source_body(p: &Provided, automation: &str) -> Value {
    json!({"automation_id": automation, "provider": "github", "connection_id": p.connection,
        "resource": {"kind": "repository", "owner": "o", "name": "r"}, "events": ["issues"]})
}

/// POSTs a GitHub delivery to the callback URL.
async fn deliver(callback: &str, secret: &str, delivery: &str, event: &str, body: &Value) -> Reply {
    let bytes = body.to_string().into_bytes();
    let mut rb = reqwest::Client::new().post(callback).body(bytes.clone());
    for (k, v) in delivery_headers(secret, delivery, event, &bytes) {
        rb = rb.header(k, v);
    }
    let r = rb.send().await.unwrap();
    let (status, headers) = (r.status(), r.headers().clone());
    let text = r.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)), headers)
}

/// The `config.secret` the newest hook at `G` was made with.
fn newest_secret(g: &GitHub) -> String {
    g.seen().iter().rev().find(|s| s.method == "POST").unwrap().body["config"]["secret"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_20_and_21_a_github_source_registers_its_hook_and_its_deliveries_fire_once() {
    let p = provided().await;
    let a = &p.f.p.admin;

    // The catalog: github, automatic or manual; no fake here.
    let catalog = a.get("/v1/provider-triggers").await;
    expect(&catalog, 200, None);
    let providers: Vec<&str> = catalog.1["data"].as_array().unwrap().iter().map(|t| t["provider"].as_str().unwrap()).collect();
    assert_eq!(providers, ["github"], "{}", catalog.1);
    assert_eq!(catalog.1["data"][0]["modes"], json!(["automatic", "manual"]));
    assert!(catalog.1["data"][0]["events"].as_array().unwrap().contains(&json!("issues")));
    let mut fake = source_body(&p, &p.automation);
    fake["provider"] = json!("fake");
    let r = a.post("/v1/webhook-sources", fake).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "provider_unsupported");

    // One POST at G, with the token and the callback; active.
    let made = a.post("/v1/webhook-sources", source_body(&p, &p.automation)).await;
    expect(&made, 201, None);
    let src = made.1.clone();
    let reg = &src["registration"];
    assert_eq!(
        (reg["status"].clone(), reg["mode"].clone(), reg["provider_hook_id"].clone()),
        (json!("active"), json!("automatic"), json!("1")),
        "{src}"
    );
    let callback = reg["callback_url"].as_str().unwrap().to_string();
    assert_eq!(callback, format!("{}/v1/ingest/providers/github/{}", p.f.p.base, src["id"].as_str().unwrap()));
    assert!(reg.get("signing_secret").is_none(), "an automatic registration's secret went to the provider only");
    let seen = p.g.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!((seen[0].method.as_str(), seen[0].path.as_str()), ("POST", "/repos/o/r/hooks"));
    assert_eq!(seen[0].authorization, format!("Bearer {TOKEN}"));
    assert_eq!(seen[0].body["config"]["url"], callback.as_str());
    assert_eq!(seen[0].body["config"]["content_type"], "json");
    assert_eq!(seen[0].body["events"], json!(["issues"]));
    let reg_id = reg["id"].as_str().unwrap().to_string();
    wait_for_hook(&p.hooks, "provider_webhook_registration.activated", &reg_id).await;

    // The token is nowhere but at G.
    let listed = a.get(&format!("/v1/webhook-sources?automation_id={}", p.automation)).await.1;
    let regs = a.get("/v1/provider-webhook-registrations").await.1;
    let audit = a.get(&format!("/v1/audit-events?resource_id={reg_id}")).await.1;
    for text in [src.to_string(), listed.to_string(), regs.to_string(), audit.to_string(), p.hooks.lock().unwrap().join("\n")] {
        assert!(!text.contains(TOKEN), "{text}");
    }
    assert!(audit.to_string().contains("webhook_source.created"), "{audit}");

    // One source per Automation; a source needs a webhook trigger.
    let again = a.post("/v1/webhook-sources", source_body(&p, &p.automation)).await;
    expect(&again, 409, None);
    assert_eq!(again.1["error"]["details"]["reason"], "webhook_source_exists");
    let n1 = id(&create(&p.f, "n1", a0(&p.f.d.deployment_id)).await.1);
    let r = a.post("/v1/webhook-sources", source_body(&p, &n1)).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "webhook_trigger_missing");
    assert_eq!(p.g.seen().len(), 1, "refusals call nothing");

    // 21. A signed issues delivery fires once, deduped on its delivery id.
    let secret = newest_secret(&p.g);
    let issue = json!({"action": "opened", "issue": {"number": 7, "title": "X"}});
    let fired = deliver(&callback, &secret, "d1", "issues", &issue).await;
    expect(&fired, 201, None);
    let firing = fired.1.clone();
    assert_eq!((firing["source"].clone(), firing["dedupe_value"].clone()), (json!("webhook"), json!("d1")), "{firing}");
    assert_eq!(firing["webhook_source_id"], src["id"]);
    assert_eq!(firing["event"], json!({"provider": "github", "type": "issues", "action": "opened", "delivery_id": "d1", "payload": issue}));
    let again = deliver(&callback, &secret, "d1", "issues", &issue).await;
    expect(&again, 201, None);
    assert_eq!(again.1["id"], firing["id"], "the same firing");
    assert_eq!(again.2.get("idempotent-replayed").and_then(|v| v.to_str().ok()), Some("true"));
    let other = deliver(&callback, &secret, "d1", "issues", &json!({"action": "closed"})).await;
    expect(&other, 409, None);
    assert_eq!(other.1["error"]["details"]["reason"], "dedupe_key_conflict");
    expect(&deliver(&callback, "whsec_not_it", "d2", "issues", &issue).await, 401, Some("auth.invalid_key"));
    let ping = deliver(&callback, &secret, "d3", "ping", &json!({"zen": "Keep it logically awesome."})).await;
    expect(&ping, 200, None);
    assert_eq!(ping.1, json!({"ignored": "ping"}));
    let push = deliver(&callback, &secret, "d4", "push", &json!({"ref": "refs/heads/main"})).await;
    expect(&push, 200, None);
    assert_eq!(push.1, json!({"ignored": "event_not_selected"}));
    let firings = firings(a, &p.automation).await;
    assert_eq!(firings.len(), 1, "only d1 fired: {firings:?}");
    let done = settled(a, firing["id"].as_str().unwrap()).await;
    assert_eq!(done["state"], "succeeded", "{done}");

    // The CLI lists both.
    assert!(p.f.cli(&["provider-triggers"]).starts_with("github  modes automatic,manual  resources repository  events "));
    let regs = p.f.cli(&["webhook-sources", "registrations"]);
    assert!(regs.contains(&format!("{reg_id}  active  github automatic  hook 1")), "{regs}");
    p.f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_22_a_registration_is_checked_repaired_and_revoked_at_the_provider() {
    let p = provided().await;
    let a = &p.f.p.admin;
    let src = a.post("/v1/webhook-sources", source_body(&p, &p.automation)).await.1;
    let reg = src["registration"]["id"].as_str().unwrap().to_string();
    let callback = src["registration"]["callback_url"].as_str().unwrap().to_string();
    let first_secret = newest_secret(&p.g);
    let at = |action: &str| format!("/v1/provider-webhook-registrations/{reg}/{action}");

    // G dropped the hook: the check says so.
    p.g.drop_hooks();
    let checked = a.post(&at("check"), json!({})).await;
    expect(&checked, 200, None);
    assert_eq!(
        (checked.1["status"].clone(), checked.1["health"]["code"].clone()),
        (json!("degraded"), json!("hook_missing")),
        "{}",
        checked.1
    );
    wait_for_hook(&p.hooks, "provider_webhook_registration.degraded", &reg).await;

    // Repaired: a new hook with a new secret; the old secret signs nothing.
    let repaired = a.post(&at("repair"), json!({})).await;
    expect(&repaired, 200, None);
    assert_eq!((repaired.1["status"].clone(), repaired.1["provider_hook_id"].clone()), (json!("active"), json!("2")), "{}", repaired.1);
    let new_secret = newest_secret(&p.g);
    assert_ne!(new_secret, first_secret);
    assert_eq!(p.g.hooks().len(), 1, "one hook at G");
    let issue = json!({"action": "opened"});
    expect(&deliver(&callback, &first_secret, "r1", "issues", &issue).await, 401, Some("auth.invalid_key"));
    expect(&deliver(&callback, &new_secret, "r2", "issues", &issue).await, 201, None);

    // G refusing the token: degraded, provider_forbidden.
    p.g.forbid(true);
    let refused = a.post(&at("check"), json!({})).await;
    assert_eq!(
        (refused.1["status"].clone(), refused.1["health"]["code"].clone()),
        (json!("degraded"), json!("provider_forbidden")),
        "{}",
        refused.1
    );
    p.g.forbid(false);
    let healthy = a.post(&at("check"), json!({})).await;
    assert_eq!(healthy.1["status"], "active", "{}", healthy.1);

    // Revoked: the hook deleted at G, deliveries refused, readiness fails.
    let revoked = a.post(&at("revoke"), json!({})).await;
    expect(&revoked, 200, None);
    assert_eq!(revoked.1["status"], "revoked");
    let last = p.g.seen().last().cloned().unwrap();
    assert_eq!(
        (last.method.as_str(), last.path.as_str(), last.authorization.as_str()),
        ("DELETE", "/repos/o/r/hooks/2", format!("Bearer {TOKEN}").as_str())
    );
    assert!(p.g.hooks().is_empty());
    wait_for_hook(&p.hooks, "provider_webhook_registration.revoked", &reg).await;
    expect(&deliver(&callback, &new_secret, "r3", "issues", &issue).await, 401, Some("auth.invalid_key"));
    let auto = a.get(&format!("/v1/automations/{}", p.automation)).await.1;
    assert_eq!(check(&auto["readiness"], "webhook")["status"], "fail", "{auto}");
    let again = a.post(&at("check"), json!({})).await;
    expect(&again, 409, None);
    assert_eq!(again.1["error"]["details"]["reason"], "registration_revoked");
    let actions = a.get(&format!("/v1/audit-events?resource_id={reg}")).await.1.to_string();
    for action in
        ["provider_webhook_registration.checked", "provider_webhook_registration.repaired", "provider_webhook_registration.revoked"]
    {
        assert!(actions.contains(action), "{action}: {actions}");
    }

    // Deleting the source leaves its registration listed, revoked.
    let src_id = src["id"].as_str().unwrap();
    expect(&a.delete(&format!("/v1/webhook-sources/{src_id}")).await, 200, None);
    expect(&a.get(&format!("/v1/webhook-sources/{src_id}")).await, 404, None);
    let regs = a.get("/v1/provider-webhook-registrations?status=revoked").await.1;
    assert_eq!(regs["data"][0]["id"], reg.as_str(), "{regs}");
    p.f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn fake_is_offered_only_under_test_providers_and_a_manual_registration_waits_for_its_first_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { test_providers: true, allow_private_targets: true, ..Default::default() }).await;
    let a = &p.admin;
    let catalog = a.get("/v1/provider-triggers").await.1;
    let providers: Vec<&str> = catalog["data"].as_array().unwrap().iter().map(|t| t["provider"].as_str().unwrap()).collect();
    assert_eq!(providers, ["github", "fake"]);
    let svc = id(&a.post("/v1/principals", json!({"kind": "service", "name": "svc"})).await.1);
    let d = deploy(a, &p.env_id, json!({})).await;
    let g = json!({"subject": {"kind": "principal", "id": svc}, "permission": "invoke", "resource": {"kind": "agent", "id": d.agent_id}});
    expect(&a.post("/v1/permission-assignments", g).await, 201, None);
    let auto = a
        .post(
            "/v1/automations",
            json!({"name": "fake", "environment_id": p.env_id, "service_principal_id": svc, "triggers": [{"kind": "webhook", "dedupe_key": "/id"}],
                "target": a0(&d.deployment_id)}),
        )
        .await;
    expect(&auto, 201, None);
    let c = a
        .post(
            "/v1/connections",
            json!({"environment_id": p.env_id, "name": "f", "kind": "http", "endpoint": {"url": "http://127.0.0.1:9"}}),
        )
        .await;
    expect(&c, 201, None);
    let made = a
        .post(
            "/v1/webhook-sources",
            json!({"automation_id": id(&auto.1), "provider": "fake", "connection_id": id(&c.1), "resource": {"kind": "stream", "name": "s"},
                "events": ["created"], "mode": "manual"}),
        )
        .await;
    expect(&made, 201, None);
    let reg = &made.1["registration"];
    assert_eq!(reg["status"], "pending", "{}", made.1);
    let secret = reg["signing_secret"].as_str().expect("shown once").to_string();
    let reg_id = reg["id"].as_str().unwrap().to_string();
    let shown = a.get(&format!("/v1/provider-webhook-registrations/{reg_id}")).await.1;
    assert!(shown.get("signing_secret").is_none(), "never again: {shown}");
    let auto_now = a.get(&format!("/v1/automations/{}", id(&auto.1))).await.1;
    assert_eq!(check(&auto_now["readiness"], "webhook")["status"], "unknown", "pending: {auto_now}");

    let body = br#"{"id":"x"}"#;
    let send = |delivery: &'static str, event: &'static str| {
        let callback = reg["callback_url"].as_str().unwrap().to_string();
        let sig = checkfu_core::signature::body_mac_hex(&secret, body);
        async move {
            reqwest::Client::new()
                .post(callback)
                .header("x-fake-delivery", delivery)
                .header("x-fake-event", event)
                .header("x-fake-signature", sig)
                .body(body.to_vec())
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(send("f1", "created").await, 201);
    let active = a.get(&format!("/v1/provider-webhook-registrations/{reg_id}")).await.1;
    assert_eq!(active["status"], "active", "its first valid delivery activated it: {active}");
    assert_eq!(send("f1", "created").await, 201, "replayed");
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(firings(a, &id(&auto.1)).await.len(), 1);
    p.stop().await;
}
