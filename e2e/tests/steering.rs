//! A steering message is never lost: whatever arrives before a model call
//! is either in that call's context or starts a later call.
#![cfg(test)]

use checkfu_e2e::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

fn text(e: &Value) -> String {
    e["payload"]["content"][0]["text"].as_str().unwrap_or_default().to_string()
}

/// Whether the Session's last user.message has an answer after it.
fn last_message_answered(evs: &[Value]) -> Result<(), String> {
    let Some(last) = evs.iter().rposition(|e| e["type"] == "user.message") else { return Ok(()) };
    let want = format!("echo: {}", text(&evs[last]));
    if evs[last..].iter().any(|e| e["type"] == "agent.message" && text(e) == want) {
        Ok(())
    } else {
        Err(format!("seq {} ({:?}) was never answered", evs[last]["seq"], text(&evs[last])))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_sent_while_the_runner_is_about_to_call_the_model_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let hold = Arc::new(checkfu_runner::ModelHold::default());
    let p = Platform::start_timed(dir.path(), Tuning { hold_before_model: Some(hold.clone()), ..Default::default() }).await;
    let a = &p.admin;
    let me = p.admin_id.clone();
    let d = deploy(a, &p.env_id, json!({})).await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    let sid = id(&s.1);

    // The runner reads the log for "first", then stops before the model call.
    hold.arm();
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "first")).await, 201, None);
    tokio::time::timeout(Duration::from_secs(10), hold.reached.notified()).await.expect("the runner reached the model call");
    // The steering message lands after the read, before the call.
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&me, "steer")).await, 201, None);
    hold.release.notify_one();

    let done = settle(a, &sid).await;
    assert_eq!(done["stop_reason"]["type"], "end_turn");
    let evs = events(a, &sid).await;
    assert_gapless(&evs);
    last_message_answered(&evs).unwrap();
    let answers: Vec<String> = evs.iter().filter(|e| e["type"] == "agent.message").map(text).collect();
    assert_eq!(answers, vec!["echo: first", "echo: steer"], "each message answered once, in order");
    let starts: Vec<&Value> = evs.iter().filter(|e| e["type"] == "span.model_request_start").collect();
    assert!(starts[0]["payload"]["context_seq"].as_i64().is_some(), "the start span says which log position the call saw");
    p.stop().await;
}

/// The load of the report: 16 clients posting messages to 100 Sessions at
/// once; every Session's last message is answered.
#[tokio::test(flavor = "multi_thread")]
async fn under_load_every_sessions_last_message_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start_timed(dir.path(), Tuning { rate_limit_per_second: 1_000_000, ..Default::default() }).await;
    let a = p.admin.clone();
    let me = p.admin_id.clone();
    let d = deploy(&a, &p.env_id, json!({})).await;
    let mut sessions = vec![];
    for _ in 0..100 {
        sessions.push(id(&a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await.1));
    }
    let sessions = Arc::new(sessions);
    let mut clients = vec![];
    for c in 0..16usize {
        let (a, me, sessions) = (a.clone(), me.clone(), sessions.clone());
        clients.push(tokio::spawn(async move {
            for i in 0..25usize {
                let sid = &sessions[(c * 37 + i * 11) % sessions.len()];
                let r = a.post(&format!("/v1/sessions/{sid}/events"), message(&me, &format!("c{c} m{i}"))).await;
                assert!(r.0.as_u16() == 201, "{} {}", r.0, r.1);
            }
        }));
    }
    for c in clients {
        c.await.unwrap();
    }
    let mut lost = vec![];
    for sid in sessions.iter() {
        settle(&a, sid).await;
        let evs = events(&a, sid).await;
        assert_gapless(&evs);
        if let Err(e) = last_message_answered(&evs) {
            lost.push(format!("{sid}: {e}"));
        }
    }
    assert!(lost.is_empty(), "{} Sessions ended with their last message unanswered: {lost:?}", lost.len());
    p.stop().await;
}
