//! The operator's Runner reconciler against kube's mock API service and a
//! real installation: runner pods paired through the public API, each with
//! a credential of its own in the operator's Secret (never the CR), removed
//! pods' Runners revoked, rotation, an installation or API error retried
//! with backoff, and every Runner revoked when the Runner goes.
#![cfg(test)]

use base64::Engine;
use checkfu_e2e::*;
use checkfu_operator::context::Context;
use checkfu_operator::installation::Paired;
use checkfu_operator::runners::{error_policy, reconcile};
use checkfu_operator_api::crd::{Runner, RunnerSpec, SecretKeyRef};
use checkfu_operator_api::mock_api::MockApi;
use checkfu_proto::runner::v1 as rp;
use checkfu_proto::runner::v1::runner_service_client::RunnerServiceClient;
use kube::api::{Api as Kube, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const NS: &str = "runners";

struct World {
    mock: MockApi,
    runners: Kube<Runner>,
    ctx: Arc<Context>,
}

fn world() -> World {
    let (mock, client) = MockApi::start();
    let installation = Arc::new(checkfu_node::operator::PublicApi::new().unwrap());
    let ctx = Arc::new(Context::new(client.clone(), "ghcr.io/checkfu/checkfu:test".into(), "op-0".into(), installation));
    World { mock, runners: Kube::namespaced(client, NS), ctx }
}

impl World {
    fn key_secret(&self, key: &str) {
        let data = base64::engine::general_purpose::STANDARD.encode(key);
        self.mock.put(
            "api/v1",
            NS,
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "install-key", "namespace": NS}, "data": {"api-key": data}}),
        );
    }

    async fn pass(&self, name: &str) -> Result<Action, checkfu_operator::error::Error> {
        let r = self.runners.get(name).await.unwrap();
        reconcile(Arc::new(r), self.ctx.clone()).await
    }

    /// The ReplicaSet's part: a runner pod of `rotation`.
    fn pod(&self, name: &str, rotation: &str) {
        self.mock.put(
            "api/v1",
            NS,
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS,
                "labels": {"checkfu.dev/runner": "edge", "app.kubernetes.io/component": "runner"},
                "annotations": {"checkfu.dev/rotation": rotation}}}),
        );
    }

    /// Pod name → pairing, as the operator's Secret holds them.
    fn held(&self) -> BTreeMap<String, Paired> {
        let s = self.mock.get("api/v1", NS, "secrets", "edge-credentials").expect("the credentials Secret");
        let data = s["data"].as_object().cloned().unwrap_or_default();
        data.into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| {
                let bytes = base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap()).unwrap();
                (k, serde_json::from_slice(&bytes).unwrap())
            })
            .collect()
    }

    fn runner(&self) -> Value {
        self.mock.get("apis/checkfu.dev/v1alpha1", NS, "runners", "edge").expect("runner")
    }

    fn reasons(&self) -> Vec<String> {
        self.mock.list("apis/events.k8s.io/v1", NS, "events").iter().map(|e| e["reason"].as_str().unwrap_or_default().to_string()).collect()
    }
}

/// Whether the installation takes this credential on the runner protocol.
async fn accepted(base: &str, credential: &str) -> bool {
    let channel = tonic::transport::Channel::from_shared(base.to_string()).unwrap().connect_lazy();
    let mut req = tonic::Request::new(rp::ClaimRequest { runner_id: String::new(), wait_ms: 50 });
    req.metadata_mut().insert("authorization", format!("Bearer {credential}").parse().unwrap());
    match RunnerServiceClient::new(channel).claim(req).await {
        Ok(_) => true,
        Err(s) if s.code() == tonic::Code::Unauthenticated => false,
        Err(s) => panic!("unexpected answer: {s:?}"),
    }
}

fn spec(p: &Platform, server: &str) -> RunnerSpec {
    RunnerSpec {
        server: server.into(),
        environment_id: p.env_id.clone(),
        pool: "edge".into(),
        replicas: 2,
        image: None,
        resources: None,
        credential_secret: SecretKeyRef { name: "install-key".into(), key: "api-key".into() },
        principal_id: p.admin_id.clone(),
        rotation: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn runner_pods_are_paired_revoked_when_removed_and_rotated() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let w = world();
    w.key_secret(&p.admin.key);
    w.runners.create(&PostParams::default(), &Runner::new("edge", spec(&p, &p.base))).await.unwrap();
    assert_eq!(w.pass("edge").await.unwrap(), Action::await_change(), "the finalizer first");
    w.pass("edge").await.unwrap();
    let d = w.mock.get("apis/apps/v1", NS, "deployments", "edge-runner").expect("the Deployment");
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["image"], "ghcr.io/checkfu/checkfu:test");
    let args: Vec<String> = serde_json::from_value(d["spec"]["template"]["spec"]["containers"][0]["args"].clone()).unwrap();
    assert!(args.windows(2).any(|a| a[0] == "--credential-file" && a[1] == "/var/run/checkfu/credentials/$(POD_NAME)"), "{args:?}");
    assert_eq!(d["metadata"]["ownerReferences"][0]["kind"], "Runner");
    assert!(w.held().is_empty());
    assert_eq!(w.runner()["status"]["pairedRunners"], 0);

    // Two pods appear: each is paired with a credential of its own.
    w.pod("edge-runner-a", "");
    w.pod("edge-runner-b", "");
    w.pass("edge").await.unwrap();
    let held = w.held();
    assert_eq!(held.keys().collect::<Vec<_>>(), ["edge-runner-a", "edge-runner-b"]);
    let (a, b) = (held["edge-runner-a"].clone(), held["edge-runner-b"].clone());
    assert_ne!(a.credential, b.credential);
    assert_eq!((a.pool.as_str(), a.environment_id.as_str()), ("edge", p.env_id.as_str()));
    for paired in [&a, &b] {
        assert!(accepted(&p.base, &paired.credential).await);
        let r = p.admin.get(&format!("/v1/runners/{}", paired.runner_id)).await;
        expect(&r, 200, None);
        assert_eq!(r.1["status"], "active");
    }
    assert_eq!(p.admin.get(&format!("/v1/runners/{}", a.runner_id)).await.1["name"], "edge-runner-a");
    let cr = w.runner().to_string();
    assert!(!cr.contains(&a.credential) && !cr.contains(&b.credential), "no credential in the CR or its status");
    assert_eq!(w.runner()["status"]["pairedRunners"], 2);
    assert_eq!(w.runner()["status"]["conditions"][0]["status"], "False", "not ready until the pods are");

    // The pods become ready: so does the Runner.
    let mut d = w.mock.get("apis/apps/v1", NS, "deployments", "edge-runner").unwrap();
    d["status"] = json!({"readyReplicas": 2, "replicas": 2});
    w.mock.put("apis/apps/v1", NS, "deployments", d);
    w.pass("edge").await.unwrap();
    let status = w.runner()["status"].clone();
    assert_eq!((status["readyReplicas"].clone(), status["pairedRunners"].clone()), (json!(2), json!(2)));
    assert_eq!(status["conditions"][0]["status"], "True");
    assert_eq!(status["observedGeneration"], 1);
    let listed = p.admin.get("/v1/runners").await.1["data"].as_array().unwrap().len();
    w.pass("edge").await.unwrap();
    assert_eq!(p.admin.get("/v1/runners").await.1["data"].as_array().unwrap().len(), listed, "idempotent: no pairing twice");

    // Scaled down: the removed pod's Runner is revoked and its key goes.
    w.mock.delete("api/v1", NS, "pods", "edge-runner-b");
    w.pass("edge").await.unwrap();
    assert_eq!(w.held().keys().collect::<Vec<_>>(), ["edge-runner-a"]);
    assert_eq!(p.admin.get(&format!("/v1/runners/{}", b.runner_id)).await.1["status"], "revoked");
    assert!(!accepted(&p.base, &b.credential).await, "a removed pod's credential stops working");
    assert!(accepted(&p.base, &a.credential).await);
    assert!(w.reasons().contains(&"Revoked".to_string()) && w.reasons().contains(&"Paired".to_string()));

    // Rotation: the template changes; new pods are paired afresh, and the
    // old ones' Runners are revoked as they go.
    w.runners.patch("edge", &PatchParams::default(), &Patch::Merge(json!({"spec": {"rotation": "2"}}))).await.unwrap();
    w.pass("edge").await.unwrap();
    let d = w.mock.get("apis/apps/v1", NS, "deployments", "edge-runner").unwrap();
    assert_eq!(d["spec"]["template"]["metadata"]["annotations"]["checkfu.dev/rotation"], "2");
    assert_eq!(w.held()["edge-runner-a"], a, "an old pod keeps its credential until it goes");
    w.mock.delete("api/v1", NS, "pods", "edge-runner-a");
    w.pod("edge-runner-c", "2");
    w.pass("edge").await.unwrap();
    let held = w.held();
    assert_eq!(held.keys().collect::<Vec<_>>(), ["edge-runner-c"]);
    assert!(!accepted(&p.base, &a.credential).await, "the rotated-out credential is revoked");
    assert!(accepted(&p.base, &held["edge-runner-c"].credential).await);
    assert_eq!(w.runner()["status"]["observedGeneration"], 2);

    // An API error is retried with backoff.
    let r = Arc::new(w.runners.get("edge").await.unwrap());
    w.mock.fail_next(1, 500);
    let e = reconcile(r.clone(), w.ctx.clone()).await.expect_err("the API failed");
    assert_eq!(error_policy(r.clone(), &e, w.ctx.clone()), Action::requeue(Duration::from_secs(1)));

    // Deleting the Runner revokes every Runner it paired.
    let c = held["edge-runner-c"].clone();
    w.runners.delete("edge", &DeleteParams::default()).await.unwrap();
    w.pass("edge").await.unwrap();
    assert!(!accepted(&p.base, &c.credential).await);
    assert!(w.mock.get("apis/checkfu.dev/v1alpha1", NS, "runners", "edge").is_none(), "the finalizer let it go");
    assert!(w.mock.get("apis/apps/v1", NS, "deployments", "edge-runner").is_none(), "its Deployment went with it");
    assert!(w.mock.get("api/v1", NS, "secrets", "edge-credentials").is_none(), "and its Secret");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_key_is_reported_and_an_unreachable_installation_retried() {
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let w = world();
    w.runners.create(&PostParams::default(), &Runner::new("edge", spec(&p, "http://127.0.0.1:9"))).await.unwrap();
    w.pass("edge").await.unwrap();
    assert_eq!(w.pass("edge").await.unwrap(), Action::requeue(Duration::from_secs(30)));
    let status = w.runner()["status"].clone();
    assert_eq!(status["conditions"][0]["reason"], "CredentialSecretMissing");
    assert!(status["conditions"][0]["message"].as_str().unwrap().contains("install-key"));

    w.key_secret(&p.admin.key);
    w.pod("edge-runner-a", "");
    let r = Arc::new(w.runners.get("edge").await.unwrap());
    let e = reconcile(r.clone(), w.ctx.clone()).await.expect_err("the installation is unreachable");
    assert!(matches!(e, checkfu_operator::error::Error::Installation(_)), "{e}");
    assert_eq!(error_policy(r.clone(), &e, w.ctx.clone()), Action::requeue(Duration::from_secs(1)));
    assert_eq!(error_policy(r, &e, w.ctx.clone()), Action::requeue(Duration::from_secs(2)));
    assert!(w.held().is_empty());

    // A key the installation refuses is an error, not a pairing.
    w.key_secret("ck_not_a_key");
    w.runners.patch("edge", &PatchParams::default(), &Patch::Merge(json!({"spec": {"server": p.base}}))).await.unwrap();
    let e = w.pass("edge").await.expect_err("refused");
    assert!(e.to_string().contains("401"), "{e}");
    assert!(w.held().is_empty());
    p.stop().await;
}

/// A runner pod's side: `checkfu runner --credential-file` waits for the
/// operator to write its pairing, then serves with it.
#[tokio::test(flavor = "multi_thread")]
async fn a_runner_pod_waits_for_its_credential_then_serves() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let p = Platform::start(dir.path()).await;
    let w = world();
    w.key_secret(&p.admin.key);
    w.runners.create(&PostParams::default(), &Runner::new("edge", spec(&p, &p.base))).await.unwrap();
    w.pass("edge").await.unwrap();
    w.pass("edge").await.unwrap();

    let file = dir.path().join("credentials").join("edge-runner-a");
    let mut child = std::process::Command::new(checkfu_e2e::procs::binary())
        .args(["runner", "--server", &p.base, "--pool", "edge", "--credential-file", file.to_str().unwrap()])
        .args(["--data-dir", dir.path().join("runner").to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("waiting for this Runner's credential"), "{first}");

    // The operator pairs the pod; the kubelet projects its key as a file.
    w.pod("edge-runner-a", "");
    w.pass("edge").await.unwrap();
    let paired = w.held()["edge-runner-a"].clone();
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, serde_json::to_vec(&paired).unwrap()).unwrap();
    let serving = lines.next().unwrap().unwrap();
    assert!(serving.contains(&paired.runner_id) && serving.contains("\"edge\""), "{serving}");
    let seen = async {
        for _ in 0..50 {
            let r = p.admin.get(&format!("/v1/runners/{}", paired.runner_id)).await;
            if !r.1["last_seen_at"].is_null() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    };
    assert!(seen.await, "the pod's runner reached the installation with its credential");
    let _ = child.kill();
    let _ = child.wait();
    p.stop().await;
}
