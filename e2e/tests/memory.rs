//! MemoryStores, documents, versions and proposals through the public API
//! (api.md §13.1–13.3): the acceptance checks of §13.6 by number, and the
//! edges around them.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::{Value, json};

/// A Principal of `kind` with its own key.
async fn someone(p: &Platform, kind: &str, name: &str) -> (String, Api) {
    let who = id(&p.admin.post("/v1/principals", json!({"kind": kind, "name": name})).await.1);
    let key = p.admin.post(&format!("/v1/principals/{who}/api-keys"), json!({})).await.1["secret"].as_str().unwrap().to_string();
    (who.clone(), Api::new(&p.base, &key))
}

async fn grant(p: &Platform, who: &str, permission: &str, kind: &str, resource: &str) -> String {
    let r = p
        .admin
        .post(
            "/v1/permission-assignments",
            json!({"subject": {"kind": "principal", "id": who}, "permission": permission, "resource": {"kind": kind, "id": resource}}),
        )
        .await;
    expect(&r, 201, None);
    id(&r.1)
}

async fn store(p: &Platform, owner: Value) -> Value {
    let r = p.admin.post("/v1/memory-stores", json!({"environment_id": p.env_id, "name": "notes", "owner": owner})).await;
    expect(&r, 201, None);
    r.1
}

fn sha(text: &str) -> String {
    checkfu_core::sha256_hex(text)
}

async fn write(api: &Api, store: &str, path: &str, content: &str, expected: Value) -> Reply {
    api.post(&format!("/v1/memory-stores/{store}/document"), json!({"path": path, "content": content, "expected_sha256": expected})).await
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_1_a_principal_owned_store_writes_directly_and_surface_scopes_are_reserved() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let s = store(&p, json!({"kind": "principal", "id": p.admin_id})).await;
    assert!(s["id"].as_str().unwrap().starts_with("mstr_"), "{s}");
    assert_eq!((s["head_version"].clone(), s["review"].clone(), s["status"].clone()), (json!(0), json!("direct"), json!("active")));
    assert_eq!(s["created_from"], Value::Null);
    let r = p
        .admin
        .post("/v1/memory-stores", json!({"environment_id": p.env_id, "name": "n", "owner": {"kind": "surface_scope", "id": "x"}}))
        .await;
    expect(&r, 400, Some("validation.invalid"));
    // The owner is in the store's Environment, and exists.
    for owner in [
        json!({"kind": "environment", "id": "env_01jx0000000000000000000000"}),
        json!({"kind": "principal", "id": "prin_01jx0000000000000000000000"}),
        json!({"kind": "robot", "id": "x"}),
    ] {
        let r = p.admin.post("/v1/memory-stores", json!({"environment_id": p.env_id, "name": "n", "owner": owner})).await;
        expect(&r, 400, Some("validation.invalid"));
    }
    let env_owned = store(&p, json!({"kind": "environment", "id": p.env_id})).await;
    assert_eq!(env_owned["review"], "proposal");
    // Listed for whoever may read it, filtered by owner.
    let listed = p.admin.get(&format!("/v1/memory-stores?owner_kind=principal&owner_id={}", p.admin_id)).await;
    expect(&listed, 200, None);
    let ids: Vec<&str> = listed.1["data"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [s["id"].as_str().unwrap()]);
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_2_writes_are_compare_and_set() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let s = id(&store(&p, json!({"kind": "principal", "id": p.admin_id})).await);
    let r = write(&p.admin, &s, "/a.md", "hello", Value::Null).await;
    expect(&r, 200, None);
    assert_eq!(r.1["store_version"], 1);
    assert_eq!(r.1["memory_store_id"], s);
    assert_eq!(r.1["document"]["content_sha256"], sha("hello"));
    assert_eq!((r.1["document"]["size_bytes"].clone(), r.1["document"]["content"].clone()), (json!(5), json!("hello")));
    let again = write(&p.admin, &s, "/a.md", "other", Value::Null).await;
    expect(&again, 409, Some("validation.conflict"));
    assert_eq!(again.1["error"]["details"]["reason"], "sha_mismatch");
    assert_eq!(again.1["error"]["details"]["current_sha256"], sha("hello"));
    assert_eq!(again.1["error"]["details"]["path"], "/a.md");
    assert_eq!(again.1["error"]["details"]["head_version"], 1);
    expect(&write(&p.admin, &s, "/a.md", "x", json!(sha("stale"))).await, 409, Some("validation.conflict"));
    let current = write(&p.admin, &s, "/a.md", "hello again", json!(sha("hello"))).await;
    expect(&current, 200, None);
    assert_eq!(current.1["store_version"], 2);
    let blind = p.admin.post(&format!("/v1/memory-stores/{s}/document"), json!({"path": "/a.md", "content": "x"})).await;
    expect(&blind, 400, Some("validation.invalid"));
    let missing = write(&p.admin, &s, "/missing.md", "x", json!(sha("hello again"))).await;
    expect(&missing, 409, Some("validation.conflict"));
    assert_eq!(missing.1["error"]["details"]["current_sha256"], Value::Null);
    // Unchanged content commits nothing.
    let same = write(&p.admin, &s, "/a.md", "hello again", json!(sha("hello again"))).await;
    expect(&same, 200, None);
    assert_eq!(same.1["store_version"], 2);
    // Limits: paths and content.
    for path in ["a.md", "/a/../b", "/a b", "/"] {
        expect(&write(&p.admin, &s, path, "x", Value::Null).await, 400, Some("validation.invalid"));
    }
    expect(&write(&p.admin, &s, "/big.md", &"x".repeat(256 * 1024 + 1), Value::Null).await, 400, Some("validation.invalid"));
    // A large document (over the inline size) round-trips.
    let big = "y".repeat(200 * 1024);
    expect(&write(&p.admin, &s, "/big.md", &big, Value::Null).await, 200, None);
    let read = p.admin.get(&format!("/v1/memory-stores/{s}/document?path=/big.md")).await;
    assert_eq!(read.1["document"]["content"].as_str().map(str::len), Some(big.len()));
    // Delete with the current sha.
    let del = p.admin.delete(&format!("/v1/memory-stores/{s}/document?path=/big.md&expected_sha256={}", sha(&big))).await;
    expect(&del, 200, None);
    assert_eq!(del.1["deleted"], json!({"path": "/big.md", "content_sha256": sha(&big)}));
    expect(&p.admin.get(&format!("/v1/memory-stores/{s}/document?path=/big.md")).await, 404, Some("not_found"));
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_3_versions_are_immutable_and_readable() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let s = id(&store(&p, json!({"kind": "principal", "id": p.admin_id})).await);
    expect(&write(&p.admin, &s, "/a.md", "v1", Value::Null).await, 200, None);
    expect(&write(&p.admin, &s, "/a.md", "v2", json!(sha("v1"))).await, 200, None);
    let at1 = p.admin.get(&format!("/v1/memory-stores/{s}/document?path=/a.md&at_version=1")).await;
    expect(&at1, 200, None);
    assert_eq!((at1.1["store_version"].clone(), at1.1["document"]["content"].clone()), (json!(1), json!("v1")));
    let versions = p.admin.get(&format!("/v1/memory-stores/{s}/versions")).await;
    expect(&versions, 200, None);
    let data = versions.1["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!((data[0]["store_version"].clone(), data[0]["changes"][0]["operation"].clone()), (json!(2), json!("modified")));
    assert_eq!((data[1]["store_version"].clone(), data[1]["changes"][0]["operation"].clone()), (json!(1), json!("created")));
    assert_eq!(data[0]["actor"], json!({"kind": "principal", "id": p.admin_id}));
    assert_eq!(data[0]["via"], "api");
    assert_eq!(data[0]["changes"][0]["sha256_before"], sha("v1"));
    let one = p.admin.get(&format!("/v1/memory-stores/{s}/versions/1")).await;
    expect(&one, 200, None);
    assert_eq!(one.1["changes"][0]["sha256_after"], sha("v1"));
    expect(&p.admin.get(&format!("/v1/memory-stores/{s}/versions/9")).await, 404, Some("not_found"));
    expect(&p.admin.get(&format!("/v1/memory-stores/{s}/document?path=/a.md&at_version=7")).await, 400, Some("validation.invalid"));
    // Listing by path, at a version, paged.
    expect(&write(&p.admin, &s, "/b/x.md", "x", Value::Null).await, 200, None);
    let docs = p.admin.get(&format!("/v1/memory-stores/{s}/documents?limit=1")).await;
    expect(&docs, 200, None);
    assert_eq!(docs.1["store_version"], 3);
    assert_eq!(docs.1["data"][0]["path"], "/a.md");
    assert!(docs.1["data"][0].get("content").is_none(), "lists carry no content");
    let next = docs.1["next_page"].as_str().unwrap();
    let rest = p.admin.get(&format!("/v1/memory-stores/{s}/documents?limit=1&page={next}")).await;
    assert_eq!(rest.1["data"][0]["path"], "/b/x.md");
    let at2 = p.admin.get(&format!("/v1/memory-stores/{s}/documents?at_version=2&path_prefix=/b/")).await;
    assert_eq!(at2.1["data"], json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_4_access_is_only_rows() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let s = id(&store(&p, json!({"kind": "principal", "id": p.admin_id})).await);
    expect(&write(&p.admin, &s, "/a.md", "secret", Value::Null).await, 200, None);
    let (bob, b) = someone(&p, "human", "bob").await;
    let read = format!("/v1/memory-stores/{s}/document?path=/a.md");
    expect(&b.get(&read).await, 403, Some("permission.denied"));
    expect(&b.get(&format!("/v1/memory-stores/{s}")).await, 403, Some("permission.denied"));
    let row = grant(&p, &bob, "read", "memory_store", &s).await;
    expect(&b.get(&read).await, 200, None);
    expect(&write(&b, &s, "/b.md", "x", Value::Null).await, 403, Some("permission.denied"));
    assert!(b.get("/v1/memory-stores").await.1["data"].as_array().unwrap().iter().any(|x| x["id"] == s), "listed once readable");
    expect(&p.admin.delete(&format!("/v1/permission-assignments/{row}")).await, 200, None);
    expect(&b.get(&read).await, 403, Some("permission.denied"));
    assert!(b.get("/v1/memory-stores").await.1["data"].as_array().unwrap().is_empty(), "not listed once revoked");
    // `manage` on the Environment reads but does not write.
    let (carol, c) = someone(&p, "human", "carol").await;
    grant(&p, &carol, "manage", "environment", &p.env_id).await;
    expect(&c.get(&read).await, 200, None);
    expect(&write(&c, &s, "/c.md", "x", Value::Null).await, 403, Some("permission.denied"));
    // `write` on the store writes.
    grant(&p, &bob, "write", "memory_store", &s).await;
    expect(&write(&b, &s, "/b.md", "x", Value::Null).await, 200, None);
    // Lifecycle needs `manage`; archiving stops writes, keeps reads.
    expect(&b.post(&format!("/v1/memory-stores/{s}/archive"), json!({})).await, 403, Some("permission.denied"));
    let archived = p.admin.post(&format!("/v1/memory-stores/{s}/archive"), json!({})).await;
    expect(&archived, 200, None);
    assert_eq!(archived.1["status"], "archived");
    expect(&p.admin.post(&format!("/v1/memory-stores/{s}/archive"), json!({})).await, 200, None);
    let refused = write(&b, &s, "/d.md", "x", Value::Null).await;
    expect(&refused, 409, Some("validation.conflict"));
    assert_eq!(refused.1["error"]["details"]["reason"], "store_archived");
    expect(&c.get(&read).await, 200, None);
    let deleted = p.admin.delete(&format!("/v1/memory-stores/{s}")).await;
    expect(&deleted, 200, None);
    assert_eq!(deleted.1["id"], s);
    expect(&p.admin.get(&format!("/v1/memory-stores/{s}")).await, 404, Some("not_found"));
    // Every API read and write is audited.
    let audit = p.admin.get(&format!("/v1/audit-events?resource_id={s}&limit=100")).await;
    let actions: Vec<&str> = audit.1["data"].as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
    for a in ["memory_store.created", "memory_document.written", "memory_document.read", "memory_store.archived", "memory_store.deleted"] {
        assert!(actions.contains(&a), "{a} in {actions:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_5_shared_stores_change_by_reviewed_proposal() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let s = id(&store(&p, json!({"kind": "environment", "id": p.env_id})).await);
    let direct = write(&p.admin, &s, "/a.md", "x", Value::Null).await;
    expect(&direct, 409, Some("validation.conflict"));
    assert_eq!(direct.1["error"]["details"]["reason"], "proposal_required");
    let proposal = |changes: Value| json!({"memory_store_id": s, "changes": changes, "rationale": "seed"});
    let r = p.admin.post("/v1/memory-proposals", proposal(json!([{"path": "/a.md", "content": "one", "expected_sha256": null}]))).await;
    expect(&r, 201, None);
    assert!(r.1["id"].as_str().unwrap().starts_with("mprop_"));
    assert_eq!((r.1["status"].clone(), r.1["reason"].clone(), r.1["base_version"].clone()), (json!("open"), json!("requested"), json!(0)));
    assert_eq!(r.1["changes"][0]["content"], "one");
    let first = id(&r.1);
    // A malformed change is refused naming its entry: the shape (checked
    // by the gateway) and the rules (checked by the memory service).
    for (changes, field) in [
        (json!({"path": "/a.md"}), "changes"),
        (json!([]), "changes"),
        (json!([{"path": "/c.md", "content": "c", "expected_sha256": null}, {"path": "/d.md", "content": "d", "extra": 1}]), "changes[1]"),
        (json!([{"path": "/c.md", "content": "c"}]), "changes[0].expected_sha256"),
        (json!([{"path": "c.md", "content": "c", "expected_sha256": null}]), "changes[0].path"),
        (json!([{"path": "/c.md", "content": "c", "expected_sha256": "nope"}]), "changes[0].expected_sha256"),
    ] {
        let r = p.admin.post("/v1/memory-proposals", proposal(changes.clone())).await;
        expect(&r, 400, Some("validation.invalid"));
        assert_eq!(r.1["error"]["details"]["field"], field, "{changes}");
    }
    // A human with `approve` approves: head + 1; again → 409.
    let (dana, d) = someone(&p, "human", "dana").await;
    grant(&p, &dana, "approve", "memory_store", &s).await;
    let approved = d.post(&format!("/v1/memory-proposals/{first}/approve"), json!({"note": "ok"})).await;
    expect(&approved, 200, None);
    assert_eq!((approved.1["status"].clone(), approved.1["applied_version"].clone()), (json!("approved"), json!(1)));
    assert_eq!(approved.1["decided_by"], dana);
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{s}")).await.1["head_version"], 1);
    let v1 = p.admin.get(&format!("/v1/memory-stores/{s}/versions/1")).await;
    assert_eq!((v1.1["via"].clone(), v1.1["memory_proposal_id"].clone()), (json!("proposal"), json!(first)));
    expect(&d.post(&format!("/v1/memory-proposals/{first}/approve"), json!({})).await, 409, Some("validation.conflict"));
    // A service Principal with `approve` → 403.
    let (svc, sv) = someone(&p, "service", "bot").await;
    grant(&p, &svc, "approve", "memory_store", &s).await;
    let second =
        id(&p.admin.post("/v1/memory-proposals", proposal(json!([{"path": "/b.md", "content": "b", "expected_sha256": null}]))).await.1);
    expect(&sv.post(&format!("/v1/memory-proposals/{second}/approve"), json!({})).await, 403, Some("permission.denied"));
    // Without `approve` → 403 too.
    let (_eve, e) = someone(&p, "human", "eve").await;
    expect(&e.post(&format!("/v1/memory-proposals/{second}/approve"), json!({})).await, 403, Some("permission.denied"));
    // A proposal whose sha went stale → approve 409, still open; reject →
    // head unchanged.
    let stale = id(&p
        .admin
        .post("/v1/memory-proposals", proposal(json!([{"path": "/a.md", "content": "two", "expected_sha256": sha("one")}])))
        .await
        .1);
    let newer = id(&p
        .admin
        .post("/v1/memory-proposals", proposal(json!([{"path": "/a.md", "content": "three", "expected_sha256": sha("one")}])))
        .await
        .1);
    expect(&d.post(&format!("/v1/memory-proposals/{newer}/approve"), json!({})).await, 200, None);
    let late = d.post(&format!("/v1/memory-proposals/{stale}/approve"), json!({})).await;
    expect(&late, 409, Some("validation.conflict"));
    assert_eq!(late.1["error"]["details"]["reason"], "sha_mismatch");
    assert_eq!(p.admin.get(&format!("/v1/memory-proposals/{stale}")).await.1["status"], "open");
    let head = p.admin.get(&format!("/v1/memory-stores/{s}")).await.1["head_version"].clone();
    let rejected = d.post(&format!("/v1/memory-proposals/{stale}/reject"), json!({"note": "superseded"})).await;
    expect(&rejected, 200, None);
    assert_eq!((rejected.1["status"].clone(), rejected.1["decision_note"].clone()), (json!("rejected"), json!("superseded")));
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{s}")).await.1["head_version"], head);
    let open = p.admin.get(&format!("/v1/memory-proposals?memory_store_id={s}&status=open")).await;
    expect(&open, 200, None);
    let ids: Vec<&str> = open.1["data"].as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [second.as_str()]);
    // Bad proposals.
    for bad in [json!([]), json!([{"path": "/a.md", "content": "x"}]), json!([{"path": "nope", "content": "x", "expected_sha256": null}])] {
        expect(&p.admin.post("/v1/memory-proposals", proposal(bad)).await, 400, Some("validation.invalid"));
    }
}

/// A deployment whose Agent has the file tools, all allowed by policy.
async fn agent_with_file_tools(p: &Platform) -> Deployed {
    let tools = json!({"tools": [{"type": "builtin", "name": "read"}, {"type": "builtin", "name": "write"}]});
    deploy_allowing_tools(&p.admin, &p.env_id, tools).await
}

async fn session_with(p: &Platform, d: &Deployed, resources: Value) -> Reply {
    p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": p.admin_id, "resources": resources})).await
}

async fn say(p: &Platform, sid: &str, text: &str) -> Value {
    expect(&p.admin.post(&format!("/v1/sessions/{sid}/events"), message(&p.admin_id, text)).await, 201, None);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    settle(&p.admin, sid).await
}

fn position(events: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    events.iter().position(pred).unwrap_or(usize::MAX)
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_6_a_read_only_mount_reads_at_its_pinned_version() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let s = id(&store(&p, json!({"kind": "principal", "id": p.admin_id})).await);
    expect(&write(&p.admin, &s, "/a.md", "remember the milk", Value::Null).await, 200, None);
    let d = agent_with_file_tools(&p).await;
    let created = session_with(&p, &d, json!([{"type": "memory_store", "memory_store_id": s, "access": "read_only"}])).await;
    expect(&created, 201, None);
    assert_eq!(
        created.1["resources"],
        json!([{"type": "memory_store", "memory_store_id": s, "access": "read_only", "mount_name": s, "store_version": 1}])
    );
    let sid = id(&created.1);
    // A later API write is not what the Session sees.
    expect(&write(&p.admin, &s, "/a.md", "changed later", json!(sha("remember the milk"))).await, 200, None);
    say(&p, &sid, &format!("call read {{\"path\": \"memory/{s}/a.md\"}}")).await;
    let ev = events(&p.admin, &sid).await;
    let result = ev.iter().find(|e| e["type"] == "agent.tool_result").expect("a tool result");
    assert!(result["payload"].to_string().contains("remember the milk"), "{result}");
    let mount = position(&ev, |e| e["type"] == "memory.accessed" && e["payload"]["operation"] == "mount");
    let first_model = position(&ev, |e| e["type"] == "span.model_request_start");
    let run_created = position(&ev, |e| e["type"] == "run.created");
    assert!(run_created < mount && mount < first_model, "run.created, then the mount, then the model: {:?}", types(&ev));
    let m = &ev[mount];
    assert_eq!(m["payload"]["memory_store_id"], s);
    assert_eq!((m["payload"]["access"].clone(), m["payload"]["store_version"].clone()), (json!("read_only"), json!(1)));
    assert_eq!(m["payload"]["mount_path"], format!("/mnt/memory/{s}"));
    assert!(m["run_id"].as_str().is_some_and(|r| r.starts_with("run_")), "{m}");
    // Read-only: the write tool refuses, and nothing reaches the store.
    say(&p, &sid, &format!("call write {{\"path\": \"memory/{s}/a.md\", \"content\": \"x\"}}")).await;
    let ev = events(&p.admin, &sid).await;
    let refused = ev.iter().rev().find(|e| e["type"] == "agent.tool_result").expect("a tool result");
    assert_eq!(refused["payload"]["is_error"], true, "{refused}");
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{s}")).await.1["head_version"], 2);
    // Mounting needs `read` (403), a store that exists (404), a unique name (400).
    let (bob, _) = someone(&p, "human", "bob").await;
    grant(&p, &bob, "invoke", "agent", &d.agent_id).await;
    let as_bob = p
        .admin
        .post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": bob, "resources": [{"type": "memory_store", "memory_store_id": s, "access": "read_only"}]}))
        .await;
    expect(&as_bob, 403, Some("permission.denied"));
    let twice = session_with(
        &p,
        &d,
        json!([{"type": "memory_store", "memory_store_id": s, "access": "read_only", "mount_name": "m"},
        {"type": "memory_store", "memory_store_id": s, "access": "read_only", "mount_name": "m"}]),
    )
    .await;
    expect(&twice, 400, Some("validation.invalid"));
    for bad in [
        json!({"type": "memory_store", "memory_store_id": s, "access": "sideways"}),
        json!({"type": "memory_store", "memory_store_id": s, "access": "read_only", "mount_name": "a/b"}),
    ] {
        expect(&session_with(&p, &d, json!([bad])).await, 400, Some("validation.invalid"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_7_a_read_write_mount_writes_back_before_the_run_completes() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = agent_with_file_tools(&p).await;
    // A direct store: one version, attributed to the Session.
    let s = id(&store(&p, json!({"kind": "principal", "id": p.admin_id})).await);
    let sid =
        id(&session_with(&p, &d, json!([{"type": "memory_store", "memory_store_id": s, "access": "read_write", "mount_name": "notes"}]))
            .await
            .1);
    say(&p, &sid, "call write {\"path\": \"memory/notes/b.md\", \"content\": \"x\"}").await;
    let ev = events(&p.admin, &sid).await;
    let wrote = position(&ev, |e| e["type"] == "memory.accessed" && e["payload"]["operation"] == "write");
    let completed = position(&ev, |e| e["type"] == "run.completed");
    assert!(wrote < completed, "the writeback precedes run.completed: {:?}", types(&ev));
    let w = &ev[wrote]["payload"];
    assert_eq!(
        (w["store_version"].clone(), w["access"].clone(), w["mount_path"].clone()),
        (json!(1), json!("read_write"), json!("/mnt/memory/notes"))
    );
    assert_eq!(w["changes"][0]["path"], "/b.md");
    assert_eq!(w["changes"][0]["operation"], "created");
    let st = p.admin.get(&format!("/v1/memory-stores/{s}")).await;
    assert_eq!(st.1["head_version"], 1);
    let v = p.admin.get(&format!("/v1/memory-stores/{s}/versions/1")).await;
    assert_eq!((v.1["actor"].clone(), v.1["via"].clone()), (json!({"kind": "session", "id": sid}), json!("writeback")));
    let doc = p.admin.get(&format!("/v1/memory-stores/{s}/document?path=/b.md")).await;
    assert_eq!(doc.1["document"]["content"], "x");
    // The next Run sees its own change (and a second write commits again).
    say(&p, &sid, "call read {\"path\": \"memory/notes/b.md\"}").await;
    let ev = events(&p.admin, &sid).await;
    assert!(ev.iter().rev().find(|e| e["type"] == "agent.tool_result").unwrap()["payload"].to_string().contains('x'));
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{s}")).await.1["head_version"], 1, "reading commits nothing");

    // An environment-owned store: a proposal, the head unchanged.
    let shared = id(&store(&p, json!({"kind": "environment", "id": p.env_id})).await);
    let sid2 = id(&session_with(&p, &d, json!([{"type": "memory_store", "memory_store_id": shared, "access": "read_write"}])).await.1);
    say(&p, &sid2, &format!("call write {{\"path\": \"memory/{shared}/b.md\", \"content\": \"x\"}}")).await;
    let ev = events(&p.admin, &sid2).await;
    let proposed = ev.iter().find(|e| e["type"] == "memory.proposal_created").expect("a proposal event");
    assert_eq!((proposed["payload"]["reason"].clone(), proposed["payload"]["paths"].clone()), (json!("shared_owner"), json!(["/b.md"])));
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{shared}")).await.1["head_version"], 0);
    let prop = p.admin.get(&format!("/v1/memory-proposals/{}", proposed["payload"]["memory_proposal_id"].as_str().unwrap())).await;
    assert_eq!((prop.1["status"].clone(), prop.1["source"].clone()), (json!("open"), json!({"kind": "session", "id": sid2})));
    assert!(position(&ev, |e| e["type"] == "memory.proposal_created") < position(&ev, |e| e["type"] == "run.completed"));
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_8_a_conflicting_writeback_becomes_a_proposal_and_a_revoked_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = agent_with_file_tools(&p).await;
    let s = id(&store(&p, json!({"kind": "principal", "id": p.admin_id})).await);
    expect(&write(&p.admin, &s, "/a.md", "one", Value::Null).await, 200, None);
    let sid = id(&session_with(&p, &d, json!([{"type": "memory_store", "memory_store_id": s, "access": "read_write", "mount_name": "m"}]))
        .await
        .1);
    say(&p, &sid, "call read {\"path\": \"memory/m/a.md\"}").await;
    // Between two Runs, an API write.
    expect(&write(&p.admin, &s, "/a.md", "from the api", json!(sha("one"))).await, 200, None);
    say(&p, &sid, "call write {\"path\": \"memory/m/a.md\", \"content\": \"from the session\"}").await;
    let ev = events(&p.admin, &sid).await;
    let proposed = ev.iter().find(|e| e["type"] == "memory.proposal_created").expect("a conflict proposal");
    assert_eq!(proposed["payload"]["reason"], "writeback_conflict");
    let doc = p.admin.get(&format!("/v1/memory-stores/{s}/document?path=/a.md")).await;
    assert_eq!(doc.1["document"]["content"], "from the api", "the head keeps the API content");
    let prop = p.admin.get(&format!("/v1/memory-proposals/{}", proposed["payload"]["memory_proposal_id"].as_str().unwrap())).await;
    assert_eq!(prop.1["changes"][0], json!({"path": "/a.md", "content": "from the session", "expected_sha256": sha("one")}));

    // `write` revoked: nothing kept, memory.writeback_refused.
    let (carol, _) = someone(&p, "human", "carol").await;
    grant(&p, &carol, "invoke", "agent", &d.agent_id).await;
    let read_row = grant(&p, &carol, "read", "memory_store", &s).await;
    let write_row = grant(&p, &carol, "write", "memory_store", &s).await;
    let _ = read_row;
    let sid2 = id(&p
        .admin
        .post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": carol, "resources": [{"type": "memory_store", "memory_store_id": s, "access": "read_write", "mount_name": "m"}]}))
        .await
        .1);
    expect(&p.admin.delete(&format!("/v1/permission-assignments/{write_row}")).await, 200, None);
    let head = p.admin.get(&format!("/v1/memory-stores/{s}")).await.1["head_version"].clone();
    say(&p, &sid2, "call write {\"path\": \"memory/m/c.md\", \"content\": \"nope\"}").await;
    let ev = events(&p.admin, &sid2).await;
    let refused = ev.iter().find(|e| e["type"] == "memory.writeback_refused").expect("refused");
    assert_eq!(refused["payload"], json!({"memory_store_id": s, "reason": "permission.denied"}));
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{s}")).await.1["head_version"], head);
    // The change is not kept in the mount either.
    say(&p, &sid2, "call read {\"path\": \"memory/m/c.md\"}").await;
    let ev = events(&p.admin, &sid2).await;
    assert_eq!(ev.iter().rev().find(|e| e["type"] == "agent.tool_result").unwrap()["payload"]["is_error"], true);
}

/// Runs the `checkfu` CLI against the platform as its admin.
fn cli(p: &Platform, dir: &std::path::Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    use std::io::Write;
    let key = std::fs::read_to_string(dir.join("admin.key")).unwrap().trim().to_string();
    let mut child = std::process::Command::new(checkfu_e2e::procs::binary())
        .args(args)
        .args(["--server", &p.base, "--key", &key])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.unwrap_or_default().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_lists_reads_writes_and_reviews_memory() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = dir.path();
    let s = id(&store(&p, json!({"kind": "principal", "id": p.admin_id})).await);
    let (ok, out, err) = cli(&p, d, &["memory", "put", &s, "/a.md"], Some("first"));
    assert!(ok, "{err}");
    assert!(out.contains("/a.md at v1"), "{out}");
    // Without --expect: over what the head holds now; --create refuses a present path.
    let (ok, out, _) = cli(&p, d, &["memory", "put", &s, "/a.md", "-"], Some("second"));
    assert!(ok && out.contains("at v2"), "{out}");
    let (ok, _, err) = cli(&p, d, &["memory", "put", &s, "/a.md", "--create"], Some("third"));
    assert!(!ok && err.contains("409"), "{err}");
    let (ok, _, err) = cli(&p, d, &["memory", "put", &s, "/a.md", "--expect", &sha("first")], Some("third"));
    assert!(!ok && err.contains("sha"), "a stale expectation is refused: {err}");
    let (_, out, _) = cli(&p, d, &["memory", "cat", &s, "/a.md"], None);
    assert_eq!(out, "second");
    let (_, out, _) = cli(&p, d, &["memory", "cat", &s, "/a.md", "--at", "1"], None);
    assert_eq!(out, "first");
    let (_, out, _) = cli(&p, d, &["memory", "ls"], None);
    assert!(out.contains(&s) && out.contains("head 2"), "{out}");
    let (_, out, _) = cli(&p, d, &["memory", "ls", &s, "--json"], None);
    let docs: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0]["content_sha256"], sha("second"));
    let (_, out, _) = cli(&p, d, &["memory", "history", &s], None);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("v2") && lines[0].contains("modified /a.md"), "{out}");
    assert!(lines[1].starts_with("v1") && lines[1].contains("created /a.md"), "{out}");
    // Proposals: listed, approved, rejected.
    let shared = id(&store(&p, json!({"kind": "environment", "id": p.env_id})).await);
    let change = |path: &str| json!({"memory_store_id": shared, "changes": [{"path": path, "content": "x", "expected_sha256": null}]});
    let one = id(&p.admin.post("/v1/memory-proposals", change("/one.md")).await.1);
    let two = id(&p.admin.post("/v1/memory-proposals", change("/two.md")).await.1);
    let (_, out, _) = cli(&p, d, &["memory", "proposals", &shared, "--status", "open"], None);
    assert!(out.contains(&one) && out.contains(&two), "{out}");
    let (ok, out, err) = cli(&p, d, &["memory", "approve", &one, "--note", "ok"], None);
    assert!(ok && out.contains("approved") && out.contains("applied as v1"), "{out}{err}");
    let (ok, out, _) = cli(&p, d, &["memory", "reject", &two, "--json"], None);
    let rejected: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(ok && rejected["status"] == "rejected", "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sessions_own_store_is_archived_with_it_and_then_deletable() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = agent_with_file_tools(&p).await;
    let sid = id(&session_with(&p, &d, json!([])).await.1);
    let s = id(&store(&p, json!({"kind": "session", "id": sid})).await);
    assert_eq!(p.admin.get(&format!("/v1/memory-stores/{s}")).await.1["review"], "direct");
    // A store mounted by a live Session is not deleted.
    let other = id(&store(&p, json!({"kind": "principal", "id": p.admin_id})).await);
    let mounting = id(&session_with(&p, &d, json!([{"type": "memory_store", "memory_store_id": other, "access": "read_only"}])).await.1);
    expect(&p.admin.post(&format!("/v1/memory-stores/{other}/archive"), json!({})).await, 200, None);
    let refused = p.admin.delete(&format!("/v1/memory-stores/{other}")).await;
    expect(&refused, 409, Some("validation.conflict"));
    assert_eq!(refused.1["error"]["details"]["reason"], "store_mounted");
    // Archiving the Sessions archives the one's own store and frees the other.
    for x in [&sid, &mounting] {
        expect(&p.admin.post(&format!("/v1/sessions/{x}/archive"), json!({})).await, 200, None);
    }
    let mut status = Value::Null;
    for _ in 0..200 {
        status = p.admin.get(&format!("/v1/memory-stores/{s}")).await.1["status"].clone();
        if status == "archived" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(status, "archived", "the Session's own store is archived with it");
    expect(&p.admin.delete(&format!("/v1/memory-stores/{s}")).await, 200, None);
    expect(&p.admin.delete(&format!("/v1/memory-stores/{other}")).await, 200, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_installation_without_memory_answers_503() {
    let dir = tempfile::tempdir().unwrap();
    let tuning = Tuning { features_disabled: vec!["memory".into()], ..Default::default() };
    let p = Platform::start_timed(dir.path(), tuning).await;
    let r = p
        .admin
        .post("/v1/memory-stores", json!({"environment_id": p.env_id, "name": "n", "owner": {"kind": "principal", "id": p.admin_id}}))
        .await;
    expect(&r, 503, Some("unavailable"));
    assert_eq!(r.1["error"]["details"], json!({"capability": "memory", "reason": "feature_disabled"}));
    expect(&p.admin.get("/v1/memory-stores").await, 503, Some("unavailable"));
    let caps = p.admin.get("/v1/capabilities").await;
    let memory = caps.1["data"].as_array().unwrap().iter().find(|c| c["name"] == "memory").cloned().unwrap();
    assert_eq!((memory["available"].clone(), memory["reason"].clone()), (json!(false), json!("feature_disabled")));
}

#[tokio::test(flavor = "multi_thread")]
async fn store_lifecycle_webhooks_are_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await;
    let (hooks, url) = hook_receiver().await;
    let types = ["memory_store.created", "memory_store.archived", "memory_store.deleted"];
    expect(&p.admin.post("/v1/webhook-endpoints", json!({"environment_id": p.env_id, "url": url, "event_types": types})).await, 201, None);
    let s = id(&store(&p, json!({"kind": "principal", "id": p.admin_id})).await);
    expect(&p.admin.post(&format!("/v1/memory-stores/{s}/archive"), json!({})).await, 200, None);
    expect(&p.admin.delete(&format!("/v1/memory-stores/{s}")).await, 200, None);
    for t in types {
        checkfu_e2e::automation::wait_for_hook(&hooks, t, &s).await;
    }
}
