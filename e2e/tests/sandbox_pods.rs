//! The Kubernetes managed plane end to end, over kube's mock API service: a
//! Session's sandbox tools run in its sandbox pod. The runner role creates
//! the `Sandbox` (and its agent token's Secret) through the API server, the
//! operator's reconciler makes the pod, a stand-in kubelet starts the real
//! `checkfu sandbox-agent` for the pod, the tools run there, and when the
//! Session ends the Sandbox and its pod go.
#![cfg(test)]

use base64::Engine;
use checkfu_e2e::*;
use checkfu_operator::context::Context;
use checkfu_operator::installation::Unconfigured;
use checkfu_operator_api::crd::Sandbox;
use checkfu_operator_api::mock_api::MockApi;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const NS: &str = "sandboxes";

/// The operator and the kubelet, played in process: every 100 ms each
/// Sandbox is reconciled, and each new sandbox pod gets a real agent
/// process on a loopback address of its own.
struct Cluster {
    mock: MockApi,
    ctx: Arc<Context>,
    root: PathBuf,
    agents: Mutex<HashMap<String, Child>>,
    next: Mutex<u8>,
}

impl Cluster {
    async fn tick(&self) {
        for sb in self.mock.list("apis/checkfu.dev/v1alpha1", NS, "sandboxes") {
            if let Ok(sb) = serde_json::from_value::<Sandbox>(sb) {
                let _ = checkfu_operator::sandboxes::reconcile(Arc::new(sb), self.ctx.clone()).await;
            }
        }
        let pods = self.mock.list("api/v1", NS, "pods");
        for pod in &pods {
            let name = pod["metadata"]["name"].as_str().unwrap().to_string();
            if !pod["status"].is_null() || self.agents.lock().unwrap().contains_key(&name) {
                continue;
            }
            let secret = pod["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"].as_str().unwrap();
            let Some(s) = self.mock.get("api/v1", NS, "secrets", secret) else { continue };
            let token = base64::engine::general_purpose::STANDARD.decode(s["data"]["token"].as_str().unwrap()).unwrap();
            let ip = {
                let mut n = self.next.lock().unwrap();
                *n += 1;
                format!("127.0.70.{n}")
            };
            let ws = self.root.join(&name);
            let child = Command::new(checkfu_e2e::procs::binary())
                .args(["sandbox-agent", "--workspace", ws.to_str().unwrap(), "--listen", &format!("{ip}:7070")])
                .env("CHECKFU_SANDBOX_AGENT_TOKEN", String::from_utf8(token).unwrap())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            for _ in 0..100 {
                if std::net::TcpStream::connect((ip.as_str(), 7070)).is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            self.agents.lock().unwrap().insert(name.clone(), child);
            let mut ready = pod.clone();
            ready["status"] = json!({"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]});
            self.mock.put("api/v1", NS, "pods", ready);
        }
        // A deleted pod's agent stops.
        let live: Vec<String> = pods.iter().map(|p| p["metadata"]["name"].as_str().unwrap().to_string()).collect();
        self.agents.lock().unwrap().retain(|name, child| {
            let keep = live.contains(name);
            if !keep {
                let _ = child.kill();
                let _ = child.wait();
            }
            keep
        });
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, mut c) in self.agents.lock().unwrap().drain() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Deletes a Sandbox as `kubectl delete` would.
fn w_delete_sandbox(mock: &MockApi, name: &str) {
    mock.delete("apis/checkfu.dev/v1alpha1", NS, "sandboxes", name);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sessions_tools_run_in_its_sandbox_pod_which_goes_when_the_session_ends() {
    let dir = tempfile::tempdir().unwrap();
    let (mock, client) = MockApi::start();
    let mut opts = embedded_options(dir.path(), &Tuning::default());
    opts.runner.kubernetes = Some(checkfu_runner::kubernetes::KubeSettings {
        client: Some(client.clone()),
        ready_within: Duration::from_secs(30),
        sweep_every: Duration::from_millis(300),
        ..checkfu_runner::kubernetes::KubeSettings::new(NS)
    });
    let p = Platform::start_with_options(dir.path(), opts).await;
    let ctx = Arc::new(Context::new(client, "ghcr.io/checkfu/checkfu:test".into(), "op-0".into(), Arc::new(Unconfigured)));
    let cluster =
        Arc::new(Cluster { mock: mock.clone(), ctx, root: dir.path().join("pods"), agents: Mutex::default(), next: Mutex::new(0) });
    let ticking = {
        let c = cluster.clone();
        tokio::spawn(async move {
            loop {
                c.tick().await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let a = &p.admin;
    let tools =
        json!({"tools": [{"type": "builtin", "name": "bash"}, {"type": "builtin", "name": "write"}, {"type": "builtin", "name": "read"}]});
    let d = deploy_allowing_tools(a, &p.env_id, tools).await;
    let s = a.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    let sid = id(&s.1);
    let text = "call write {\"path\": \"notes/a.txt\", \"content\": \"from the pod\"}\ncall bash {\"command\": \"cat notes/a.txt && pwd && mkdir -p outputs && head -c 3000000 /dev/urandom > outputs/report.bin\"}";
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&p.admin_id, text)).await, 201, None);
    settle(a, &sid).await;

    let evs = events(a, &sid).await;
    let results: Vec<&Value> = evs.iter().filter(|e| e["type"] == "agent.tool_result").collect();
    assert_eq!(results.len(), 2, "{evs:#?}");
    assert_eq!(results[0]["payload"]["is_error"], false, "{:?}", results[0]);
    let out = results[1]["payload"]["content"].to_string();
    let name = checkfu_runner::kubernetes::sandbox_name(&sid);
    let pod = format!("sandbox-{name}");
    assert!(out.contains("from the pod") && out.contains(&pod), "bash ran in the pod's workspace: {out}");
    assert!(dir.path().join("pods").join(&pod).join("notes/a.txt").exists(), "the file is in the pod's workspace");
    assert!(!dir.path().join("workspaces").join(&sid).exists(), "nothing ran on the runner's own filesystem");

    // The Sandbox carries the pinned profile's image and the sandbox's expiry.
    let sb = mock.get("apis/checkfu.dev/v1alpha1", NS, "sandboxes", &name).expect("the Sandbox");
    assert_eq!(sb["spec"]["image"], "debian:12");
    assert_eq!(sb["spec"]["sessionId"], sid.as_str());
    assert_eq!(sb["status"]["phase"], "Ready");
    let secret = mock.get("api/v1", NS, "secrets", &format!("{name}-agent")).expect("the token Secret");
    assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], sb["metadata"]["uid"], "the token goes with the Sandbox");
    let token =
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(secret["data"]["token"].as_str().unwrap()).unwrap()).unwrap();
    assert!(!serde_json::to_string(&evs).unwrap().contains(&token), "the agent token is in no event");
    assert!(!sb.to_string().contains(&token), "nor in the Sandbox");

    // The pod enforces the image and the resources: nothing is unenforced.
    let view = a.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(view.1["sandbox"]["unenforced"], json!([]), "{}", view.1);

    // Its outputs became the Session's files, the bytes read from the pod.
    let listed = a.get(&format!("/v1/sessions/{sid}/files")).await;
    expect(&listed, 200, None);
    let report = listed.1["data"].as_array().unwrap().iter().find(|f| f["path"] == "report.bin").cloned().expect("report.bin captured");
    assert_eq!((report["status"].as_str(), report["size"].as_i64()), (Some("captured"), Some(3_000_000)));
    let in_pod = std::fs::read(dir.path().join("pods").join(&pod).join("outputs/report.bin")).unwrap();
    let got = reqwest::Client::new()
        .get(format!("{}/v1/sessions/{sid}/files/content?path=report.bin", p.base))
        .bearer_auth(&a.key)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert!(got.as_ref() == in_pod.as_slice(), "the captured file is the pod's, byte for byte");

    // A second turn uses the same pod.
    expect(&a.post(&format!("/v1/sessions/{sid}/events"), message(&p.admin_id, "call read {\"path\": \"notes/a.txt\"}")).await, 201, None);
    settle(a, &sid).await;
    let evs = events(a, &sid).await;
    let last = evs.iter().rev().find(|e| e["type"] == "agent.tool_result").unwrap();
    assert!(last["payload"]["content"].to_string().contains("from the pod"));
    assert_eq!(cluster.agents.lock().unwrap().len(), 1, "one pod for the Session");

    // The pod and its workspace are lost (the Sandbox deleted behind the
    // runner's back): the next turn gets a new pod, restored from the
    // Session's snapshot.
    w_delete_sandbox(&mock, &name);
    for _ in 0..100 {
        if mock.get("apis/checkfu.dev/v1alpha1", NS, "sandboxes", &name).is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(mock.get("api/v1", NS, "pods", &pod).is_none(), "the old pod went");
    expect(
        &a.post(
            &format!("/v1/sessions/{sid}/events"),
            message(&p.admin_id, "call bash {\"command\": \"cat notes/a.txt; wc -c < outputs/report.bin\"}"),
        )
        .await,
        201,
        None,
    );
    settle(a, &sid).await;
    let evs = events(a, &sid).await;
    let last = evs.iter().rev().find(|e| e["type"] == "agent.tool_result").unwrap();
    let out = last["payload"]["content"].to_string();
    assert!(out.contains("from the pod") && out.contains("3000000"), "the new pod's workspace was restored: {out}");
    let sb2 = mock.get("apis/checkfu.dev/v1alpha1", NS, "sandboxes", &name).expect("a new Sandbox");
    assert_ne!(sb2["metadata"]["uid"], sb["metadata"]["uid"]);

    // The Session ends: its Sandbox, pod and token go.
    expect(&a.post(&format!("/v1/sessions/{sid}/archive"), json!({})).await, 200, None);
    let mut gone = false;
    for _ in 0..100 {
        if mock.get("apis/checkfu.dev/v1alpha1", NS, "sandboxes", &name).is_none() && mock.get("api/v1", NS, "pods", &pod).is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the Sandbox and its pod went when the Session ended");
    assert!(mock.get("api/v1", NS, "secrets", &format!("{name}-agent")).is_none());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(cluster.agents.lock().unwrap().is_empty(), "the pod's agent stopped");
    ticking.abort();
    p.stop().await;
}

/// `EndedSandboxes` serves the managed runner inside the mesh only: the
/// public port does not forward it.
#[tokio::test(flavor = "multi_thread")]
async fn which_sandboxes_ended_is_asked_inside_the_mesh_only() {
    use checkfu_proto::runner::v1 as rp;
    use checkfu_proto::runner::v1::runner_service_client::RunnerServiceClient;
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let d = deploy(&p.admin, &p.env_id, json!({})).await;
    let s = p.admin.post("/v1/sessions", json!({"agent_deployment_id": d.deployment_id})).await;
    let sid = id(&s.1);
    let ask = rp::EndedSandboxesRequest { session_ids: vec![sid.clone(), "sess_00000000000000000000000000".into(), "not an id".into()] };

    let public = tonic::transport::Channel::from_shared(p.base.clone()).unwrap().connect_lazy();
    let refused = RunnerServiceClient::new(public).ended_sandboxes(ask.clone()).await.expect_err("not on the public port");
    assert_eq!(refused.code(), tonic::Code::Unimplemented);

    let mut mesh = RunnerServiceClient::new(p.internal(checkfu_node::Role::Runner, checkfu_node::Role::Runner));
    let ended = mesh.ended_sandboxes(ask.clone()).await.expect("the managed runner asks").into_inner().ended;
    // A Session whose sandbox never materialised has none to keep; the
    // unknown and malformed ids are ended too.
    assert_eq!(ended.len(), 3, "{ended:?}");
    let too_many = rp::EndedSandboxesRequest { session_ids: vec![sid.clone(); 501] };
    assert_eq!(mesh.ended_sandboxes(too_many).await.expect_err("bounded").code(), tonic::Code::InvalidArgument);
    p.stop().await;
}
