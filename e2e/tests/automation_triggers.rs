//! Automation triggers through the public API (api.md §12.3–12.4), the
//! acceptance checks of §12.11 numbered 7 to 12: one-time schedules with
//! catch-up and `occurrence_failed`, recurring cron schedules, and signed
//! webhook ingest with its check order, dedupe identities, secret rotation
//! and admission filters.
#![cfg(test)]

use checkfu_core::time::{now_ms, rfc3339};
use checkfu_e2e::automation::*;
use checkfu_e2e::*;
use serde_json::{Value, json};
use std::time::Duration;

/// `ms` written in the `+02:00` offset (the same instant).
fn plus_two(ms: i64) -> String {
    rfc3339(ms + 2 * 3_600_000).replace('Z', "+02:00")
}

fn once(at: &str) -> Value {
    json!([{"kind": "schedule_once", "at": at}])
}

async fn get(f: &Fixture, id: &str) -> Value {
    f.p.admin.get(&format!("/v1/automations/{id}")).await.1
}

fn next_at(a: &Value) -> Value {
    a["triggers"][0]["next_at"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_7_a_one_time_schedule_fires_once_at_its_time() {
    let f = fixture().await;
    let a = &f.p.admin;
    let r = create_with(&f, "past", once(&plus_two(now_ms() - 1_000)), a0(&f.d.deployment_id), None).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "invalid_trigger", "{}", r.1);

    let at_ms = (now_ms() / 1000 + 3) * 1000;
    let r = create_with(&f, "o1", once(&plus_two(at_ms)), a0(&f.d.deployment_id), None).await;
    expect(&r, 201, None);
    let o1 = id(&r.1);
    assert_eq!(r.1["triggers"][0]["at"], rfc3339(at_ms), "read back as UTC milliseconds");
    assert_eq!(r.1["trigger"]["at"], rfc3339(at_ms));
    assert_eq!(next_at(&r.1), json!(rfc3339(at_ms)));
    // A manual fire leaves the occurrence pending.
    let m = a.post(&format!("/v1/automations/{o1}/fire"), json!({})).await;
    expect(&m, 201, None);
    assert_eq!(next_at(&get(&f, &o1).await), json!(rfc3339(at_ms)));

    let fired = wait_firings(a, &o1, 2, Duration::from_secs(6)).await;
    let scheduled: Vec<&Value> = fired.iter().filter(|x| x["source"] == "schedule").collect();
    assert_eq!(scheduled.len(), 1, "one schedule firing: {fired:?}");
    assert_eq!(scheduled[0]["scheduled_for"], rfc3339(at_ms));
    assert_eq!(scheduled[0]["event"], Value::Null);
    assert!(now_ms() >= at_ms);
    assert_eq!(settled(a, scheduled[0]["id"].as_str().unwrap()).await["state"], "succeeded");
    let after = get(&f, &o1).await;
    assert_eq!(next_at(&after), Value::Null, "consumed: {after}");

    // Pause, resume and rename do not re-arm it.
    expect(&a.post(&format!("/v1/automations/{o1}/pause"), json!({})).await, 200, None);
    expect(&a.post(&format!("/v1/automations/{o1}/resume"), json!({})).await, 200, None);
    expect(&a.post(&format!("/v1/automations/{o1}"), json!({"name": "o1-renamed"})).await, 200, None);
    // The same (past) `at` again is no change, not a refusal.
    let same = a.post(&format!("/v1/automations/{o1}"), json!({"triggers": once(&rfc3339(at_ms))})).await;
    expect(&same, 200, None);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(firings(a, &o1).await.len(), 2, "no firing while nothing re-armed it");

    // A new `at` → exactly one more.
    let at2 = (now_ms() / 1000 + 2) * 1000;
    let r = a.post(&format!("/v1/automations/{o1}"), json!({"trigger": {"kind": "schedule_once", "at": rfc3339(at2)}})).await;
    expect(&r, 200, None);
    assert_eq!(next_at(&r.1), json!(rfc3339(at2)));
    let fired = wait_firings(a, &o1, 3, Duration::from_secs(6)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let fired_later = firings(a, &o1).await;
    assert_eq!(fired_later.len(), 3, "exactly one more: {fired:?}");
    assert_eq!(fired_later[2]["scheduled_for"], rfc3339(at2));
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_8_a_paused_one_time_schedule_catches_up_and_a_failed_one_pauses() {
    let f = fixture().await;
    let a = &f.p.admin;
    let at_ms = (now_ms() / 1000 + 2) * 1000;
    let r = create_with(&f, "c1", once(&rfc3339(at_ms)), a0(&f.d.deployment_id), None).await;
    expect(&r, 201, None);
    let c1 = id(&r.1);
    let p = a.post(&format!("/v1/automations/{c1}/pause"), json!({})).await;
    expect(&p, 200, None);
    assert_eq!(next_at(&p.1), json!(rfc3339(at_ms)), "pause keeps the occurrence");
    tokio::time::sleep(Duration::from_millis((at_ms - now_ms()).max(0) as u64 + 2_000)).await;
    assert!(firings(a, &c1).await.is_empty(), "nothing fires while paused");
    expect(&a.post(&format!("/v1/automations/{c1}/resume"), json!({})).await, 200, None);
    let fired = wait_firings(a, &c1, 1, Duration::from_secs(4)).await;
    assert_eq!(fired.len(), 1, "one catch-up firing");
    assert_eq!(fired[0]["source"], "schedule");
    assert_eq!(fired[0]["scheduled_for"], rfc3339(at_ms), "with the original scheduled_for");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(firings(a, &c1).await.len(), 1);
    assert_eq!(next_at(&get(&f, &c1).await), Value::Null);

    // svc loses invoke before `at`: one skipped firing, consumed, paused.
    let at2 = (now_ms() / 1000 + 3) * 1000;
    let r = create_with(&f, "c2", once(&rfc3339(at2)), a0(&f.d.deployment_id), None).await;
    expect(&r, 201, None);
    let c2 = id(&r.1);
    expect(&a.delete(&format!("/v1/permission-assignments/{}", f.invoke)).await, 200, None);
    let fired = wait_firings(a, &c2, 1, Duration::from_secs(6)).await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0]["state"], "skipped");
    assert_eq!(fired[0]["error"]["reason"], "readiness_blocked");
    assert!(fired[0]["child_session_ids"].as_array().unwrap().is_empty());
    let mut after = get(&f, &c2).await;
    for _ in 0..50 {
        if after["status"] == "paused" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = get(&f, &c2).await;
    }
    assert_eq!(next_at(&after), Value::Null, "{after}");
    assert_eq!(after["status"], "paused");
    assert_eq!(after["pause_reason"]["code"], "occurrence_failed", "{after}");
    wait_for_hook(&f.hooks, "automation.paused", &c2).await;
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_9_a_cron_schedule_fires_every_occurrence_and_none_while_paused() {
    let f = fixture().await;
    let a = &f.p.admin;
    let cron = json!([{"kind": "schedule", "cron": "*/2 * * * * *", "timezone": "UTC"}]);
    let r = create_with(&f, "s1", cron, a0(&f.d.deployment_id), None).await;
    expect(&r, 201, None);
    let s1 = id(&r.1);
    assert!(next_at(&r.1).is_string(), "{}", r.1);
    tokio::time::sleep(Duration::from_secs(7)).await;
    let fired = firings(a, &s1).await;
    let mut times: Vec<String> = fired.iter().map(|x| x["scheduled_for"].as_str().unwrap().to_string()).collect();
    assert!(fired.iter().all(|x| x["source"] == "schedule" && x["event"].is_null()));
    times.dedup();
    assert!(times.len() >= 3, "at least 3 distinct occurrences in 7 s: {times:?}");
    assert_eq!(times.len(), fired.len(), "one firing per occurrence");

    let p = a.post(&format!("/v1/automations/{s1}/pause"), json!({})).await;
    expect(&p, 200, None);
    assert_eq!(next_at(&p.1), Value::Null, "a paused schedule has no pending occurrence");
    let paused_at = now_ms();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = firings(a, &s1).await.len();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let during = firings(a, &s1).await;
    assert_eq!(during.len(), before, "none inside the pause");
    assert!(during.iter().all(|x| checkfu_core::time::parse_rfc3339(x["scheduled_for"].as_str().unwrap(), 3).unwrap() <= paused_at));
    let r = a.post(&format!("/v1/automations/{s1}/resume"), json!({})).await;
    expect(&r, 200, None);
    assert!(next_at(&r.1).is_string(), "resumed: the next occurrence after now");
    let more = wait_firings(a, &s1, before + 1, Duration::from_secs(4)).await;
    assert!(more.len() > before, "it fires again after resume");
    f.p.stop().await;
}

const S: &str = "a-32-character-ingest-secret-0001";

fn hook() -> Value {
    json!([{"kind": "webhook", "dedupe_key": "/id"}])
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_10_signed_ingest_checks_its_signature_first() {
    let f = fixture().await;
    let a = &f.p.admin;
    let base = &f.p.base;
    let r = create_with(&f, "w", hook(), a0(&f.d.deployment_id), Some(S)).await;
    expect(&r, 201, None);
    assert!(r.1.get("ingest_secret").is_none(), "a supplied secret is not echoed");
    assert_eq!(check(&r.1["readiness"], "webhook")["status"], "pass");
    let w = id(&r.1);
    let e1 = r#"{"id":"e1","title":"Q"}"#;
    let r = ingest_signed(base, &w, S, e1).await;
    expect(&r, 201, None);
    assert_eq!(r.1["source"], "webhook");
    assert_eq!(r.1["event"], json!({"id": "e1", "title": "Q"}));
    assert_eq!(r.1["dedupe_value"], "e1");
    assert_eq!(r.1["child_session_ids"].as_array().unwrap().len(), 1, "{}", r.1);
    let child = r.1["child_session_ids"][0].as_str().unwrap().to_string();
    assert_eq!(settled(a, r.1["id"].as_str().unwrap()).await["state"], "succeeded");
    let msgs = events(a, &child).await;
    let first = msgs.iter().find(|e| e["type"] == "user.message").unwrap();
    assert_eq!(first["payload"]["content"][0]["text"], "Summarize Q");

    // 401 for every signature that is not the current secret's, now.
    let e2 = r#"{"id":"e2","title":"Q"}"#;
    let now = now_s();
    let altered = sig(S, now, e2.as_bytes());
    for (why, body, header) in [
        ("altered body", r#"{"id":"e2","title":"R"}"#.to_string(), altered.clone()),
        ("other secret", e2.to_string(), sig("another-32-character-secret-00000", now, e2.as_bytes())),
        ("unsigned", e2.to_string(), String::new()),
        ("malformed", e2.to_string(), "v1=zz".to_string()),
        ("too old", e2.to_string(), sig(S, now - 360, e2.as_bytes())),
        ("too new", e2.to_string(), sig(S, now + 360, e2.as_bytes())),
    ] {
        let r = ingest(base, &w, body.as_bytes(), &header).await;
        assert_eq!(r.0.as_u16(), 401, "{why}: {}", r.1);
        assert_eq!(r.1["error"]["type"], "auth.invalid_key", "{why}");
    }
    // Unknown, deleted-looking or malformed ids answer the same 401.
    let r = ingest(base, "auto_01jx0000000000000000000000", e2.as_bytes(), &sig(S, now, e2.as_bytes())).await;
    expect(&r, 401, Some("auth.invalid_key"));
    let r = ingest(base, "nope", e2.as_bytes(), &sig(S, now, e2.as_bytes())).await;
    expect(&r, 401, Some("auth.invalid_key"));
    // Within the tolerance.
    let r = ingest(base, &w, e2.as_bytes(), &sig(S, now - 240, e2.as_bytes())).await;
    expect(&r, 201, None);
    // Over 1 MiB: 413 before anything else.
    let big = vec![b' '; 1_048_577];
    let r = ingest(base, &w, &big, "").await;
    assert_eq!(r.0.as_u16(), 413, "{}", r.1);
    // Headers and body after the signature: 400 with their reasons.
    let e4 = r#"{"id":"e4"}"#;
    let good = sig(S, now_s(), e4.as_bytes());
    let r = ingest_with(
        base,
        &w,
        e4.as_bytes(),
        &[("checkfu-signature", &good), ("checkfu-version", "2"), ("content-type", "application/json")],
    )
    .await;
    assert_eq!((r.0.as_u16(), r.1["error"]["details"]["reason"].clone()), (400, json!("unsupported_version")), "{}", r.1);
    let r = ingest_with(base, &w, e4.as_bytes(), &[("checkfu-signature", &good), ("checkfu-version", "1"), ("content-type", "text/plain")])
        .await;
    assert_eq!((r.0.as_u16(), r.1["error"]["details"]["reason"].clone()), (400, json!("unsupported_content_type")));
    let r = ingest_with(
        base,
        &w,
        e4.as_bytes(),
        &[("checkfu-signature", &good), ("checkfu-version", "1"), ("content-type", "application/json; charset=utf-8")],
    )
    .await;
    expect(&r, 201, None);
    let r = ingest_signed(base, &w, S, "{not json").await;
    assert_eq!((r.0.as_u16(), r.1["error"]["details"]["reason"].clone()), (400, json!("invalid_json")));
    let r = ingest_signed(base, &w, S, r#"{"title":"no id"}"#).await;
    assert_eq!((r.0.as_u16(), r.1["error"]["details"]["reason"].clone()), (400, json!("dedupe_key_missing")));
    // Paused → 409, recording nothing.
    let before = firings(a, &w).await.len();
    expect(&a.post(&format!("/v1/automations/{w}/pause"), json!({})).await, 200, None);
    let r = ingest_signed(base, &w, S, r#"{"id":"e5"}"#).await;
    expect(&r, 409, Some("validation.conflict"));
    assert_eq!(firings(a, &w).await.len(), before, "a refusal records nothing");

    // An Automation without a webhook trigger takes no ingest at all.
    let n = create(&f, "manual-only", a0(&f.d.deployment_id)).await;
    let r = ingest_signed(base, &id(&n.1), S, e2).await;
    expect(&r, 401, Some("auth.invalid_key"));
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_11_dedupe_identities_survive_secret_rotation() {
    let f = fixture().await;
    let a = &f.p.admin;
    let base = &f.p.base;
    // No secret given: one is generated and shown once.
    let r = create_with(&f, "w", hook(), a0(&f.d.deployment_id), None).await;
    expect(&r, 201, None);
    let s = r.1["ingest_secret"].as_str().unwrap().to_string();
    assert!(s.starts_with("whsec_") && s.len() == 70, "{s}");
    let w = id(&r.1);
    assert!(get(&f, &w).await.get("ingest_secret").is_none(), "never readable later");

    let e1 = r#"{"id":"e1","title":"Q"}"#;
    let first = ingest_signed(base, &w, &s, e1).await;
    expect(&first, 201, None);
    let afire = id(&first.1);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let again = ingest_signed(base, &w, &s, e1).await;
    expect(&again, 201, None);
    assert_eq!(id(&again.1), afire, "the original firing");
    assert_eq!(again.2.get("idempotent-replayed").and_then(|v| v.to_str().ok()), Some("true"));
    let r = ingest_signed(base, &w, &s, r#"{"id":"e1","title":"X"}"#).await;
    expect(&r, 409, Some("validation.conflict"));
    assert_eq!(r.1["error"]["details"]["reason"], "dedupe_key_conflict");
    // An integer identity is another identity than its text.
    expect(&ingest_signed(base, &w, &s, r#"{"id":1}"#).await, 201, None);
    expect(&ingest_signed(base, &w, &s, r#"{"id":"1"}"#).await, 201, None);

    // Rotation: at once, no overlap.
    let s2 = "rotated-secret-of-32-characters-xx";
    let r = a.post(&format!("/v1/automations/{w}"), json!({"ingest_secret": s2})).await;
    expect(&r, 200, None);
    assert!(r.1.get("ingest_secret").is_none(), "a supplied secret is not echoed");
    expect(&ingest_signed(base, &w, &s, r#"{"id":"e9"}"#).await, 401, Some("auth.invalid_key"));
    expect(&ingest_signed(base, &w, &s, e1).await, 401, Some("auth.invalid_key"));
    let r = ingest_signed(base, &w, s2, e1).await;
    expect(&r, 201, None);
    assert_eq!(id(&r.1), afire, "re-signed with the new secret, it rejoins its original result");
    let r = ingest_signed(base, &w, s2, r#"{"id":"e1","title":"X"}"#).await;
    assert_eq!(r.1["error"]["details"]["reason"], "dedupe_key_conflict");
    let audit = a.get(&format!("/v1/audit-events?resource_id={w}&limit=100")).await;
    assert!(audit.1.to_string().contains("automation.ingest_secret_rotated"), "the rotation is audited: {}", audit.1);
    assert!(!audit.1.to_string().contains(s2) && !audit.1.to_string().contains(&s), "no secret in the audit");
    // A too-short secret is refused.
    let r = a.post(&format!("/v1/automations/{w}"), json!({"ingest_secret": "short"})).await;
    expect(&r, 400, Some("validation.invalid"));
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_12_an_admission_filter_records_what_it_stops() {
    let f = fixture().await;
    let a = &f.p.admin;
    let base = &f.p.base;
    let trig = json!([{"kind": "webhook", "dedupe_key": "/id",
        "admission_filter": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/kind", "value": "issue"}]}}]);
    let r = create_with(&f, "wf", trig.clone(), a0(&f.d.deployment_id), Some(S)).await;
    expect(&r, 201, None);
    let wf = id(&r.1);
    assert_eq!(r.1["triggers"][0]["admission_filter"], trig[0]["admission_filter"]);
    let e3 = r#"{"id":"e3","kind":"pr"}"#;
    let r = ingest_signed(base, &wf, S, e3).await;
    expect(&r, 200, None);
    let afdl = id(&r.1);
    assert!(afdl.starts_with("afdl_"), "{}", r.1);
    assert_eq!(
        (r.1["reason"].clone(), r.1["predicate_index"].clone(), r.1["dedupe_value"].clone()),
        (json!("admission_filter"), json!(0), json!("e3"))
    );
    assert_eq!(r.1["body_sha256"], checkfu_core::sha256_hex(e3));
    let r = ingest_signed(base, &wf, S, e3).await;
    expect(&r, 200, None);
    assert_eq!(id(&r.1), afdl, "the same filtered delivery");
    assert_eq!(r.2.get("idempotent-replayed").and_then(|v| v.to_str().ok()), Some("true"));
    let listed = a.get(&format!("/v1/automations/{wf}/filtered-deliveries")).await;
    expect(&listed, 200, None);
    assert_eq!(listed.1["data"].as_array().unwrap().len(), 1, "one afdl_: {}", listed.1);
    assert!(firings(a, &wf).await.is_empty());
    // An issue passes; a manual fire ignores the filter.
    expect(&ingest_signed(base, &wf, S, r#"{"id":"e4","kind":"issue"}"#).await, 201, None);
    let r = a.post(&format!("/v1/automations/{wf}/fire"), json!({"event": {"id": "e3", "kind": "pr"}})).await;
    expect(&r, 201, None);
    assert_eq!(r.1["source"], "manual");
    // Filters are checked when written.
    let bad = json!([{"kind": "webhook", "dedupe_key": "/id",
        "admission_filter": {"kind": "predicates", "predicates": [{"kind": "equals", "pointer": "/kind", "value": null}]}}]);
    let r = create_with(&f, "bad", bad, a0(&f.d.deployment_id), Some(S)).await;
    assert_eq!((r.0.as_u16(), r.1["error"]["details"]["reason"].clone()), (400, json!("invalid_trigger")), "{}", r.1);
    let d = &r.1["error"]["details"];
    assert_eq!(
        (d["field"].clone(), d["code"].clone()),
        (json!("triggers[0].admission_filter.predicates[0]"), json!("invalid_predicate_value"))
    );
    f.p.stop().await;
}

/// `checkfu automation create --webhook` prints the generated secret once;
/// events signed with it fire; `automation filtered` lists what a filter
/// stopped; `--cron` and `--at` read back with their next occurrence.
#[tokio::test(flavor = "multi_thread")]
async fn the_command_line_creates_scheduled_and_webhook_automations() {
    let f = fixture().await;
    let cli = |args: &[&str]| f.cli(args);
    let common = [
        "--environment",
        &f.p.env_id,
        "--service-principal",
        &f.svc,
        "--deployment",
        &f.d.deployment_id,
        "--prompt",
        "Look at {{event.id}}",
    ];
    let text = cli(&[&["automation", "create", "--name", "hook", "--webhook", "/id"][..], &common[..]].concat());
    let secret = text.lines().find_map(|l| l.strip_prefix("ingest secret (shown once; keep it): ")).expect("the secret line").to_string();
    assert!(text.contains("[webhook /id]"), "{text}");
    let hook = text.split_whitespace().next().unwrap().to_string();
    let r = ingest_signed(&f.p.base, &hook, &secret, r#"{"id":"cli-1"}"#).await;
    expect(&r, 201, None);
    let listed = cli(&["automation", "firings", &hook]);
    assert!(listed.contains("webhook") && listed.contains(&id(&r.1)), "{listed}");
    assert!(cli(&["automation", "filtered", &hook]).trim().is_empty(), "no filter, nothing stopped");

    let at = rfc3339((now_ms() / 1000 + 3600) * 1000);
    let text = cli(&[&["automation", "create", "--name", "once", "--at", &at][..], &common[..]].concat());
    assert!(text.contains(&format!("at {at}, next {at}")), "{text}");
    let text = cli(
        &[&["automation", "create", "--name", "cron", "--cron", "0 9 * * 1-5", "--timezone", "Europe/Paris"][..], &common[..]].concat()
    );
    assert!(text.contains("cron 0 9 * * 1-5 (Europe/Paris), next "), "{text}");
    let json_out = cli(&["automation", "get", text.split_whitespace().next().unwrap(), "--json"]);
    let v: Value = serde_json::from_str(json_out.trim()).unwrap();
    assert!(v.get("ingest_secret").is_none());
    f.p.stop().await;
}

/// What a scheduler that was down finds (§12.3): a recurring occurrence
/// long past is skipped and the next one armed; a one-time occurrence
/// whose `at` passed fires once, with its original `scheduled_for`. The
/// platform is stopped and its timers set as downtime leaves them.
#[tokio::test(flavor = "multi_thread")]
async fn a_scheduler_that_was_down_skips_missed_recurring_occurrences_and_catches_up_one_time_ones() {
    use checkfu_store::sqlx;
    let f = fixture().await;
    let daily = json!([{"kind": "schedule", "cron": "0 0 * * *", "timezone": "UTC"}]);
    let s1 = id(&create_with(&f, "daily", daily, a0(&f.d.deployment_id), None).await.1);
    let o1 = id(&create_with(&f, "once", once(&rfc3339(now_ms() + 3_600_000)), a0(&f.d.deployment_id), None).await.1);
    let Fixture { p, dir, svc, d, .. } = f;
    p.stop().await;

    let missed = (now_ms() / 1000 - 120) * 1000;
    let db = checkfu_store::Db::open(&checkfu_store::Location::SqliteDir(dir.path().into()), "scheduler", &checkfu_scheduler::MIGRATIONS)
        .await
        .unwrap();
    for (auto, at) in [(&s1, missed), (&o1, missed)] {
        sqlx::query("UPDATE timers SET scheduled_for_ms = $1, due_ms = $1 WHERE id = $2")
            .bind(at)
            .bind(auto.as_str())
            .execute(&db.pool)
            .await
            .unwrap();
    }
    let triggers = json!([{"kind": "schedule_once", "at": rfc3339(missed)}]).to_string();
    sqlx::query("UPDATE automations SET triggers_json = $1 WHERE id = $2")
        .bind(triggers)
        .bind(o1.as_str())
        .execute(&db.pool)
        .await
        .unwrap();
    drop(db);

    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let a = &p.admin;
    let fired = wait_firings(a, &o1, 1, Duration::from_secs(6)).await;
    assert_eq!(fired.len(), 1, "the one-time occurrence fires once on return");
    assert_eq!(fired[0]["scheduled_for"], rfc3339(missed));
    assert_eq!(fired[0]["child_session_ids"][0].as_str().map(|_| ()), Some(()), "as {svc} on {}", d.deployment_id);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(firings(a, &s1).await.is_empty(), "the missed recurring occurrence is skipped");
    let next = a.get(&format!("/v1/automations/{s1}")).await.1["triggers"][0]["next_at"]
        .as_str()
        .map(|t| checkfu_core::time::parse_rfc3339(t, 3).unwrap());
    assert!(next.is_some_and(|n| n > now_ms() && n % 86_400_000 == 0), "the next midnight is armed: {next:?}");
    assert_eq!(a.get(&format!("/v1/automations/{o1}")).await.1["triggers"][0]["next_at"], Value::Null);
    assert_eq!(firings(a, &o1).await.len(), 1);
    p.stop().await;
}
