//! Skills and Files through the public API (api.md §16.6–16.7, acceptance
//! checks 1 and 15–18): uploads with their limits, windows, idempotency and
//! deletion; Files given to a Session and read by its agent at
//! `uploads/<id>/<name>`; skill bundles as immutable versions, pinned at
//! publication and mounted read-only at `skills/<name>/`.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::{Value, json};

fn skill_md(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

/// Uploads `bytes` as `filename` into `env`.
async fn upload(api: &Api, env: &str, filename: &str, content_type: &str, bytes: &[u8]) -> Reply {
    let parts: Vec<FormPart> = vec![("environment_id", None, None, env.as_bytes()), ("file", Some(filename), Some(content_type), bytes)];
    api.post_form("/v1/files", &parts, "b0undary-1", &[]).await
}

/// A skill pushed as a multipart form.
async fn push_skill(api: &Api, env: &str, files: &[(&str, &[u8])]) -> Reply {
    let mut parts: Vec<FormPart> = vec![("environment_id", None, None, env.as_bytes())];
    for (path, bytes) in files {
        parts.push(("files", Some(path), Some("application/octet-stream"), bytes));
    }
    api.post_form("/v1/skills", &parts, "skill-form", &[]).await
}

fn of_type<'a>(evs: &'a [Value], t: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == t).collect()
}

fn results(evs: &[Value]) -> Vec<(String, bool)> {
    of_type(evs, "agent.tool_result")
        .iter()
        .map(|r| {
            let c = match &r["payload"]["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (c, r["payload"]["is_error"] == true)
        })
        .collect()
}

fn last_agent_text(evs: &[Value]) -> String {
    let m = of_type(evs, "agent.message");
    m.last().map(|m| m["payload"]["content"][0]["text"].as_str().unwrap_or_default().to_string()).unwrap_or_default()
}

/// A Session on `deployment` whose first message is `content`, settled.
async fn run(p: &Platform, deployment: &str, content: Value) -> (String, Vec<Value>) {
    let msg = json!({"type": "user.message", "payload": {"content": content}, "authored_by": p.admin_id, "caused_by": {"kind": "principal", "id": p.admin_id}});
    let s = p.admin.post("/v1/sessions", json!({"agent_deployment_id": deployment, "initial_events": [msg]})).await;
    expect(&s, 201, None);
    let sid = id(&s.1);
    let done = settle(&p.admin, &sid).await;
    assert_eq!(done["status"], "idle", "{done}");
    (sid.clone(), events(&p.admin, &sid).await)
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn document(file_id: &str) -> Value {
    json!({"type": "document", "source": {"type": "file", "file_id": file_id}, "title": "notes"})
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_1_a_disabled_files_feature_answers_503_on_reads_and_writes() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { features_disabled: vec!["files".into()], ..Default::default() }).await;
    let caps = p.admin.get("/v1/capabilities").await;
    let files = caps.1["data"].as_array().unwrap().iter().find(|c| c["name"] == "files").cloned().unwrap();
    assert_eq!((files["available"].clone(), files["reason"].clone()), (json!(false), json!("feature_disabled")));
    let skills = caps.1["data"].as_array().unwrap().iter().find(|c| c["name"] == "skills").cloned().unwrap();
    assert_eq!(skills["available"], true, "only files is off");
    for r in [upload(&p.admin, &p.env_id, "notes.txt", "text/plain", b"alpha beta").await, p.admin.get("/v1/files").await] {
        expect(&r, 503, Some("unavailable"));
        assert_eq!(r.1["error"]["details"], json!({"capability": "files", "reason": "feature_disabled"}));
    }
    // A write that needs the feature (a message naming a File) is refused too.
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let s = p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    expect(&s, 201, None);
    let block = json!({"type": "user.message", "payload": {"content": [text("see"), document("file_01m8td25v3x763n7vak8mras0d")]},
        "authored_by": p.admin_id, "caused_by": {"kind": "principal", "id": p.admin_id}});
    let r = p.admin.post(&format!("/v1/sessions/{}/events", id(&s.1)), block).await;
    expect(&r, 503, Some("unavailable"));
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_17_a_file_is_uploaded_given_to_a_session_read_by_its_agent_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning::default()).await;
    let a = &p.admin;
    let f = upload(a, &p.env_id, "notes.txt", "text/plain", b"alpha beta").await;
    expect(&f, 201, None);
    assert_eq!(f.1["size_bytes"], 10);
    assert_eq!(f.1["media_type"], "text/plain");
    assert_eq!(f.1["filename"], "notes.txt");
    assert!(f.1["expires_at"].is_string(), "30 days by default: {}", f.1);
    let file_id = id(&f.1);
    assert!(file_id.starts_with("file_"));

    // The same bytes back, with the whole size in a header; windows concatenate.
    let (status, bytes, headers) = a.get_bytes(&format!("/v1/files/{file_id}/content")).await;
    assert_eq!((status.as_u16(), bytes.as_slice()), (200, b"alpha beta".as_slice()));
    assert_eq!(headers["checkfu-file-size"], "10");
    assert_eq!(headers["content-type"], "text/plain");
    let (_, head, _) = a.get_bytes(&format!("/v1/files/{file_id}/content?offset=0&length=6")).await;
    let (_, tail, _) = a.get_bytes(&format!("/v1/files/{file_id}/content?offset=6")).await;
    assert_eq!([head, tail].concat(), b"alpha beta");
    let listed = a.get(&format!("/v1/files?environment_id={}", p.env_id)).await;
    expect(&listed, 200, None);
    assert_eq!(listed.1["data"][0]["id"], file_id.as_str());

    // A message with its document block: the agent reads it in the workspace.
    let d = deploy(a, &p.env_id, json!({"tools": [{"type": "builtin", "name": "read"}]})).await;
    let call = format!("call read {{\"path\":\"uploads/{file_id}/notes.txt\"}}");
    let (sid, evs) = run(&p, &d.deployment_id, json!([text(&call), document(&file_id)])).await;
    assert_eq!(results(&evs), vec![("alpha beta".to_string(), false)], "{evs:?}");
    assert_eq!(last_agent_text(&evs), "tool read returned: alpha beta");
    // The File counts in the model's input as `[file <id> <name>]`.
    let usage = of_type(&evs, "span.model_request_end")[0]["payload"]["model_usage"]["input_tokens"].as_i64().unwrap();
    let plain = call.chars().count() + format!("[file {file_id} notes.txt]").chars().count();
    assert_eq!(usage, plain.div_ceil(4) as i64, "{evs:?}");
    // A File given as a resource at creation is there from the first Run.
    let s = a
        .post(
            "/v1/sessions",
            json!({"agent_deployment_id": d.deployment_id, "resources": [{"type": "file", "file_id": file_id}],
                "initial_events": [message(&p.admin_id, &call)]}),
        )
        .await;
    expect(&s, 201, None);
    settle(a, &id(&s.1)).await;
    assert_eq!(results(&events(a, &id(&s.1)).await), vec![("alpha beta".to_string(), false)]);

    // Another Environment's File → 400.
    let env2 = a.post("/v1/environments", json!({"name": "other"})).await;
    expect(&env2, 201, None);
    let other = upload(a, &id(&env2.1), "x.txt", "text/plain", b"elsewhere").await;
    expect(&other, 201, None);
    let r = a
        .post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"type": "user.message", "payload": {"content": [text("x"), document(&id(&other.1))]}, "authored_by": p.admin_id,
                "caused_by": {"kind": "principal", "id": p.admin_id}}),
        )
        .await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "other_environment");

    // A Principal with only read never sees another's File.
    let (reader, _) = reader(&p).await;
    expect(&reader.get(&format!("/v1/files/{file_id}")).await, 404, Some("not_found"));
    let mine = upload(&reader, &p.env_id, "mine.txt", "text/plain", b"mine").await;
    expect(&mine, 201, None);
    let theirs = reader.get(&format!("/v1/files?environment_id={}", p.env_id)).await;
    let ids: Vec<&str> = theirs.1["data"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [id(&mine.1).as_str()], "only their own");

    // Deleted: the bytes and any new reference are gone; a Session keeps its copy.
    let del = a.delete(&format!("/v1/files/{file_id}")).await;
    expect(&del, 200, None);
    assert_eq!(del.1, json!({"id": file_id, "deleted": true}));
    expect(&a.get(&format!("/v1/files/{file_id}")).await, 404, Some("not_found"));
    let (status, _, _) = a.get_bytes(&format!("/v1/files/{file_id}/content")).await;
    assert_eq!(status.as_u16(), 404);
    let again = a
        .post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"type": "user.message", "payload": {"content": [text("again"), document(&file_id)]}, "authored_by": p.admin_id,
                "caused_by": {"kind": "principal", "id": p.admin_id}}),
        )
        .await;
    expect(&again, 404, Some("not_found"));
    let s =
        a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "resources": [{"type": "file", "file_id": file_id}]})).await;
    expect(&s, 404, Some("not_found"));
    let later = a
        .post(
            &format!("/v1/sessions/{sid}/events"),
            json!({"type": "user.message", "payload": {"content": [text(&call)]}, "authored_by": p.admin_id,
                "caused_by": {"kind": "principal", "id": p.admin_id}}),
        )
        .await;
    expect(&later, 201, None);
    settle(a, &sid).await;
    let evs = events(a, &sid).await;
    assert_eq!(results(&evs).last().unwrap(), &("alpha beta".to_string(), false), "deletion does not recall the Session's copy");
    p.stop().await;
}

/// A Principal holding only `read` on the Environment, with its key.
async fn reader(p: &Platform) -> (Api, String) {
    let pr = p.admin.post("/v1/principals", json!({"kind": "service", "name": "reader"})).await;
    expect(&pr, 201, None);
    let pid = id(&pr.1);
    let g = json!({"subject": {"kind": "principal", "id": pid}, "permission": "read", "resource": {"kind": "environment", "id": p.env_id}});
    expect(&p.admin.post("/v1/permission-assignments", g).await, 201, None);
    let k = p.admin.post(&format!("/v1/principals/{pid}/api-keys"), json!({"name": "k"})).await;
    expect(&k, 201, None);
    (Api::new(&p.base, k.1["secret"].as_str().unwrap()), pid)
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_17_limits_bad_forms_and_images_are_refused_with_the_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning::default()).await;
    let a = &p.admin;
    // 65 MiB → 413.
    let big = vec![b'x'; 65 * 1024 * 1024];
    expect(&upload(a, &p.env_id, "big.bin", "application/octet-stream", &big).await, 413, Some("validation.payload_too_large"));
    // Exactly 64 MiB is taken.
    let max = vec![b'y'; 64 * 1024 * 1024];
    let r = upload(a, &p.env_id, "max.bin", "application/octet-stream", &max).await;
    expect(&r, 201, None);
    assert_eq!(r.1["size_bytes"], 64 * 1024 * 1024);
    // No type → application/octet-stream; a bad filename, a missing part,
    // an expiry out of range, an unknown field → 400.
    let parts: Vec<FormPart> = vec![("environment_id", None, None, p.env_id.as_bytes()), ("file", Some("raw"), None, b"..")];
    let r = a.post_form("/v1/files", &parts, "x1", &[]).await;
    expect(&r, 201, None);
    assert_eq!(r.1["media_type"], "application/octet-stream");
    let cases: Vec<Vec<FormPart>> = vec![
        vec![("environment_id", None, None, p.env_id.as_bytes()), ("file", Some("a/b"), None, b"..")],
        vec![("environment_id", None, None, p.env_id.as_bytes())],
        vec![("file", Some("n.txt"), None, b"..")],
        vec![
            ("environment_id", None, None, p.env_id.as_bytes()),
            ("expires_in_seconds", None, None, b"60"),
            ("file", Some("n"), None, b"."),
        ],
        vec![("environment_id", None, None, p.env_id.as_bytes()), ("colour", None, None, b"red"), ("file", Some("n"), None, b".")],
    ];
    for parts in cases {
        expect(&a.post_form("/v1/files", &parts, "x2", &[]).await, 400, Some("validation.invalid"));
    }
    expect(&a.post("/v1/files", json!({"environment_id": p.env_id})).await, 400, Some("validation.invalid"));
    // An expiry in range is kept.
    let parts: Vec<FormPart> = vec![
        ("environment_id", None, None, p.env_id.as_bytes()),
        ("expires_in_seconds", None, None, b"3600"),
        ("file", Some("n"), None, b"."),
    ];
    let r = a.post_form("/v1/files", &parts, "x3", &[]).await;
    expect(&r, 201, None);
    assert!(r.1["expires_at"].as_str().unwrap() < "9999");
    // An image block must name an image a model takes.
    let d = deploy(a, &p.env_id, json!({})).await;
    let notes = upload(a, &p.env_id, "notes.txt", "text/plain", b"alpha").await;
    let img = json!({"type": "image", "source": {"type": "file", "file_id": id(&notes.1)}});
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    let r = a
        .post(
            &format!("/v1/sessions/{}/events", id(&s.1)),
            json!({"type": "user.message", "payload": {"content": [text("look"), img]}, "authored_by": p.admin_id,
                "caused_by": {"kind": "principal", "id": p.admin_id}}),
        )
        .await;
    expect(&r, 400, Some("validation.invalid"));
    // More than 20 file blocks → 400.
    let many: Vec<Value> = std::iter::once(text("many")).chain((0..21).map(|_| document(&id(&notes.1)))).collect();
    let r = a
        .post(
            &format!("/v1/sessions/{}/events", id(&s.1)),
            json!({"type": "user.message", "payload": {"content": many}, "authored_by": p.admin_id,
                "caused_by": {"kind": "principal", "id": p.admin_id}}),
        )
        .await;
    expect(&r, 400, Some("validation.invalid"));
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_18_an_upload_is_idempotent_by_its_parts_not_its_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning::default()).await;
    let a = &p.admin;
    let parts: Vec<FormPart> =
        vec![("environment_id", None, None, p.env_id.as_bytes()), ("file", Some("notes.txt"), Some("text/plain"), b"alpha beta")];
    let key = [("idempotency-key", "upload-1")];
    let first = a.post_form("/v1/files", &parts, "first-boundary", &key).await;
    expect(&first, 201, None);
    let again = a.post_form("/v1/files", &parts, "another-boundary-entirely", &key).await;
    expect(&again, 201, None);
    assert_eq!(again.2.get("idempotent-replayed").map(|v| v.to_str().unwrap()), Some("true"));
    assert_eq!(again.1["id"], first.1["id"]);
    let listed = a.get(&format!("/v1/files?environment_id={}", p.env_id)).await;
    assert_eq!(listed.1["data"].as_array().unwrap().len(), 1, "one File");
    let other: Vec<FormPart> =
        vec![("environment_id", None, None, p.env_id.as_bytes()), ("file", Some("notes.txt"), Some("text/plain"), b"gamma delta")];
    expect(&a.post_form("/v1/files", &other, "first-boundary", &key).await, 409, Some("idempotency.key_reused"));
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_15_a_skill_is_versioned_by_form_and_json_and_its_bundle_checked() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning::default()).await;
    let a = &p.admin;
    let v1 = skill_md("greeting", "Says hello", "# Greeting v1");
    let s = push_skill(a, &p.env_id, &[("greeting/SKILL.md", v1.as_bytes()), ("greeting/scripts/hi.sh", b"echo hi\n")]).await;
    expect(&s, 201, None);
    assert_eq!((s.1["name"].clone(), s.1["latest_version"].clone(), s.1["status"].clone()), (json!("greeting"), json!(1), json!("active")));
    assert_eq!(s.1["description"], "Says hello");
    assert_eq!(s.1["version"], 1, "the version this write made");
    let sid = id(&s.1);
    assert!(sid.starts_with("skl_"));
    let v2 = skill_md("greeting", "Says hello, twice", "# Greeting v2");
    let body = json!({"files": [{"path": "SKILL.md", "content": v2}, {"path": "scripts/hi.sh", "content": "ZWNobyBoaSBoaQo=", "encoding": "base64"}]});
    let r = a.post(&format!("/v1/skills/{sid}/versions"), body).await;
    expect(&r, 201, None);
    assert_eq!((r.1["version"].clone(), r.1["latest_version"].clone()), (json!(2), json!(2)));
    let got = a.get(&format!("/v1/skills/{sid}")).await;
    assert_eq!((got.1["latest_version"].clone(), got.1["description"].clone()), (json!(2), json!("Says hello, twice")));
    // Version 1 is unchanged.
    let one = a.get(&format!("/v1/skills/{sid}/versions/1")).await;
    expect(&one, 200, None);
    let paths: Vec<&str> = one.1["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["SKILL.md", "scripts/hi.sh"], "the shared top directory is stripped");
    let (_, md, _) = a.get_bytes(&format!("/v1/skills/{sid}/versions/1/content?path=SKILL.md")).await;
    assert_eq!(md, v1.as_bytes());
    let (_, sh, _) = a.get_bytes(&format!("/v1/skills/{sid}/versions/2/content?path=scripts/hi.sh")).await;
    assert_eq!(sh, b"echo hi hi\n");
    let versions = a.get(&format!("/v1/skills/{sid}/versions?limit=1")).await;
    assert_eq!(versions.1["data"][0]["version"], 2);
    let next = versions.1["next_page"].as_str().unwrap().to_string();
    assert_eq!(a.get(&format!("/v1/skills/{sid}/versions?limit=1&page={next}")).await.1["data"][0]["version"], 1);

    // No SKILL.md, bad front matter, a bad path → 400; 9 MiB → 413; the name taken → 409; renamed → 400.
    let r = push_skill(a, &p.env_id, &[("README.md", b"hi")]).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "skill_md_missing");
    let r = push_skill(a, &p.env_id, &[("SKILL.md", b"# no front matter")]).await;
    assert_eq!(r.1["error"]["details"]["reason"], "front_matter_invalid", "{}", r.1);
    let r = a
        .post(
            "/v1/skills",
            json!({"environment_id": p.env_id, "files": [{"path": "SKILL.md", "content": v1}, {"path": "../x", "content": "x"}]}),
        )
        .await;
    assert_eq!(r.1["error"]["details"]["reason"], "path_invalid", "{}", r.1);
    let nine = vec![b'z'; 9 * 1024 * 1024];
    let other = skill_md("big", "Large", "");
    expect(
        &push_skill(a, &p.env_id, &[("SKILL.md", other.as_bytes()), ("blob.bin", &nine)]).await,
        413,
        Some("validation.payload_too_large"),
    );
    let r = push_skill(a, &p.env_id, &[("SKILL.md", v1.as_bytes())]).await;
    expect(&r, 409, Some("validation.conflict"));
    assert_eq!(r.1["error"]["details"]["reason"], "name_taken");
    let renamed = skill_md("salute", "Other", "");
    let r = a.post(&format!("/v1/skills/{sid}/versions"), json!({"files": [{"path": "SKILL.md", "content": renamed}]})).await;
    assert_eq!(r.1["error"]["details"]["reason"], "name_changed", "{}", r.1);
    // read may read, not write.
    let (reader, _) = reader(&p).await;
    expect(&reader.get(&format!("/v1/skills/{sid}")).await, 200, None);
    expect(&push_skill(&reader, &p.env_id, &[("SKILL.md", skill_md("mine", "m", "").as_bytes())]).await, 403, Some("permission.denied"));
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_16_a_pinned_skill_is_mounted_read_only_and_outlives_its_archive() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning::default()).await;
    let a = &p.admin;
    let v1 = skill_md("greeting", "Says hello", "# Greeting v1");
    let s = push_skill(a, &p.env_id, &[("SKILL.md", v1.as_bytes()), ("scripts/hi.sh", b"echo hi\n")]).await;
    expect(&s, 201, None);
    let skill = id(&s.1);
    let v2 = skill_md("greeting", "Says hello, twice", "# Greeting v2");
    expect(&a.post(&format!("/v1/skills/{skill}/versions"), json!({"files": [{"path": "SKILL.md", "content": v2}]})).await, 201, None);

    let tools = json!([{"type": "builtin", "name": "read"}, {"type": "builtin", "name": "write"}, {"type": "builtin", "name": "bash"}]);
    let d = deploy_allowing_tools(a, &p.env_id, json!({"tools": tools, "skills": [{"skill_id": skill, "version": 1}]})).await;
    let version = a.get(&format!("/v1/agents/{}/versions/1", d.agent_id)).await;
    assert_eq!(version.1["definition"]["skills"], json!([{"skill_id": skill, "version": 1}]), "{}", version.1);

    let calls = "call read {\"path\":\"skills/greeting/SKILL.md\"}\n\
                 call write {\"path\":\"skills/greeting/x\",\"content\":\"x\"}\n\
                 call bash {\"command\":\"touch skills/greeting/x; cat skills/greeting/scripts/hi.sh\"}";
    let (_, evs) = run(&p, &d.deployment_id, json!([text(calls)])).await;
    let r = results(&evs);
    assert_eq!(r.len(), 3, "{evs:?}");
    assert_eq!(r[0], (v1.clone(), false), "version 1's text");
    assert!(r[1].1 && r[1].0.contains("read-only"), "write there fails: {:?}", r[1]);
    assert!(r[2].0.contains("Read-only file system"), "bash cannot touch it: {:?}", r[2]);
    assert!(r[2].0.contains("echo hi"), "but reads it: {:?}", r[2]);

    // A Session may narrow a variable skill away: then it is not mounted.
    let variable = json!({"tools": [{"type": "builtin", "name": "read"}], "skills": [skill],
        "session_variable": {"skills": {"allowed": [skill]}}});
    let dv = deploy(a, &p.env_id, variable).await;
    let read = message(&p.admin_id, "call read {\"path\":\"skills/greeting/SKILL.md\"}");
    let narrowed = a.post("/v1/sessions", json!({"agent_deployment_id": dv.deployment_id, "skills": [], "initial_events": [read]})).await;
    expect(&narrowed, 201, None);
    settle(a, &id(&narrowed.1)).await;
    let r = results(&events(a, &id(&narrowed.1)).await);
    assert!(r.len() == 1 && r[0].1, "not mounted once narrowed away: {r:?}");
    let kept = a.post("/v1/sessions", json!({"agent_deployment_id": dv.deployment_id, "initial_events": [read]})).await;
    settle(a, &id(&kept.1)).await;
    assert_eq!(results(&events(a, &id(&kept.1)).await), vec![(v2.clone(), false)], "mounted by default");
    // Narrowed later: the next Run finds the mount gone.
    let sel = a.post(&format!("/v1/sessions/{}/selection", id(&kept.1)), json!({"skills": []})).await;
    expect(&sel, 200, None);
    let again = a.post(&format!("/v1/sessions/{}/events", id(&kept.1)), read.clone()).await;
    expect(&again, 201, None);
    settle(a, &id(&kept.1)).await;
    let r = results(&events(a, &id(&kept.1)).await);
    assert!(r.len() == 2 && r[1].1, "the narrowed skill is unmounted: {r:?}");

    // A bare id pins the latest version.
    let d2 = deploy(a, &p.env_id, json!({"tools": [{"type": "builtin", "name": "read"}], "skills": [skill]})).await;
    let version = a.get(&format!("/v1/agents/{}/versions/1", d2.agent_id)).await;
    assert_eq!(version.1["definition"]["skills"], json!([{"skill_id": skill, "version": 2}]));
    let (_, evs) = run(&p, &d2.deployment_id, json!([text("call read {\"path\":\"skills/greeting/SKILL.md\"}")])).await;
    assert_eq!(results(&evs), vec![(v2.clone(), false)]);

    // Two versions of one name, another Environment's skill → 400.
    let agent = a
        .post(
            "/v1/agents",
            json!({"environment_id": p.env_id, "name": "twice",
        "draft": {"skills": [{"skill_id": skill, "version": 1}, {"skill_id": skill, "version": 2}]}}),
        )
        .await;
    expect(&agent, 201, None);
    let r = a.post(&format!("/v1/agents/{}/versions", id(&agent.1)), json!({})).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "skill_version_conflict");
    let env2 = a.post("/v1/environments", json!({"name": "elsewhere"})).await;
    let far = push_skill(a, &id(&env2.1), &[("SKILL.md", skill_md("far", "Far", "").as_bytes())]).await;
    expect(&far, 201, None);
    let agent = a.post("/v1/agents", json!({"environment_id": p.env_id, "name": "far", "draft": {"skills": [id(&far.1)]}})).await;
    let r = a.post(&format!("/v1/agents/{}/versions", id(&agent.1)), json!({})).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "other_environment");

    // Archived: no new version or publication; the published version still mounts.
    let arch = a.post(&format!("/v1/skills/{skill}/archive"), json!({})).await;
    expect(&arch, 200, None);
    assert_eq!(arch.1["status"], "archived");
    let r = a.post(&format!("/v1/skills/{skill}/versions"), json!({"files": [{"path": "SKILL.md", "content": v1}]})).await;
    expect(&r, 409, Some("validation.conflict"));
    assert_eq!(r.1["error"]["details"]["reason"], "skill_archived");
    let agent = a.post("/v1/agents", json!({"environment_id": p.env_id, "name": "late", "draft": {"skills": [skill]}})).await;
    let r = a.post(&format!("/v1/agents/{}/versions", id(&agent.1)), json!({})).await;
    expect(&r, 409, Some("validation.conflict"));
    assert_eq!(r.1["error"]["details"]["reason"], "skill_archived");
    let (_, evs) = run(&p, &d.deployment_id, json!([text("call read {\"path\":\"skills/greeting/SKILL.md\"}")])).await;
    assert_eq!(results(&evs), vec![(v1.clone(), false)], "the published version still mounts");
    assert!(
        a.get(&format!("/v1/skills?environment_id={}", p.env_id)).await.1["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["id"] != skill.as_str())
    );
    let all = a.get(&format!("/v1/skills?environment_id={}&include_archived=true", p.env_id)).await;
    assert!(all.1["data"].as_array().unwrap().iter().any(|s| s["id"] == skill.as_str()));
    // The name is free again among active skills.
    expect(&push_skill(a, &p.env_id, &[("SKILL.md", v1.as_bytes())]).await, 201, None);
    p.stop().await;
}
