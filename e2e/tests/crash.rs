//! Nothing answered is lost in a crash: `checkfu up` is killed with SIGKILL
//! while clients post events, restarted on the same data directory, and
//! every event that was answered 201 is there with its seq, with no gap.
#![cfg(test)]

use checkfu_e2e::procs::up;
use checkfu_e2e::*;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread")]
async fn a_sigkill_loses_no_answered_event() {
    let dir = tempfile::tempdir().unwrap();
    let (mut proc, base) = up(dir.path());
    wait_ready(&base).await;
    let key = std::fs::read_to_string(dir.path().join("admin.key")).unwrap().trim().to_string();
    let a = Api::new(&base, &key);
    let env = id(&a.get("/v1/environments").await.1["data"][0]);
    let me = a.get("/v1/principals").await.1["data"][0]["id"].as_str().unwrap().to_string();
    let d = deploy(&a, &env, json!({})).await;
    let mut sessions = vec![];
    for _ in 0..8 {
        sessions.push(id(&a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await.1));
    }

    // (session, seq, event id) of every 201.
    let answered: Arc<Mutex<Vec<(String, i64, String)>>> = Arc::default();
    let mut clients = vec![];
    for (c, sid) in sessions.iter().enumerate() {
        let (answered, sid, me) = (answered.clone(), sid.clone(), me.clone());
        let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
        let url = format!("{base}/v1/sessions/{sid}/events");
        let key = key.clone();
        clients.push(tokio::spawn(async move {
            for i in 0..10_000 {
                let body = message(&me, &format!("c{c} m{i}"));
                let Ok(r) = client.post(&url).bearer_auth(&key).json(&body).send().await else { return };
                if r.status().as_u16() != 201 {
                    // 409 while a Run is mid-settle is fine; anything after the kill ends the client.
                    if r.status().is_server_error() {
                        return;
                    }
                    continue;
                }
                let Ok(v) = r.json::<serde_json::Value>().await else { return };
                answered.lock().unwrap().push((sid.clone(), v["seq"].as_i64().unwrap(), v["id"].as_str().unwrap().to_string()));
            }
        }));
    }
    // Let them write for a while, then kill the process mid-stream.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before_kill = answered.lock().unwrap().len();
    proc.kill_hard();
    for c in clients {
        let _ = c.await;
    }
    let answered = answered.lock().unwrap().clone();
    assert!(before_kill > 20, "the clients were writing when the process died ({before_kill} answered)");

    let (_proc, base) = up(dir.path());
    wait_ready(&base).await;
    let a = Api::new(&base, &key);
    for sid in &sessions {
        let evs = events(&a, sid).await;
        assert_gapless(&evs);
        for (_, seq, evt) in answered.iter().filter(|(s, _, _)| s == sid) {
            let e =
                evs.iter().find(|e| e["seq"] == *seq).unwrap_or_else(|| panic!("{sid}: seq {seq} ({evt}) was answered 201 and then lost"));
            assert_eq!(e["id"], evt.as_str(), "{sid}: seq {seq} holds another event after the crash");
        }
    }
    println!("{} answered events across {} Sessions all survived the SIGKILL", answered.len(), sessions.len());
}
