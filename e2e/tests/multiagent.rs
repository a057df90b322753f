//! Multiagent through the public API (api.md §15): a coordinator's roster,
//! frozen at publication (acceptance 15.6 #1), every Session's primary
//! SessionThread (#2), and child threads spawned and messaged by the
//! platform tools, governed by `use_agent` and ActionPolicy (#3–#9).
#![cfg(test)]

use checkfu_e2e::sse::Stream;
use checkfu_e2e::*;
use serde_json::{Value, json};
use std::time::Duration;

async fn agent(p: &Platform, name: &str, draft: Value) -> String {
    let r = p.admin.post("/v1/agents", json!({"environment_id": p.env_id, "name": name, "draft": draft})).await;
    expect(&r, 201, None);
    id(&r.1)
}

async fn publish(p: &Platform, agent_id: &str) -> Reply {
    p.admin.post(&format!("/v1/agents/{agent_id}/versions"), json!({})).await
}

async fn set_draft(p: &Platform, agent_id: &str, draft: Value) {
    expect(&p.admin.post(&format!("/v1/agents/{agent_id}"), json!({"draft": draft})).await, 200, None);
}

fn coordinator(agents: Value) -> Value {
    json!({"multiagent": {"type": "coordinator", "agents": agents}})
}

#[track_caller]
fn refused(r: &Reply, reason: &str) {
    expect(r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], reason, "{}", r.1);
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_1_rosters_are_checked_and_frozen_at_publication() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let b = agent(&p, "B", json!({})).await;
    expect(&publish(&p, &b).await, 201, None);
    let c = agent(&p, "C", json!({})).await;
    expect(&publish(&p, &c).await, 201, None);
    let a = agent(&p, "A", coordinator(json!([b]))).await;

    // Refusals, each with its reason.
    set_draft(&p, &a, coordinator(json!([]))).await;
    refused(&publish(&p, &a).await, "roster_empty");
    let many: Vec<String> = (0..21).map(|i| format!("agt_01jx00000000000000000000{:02}", i)).collect();
    set_draft(&p, &a, coordinator(json!(many))).await;
    refused(&publish(&p, &a).await, "roster_too_large");
    set_draft(&p, &a, coordinator(json!([b, {"type": "agent", "id": b, "version": 1}]))).await;
    refused(&publish(&p, &a).await, "roster_duplicate");
    set_draft(&p, &a, coordinator(json!([a, {"type": "self"}]))).await;
    refused(&publish(&p, &a).await, "roster_duplicate");
    let nested = agent(&p, "N", coordinator(json!([c]))).await;
    expect(&publish(&p, &nested).await, 201, None);
    set_draft(&p, &a, coordinator(json!([nested]))).await;
    refused(&publish(&p, &a).await, "nested_coordinator");
    let unpublished = agent(&p, "U", json!({})).await;
    set_draft(&p, &a, coordinator(json!([unpublished]))).await;
    refused(&publish(&p, &a).await, "roster_member_unavailable");
    set_draft(&p, &a, coordinator(json!(["agt_01jx0000000000000000000000"]))).await;
    refused(&publish(&p, &a).await, "roster_member_unavailable");
    set_draft(&p, &a, coordinator(json!([{"type": "agent", "id": b, "version": 9}]))).await;
    refused(&publish(&p, &a).await, "roster_member_unavailable");
    // Shape errors are the draft's.
    let bad = p.admin.post(&format!("/v1/agents/{a}"), json!({"draft": {"multiagent": {"type": "team", "agents": []}}})).await;
    expect(&bad, 400, Some("validation.invalid"));

    // Published: bare ids take the member's latest version, exact ones stay, self is this version.
    set_draft(&p, &a, coordinator(json!([b, {"type": "agent", "id": c, "version": 1}, {"type": "self"}]))).await;
    let v1 = publish(&p, &a).await;
    expect(&v1, 201, None);
    let resolved = |v: &Value| v["definition"]["multiagent"]["resolved_agents"].as_array().unwrap().clone();
    let r1 = resolved(&v1.1);
    assert_eq!(
        (r1[0]["agent_id"].clone(), r1[0]["version"].clone(), r1[0]["name"].clone(), r1[0]["self"].clone()),
        (json!(b), json!(1), json!("B"), json!(false))
    );
    assert!(r1[0]["release_sha256"].as_str().is_some_and(|s| s.len() == 64));
    assert_eq!((r1[1]["agent_id"].clone(), r1[1]["version"].clone()), (json!(c), json!(1)));
    assert_eq!(
        (r1[2]["agent_id"].clone(), r1[2]["self"].clone(), r1[2]["version"].clone()),
        (json!(a), json!(true), v1.1["version"].clone())
    );
    // B v2 and C v2: only republishing A moves bare B; exact C stays at 1.
    set_draft(&p, &b, json!({"instructions": "v2"})).await;
    expect(&publish(&p, &b).await, 201, None);
    expect(&publish(&p, &c).await, 201, None);
    let still = p.admin.get(&format!("/v1/agents/{a}/versions/{}", v1.1["version"])).await;
    assert_eq!(resolved(&still.1)[0]["version"], 1, "a published roster never moves");
    let v2 = publish(&p, &a).await;
    expect(&v2, 201, None);
    let r2 = resolved(&v2.1);
    assert_eq!((r2[0]["version"].clone(), r2[1]["version"].clone()), (json!(2), json!(1)));

    // A published definition written back as the draft reads back whole,
    // its resolved list included (publication replaces it); a resolved
    // member not as publication writes it is refused, naming it.
    let again = p.admin.post(&format!("/v1/agents/{a}"), json!({"draft": v2.1["definition"]})).await;
    expect(&again, 200, None);
    assert_eq!(again.1["draft"], v2.1["definition"]);
    let mut broken = v2.1["definition"].clone();
    broken["multiagent"]["resolved_agents"][1] = json!({"agent_id": c});
    let bad = p.admin.post(&format!("/v1/agents/{a}"), json!({"draft": broken})).await;
    expect(&bad, 400, Some("validation.invalid"));
    assert_eq!(bad.1["error"]["details"]["field"], "draft.multiagent.resolved_agents[1]", "{}", bad.1);
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_2_a_single_agent_session_has_one_primary_thread_whose_events_are_the_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let sid = id(&p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": p.admin_id})).await.1);
    expect(&p.admin.post(&format!("/v1/sessions/{sid}/events"), message(&p.admin_id, "hello")).await, 201, None);
    let session = settle(&p.admin, &sid).await;
    let listed = p.admin.get(&format!("/v1/sessions/{sid}/threads")).await;
    expect(&listed, 200, None);
    let threads = listed.1["data"].as_array().unwrap();
    assert_eq!(threads.len(), 1);
    let t = &threads[0];
    let tid = t["id"].as_str().unwrap();
    assert!(tid.starts_with("sthr_"), "{t}");
    assert_eq!(
        (t["type"].clone(), t["session_id"].clone(), t["parent_thread_id"].clone()),
        (json!("session_thread"), json!(sid), Value::Null)
    );
    assert_eq!((t["status"].clone(), t["stop_reason"].clone()), (session["status"].clone(), session["stop_reason"].clone()));
    assert_eq!(
        (t["agent"]["agent_id"].clone(), t["agent"]["name"].clone(), t["agent"]["version"].clone()),
        (json!(d.agent_id), json!("helper"), json!(1))
    );
    expect(&p.admin.get(&format!("/v1/sessions/{sid}/threads/{tid}")).await, 200, None);
    assert_eq!(p.admin.get(&format!("/v1/sessions/{sid}/threads?status=running")).await.1["data"], json!([]));
    // The primary's view is the Session's events.
    let mine = p.admin.get(&format!("/v1/sessions/{sid}/threads/{tid}/events?limit=1000")).await;
    expect(&mine, 200, None);
    assert_eq!(mine.1["data"].as_array().unwrap(), &events(&p.admin, &sid).await);
    // The primary is archived only with its Session; another Session's thread is 404.
    let archived = p.admin.post(&format!("/v1/sessions/{sid}/threads/{tid}/archive"), json!({})).await;
    expect(&archived, 409, Some("validation.conflict"));
    let other = id(&p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id, "principal_id": p.admin_id})).await.1);
    expect(&p.admin.get(&format!("/v1/sessions/{other}/threads/{tid}")).await, 404, Some("not_found"));
    expect(&p.admin.get(&format!("/v1/sessions/{other}/threads/{tid}/events")).await, 404, Some("not_found"));
    expect(&p.admin.get(&format!("/v1/sessions/{sid}/threads/nope")).await, 400, Some("validation.invalid"));
}

/// The acceptance setup: coordinator `A` (roster `[B]`, the `read` tool)
/// and member `B` (the `write` tool), published; `use_agent` from A to B; a
/// policy allowing `write` and `read`; a deployment of A.
struct Team {
    p: Platform,
    a: String,
    b: String,
    deployment: String,
    use_agent: String,
}

impl Team {
    async fn start(dir: &std::path::Path) -> Team {
        Team::on(Platform::start(dir).await).await
    }

    async fn on(p: Platform) -> Team {
        let b = agent(&p, "B", json!({"tools": [{"type": "builtin", "name": "write"}, {"type": "custom", "name": "lookup", "input_schema": {"type": "object"}}]})).await;
        expect(&publish(&p, &b).await, 201, None);
        let mut draft = coordinator(json!([b]));
        draft["tools"] =
            json!([{"type": "builtin", "name": "read"}, {"type": "custom", "name": "ask", "input_schema": {"type": "object"}}]);
        let a = agent(&p, "A", draft).await;
        expect(&publish(&p, &a).await, 201, None);
        let use_agent = p
            .admin
            .post(
                "/v1/permission-assignments",
                json!({"subject": {"kind": "agent_definition", "id": a}, "permission": "use_agent", "resource": {"kind": "agent", "id": b}}),
            )
            .await;
        expect(&use_agent, 201, None);
        let allow = json!({"environment_id": p.env_id, "name": "tools", "rules": [
            {"subject": {"kind": "*", "id_glob": "*"}, "resource": {"kind": "tool", "id_glob": "write"}, "permission_glob": "invoke", "disposition": "allow"},
            {"subject": {"kind": "*", "id_glob": "*"}, "resource": {"kind": "tool", "id_glob": "lookup"}, "permission_glob": "invoke", "disposition": "allow"},
            {"subject": {"kind": "*", "id_glob": "*"}, "resource": {"kind": "tool", "id_glob": "ask"}, "permission_glob": "invoke", "disposition": "allow"}
        ]});
        expect(&p.admin.post("/v1/action-policies", allow).await, 201, None);
        let deployment = deploy_agent(&p, &a).await;
        Team { use_agent: id(&use_agent.1), p, a, b, deployment }
    }

    async fn session(&self) -> String {
        let r = self.p.admin.post("/v1/sessions", json!({"agent_deployment_id": self.deployment, "principal_id": self.p.admin_id})).await;
        expect(&r, 201, None);
        id(&r.1)
    }

    async fn say(&self, sid: &str, text: &str) {
        expect(&self.p.admin.post(&format!("/v1/sessions/{sid}/events"), message(&self.p.admin_id, text)).await, 201, None);
    }

    async fn threads(&self, sid: &str) -> Vec<Value> {
        let r = self.p.admin.get(&format!("/v1/sessions/{sid}/threads")).await;
        expect(&r, 200, None);
        r.1["data"].as_array().unwrap().clone()
    }

    /// A thread's view of the log.
    async fn view(&self, sid: &str, tid: &str) -> Vec<Value> {
        let r = self.p.admin.get(&format!("/v1/sessions/{sid}/threads/{tid}/events?limit=1000")).await;
        expect(&r, 200, None);
        r.1["data"].as_array().unwrap().clone()
    }

    /// Waits until the thread is idle (its view holding `until`, if named).
    async fn idle(&self, sid: &str, tid: &str, until: &str) -> Value {
        for _ in 0..1200 {
            let t = self.p.admin.get(&format!("/v1/sessions/{sid}/threads/{tid}")).await.1;
            if t["status"] == "idle" && (until.is_empty() || types(&self.view(sid, tid).await).iter().any(|x| x == until)) {
                return t;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("thread {tid} never idled");
    }

    /// A new Session whose child waits on its custom tool:
    /// `(session, child)`.
    async fn parked_child(&self) -> (String, String) {
        let sid = self.session().await;
        let child = self.spawned(&sid, "call lookup {}").await;
        let parked = self.idle(&sid, &child, "").await;
        assert_eq!(parked["stop_reason"]["type"], "requires_action", "{parked}");
        (sid, child)
    }

    async fn stop_reason(&self, sid: &str, tid: &str) -> String {
        let r = self.p.admin.get(&format!("/v1/sessions/{sid}/threads/{tid}")).await.1;
        r["stop_reason"]["type"].as_str().unwrap_or_default().to_string()
    }

    /// A new Session whose primary waits on its custom tool while its child
    /// waits on its own: `(session, child)`.
    async fn both_parked(&self) -> (String, String) {
        let sid = self.session().await;
        self.say(&sid, &format!("call spawn_agent {}\ncall ask {{}}", json!({"agent_id": self.b, "message": "call lookup {}"}))).await;
        let s = settle(&self.p.admin, &sid).await;
        assert_eq!(s["stop_reason"]["type"], "requires_action", "{s}");
        let child = self.threads(&sid).await[1]["id"].as_str().unwrap().to_string();
        let c = self.idle(&sid, &child, "").await;
        assert_eq!(c["stop_reason"]["type"], "requires_action", "{c}");
        (sid, child)
    }

    /// Spawns B from a fresh Session with `message`; the child's id.
    async fn spawned(&self, sid: &str, message: &str) -> String {
        self.say(sid, &format!("call spawn_agent {}", json!({"agent_id": self.b, "message": message}))).await;
        settle(&self.p.admin, sid).await;
        let result = tool_results(&events(&self.p.admin, sid).await).pop().expect("a spawn result");
        result["content"]["session_thread_id"].as_str().unwrap_or_else(|| panic!("no thread in {result}")).to_string()
    }
}

async fn deploy_agent(p: &Platform, agent_id: &str) -> String {
    let env = &p.env_id;
    let sbp =
        p.admin.post("/v1/sandbox-profiles", json!({"environment_id": env, "name": format!("sbp-{agent_id}"), "image": "debian:12"})).await;
    expect(&sbp, 201, None);
    let mrp = p
        .admin
        .post("/v1/model-routing-profiles", json!({"environment_id": env, "name": format!("mrp-{agent_id}"), "candidates": [{"provider": "scripted", "model": "scripted-1", "effort": "low"}]}))
        .await;
    expect(&mrp, 201, None);
    let dep = p
        .admin
        .post(
            "/v1/agent-deployments",
            json!({"environment_id": env, "key": format!("k-{agent_id}"), "agent_id": agent_id, "agent_version": 1, "model_routing_profile_id": id(&mrp.1), "sandbox_profile_id": id(&sbp.1)}),
        )
        .await;
    expect(&dep, 201, None);
    id(&dep.1)
}

fn tool_results(events: &[Value]) -> Vec<Value> {
    events.iter().filter(|e| e["type"] == "agent.tool_result").map(|e| e["payload"].clone()).collect()
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

fn texts(events: &[Value]) -> Vec<String> {
    of_type(events, "agent.message").iter().map(|e| e["payload"]["content"][0]["text"].as_str().unwrap_or_default().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_3_a_spawn_makes_a_child_thread_that_answers_in_its_own_view() {
    let dir = tempfile::tempdir().unwrap();
    let t = Team::start(dir.path()).await;
    let sid = t.session().await;
    let child = t.spawned(&sid, "hi").await;
    assert!(child.starts_with("sthr_"), "{child}");
    let primary_view = events(&t.p.admin, &sid).await;
    let result = tool_results(&primary_view).pop().unwrap();
    assert_eq!(
        (result["content"]["agent_id"].clone(), result["content"]["agent_version"].clone(), result["content"]["status"].clone()),
        (json!(t.b), json!(1), json!("accepted"))
    );
    let created = of_type(&primary_view, "session.thread_created");
    assert_eq!(created.len(), 1);
    let c = &created[0]["payload"];
    assert_eq!(
        (c["session_thread_id"].clone(), c["agent_id"].clone(), c["agent_name"].clone(), c["agent_version"].clone()),
        (json!(child), json!(t.b), json!("B"), json!(1))
    );
    assert!(c["spawned_by_tool_use_id"].as_str().is_some_and(|u| !u.is_empty()));
    assert_eq!(created[0]["session_thread_id"], Value::Null, "thread_created is the primary's");
    // The primary's turn went on and ended: it never waits on its child.
    let s = t.p.admin.get(&format!("/v1/sessions/{sid}")).await.1;
    assert_eq!(s["stop_reason"]["type"], "end_turn", "{s}");

    t.idle(&sid, &child, "agent.message").await;
    let mine = t.view(&sid, &child).await;
    let received = of_type(&mine, "agent.thread_message_received");
    assert_eq!(received.len(), 1, "{mine:?}");
    assert_eq!(received[0]["payload"]["content"][0]["text"], "hi");
    assert!(received[0]["payload"].get("from_agent_name").is_none(), "the primary sends without a name");
    assert_eq!(texts(&mine), ["echo: hi"]);
    assert!(
        mine.iter().all(|e| e["session_thread_id"] == json!(child) && e["origin_event_id"].is_null()),
        "a child view holds its own events"
    );
    assert!(of_type(&mine, "session.thread_created").is_empty());

    // The primary view: the child's idle, cross-posted.
    let primary_view = events(&t.p.admin, &sid).await;
    let idles = of_type(&primary_view, "session.thread_status_idle");
    assert_eq!(idles.len(), 1, "{primary_view:?}");
    assert_eq!(idles[0]["session_thread_id"], json!(child));
    let origin = idles[0]["origin_event_id"].as_str().expect("a cross-post names its original");
    let own = of_type(&mine, "session.thread_status_idle");
    assert_eq!(own[0]["id"], json!(origin));
    assert_ne!(own[0]["seq"], idles[0]["seq"], "a cross-post has its own seq");
    assert_eq!(idles[0]["payload"]["agent_name"], "B");
    assert!(of_type(&primary_view, "agent.thread_message_received").is_empty(), "the child's message stays in its view");
    // The thread resources.
    let listed = t.threads(&sid).await;
    assert_eq!(listed.len(), 2);
    assert_eq!((listed[1]["id"].clone(), listed[1]["parent_thread_id"].clone()), (json!(child), listed[0]["id"].clone()));
    assert_eq!((listed[1]["agent"]["name"].clone(), listed[1]["status"].clone()), (json!("B"), json!("idle")));
    assert!(listed[1]["usage"]["output_tokens"].as_i64().unwrap() > 0, "{}", listed[1]);
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_4_a_child_reports_back_and_the_primary_answers() {
    let dir = tempfile::tempdir().unwrap();
    let t = Team::start(dir.path()).await;
    let sid = t.session().await;
    let child = t.spawned(&sid, r#"call send_message {"message":"done"}"#).await;
    t.idle(&sid, &child, "agent.message").await;
    let mine = t.view(&sid, &child).await;
    let sent = of_type(&mine, "agent.thread_message_sent");
    assert_eq!(sent.len(), 1, "{mine:?}");
    let primary = t.threads(&sid).await[0]["id"].clone();
    assert_eq!(sent[0]["payload"]["to_session_thread_id"], primary);
    assert!(sent[0]["payload"].get("to_agent_name").is_none(), "the primary has no name here");
    let result = tool_results(&mine).pop().unwrap();
    assert_eq!(result["content"]["event_id"], sent[0]["id"]);
    // The primary got it, named, and answered.
    for _ in 0..1200 {
        if texts(&events(&t.p.admin, &sid).await).iter().any(|x| x == "echo: done") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    settle(&t.p.admin, &sid).await;
    let primary_view = events(&t.p.admin, &sid).await;
    let got = of_type(&primary_view, "agent.thread_message_received");
    assert_eq!(got.len(), 1, "{primary_view:?}");
    assert_eq!(
        (got[0]["payload"]["from_session_thread_id"].clone(), got[0]["payload"]["from_agent_name"].clone()),
        (json!(child), json!("B"))
    );
    assert_eq!(got[0]["session_thread_id"], Value::Null);
    assert!(texts(&primary_view).contains(&"echo: done".to_string()), "{:?}", texts(&primary_view));

    // `checkfu session follow` shows every thread, a prefix per thread, and
    // stops once all are idle.
    let mut follower = std::process::Command::new(checkfu_e2e::procs::binary())
        .args(["session", "follow", &sid, "--exit-on-idle", "--server", &t.p.base, "--key", &t.p.admin.key])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while follower.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "follow never stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = follower.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.iter().all(|l| l.starts_with("[A] ") || l.starts_with("[B] ")), "{stdout}");
    assert!(lines.iter().any(|l| l.starts_with("[A] ") && l.contains("echo: done")), "{stdout}");
    assert!(lines.iter().any(|l| l.starts_with("[B] ") && l.contains("agent.thread_message_sent")), "{stdout}");
    let child_idles = of_type(&t.view(&sid, &child).await, "session.thread_status_idle").len();
    assert_eq!(lines.iter().filter(|l| l.contains("session.thread_status_idle")).count(), child_idles, "cross-posts print once: {stdout}");

    // `--thread` follows one child's view alone, to its current idle.
    let one = std::process::Command::new(checkfu_e2e::procs::binary())
        .args(["session", "follow", &sid, "--exit-on-idle", "--thread", &child, "--json", "--server", &t.p.base, "--key", &t.p.admin.key])
        .output()
        .unwrap();
    assert!(one.status.success(), "{}", String::from_utf8_lossy(&one.stderr));
    let seen: Vec<Value> = String::from_utf8_lossy(&one.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let view = t.view(&sid, &child).await;
    assert_eq!(
        seen.iter().map(|e| e["seq"].clone()).collect::<Vec<_>>(),
        view.iter().map(|e| e["seq"].clone()).collect::<Vec<_>>(),
        "the child's view, every event once"
    );
    assert_eq!(seen.last().unwrap()["type"], "session.thread_status_idle");
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_5_use_agent_rows_and_policies_govern_spawning() {
    let dir = tempfile::tempdir().unwrap();
    let t = Team::start(dir.path()).await;
    let spawn_result = |sid: String| {
        let t = &t;
        async move {
            settle(&t.p.admin, &sid).await;
            tool_results(&events(&t.p.admin, &sid).await).pop().expect("a result")
        }
    };
    let call = format!("call spawn_agent {}", json!({"agent_id": t.b, "message": "hi"}));

    // No use_agent row: permission.denied, no thread.
    expect(&t.p.admin.delete(&format!("/v1/permission-assignments/{}", t.use_agent)).await, 200, None);
    let sid = t.session().await;
    t.say(&sid, &call).await;
    let r = spawn_result(sid.clone()).await;
    assert_eq!((r["is_error"].clone(), r["content"]["error"]["type"].clone()), (json!(true), json!("permission.denied")), "{r}");
    assert_eq!(t.threads(&sid).await.len(), 1, "no thread");
    let grant =
        json!({"subject": {"kind": "agent_definition", "id": t.a}, "permission": "use_agent", "resource": {"kind": "agent", "id": t.b}});
    expect(&t.p.admin.post("/v1/permission-assignments", grant).await, 201, None);

    // A deny policy: policy.denied.
    let rule = |d: &str| {
        json!({"environment_id": t.p.env_id, "name": format!("use-{d}"), "rules": [
            {"subject": {"kind": "agent_definition", "id_glob": t.a}, "resource": {"kind": "agent", "id_glob": t.b}, "permission_glob": "use_agent", "disposition": d}
        ]})
    };
    let deny = t.p.admin.post("/v1/action-policies", rule("deny")).await;
    expect(&deny, 201, None);
    let sid = t.session().await;
    t.say(&sid, &call).await;
    let r = spawn_result(sid.clone()).await;
    assert_eq!(r["content"]["error"]["type"], "policy.denied", "{r}");
    assert_eq!(t.threads(&sid).await.len(), 1);
    expect(&t.p.admin.delete(&format!("/v1/action-policies/{}", id(&deny.1))).await, 200, None);

    // require_approval: a pending ActionApproval; the primary waits; approved, the child exists.
    expect(&t.p.admin.post("/v1/action-policies", rule("require_approval")).await, 201, None);
    let sid = t.session().await;
    t.say(&sid, &call).await;
    let s = settle(&t.p.admin, &sid).await;
    assert_eq!(s["stop_reason"]["type"], "requires_action", "{s}");
    let pending = t.p.admin.get(&format!("/v1/action-approvals?status=pending&session_id={sid}")).await;
    let approval = pending.1["data"][0].clone();
    assert_eq!(approval["frozen"]["tool"], "spawn_agent", "{approval}");
    assert_eq!(t.threads(&sid).await.len(), 1, "nothing spawned before the approval");
    let body = json!({"decision": "approve", "response_token": approval["response_token"]});
    expect(&t.p.admin.post(&format!("/v1/action-approvals/{}/responses", id(&approval)), body).await, 200, None);
    for _ in 0..1200 {
        if t.threads(&sid).await.len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(t.threads(&sid).await.len(), 2, "approved: the child is spawned");

    // Outside the roster, even with a row: not_in_roster.
    let c = agent(&t.p, "C", json!({})).await;
    expect(&publish(&t.p, &c).await, 201, None);
    let grant =
        json!({"subject": {"kind": "agent_definition", "id": t.a}, "permission": "use_agent", "resource": {"kind": "agent", "id": c}});
    expect(&t.p.admin.post("/v1/permission-assignments", grant).await, 201, None);
    let sid = t.session().await;
    t.say(&sid, &format!("call spawn_agent {}", json!({"agent_id": c, "message": "hi"}))).await;
    let r = spawn_result(sid.clone()).await;
    assert_eq!(r["content"]["error"]["type"], "not_in_roster", "{r}");
    assert_eq!(t.threads(&sid).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_6_threads_are_listed_in_spawn_order_and_capped_at_25() {
    let dir = tempfile::tempdir().unwrap();
    let t = Team::start(dir.path()).await;
    let sid = t.session().await;
    let twice = format!(
        "call spawn_agent {}\ncall spawn_agent {}",
        json!({"agent_id": t.b, "message": "one"}),
        json!({"agent_id": t.b, "message": "two"})
    );
    t.say(&sid, &twice).await;
    settle(&t.p.admin, &sid).await;
    let listed = t.threads(&sid).await;
    assert_eq!(listed.len(), 3, "the primary, then two children");
    let results = tool_results(&events(&t.p.admin, &sid).await);
    assert_eq!(
        (listed[1]["id"].clone(), listed[2]["id"].clone()),
        (results[0]["content"]["session_thread_id"].clone(), results[1]["content"]["session_thread_id"].clone())
    );
    assert_ne!(listed[1]["id"], listed[2]["id"], "the same member twice is two threads");

    let sid = t.session().await;
    let lines: Vec<String> =
        (0..25).map(|i| format!("call spawn_agent {}", json!({"agent_id": t.b, "message": format!("n{i}")}))).collect();
    t.say(&sid, &lines.join("\n")).await;
    settle(&t.p.admin, &sid).await;
    let results = tool_results(&events(&t.p.admin, &sid).await);
    assert_eq!(results.len(), 25);
    let accepted = results.iter().filter(|r| r["content"]["status"] == "accepted").count();
    let capped: Vec<&Value> = results.iter().filter(|r| r["content"]["error"]["type"] == "thread_capacity_reached").collect();
    assert_eq!((accepted, capped.len()), (24, 1), "{results:?}");
    assert_eq!(t.threads(&sid).await.len(), 25);
    // Archiving an idle child frees a slot.
    let first = results[0]["content"]["session_thread_id"].as_str().unwrap().to_string();
    t.idle(&sid, &first, "agent.message").await;
    let archived = t.p.admin.post(&format!("/v1/sessions/{sid}/threads/{first}/archive"), json!({})).await;
    expect(&archived, 200, None);
    t.say(&sid, &format!("call spawn_agent {}", json!({"agent_id": t.b, "message": "again"}))).await;
    settle(&t.p.admin, &sid).await;
    let last = tool_results(&events(&t.p.admin, &sid).await).pop().unwrap();
    assert_eq!(last["content"]["status"], "accepted", "{last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_8_archiving_needs_an_idle_unparked_child() {
    let dir = tempfile::tempdir().unwrap();
    let t = Team::start(dir.path()).await;
    let (sid, child) = t.parked_child().await;
    let primary = t.threads(&sid).await[0]["id"].as_str().unwrap().to_string();
    expect(&t.p.admin.post(&format!("/v1/sessions/{sid}/threads/{primary}/archive"), json!({})).await, 409, Some("validation.conflict"));
    expect(&t.p.admin.post(&format!("/v1/sessions/{sid}/threads/{child}/archive"), json!({})).await, 409, Some("validation.conflict"));
    let stop = input(&t.p.admin_id, "user.interrupt", json!({"session_thread_id": child}));
    expect(&t.p.admin.post(&format!("/v1/sessions/{sid}/events"), stop).await, 201, None);
    let idle = t.p.admin.get(&format!("/v1/sessions/{sid}/threads/{child}")).await.1;
    assert_eq!((idle["status"].clone(), idle["stop_reason"]["type"].clone()), (json!("idle"), json!("end_turn")), "{idle}");
    let archived = t.p.admin.post(&format!("/v1/sessions/{sid}/threads/{child}/archive"), json!({})).await;
    expect(&archived, 200, None);
    assert_eq!(archived.1["status"], "terminated");
    assert!(archived.1["archived_at"].is_string(), "{}", archived.1);
    let again = t.p.admin.post(&format!("/v1/sessions/{sid}/threads/{child}/archive"), json!({})).await;
    expect(&again, 200, None);
    assert_eq!(again.1, archived.1, "archiving again answers the same body");
    let primary_view = events(&t.p.admin, &sid).await;
    let terminated = of_type(&primary_view, "session.thread_status_terminated");
    assert_eq!(terminated.len(), 1);
    assert!(terminated[0]["origin_event_id"].is_string(), "cross-posted");
    // Still readable; an archived thread takes no interrupt.
    expect(&t.p.admin.get(&format!("/v1/sessions/{sid}/threads/{child}/events")).await, 200, None);
    let stop = input(&t.p.admin_id, "user.interrupt", json!({"session_thread_id": child}));
    expect(&t.p.admin.post(&format!("/v1/sessions/{sid}/events"), stop).await, 409, Some("validation.conflict"));
    // Another Session's thread → 400.
    let other = t.session().await;
    let stop = input(&t.p.admin_id, "user.interrupt", json!({"session_thread_id": child}));
    expect(&t.p.admin.post(&format!("/v1/sessions/{other}/events"), stop).await, 400, Some("validation.invalid"));
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_7_a_childs_wait_surfaces_on_the_primary_and_is_answered_with_both_ids() {
    let dir = tempfile::tempdir().unwrap();
    let t = Team::start(dir.path()).await;
    let (sid, child) = t.parked_child().await;
    let mine = t.view(&sid, &child).await;
    let own_use = of_type(&mine, "agent.custom_tool_use")[0].clone();
    let use_id = own_use["payload"]["custom_tool_use_id"].as_str().unwrap().to_string();

    let primary_view = events(&t.p.admin, &sid).await;
    let posted = of_type(&primary_view, "agent.custom_tool_use");
    assert_eq!(posted.len(), 1, "{primary_view:?}");
    assert_eq!((posted[0]["session_thread_id"].clone(), posted[0]["origin_event_id"].clone()), (json!(child), own_use["id"].clone()));
    let idle = of_type(&primary_view, "session.thread_status_idle").pop().expect("a cross-posted idle").clone();
    assert_eq!(idle["payload"]["stop_reason"]["type"], "requires_action");
    assert_eq!(idle["payload"]["stop_reason"]["event_ids"], json!([posted[0]["id"]]), "it names the cross-posts");
    let own_idle = of_type(&mine, "session.thread_status_idle").pop().unwrap().clone();
    assert_eq!(own_idle["payload"]["stop_reason"]["event_ids"], json!([own_use["id"]]), "the child's own names its own");
    let s = t.p.admin.get(&format!("/v1/sessions/{sid}")).await.1;
    assert_eq!(s["stop_reason"]["type"], "end_turn", "a child's wait never blocks the primary: {s}");

    let answer = |thread: &str| {
        input(
            &t.p.admin_id,
            "user.custom_tool_result",
            json!({"custom_tool_use_id": use_id, "session_thread_id": thread, "content": [{"type": "text", "text": "42"}]}),
        )
    };
    let primary = t.threads(&sid).await[0]["id"].as_str().unwrap().to_string();
    let wrong = t.p.admin.post(&format!("/v1/sessions/{sid}/events"), answer(&primary)).await;
    expect(&wrong, 409, Some("validation.conflict"));
    assert_eq!(wrong.1["error"]["details"]["reason"], "no_such_wait", "{}", wrong.1);
    let first = t.p.admin.post(&format!("/v1/sessions/{sid}/events"), answer(&child)).await;
    expect(&first, 201, None);
    assert_eq!(first.1["session_thread_id"], json!(child), "recorded in the child's view");
    let again = t.p.admin.post(&format!("/v1/sessions/{sid}/events"), answer(&child)).await;
    expect(&again, 200, None);
    assert_eq!(again.1["id"], first.1["id"], "the exact duplicate answers the first event");
    t.idle(&sid, &child, "agent.message").await;
    let mine = t.view(&sid, &child).await;
    assert!(texts(&mine).iter().any(|x| x.contains("42")), "{:?}", texts(&mine));
    let s = t.p.admin.get(&format!("/v1/sessions/{sid}/threads/{child}")).await.1;
    assert_eq!(s["stop_reason"]["type"], "end_turn", "{s}");
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_9_an_interrupt_targets_one_thread_or_all() {
    let dir = tempfile::tempdir().unwrap();
    let t = Team::start(dir.path()).await;

    let (sid, child) = t.both_parked().await;
    let primary = t.threads(&sid).await[0]["id"].as_str().unwrap().to_string();
    let one = input(&t.p.admin_id, "user.interrupt", json!({"session_thread_id": child}));
    expect(&t.p.admin.post(&format!("/v1/sessions/{sid}/events"), one).await, 201, None);
    assert_eq!(t.stop_reason(&sid, &child).await, "end_turn");
    assert_eq!(t.stop_reason(&sid, &primary).await, "requires_action", "only the child");

    let (sid, child) = t.both_parked().await;
    let primary = t.threads(&sid).await[0]["id"].as_str().unwrap().to_string();
    expect(&t.p.admin.post(&format!("/v1/sessions/{sid}/events"), interrupt(&t.p.admin_id)).await, 201, None);
    settle(&t.p.admin, &sid).await;
    assert_eq!(t.stop_reason(&sid, &child).await, "end_turn");
    assert_eq!(t.stop_reason(&sid, &primary).await, "end_turn", "both");
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_10_thread_streams_resume_within_their_view_and_threads_share_one_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let t = Team::start(dir.path()).await;
    let sid = t.session().await;
    let child = t.spawned(&sid, r#"call write {"path":"notes.txt","content":"from B"}"#).await;
    t.idle(&sid, &child, "agent.message").await;
    let mine = t.view(&sid, &child).await;
    assert!(tool_results(&mine).iter().all(|r| r["is_error"] == false), "{mine:?}");

    // The child's stream, resumed after its second event: the rest of its view, no gap, no duplicate.
    let key = t.p.admin.key.clone();
    let path = format!("/v1/sessions/{sid}/threads/{child}/events/stream");
    let after = mine[1]["seq"].as_i64().unwrap();
    let mut resumed = Stream::open(&t.p.base, &key, &path, Some(after)).await;
    let last = mine.last().unwrap()["seq"].as_i64().unwrap().to_string();
    let frames = resumed.until(Duration::from_secs(10), |f| f.id.as_deref() == Some(last.as_str())).await;
    let got: Vec<i64> = frames.iter().filter_map(|f| f.id.as_ref()).map(|i| i.parse().unwrap()).collect();
    let want: Vec<i64> = mine[2..].iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(got, want, "exactly the rest of the child's view");

    // Live: the primary's stream with previews sees no child preview, and the
    // primary reads the child's file.
    let mut primary = Stream::open(&t.p.base, &key, &format!("/v1/sessions/{sid}/events/stream?event_deltas=agent.message"), None).await;
    t.say(&sid, &format!("call send_message {}", json!({"session_thread_id": child, "message": "again"}))).await;
    t.idle(&sid, &child, "").await;
    settle(&t.p.admin, &sid).await;
    t.say(&sid, r#"call read {"path":"notes.txt"}"#).await;
    let seen = primary.until(Duration::from_secs(20), |f| f.event == "agent.tool_result" && f.data.contains("from B")).await;
    let child_runs: Vec<String> = t.view(&sid, &child).await.iter().filter_map(|e| e["run_id"].as_str().map(str::to_string)).collect();
    for f in seen.iter().filter(|f| f.id.is_none() && !f.event.is_empty()) {
        let run = f.json()["run_id"].as_str().unwrap_or_default().to_string();
        assert!(!child_runs.contains(&run), "a child's preview reached the primary stream: {f:?}");
    }
    assert!(
        seen.iter().filter(|f| f.id.is_some()).all(|f| f.json()["session_thread_id"].is_null() || f.json()["origin_event_id"].is_string())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn thread_lifecycles_reach_webhooks_with_the_threads_id() {
    let dir = tempfile::tempdir().unwrap();
    let t = Team::on(Platform::start_timed(dir.path(), Tuning { allow_private_targets: true, ..Default::default() }).await).await;
    let (hooks, url) = hook_receiver().await;
    let kinds = ["session.thread_created", "session.thread_idled", "session.thread_terminated"];
    let endpoint = json!({"environment_id": t.p.env_id, "url": url, "event_types": kinds});
    expect(&t.p.admin.post("/v1/webhook-endpoints", endpoint).await, 201, None);
    let sid = t.session().await;
    let child = t.spawned(&sid, "hi").await;
    t.idle(&sid, &child, "agent.message").await;
    expect(&t.p.admin.post(&format!("/v1/sessions/{sid}/threads/{child}/archive"), json!({})).await, 200, None);
    for kind in kinds {
        checkfu_e2e::automation::wait_for_hook(&hooks, kind, &child).await;
    }
    let delivered: Vec<Value> = hooks.lock().unwrap().iter().filter_map(|b| serde_json::from_str(b).ok()).collect();
    assert!(
        delivered.iter().all(|b| b["data"]["session_id"] == json!(sid) && b["data"]["session_thread_id"] == json!(child)),
        "{delivered:?}"
    );
    assert_eq!(delivered.iter().filter(|b| b["type"] == "session.thread_idled").count(), 1, "one idle, not its cross-post: {delivered:?}");
    assert!(delivered.iter().all(|b| b["data"].get("content").is_none()), "thin notices");
}

#[tokio::test(flavor = "multi_thread")]
async fn at_the_budgets_cap_every_thread_pauses_and_raising_it_restarts_them_all() {
    let dir = tempfile::tempdir().unwrap();
    let t = Team::start(dir.path()).await;
    let spawn = format!("call spawn_agent {}", json!({"agent_id": t.b, "message": "hi"}));
    let s =
        t.p.admin
            .post(
                "/v1/sessions",
                json!({"agent_deployment_id": t.deployment, "budget": {"limit": 1, "metric": "model_tokens"},
                   "initial_events": [message(&t.p.admin_id, &spawn)]}),
            )
            .await;
    expect(&s, 201, None);
    let sid = id(&s.1);
    let paused = settle(&t.p.admin, &sid).await;
    assert_eq!(paused["stop_reason"]["type"], "budget_reached", "{paused}");
    let child = t.threads(&sid).await[1]["id"].as_str().unwrap().to_string();
    let c = t.idle(&sid, &child, "").await;
    assert_eq!(c["stop_reason"]["type"], "budget_reached", "the child pauses too: {c}");
    assert!(texts(&t.view(&sid, &child).await).is_empty(), "no model call past the cap");

    let bid = paused["budget_id"].as_str().unwrap().to_string();
    expect(&t.p.admin.post(&format!("/v1/budgets/{bid}"), json!({"limit": 1_000_000})).await, 200, None);
    t.idle(&sid, &child, "agent.message").await;
    assert_eq!(texts(&t.view(&sid, &child).await), ["echo: hi"], "the child restarted");
    for _ in 0..1200 {
        let s = t.p.admin.get(&format!("/v1/sessions/{sid}")).await.1;
        if s["status"] == "idle" && s["stop_reason"]["type"] == "end_turn" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the primary never restarted");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_use_id_two_threads_wait_on_must_name_its_thread() {
    let dir = tempfile::tempdir().unwrap();
    let t = Team::start(dir.path()).await;
    let sid = t.session().await;
    // The scripted model numbers tool uses by conversation length: the
    // primary's `ask` and the child's `lookup` get the same id.
    t.say(&sid, &format!("call ask {{}}\ncall spawn_agent {}", json!({"agent_id": t.b, "message": "call lookup {}"}))).await;
    settle(&t.p.admin, &sid).await;
    let child = t.threads(&sid).await[1]["id"].as_str().unwrap().to_string();
    t.idle(&sid, &child, "session.thread_status_idle").await;
    let primary = t.threads(&sid).await[0]["id"].as_str().unwrap().to_string();
    let asked = of_type(&events(&t.p.admin, &sid).await, "agent.custom_tool_use")
        .iter()
        .find(|e| e["session_thread_id"].is_null())
        .map(|e| e["payload"]["custom_tool_use_id"].as_str().unwrap().to_string())
        .unwrap();
    let looked =
        of_type(&t.view(&sid, &child).await, "agent.custom_tool_use")[0]["payload"]["custom_tool_use_id"].as_str().unwrap().to_string();
    assert_eq!(asked, looked, "one id, two waits");
    let answer = |thread: Option<&str>, text: &str| {
        let mut p = json!({"custom_tool_use_id": asked, "content": [{"type": "text", "text": text}]});
        if let Some(t) = thread {
            p["session_thread_id"] = json!(t);
        }
        input(&t.p.admin_id, "user.custom_tool_result", p)
    };
    let r = t.p.admin.post(&format!("/v1/sessions/{sid}/events"), answer(None, "?")).await;
    expect(&r, 409, Some("validation.conflict"));
    assert_eq!(r.1["error"]["details"]["reason"], "ambiguous_origin", "{}", r.1);
    let to_child = t.p.admin.post(&format!("/v1/sessions/{sid}/events"), answer(Some(&child), "for B")).await;
    expect(&to_child, 201, None);
    // Only the primary waits on it now: a different answer naming it is its own.
    let to_primary = t.p.admin.post(&format!("/v1/sessions/{sid}/events"), answer(Some(&primary), "for A")).await;
    expect(&to_primary, 201, None);
    assert_eq!(to_primary.1["session_thread_id"], Value::Null);
    t.idle(&sid, &child, "agent.message").await;
    assert!(texts(&t.view(&sid, &child).await).iter().any(|x| x.contains("for B")));
    // A replay of the child's answer is the same event; a changed one conflicts.
    let again = t.p.admin.post(&format!("/v1/sessions/{sid}/events"), answer(Some(&child), "for B")).await;
    expect(&again, 200, None);
    assert_eq!(again.1["id"], to_child.1["id"]);
    expect(&t.p.admin.post(&format!("/v1/sessions/{sid}/events"), answer(Some(&child), "changed")).await, 409, Some("validation.conflict"));
}

#[tokio::test(flavor = "multi_thread")]
async fn archiving_the_session_terminates_its_threads_and_withdraws_their_approvals() {
    let dir = tempfile::tempdir().unwrap();
    let t = Team::start(dir.path()).await;
    // B's write asks for approval (only this Session's policy allows it).
    let ask = json!({"environment_id": t.p.env_id, "name": "ask-b", "rules": [
        {"subject": {"kind": "agent_definition", "id_glob": t.b}, "resource": {"kind": "tool", "id_glob": "write"}, "permission_glob": "invoke", "disposition": "require_approval"}
    ]});
    expect(&t.p.admin.post("/v1/action-policies", ask).await, 201, None);
    let sid = t.session().await;
    let child = t.spawned(&sid, r#"call write {"path":"x.txt","content":"x"}"#).await;
    let parked = t.idle(&sid, &child, "").await;
    assert_eq!(parked["stop_reason"]["type"], "requires_action", "{parked}");
    let pending = t.p.admin.get(&format!("/v1/action-approvals?status=pending&session_id={sid}")).await;
    let approval = pending.1["data"][0].clone();
    assert_eq!(approval["frozen"]["agent_id"], json!(t.b), "{approval}");

    expect(&t.p.admin.post(&format!("/v1/sessions/{sid}/archive"), json!({})).await, 200, None);
    let c = t.p.admin.get(&format!("/v1/sessions/{sid}/threads/{child}")).await.1;
    assert_eq!(c["status"], "terminated", "{c}");
    let record = t.p.admin.get(&format!("/v1/action-approvals/{}", id(&approval))).await.1;
    assert_eq!(record["status"], "expired", "nobody approves a call of an archived Session: {record}");
    let terminated = of_type(&events(&t.p.admin, &sid).await, "session.thread_status_terminated").len();
    assert_eq!(terminated, 1, "cross-posted");
}
