//! Dreams through the public API (api.md §13.5): the acceptance checks 9
//! and 10 of §13.6, and the edges around them.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::{Value, json};
use std::time::Duration;

async fn store(p: &Platform, name: &str) -> String {
    let r = p
        .admin
        .post("/v1/memory-stores", json!({"environment_id": p.env_id, "name": name, "owner": {"kind": "principal", "id": p.admin_id}}))
        .await;
    expect(&r, 201, None);
    id(&r.1)
}

async fn put(p: &Platform, store: &str, path: &str, content: &str) {
    let r = p
        .admin
        .post(&format!("/v1/memory-stores/{store}/document"), json!({"path": path, "content": content, "expected_sha256": null}))
        .await;
    expect(&r, 200, None);
}

/// The store's documents at its head, `path → content`.
async fn documents(p: &Platform, store: &str) -> Vec<(String, String)> {
    let listed = p.admin.get(&format!("/v1/memory-stores/{store}/documents?limit=100")).await;
    expect(&listed, 200, None);
    let mut out = vec![];
    for d in listed.1["data"].as_array().unwrap() {
        let path = d["path"].as_str().unwrap();
        let read = p.admin.get(&format!("/v1/memory-stores/{store}/document?path={path}")).await;
        out.push((path.to_string(), read.1["document"]["content"].as_str().unwrap().to_string()));
    }
    out
}

fn docs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect()
}

/// Polls until the Dream is no longer pending or running.
async fn finished(p: &Platform, dream: &str) -> Value {
    for _ in 0..600 {
        let r = p.admin.get(&format!("/v1/dreams/{dream}")).await;
        expect(&r, 200, None);
        if !matches!(r.1["status"].as_str(), Some("pending" | "running")) {
            return r.1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("dream {dream} never finished");
}

async fn dream(p: &Platform, body: Value) -> Value {
    let r = p.admin.post("/v1/dreams", body).await;
    expect(&r, 201, None);
    assert_eq!(r.1["status"], "pending", "{}", r.1);
    finished(p, r.1["id"].as_str().unwrap()).await
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_9_a_deterministic_dream_writes_a_new_store_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let (hooks, url) = hook_receiver().await;
    expect(
        &p.admin
            .post("/v1/webhook-endpoints", json!({"environment_id": p.env_id, "url": url, "event_types": ["memory_store.created"]}))
            .await,
        201,
        None,
    );
    let input = store(&p, "notes").await;
    put(&p, &input, "/b.md", "same\n").await;
    put(&p, &input, "/a.md", "same\n").await;
    put(&p, &input, "/lines.md", "tea\ncake\n\ntea\n\ncake\nmilk\n").await;
    // Someone who may read the input may read the output.
    let reader = id(&p.admin.post("/v1/principals", json!({"kind": "human", "name": "reader"})).await.1);
    let row =
        json!({"subject": {"kind": "principal", "id": reader}, "permission": "read", "resource": {"kind": "memory_store", "id": input}});
    expect(&p.admin.post("/v1/permission-assignments", row).await, 201, None);

    let created = p.admin.post("/v1/dreams", json!({"memory_store_id": input})).await;
    expect(&created, 201, None);
    let d = &created.1;
    assert!(d["id"].as_str().unwrap().starts_with("drm_"), "{d}");
    assert_eq!(
        (d["mode"].clone(), d["inputs"]["store_version"].clone(), d["review"].clone()),
        (json!("deterministic"), json!(3), json!(false))
    );
    assert_eq!(d["outputs"]["memory_store_id"], Value::Null, "no output before it completes");
    let d = finished(&p, d["id"].as_str().unwrap()).await;
    assert_eq!(d["status"], "completed", "{d}");
    assert_eq!(d["usage"], json!({"input_tokens": 0, "output_tokens": 0, "cost_micro_usd": 0}));
    assert_eq!(d["stats"]["duplicate_documents_removed"], 1);
    assert_eq!(d["stats"]["duplicate_lines_removed"], 2);
    assert!(d["ended_at"].is_string() && d["started_at"].is_string());

    let out = d["outputs"]["memory_store_id"].as_str().unwrap().to_string();
    let s = p.admin.get(&format!("/v1/memory-stores/{out}")).await.1;
    assert_eq!(s["name"], format!("notes ({})", d["id"].as_str().unwrap()));
    assert_eq!(s["created_from"], json!({"memory_store_id": input, "store_version": 3, "dream_id": d["id"]}));
    assert_eq!(
        (s["head_version"].clone(), s["owner"].clone(), s["review"].clone()),
        (json!(2), json!({"kind": "principal", "id": p.admin_id}), json!("direct"))
    );
    assert_eq!(documents(&p, &out).await, docs(&[("/a.md", "same\n"), ("/lines.md", "tea\ncake\n\n\nmilk\n")]));
    let versions = p.admin.get(&format!("/v1/memory-stores/{out}/versions")).await.1;
    let vias: Vec<&str> = versions["data"].as_array().unwrap().iter().map(|v| v["via"].as_str().unwrap()).collect();
    assert_eq!(vias, ["dream", "copy"]);
    assert_eq!(versions["data"][0]["actor"], json!({"kind": "dream", "id": d["id"]}));
    // Version 1 equals the input at the pinned version.
    let v1 = p.admin.get(&format!("/v1/memory-stores/{out}/documents?at_version=1")).await.1;
    assert_eq!(v1["data"].as_array().unwrap().len(), 3);
    // The input never changes.
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{input}")).await.1["head_version"], 3);
    assert_eq!(documents(&p, &input).await.len(), 3);
    // The input's own rows were copied, as new rows.
    let rows = p.admin.get(&format!("/v1/permission-assignments?resource_id={out}")).await.1;
    let rows = rows["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0]["subject"]["id"].clone(), rows[0]["permission"].clone()), (json!(reader), json!("read")));
    checkfu_e2e::automation::wait_for_hook(&hooks, "memory_store.created", &out).await;

    // review:true: the output stays at version 1, the changes an open proposal.
    let reviewed = dream(&p, json!({"memory_store_id": input, "review": true})).await;
    assert_eq!(reviewed["status"], "completed", "{reviewed}");
    let out2 = reviewed["outputs"]["memory_store_id"].as_str().unwrap().to_string();
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{out2}")).await.1["head_version"], 1);
    let proposal = reviewed["outputs"]["memory_proposal_id"].as_str().unwrap().to_string();
    let pr = p.admin.get(&format!("/v1/memory-proposals/{proposal}")).await.1;
    assert_eq!(
        (pr["status"].clone(), pr["reason"].clone(), pr["memory_store_id"].clone()),
        (json!("open"), json!("dream_review"), json!(out2))
    );
    let approved = p.admin.post(&format!("/v1/memory-proposals/{proposal}/approve"), json!({})).await;
    expect(&approved, 200, None);
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{out2}")).await.1["head_version"], 2);
    assert_eq!(documents(&p, &out2).await, documents(&p, &out).await);

    // Nothing to change: no version 2, and with review no proposal.
    let clean = dream(&p, json!({"memory_store_id": out, "review": true})).await;
    assert_eq!(clean["outputs"]["memory_proposal_id"], Value::Null);
    let clean_out = clean["outputs"]["memory_store_id"].as_str().unwrap();
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{clean_out}")).await.1["head_version"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_10_a_model_dream_remembers_once_and_finished_dreams_archive() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let sid = id(&p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": p.admin_id})).await.1);
    for text in ["remember: tea", "hello\nremember: tea"] {
        expect(&p.admin.post(&format!("/v1/sessions/{sid}/events"), message(&p.admin_id, text)).await, 201, None);
        settle(&p.admin, &sid).await;
    }
    let input = store(&p, "notes").await;
    let body = json!({"memory_store_id": input, "session_ids": [sid], "model_routing_profile_id": d.routing_profile_id, "instructions": "keep it short"});
    let done = dream(&p, body).await;
    assert_eq!((done["status"].clone(), done["mode"].clone()), (json!("completed"), json!("model")), "{done}");
    assert!(done["usage"]["input_tokens"].as_i64().unwrap() > 0 && done["usage"]["output_tokens"].as_i64().unwrap() > 0, "{done}");
    assert_eq!((done["stats"]["sessions_read"].clone(), done["stats"]["messages_read"].clone()), (json!(1), json!(2)));
    let out = done["outputs"]["memory_store_id"].as_str().unwrap();
    assert_eq!(documents(&p, out).await, docs(&[("/dream/notes.md", "tea\n")]));
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{input}")).await.1["head_version"], 0);

    // Finished: cancelling is refused; archiving hides it from default lists.
    let dream_id = done["id"].as_str().unwrap();
    expect(&p.admin.post(&format!("/v1/dreams/{dream_id}/cancel"), json!({})).await, 409, Some("validation.conflict"));
    let archived = p.admin.post(&format!("/v1/dreams/{dream_id}/archive"), json!({})).await;
    expect(&archived, 200, None);
    assert!(archived.1["archived_at"].is_string());
    let again = p.admin.post(&format!("/v1/dreams/{dream_id}/archive"), json!({})).await;
    assert_eq!(again.1, archived.1, "archiving is idempotent");
    let ids = |r: Reply| r.1["data"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert!(!ids(p.admin.get("/v1/dreams").await).contains(&dream_id.to_string()));
    assert!(ids(p.admin.get("/v1/dreams?include_archived=true").await).contains(&dream_id.to_string()));
    assert!(ids(p.admin.get("/v1/dreams?status=completed&include_archived=true").await).contains(&dream_id.to_string()));
    assert!(ids(p.admin.get("/v1/dreams?status=failed&include_archived=true").await).is_empty());
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{out}")).await.1["status"], "active", "the output is untouched");

    // A Session from another Environment → 400; unknown ids → 400; a
    // profile of another Environment → 400.
    let other_env = id(&p.admin.post("/v1/environments", json!({"name": "other"})).await.1);
    let od = deploy(&p.admin, &other_env, json!({})).await;
    let other = id(&p.admin.post("/v1/sessions", json!({"agent_deployment_id": od.deployment_id, "principal_id": p.admin_id})).await.1);
    for body in [
        json!({"memory_store_id": input, "session_ids": [other]}),
        json!({"memory_store_id": input, "session_ids": [sid, sid]}),
        json!({"memory_store_id": input, "session_ids": ["sess_01jx0000000000000000000000"]}),
        json!({"memory_store_id": input, "model_routing_profile_id": od.routing_profile_id}),
        json!({"memory_store_id": input, "instructions": "x".repeat(64 * 1024 + 1)}),
        json!({"memory_store_id": input, "session_ids": vec![sid.clone(); 101]}),
    ] {
        expect(&p.admin.post("/v1/dreams", body).await, 400, Some("validation.invalid"));
    }
    expect(&p.admin.post("/v1/dreams", json!({"memory_store_id": "mstr_01jx0000000000000000000000"})).await, 404, Some("not_found"));
    expect(&p.admin.get("/v1/dreams/drm_01jx0000000000000000000000").await, 404, Some("not_found"));
}

#[tokio::test(flavor = "multi_thread")]
async fn dreams_need_manage_to_start_and_read_to_see_and_refuse_an_archived_store() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let input = store(&p, "notes").await;
    let who = id(&p.admin.post("/v1/principals", json!({"kind": "human", "name": "someone"})).await.1);
    let key = p.admin.post(&format!("/v1/principals/{who}/api-keys"), json!({})).await.1["secret"].as_str().unwrap().to_string();
    let api = Api::new(&p.base, &key);
    expect(&api.post("/v1/dreams", json!({"memory_store_id": input})).await, 403, Some("permission.denied"));
    let done = dream(&p, json!({"memory_store_id": input})).await;
    let dream_id = done["id"].as_str().unwrap();
    expect(&api.get(&format!("/v1/dreams/{dream_id}")).await, 403, Some("permission.denied"));
    assert_eq!(api.get("/v1/dreams").await.1["data"], json!([]), "listed only for who may read the input");
    let row = json!({"subject": {"kind": "principal", "id": who}, "permission": "read", "resource": {"kind": "memory_store", "id": input}});
    expect(&p.admin.post("/v1/permission-assignments", row).await, 201, None);
    expect(&api.get(&format!("/v1/dreams/{dream_id}")).await, 200, None);
    expect(&api.post(&format!("/v1/dreams/{dream_id}/archive"), json!({})).await, 403, Some("permission.denied"));
    // An empty input still gives a version 1 copy.
    let out = done["outputs"]["memory_store_id"].as_str().unwrap();
    let versions = p.admin.get(&format!("/v1/memory-stores/{out}/versions")).await.1;
    assert_eq!(versions["data"].as_array().unwrap().len(), 1);
    assert_eq!(versions["data"][0]["via"], "copy");
    expect(&p.admin.post(&format!("/v1/memory-stores/{input}/archive"), json!({})).await, 200, None);
    let r = p.admin.post("/v1/dreams", json!({"memory_store_id": input})).await;
    expect(&r, 409, Some("validation.conflict"));
    assert_eq!(r.1["error"]["details"]["reason"], "store_archived");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_starts_a_dream_and_follows_it_to_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let input = store(&p, "notes").await;
    put(&p, &input, "/a.md", "x\nx\n").await;
    let key = std::fs::read_to_string(dir.path().join("admin.key")).unwrap().trim().to_string();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(checkfu_e2e::procs::binary())
            .args(args)
            .args(["--server", &p.base, "--key", &key])
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (ok, stdout, stderr) = run(&["memory", "dream", &input, "--review"]);
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("completed: output store mstr_") && stdout.contains("proposal mprop_"), "{stdout}");
    let (ok, json_out, _) = run(&["memory", "dream", &input, "--json"]);
    assert!(ok);
    let d: Value = serde_json::from_str(json_out.trim()).unwrap();
    assert_eq!(d["status"], "completed");
    assert_eq!(documents(&p, d["outputs"]["memory_store_id"].as_str().unwrap()).await, docs(&[("/a.md", "x\n")]));
    let (ok, _, stderr) = run(&["memory", "dream", "mstr_01jx0000000000000000000000"]);
    assert!(!ok && stderr.contains("not_found"), "{stderr}");
}
