//! Delivery screening through the public API (api.md §18.8): an
//! Automation's children hold every `agent.message` for one evaluation by a
//! qualified screen; `message.screened` is stored first, and the message
//! only when released. Withheld text is nowhere — not in the log, the
//! stream, the trace — and no preview streams in a screened Session.
//! Acceptance check 19 of §18.13, and the graph's `deliveryScreen`.
#![cfg(test)]

use checkfu_e2e::automation::*;
use checkfu_e2e::sse::Stream;
use checkfu_e2e::*;
use serde_json::{Value, json};
use std::time::Duration;

/// Records that the scripted model may screen deliveries for 30 days.
async fn qualify_screens(f: &Fixture) {
    let now = checkfu_core::time::now_ms();
    let body = json!({"provider": "scripted", "model": "scripted-1", "purpose": "delivery_screen", "evidence": "the screening suite, 2026-12",
        "reviewed_at": checkfu_core::time::rfc3339(now - 3_600_000), "expires_at": checkfu_core::time::rfc3339(now + 30 * 86_400_000)});
    expect(&f.p.admin.post("/v1/evaluator-qualifications", body).await, 201, None);
}

/// A0 (`Summarize {{event.title}}` on dep_a) screened by `instructions`.
fn screened_a0(f: &Fixture, instructions: &str, on_failure: Option<&str>) -> Value {
    let mut t = a0(&f.d.deployment_id);
    t["input"] = json!({"delivery_screen": {"model_routing_profile_id": f.d.routing_profile_id, "instructions": instructions}});
    if let Some(o) = on_failure {
        t["input"]["delivery_screen"]["on_failure"] = json!(o);
    }
    t
}

/// Fires A0-shaped `automation` with `{title}` and waits for it to settle:
/// the firing and its one child's events.
async fn fire_title(f: &Fixture, automation: &str, title: &str) -> (Value, String, Vec<Value>) {
    let a = &f.p.admin;
    let fired = a.post(&format!("/v1/automations/{automation}/fire"), json!({"event": {"title": title}})).await;
    expect(&fired, 201, None);
    let done = settled(a, &id(&fired.1)).await;
    let child = done["child_session_ids"][0].as_str().unwrap_or_else(|| panic!("one child: {done}")).to_string();
    settle(a, &child).await;
    let evs = events(a, &child).await;
    assert_gapless(&evs);
    (done, child, evs)
}

fn of_type<'a>(evs: &'a [Value], t: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == t).collect()
}

/// Token usage the child's own model calls and screens reported.
fn reported_tokens(evs: &[Value]) -> i64 {
    let calls: i64 =
        of_type(evs, "span.model_request_end").iter().map(|e| e["payload"]["model_usage"]["input_tokens"].as_i64().unwrap()).sum();
    let screens: i64 = of_type(evs, "message.screened").iter().map(|e| e["payload"]["usage"]["input_tokens"].as_i64().unwrap()).sum();
    calls + screens
}

#[tokio::test(flavor = "multi_thread")]
async fn acceptance_19_a_screen_withholds_what_it_blocks_and_releases_the_rest() {
    let f = fixture().await;
    let a = &f.p.admin;
    let mrp = f.d.routing_profile_id.clone();

    // Unqualified: saved paused, `evaluators` naming the purpose.
    let r = create(&f, "screened", screened_a0(&f, "block: X1", None)).await;
    expect(&r, 201, None);
    assert_eq!(r.1["target"]["input"]["delivery_screen"]["on_failure"], "fail_closed", "{}", r.1);
    assert_eq!(r.1["status"], "paused", "{}", r.1);
    let reason = check(&r.1["readiness"], "evaluators")["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("delivery_screen") && reason.contains(&mrp), "{reason}");
    qualify_screens(&f).await;
    let auto = id(&r.1);
    let resumed = a.post(&format!("/v1/automations/{auto}/resume"), json!({})).await;
    assert_eq!(resumed.1["status"], "active", "{}", resumed.1);

    // Blocked: the verdict stands in for the message; the firing fails.
    let (done, child, evs) = fire_title(&f, &auto, "X1").await;
    assert_eq!((done["state"].clone(), done["error"]["reason"].clone()), (json!("failed"), json!("delivery_blocked")), "{done}");
    let screened = of_type(&evs, "message.screened");
    assert_eq!(screened.len(), 1, "{evs:?}");
    let verdict = &screened[0]["payload"];
    assert_eq!((verdict["verdict"].clone(), verdict["released"].clone()), (json!("blocked"), json!(false)), "{verdict}");
    assert_eq!(verdict["content_sha256"], checkfu_core::sha256_hex("echo: Summarize X1"));
    assert!(verdict["usage"]["input_tokens"].as_i64().unwrap() > 0, "{verdict}");
    assert_eq!(screened[0]["run_id"], of_type(&evs, "run.created")[0]["run_id"], "the Run's verdict");
    assert!(of_type(&evs, "agent.message").is_empty(), "withheld");
    let all = serde_json::to_string(&evs).unwrap();
    assert!(!all.contains("echo: Summarize X1"), "the withheld text is stored nowhere in the log");
    let session = a.get(&format!("/v1/sessions/{child}")).await.1;
    assert_eq!(session["delivery_screen"]["instructions"], "block: X1", "{session}");
    assert_eq!(session["usage"]["input_tokens"].as_i64().unwrap(), reported_tokens(&evs), "the screen's cost joins the Session's");
    assert_eq!(done["usage"]["input_tokens"], session["usage"]["input_tokens"], "and the firing's");
    let trace = a.get(&format!("/v1/automation-firings/{}/trace", id(&done))).await.1;
    assert_eq!(
        trace["receipts"]["screens"],
        json!([{"step_id": null, "session_id": child, "event_id": screened[0]["id"], "seq": screened[0]["seq"], "verdict": "blocked",
            "released": false, "content_sha256": verdict["content_sha256"], "at": screened[0]["created_at"]}]),
        "{trace}"
    );
    assert_eq!(trace["evidence"]["complete"], true);
    assert!(!trace.to_string().contains("Summarize X1"), "no content in the trace");
    let tree = f.cli(&["automation", "trace", &id(&done)]);
    assert!(tree.contains(&format!("screen {} in {child}  blocked, withheld", screened[0]["id"].as_str().unwrap())), "{tree}");

    // Allowed: the verdict, then the message right after it.
    let (done, _, evs) = fire_title(&f, &auto, "R").await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let at = evs.iter().position(|e| e["type"] == "message.screened").unwrap();
    assert_eq!(evs[at]["payload"]["verdict"], "allowed");
    assert_eq!(evs[at]["payload"]["released"], true);
    assert_eq!(evs[at + 1]["type"], "agent.message", "{evs:?}");
    assert_eq!(evs[at + 1]["payload"]["content"][0]["text"], "echo: Summarize R");

    // A screen that fails withholds, unless it fails open.
    let closed = id(&create(&f, "closed", screened_a0(&f, "error: R", None)).await.1);
    let (done, _, evs) = fire_title(&f, &closed, "R").await;
    assert_eq!(done["error"]["reason"], "delivery_blocked", "{done}");
    let v = &of_type(&evs, "message.screened")[0]["payload"];
    assert_eq!((v["verdict"].clone(), v["released"].clone(), v["usage"]["input_tokens"].clone()), (json!("error"), json!(false), json!(0)));
    assert!(of_type(&evs, "agent.message").is_empty());
    let open = id(&create(&f, "open", screened_a0(&f, "error: R", Some("fail_open"))).await.1);
    let (done, _, evs) = fire_title(&f, &open, "R").await;
    assert_eq!(done["state"], "succeeded", "{done}");
    let v = &of_type(&evs, "message.screened")[0]["payload"];
    assert_eq!((v["verdict"].clone(), v["released"].clone()), (json!("error"), json!(true)));
    assert_eq!(of_type(&evs, "agent.message").len(), 1, "released under fail_open");

    // A Session made elsewhere keeps how it delivers.
    let s = idle_session(a, &f.svc, &f.d.deployment_id, json!({})).await;
    let mut continued = screened_a0(&f, "block: X1", None);
    continued["session_target"] = json!({"mode": "continue_selected", "session": s});
    let r = create(&f, "continued", continued).await;
    expect(&r, 400, Some("validation.invalid"));
    assert_eq!(r.1["error"]["details"]["reason"], "session_target_conflict", "{}", r.1);
    // And a screen is checked as it is written.
    let mut bad = screened_a0(&f, " ", None);
    bad["input"]["delivery_screen"]["tier"] = json!("huge");
    expect(&create(&f, "bad", bad).await, 400, Some("validation.invalid"));
    f.p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_screened_step_streams_no_preview_and_a_withheld_answer_rejects_the_step() {
    let f = fixture().await;
    let a = &f.p.admin;
    qualify_screens(&f).await;
    let c = deploy(a, &f.p.env_id, json!({"tools": [{"type": "custom", "name": "lookup", "read_only": true}]})).await;
    grant(&f.p, &f.svc, &c.agent_id).await;
    let screen = json!({"modelRoutingProfileId": f.d.routing_profile_id, "instructions": "block: secret"});
    let nodes = json!([
        hook_node(),
        {"kind": "step_agent", "id": "agent", "agent": c.deployment_id, "prompt": "call lookup {}", "deliveryScreen": screen},
        {"kind": "step_agent", "id": "after", "agent": f.d.deployment_id, "prompt": "next"}
    ]);
    let edges = json!([graph_edge("starts", "hook", "agent"), graph_edge("then", "agent", "after")]);

    // Not with a continued Session.
    let mut conflicting = nodes.clone();
    conflicting[1]["sessionTarget"] =
        json!({"mode": "continue_selected", "session": idle_session(a, &f.svc, &f.d.deployment_id, json!({})).await});
    let g = save_graph(&f, graph_document(&f, "conflict", conflicting, edges.clone())).await;
    let r = a.post(&format!("/v1/automation-graphs/{g}/plan"), json!({"revision": 1})).await;
    assert!(r.1.to_string().contains("session_target_conflict"), "{}", r.1);

    let (auto, secret) = apply_graph(&f, graph_document(&f, "screened", nodes, edges)).await;
    assert_eq!(auto["status"], "active", "{auto}");
    let firing = fire_signed(&f, auto["id"].as_str().unwrap(), &secret, json!({"id": "1"})).await;
    let mut child = None;
    for _ in 0..100 {
        let t = a.get(&format!("/v1/automation-firings/{firing}")).await.1;
        if let Some(c) = firing_step(&t, "agent")["child_session_id"].as_str() {
            child = Some(c.to_string());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let child = child.expect("the step's child");
    let parked = settle(a, &child).await;
    assert_eq!(parked["stop_reason"]["type"], "requires_action");

    // Watch the answer's turn with previews asked for: none come.
    let path = format!("/v1/sessions/{child}/events/stream?event_deltas=agent.message,agent.thinking");
    let mut stream = Stream::open(&f.p.base, &a.key, &path, parked["last_seq"].as_i64()).await;
    answer_lookup(a, &f.svc, &child, "the secret").await;
    let frames = stream.until(Duration::from_secs(15), |fr| fr.event == "session.status_idle").await;
    let kinds: Vec<&str> = frames.iter().map(|fr| fr.event.as_str()).collect();
    assert!(kinds.contains(&"message.screened"), "the verdict streams: {kinds:?}");
    assert!(!frames.iter().any(|fr| fr.event == "event_start" || fr.event == "event_delta"), "no preview in a screened Session");
    assert!(!frames.iter().any(|fr| fr.event == "agent.message"), "withheld");

    let done = settled(a, &firing).await;
    assert_eq!(done["state"], "succeeded", "a rejection is a verdict, not a failure: {done}");
    let step = firing_step(&done, "agent");
    assert_eq!(
        (step["outcome"]["kind"].clone(), step["outcome"]["reason"].clone()),
        (json!("rejected"), json!("delivery_blocked")),
        "{done}"
    );
    assert_eq!(firing_step(&done, "after")["outcome"]["kind"], "skipped", "{done}");
    let trace = a.get(&format!("/v1/automation-firings/{firing}/trace")).await.1;
    let screens = trace["receipts"]["screens"].as_array().unwrap();
    assert_eq!(screens.last().unwrap()["step_id"], "agent", "{trace}");
    assert_eq!(screens.last().unwrap()["verdict"], "blocked", "{trace}");
    assert!(!trace.to_string().contains("the secret"), "{trace}");
    f.p.stop().await;
}
