//! Session files through the public API: what the agent leaves in its
//! outputs folder is captured when the Run settles, within the limits of
//! api.md §10, each refusal recorded with its reason; windows of at most
//! 8 MiB concatenate to the exact file.
#![cfg(test)]

use checkfu_core::sha256_hex;
use checkfu_e2e::*;
use serde_json::{Value, json};

async fn turn(a: &Api, me: &str, sid: &str, command: &str) {
    let text = format!("call bash {}", json!({"command": command}));
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(me, &text)).await, 201, None);
    let s = settle(a, sid).await;
    assert_eq!(s["stop_reason"]["type"], "end_turn", "{s}");
}

async fn files(a: &Api, sid: &str) -> Vec<Value> {
    let mut out = vec![];
    let mut page = String::new();
    loop {
        let r = a.get(&format!("/v1/sessions/{sid}/files?limit=100{page}")).await;
        expect(&r, 200, None);
        out.extend(r.1["data"].as_array().unwrap().iter().cloned());
        match r.1["next_page"].as_str() {
            Some(p) => page = format!("&page={p}"),
            None => return out,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn outputs_are_captured_with_limits_and_read_back_in_windows() {
    if !checkfu_runner::sandbox::isolation_available() {
        checkfu_core::testing::skip("session files made by bash", "this host cannot isolate bash (bubblewrap)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let (a, me) = (&p.admin, p.admin_id.clone());
    let d = deploy(a, &p.env_id, json!({"tools": [{"type": "builtin", "name": "bash"}]})).await;
    let allow = json!({"environment_id": p.env_id, "name": "bash-ok", "rules": [
        {"subject": {"kind": "agent_definition", "id_glob": d.agent_id}, "resource": {"kind": "tool", "id_glob": "bash"}, "permission_glob": "invoke", "disposition": "allow"}
    ]});
    expect(&a.post("/v1/action-policies", allow).await, 201, None);
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    let sid = id(&s.1);
    assert!(s.1["sandbox_expires_at"].is_null(), "no sandbox before the first Run");

    // A 20 MiB output and a 65 MiB one (the profile's default disk lets
    // bash write it; the capture limit is 64 MiB).
    turn(
        a,
        &me,
        &sid,
        "mkdir -p outputs && head -c 20971520 /dev/urandom > outputs/big.bin && head -c 68157440 /dev/zero > outputs/huge.bin && echo done",
    )
    .await;
    let session = a.get(&format!("/v1/sessions/{sid}")).await;
    let expires = session.1["sandbox_expires_at"].as_str().expect("fixed at first materialisation").to_string();
    assert_eq!(session.1["sandbox"]["expires_at"], expires.as_str());
    let unenforced: Vec<&str> =
        session.1["sandbox"]["unenforced"].as_array().unwrap().iter().map(|u| u["field"].as_str().unwrap()).collect();
    assert!(unenforced.contains(&"image"), "the local plane reports what it does not enforce: {unenforced:?}");
    let listed = files(a, &sid).await;
    let by = |p: &str| listed.iter().find(|f| f["path"] == p).cloned().unwrap_or_else(|| panic!("{p} not listed: {listed:?}"));
    let big = by("big.bin");
    assert_eq!((big["status"].as_str(), big["size"].as_i64()), (Some("captured"), Some(20_971_520)));
    assert!(big["id"].as_str().unwrap().starts_with("file_"));
    let huge = by("huge.bin");
    assert_eq!((huge["status"].as_str(), huge["size"].as_i64()), (Some("too_large"), Some(68_157_440)));

    // Three windows (8 MiB at most each) concatenate to the exact file.
    let on_disk = std::fs::read(dir.path().join("workspaces").join(&sid).join("outputs/big.bin")).unwrap();
    let client = reqwest::Client::new();
    let mut joined = vec![];
    for w in 0..3u64 {
        let url = format!("{}/v1/sessions/{sid}/files/content?path=big.bin&offset={}&length=8388608", p.base, w * 8_388_608);
        let r = client.get(&url).bearer_auth(&a.key).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["checkfu-file-size"], "20971520");
        let body = r.bytes().await.unwrap();
        assert!(body.len() <= 8_388_608);
        joined.extend_from_slice(&body);
    }
    assert_eq!(joined.len(), 20_971_520);
    assert_eq!(sha256_hex(&joined), big["sha256"].as_str().unwrap());
    assert_eq!(sha256_hex(&joined), sha256_hex(&on_disk));
    let capped = client
        .get(format!("{}/v1/sessions/{sid}/files/content?path=big.bin&length=99999999", p.base))
        .bearer_auth(&a.key)
        .send()
        .await
        .unwrap();
    assert_eq!(capped.bytes().await.unwrap().len(), 8_388_608, "one response carries at most 8 MiB");
    let gone = a.get(&format!("/v1/sessions/{sid}/files/content?path=huge.bin")).await;
    expect(&gone, 404, Some("not_found"));
    expect(&a.get(&format!("/v1/sessions/{sid}/files/content?path=../etc/passwd")).await, 400, Some("validation.invalid"));

    // 64 more small files: with big.bin that is 65, and the 65th in path
    // order is over capacity.
    turn(a, &me, &sid, "for i in $(seq 1 64); do echo $i > outputs/f$i.txt; done; echo ok").await;
    let listed = files(a, &sid).await;
    let small: Vec<&Value> = listed.iter().filter(|f| f["path"].as_str().unwrap().starts_with('f')).collect();
    assert_eq!(small.len(), 64);
    let over: Vec<&str> = small.iter().filter(|f| f["status"] == "over_capacity").map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(over, vec!["f9.txt"], "the 65th file (in path order) is over capacity");
    assert_eq!(listed.iter().filter(|f| f["status"] == "captured").count(), 64);
    assert_eq!(a.get(&format!("/v1/sessions/{sid}")).await.1["sandbox_expires_at"], expires.as_str(), "activity never extends it");
    p.stop().await;
}
