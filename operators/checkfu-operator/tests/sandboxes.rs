//! The Sandbox reconciler against kube's mock API service: create, update,
//! drift repair, expiry, finalizer cleanup, an API error with backoff,
//! events and metrics.
#![cfg(test)]

use checkfu_operator::context::{Context, FINALIZER};
use checkfu_operator::installation::Unconfigured;
use checkfu_operator::sandboxes::{error_policy, reconcile};
use checkfu_operator_api::crd::{Resources, Sandbox, SandboxSpec};
use checkfu_operator_api::mock_api::MockApi;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const NS: &str = "agents";

struct World {
    mock: MockApi,
    api: Api<Sandbox>,
    ctx: Arc<Context>,
}

fn world() -> World {
    let (mock, client) = MockApi::start();
    let ctx = Arc::new(Context::new(client.clone(), "ghcr.io/checkfu/checkfu:test".into(), "op-0".into(), Arc::new(Unconfigured)));
    World { mock, api: Api::namespaced(client, NS), ctx }
}

fn spec(expires_in: i64) -> SandboxSpec {
    SandboxSpec {
        session_id: "sess_01".into(),
        environment_id: "env_1".into(),
        image: "python:3.12-slim".into(),
        resources: Resources { cpu_millis: 500, memory_mib: 512, disk_mib: 1024 },
        expires_at: (Timestamp::now() + SignedDuration::from_secs(expires_in)).to_string(),
        storage_class: None,
        agent_secret: "sess-01-agent".into(),
        platform_namespace: None,
    }
}

impl World {
    async fn create(&self, name: &str, spec: SandboxSpec) {
        self.api.create(&PostParams::default(), &Sandbox::new(name, spec)).await.expect("create");
    }

    /// One pass over the Sandbox as it now is.
    async fn pass(&self, name: &str) -> Result<Action, checkfu_operator::error::Error> {
        let sb = self.api.get(name).await.expect("get");
        reconcile(Arc::new(sb), self.ctx.clone()).await
    }

    fn child(&self, plural: &str, name: &str) -> Option<Value> {
        let prefix = match plural {
            "networkpolicies" => "apis/networking.k8s.io/v1",
            _ => "api/v1",
        };
        self.mock.get(prefix, NS, plural, &format!("sandbox-{name}"))
    }

    fn sandbox(&self, name: &str) -> Option<Value> {
        self.mock.get("apis/checkfu.dev/v1alpha1", NS, "sandboxes", name)
    }

    fn reasons(&self) -> Vec<String> {
        self.mock.list("apis/events.k8s.io/v1", NS, "events").iter().map(|e| e["reason"].as_str().unwrap_or_default().to_string()).collect()
    }

    /// The kubelet's part: the pod runs and is ready at `ip`.
    fn pod_ready(&self, name: &str, ip: &str) {
        let mut pod = self.child("pods", name).expect("pod");
        pod["status"] = json!({"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]});
        self.mock.put("api/v1", NS, "pods", pod);
    }
}

#[tokio::test]
async fn a_new_sandbox_gets_its_pod_volume_and_policy_then_reports_ready() {
    let w = world();
    w.create("s1", spec(3600)).await;
    assert_eq!(w.pass("s1").await.expect("first pass"), Action::await_change(), "the first pass adds the finalizer");
    assert_eq!(w.sandbox("s1").expect("sandbox")["metadata"]["finalizers"], json!([FINALIZER]));
    assert!(w.child("pods", "s1").is_none(), "nothing before the finalizer holds");

    let action = w.pass("s1").await.expect("second pass");
    assert_eq!(action, Action::requeue(Duration::from_secs(5)), "pending: looked at again soon");
    let pod = w.child("pods", "s1").expect("pod");
    assert_eq!(pod["spec"]["containers"][0]["image"], "python:3.12-slim");
    assert_eq!(pod["spec"]["initContainers"][0]["image"], "ghcr.io/checkfu/checkfu:test");
    let uid = w.sandbox("s1").expect("sandbox")["metadata"]["uid"].clone();
    for plural in ["pods", "persistentvolumeclaims", "networkpolicies"] {
        let c = w.child(plural, "s1").unwrap_or_else(|| panic!("{plural}"));
        assert_eq!(c["metadata"]["ownerReferences"][0]["uid"], uid, "{plural} is owned by the Sandbox");
        assert_eq!(c["metadata"]["ownerReferences"][0]["controller"], true);
    }
    let status = &w.sandbox("s1").expect("sandbox")["status"];
    assert_eq!(status["phase"], "Pending");
    assert_eq!(status["observedGeneration"], 1);
    assert_eq!(status["conditions"][0]["type"], "Ready");
    assert_eq!(status["conditions"][0]["status"], "False");

    w.pod_ready("s1", "10.1.2.3");
    let action = w.pass("s1").await.expect("third pass");
    assert_eq!(action, Action::requeue(Duration::from_secs(300)));
    let status = &w.sandbox("s1").expect("sandbox")["status"];
    assert_eq!(status["phase"], "Ready");
    assert_eq!(status["podPhase"], "Running");
    assert_eq!(status["address"], "10.1.2.3:7070");
    assert_eq!(status["conditions"][0]["status"], "True");
    let reasons = w.reasons();
    assert!(reasons.contains(&"PodCreated".to_string()) && reasons.contains(&"Ready".to_string()), "{reasons:?}");

    // Idempotent: another pass changes nothing and records nothing.
    let before = (w.sandbox("s1"), w.child("pods", "s1"), w.reasons().len());
    w.pass("s1").await.expect("fourth pass");
    let after = (w.sandbox("s1"), w.child("pods", "s1"), w.reasons().len());
    let strip = |v: Option<Value>| {
        v.map(|mut v| {
            v["metadata"]["resourceVersion"] = Value::Null;
            v
        })
    };
    assert_eq!((strip(before.0), strip(before.1), before.2), (strip(after.0), strip(after.1), after.2));
}

#[tokio::test]
async fn deleted_children_come_back_and_a_changed_image_replaces_the_pod() {
    let w = world();
    w.create("s2", spec(3600)).await;
    w.pass("s2").await.expect("finalizer");
    w.pass("s2").await.expect("children");

    // Drift: someone deletes the pod and the network policy.
    w.mock.delete("api/v1", NS, "pods", "sandbox-s2");
    w.mock.delete("apis/networking.k8s.io/v1", NS, "networkpolicies", "sandbox-s2");
    assert!(w.child("pods", "s2").is_none());
    w.pass("s2").await.expect("repair");
    assert!(w.child("pods", "s2").is_some(), "the pod is back");
    let np = w.child("networkpolicies", "s2").expect("the network policy is back");
    assert_eq!(np["spec"]["egress"][0]["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"], "capability-gateway");

    // An edited policy is put back as it should be.
    let mut open = np.clone();
    open["spec"]["egress"] = json!([{}]);
    w.mock.put("apis/networking.k8s.io/v1", NS, "networkpolicies", open);
    w.pass("s2").await.expect("repair");
    assert_eq!(w.child("networkpolicies", "s2").expect("np")["spec"]["egress"], np["spec"]["egress"]);

    // Update: a longer expiry keeps the pod; a new image replaces it.
    let pod_uid = w.child("pods", "s2").expect("pod")["metadata"]["uid"].clone();
    let later = (Timestamp::now() + SignedDuration::from_secs(7200)).to_string();
    w.api.patch("s2", &PatchParams::default(), &Patch::Merge(json!({"spec": {"expiresAt": later}}))).await.expect("patch");
    w.pass("s2").await.expect("update");
    assert_eq!(w.child("pods", "s2").expect("pod")["metadata"]["uid"], pod_uid, "the pod is kept");
    assert_eq!(w.sandbox("s2").expect("sandbox")["status"]["observedGeneration"], 2);

    w.api.patch("s2", &PatchParams::default(), &Patch::Merge(json!({"spec": {"image": "node:22"}}))).await.expect("patch");
    let action = w.pass("s2").await.expect("replace");
    assert_eq!(action, Action::requeue(Duration::from_secs(1)));
    assert!(w.child("pods", "s2").is_none(), "the old pod is deleted");
    assert!(w.reasons().contains(&"PodReplaced".to_string()));
    w.pass("s2").await.expect("recreate");
    let pod = w.child("pods", "s2").expect("pod");
    assert_eq!(pod["spec"]["containers"][0]["image"], "node:22");
    assert_eq!(w.sandbox("s2").expect("sandbox")["status"]["observedGeneration"], 3);
}

#[tokio::test]
async fn a_deleted_sandbox_takes_its_children_before_it_goes() {
    let w = world();
    w.create("s3", spec(3600)).await;
    w.pass("s3").await.expect("finalizer");
    w.pass("s3").await.expect("children");
    w.api.delete("s3", &DeleteParams::default()).await.expect("delete");
    assert!(w.sandbox("s3").is_some(), "held by the finalizer");
    assert!(w.child("pods", "s3").is_some());
    w.pass("s3").await.expect("cleanup");
    for plural in ["pods", "persistentvolumeclaims", "networkpolicies"] {
        assert!(w.child(plural, "s3").is_none(), "{plural} is deleted");
    }
    assert!(w.sandbox("s3").is_none(), "the finalizer is removed and the Sandbox goes");
    assert!(w.reasons().contains(&"Deleted".to_string()));
}

#[tokio::test]
async fn at_its_expiry_a_sandbox_loses_its_children_and_says_so() {
    let w = world();
    w.create("s4", spec(2)).await;
    w.pass("s4").await.expect("finalizer");
    let action = w.pass("s4").await.expect("children");
    assert!(w.child("pods", "s4").is_some());
    assert!(
        action == Action::requeue(Duration::from_secs(2)) || action == Action::requeue(Duration::from_secs(1)),
        "looked at again at its expiry: {action:?}"
    );
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(w.pass("s4").await.expect("expiry"), Action::await_change());
    for plural in ["pods", "persistentvolumeclaims", "networkpolicies"] {
        assert!(w.child(plural, "s4").is_none(), "{plural} is deleted at expiry");
    }
    let sb = w.sandbox("s4").expect("the Sandbox stays, expired");
    assert_eq!(sb["status"]["phase"], "Expired");
    assert_eq!(sb["status"]["conditions"][0]["reason"], "Expired");
    assert!(w.reasons().contains(&"Expired".to_string()));
    w.pass("s4").await.expect("again");
    assert!(w.child("pods", "s4").is_none(), "an expired Sandbox gets no new pod");
}

#[tokio::test]
async fn an_invalid_expiry_is_reported_not_retried() {
    let w = world();
    let mut s = spec(60);
    s.expires_at = "next tuesday".into();
    w.create("s5", s).await;
    w.pass("s5").await.expect("finalizer");
    assert_eq!(w.pass("s5").await.expect("invalid"), Action::await_change());
    let sb = w.sandbox("s5").expect("sandbox");
    assert_eq!(sb["status"]["phase"], "Failed");
    assert_eq!(sb["status"]["conditions"][0]["reason"], "InvalidSpec");
    assert!(w.child("pods", "s5").is_none());
}

#[tokio::test]
async fn an_api_error_is_retried_with_backoff_and_metered() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let _guard = metrics::set_default_local_recorder(&recorder);
    let w = world();
    w.create("s6", spec(3600)).await;
    w.pass("s6").await.expect("finalizer");
    let sb = Arc::new(w.api.get("s6").await.expect("get"));
    let mut waits = vec![];
    for _ in 0..3 {
        w.mock.fail_next(1, 500);
        let e = reconcile(sb.clone(), w.ctx.clone()).await.expect_err("the API failed");
        assert!(matches!(e, checkfu_operator::error::Error::Kube(_)), "{e}");
        waits.push(error_policy(sb.clone(), &e, w.ctx.clone()));
    }
    assert_eq!(waits, [1, 2, 4].map(|s| Action::requeue(Duration::from_secs(s))), "doubling backoff");
    w.pass("s6").await.expect("recovered");
    assert!(w.child("pods", "s6").is_some());
    let sb = Arc::new(w.api.get("s6").await.expect("get"));
    w.mock.fail_next(1, 503);
    let e = reconcile(sb.clone(), w.ctx.clone()).await.expect_err("fails again");
    assert_eq!(error_policy(sb, &e, w.ctx.clone()), Action::requeue(Duration::from_secs(1)), "a success starts the backoff over");

    let text = handle.render();
    assert!(text.contains(r#"checkfu_operator_reconciliations_total{controller="sandbox",result="ok"}"#), "{text}");
    assert!(text.contains(r#"checkfu_operator_reconciliations_total{controller="sandbox",result="error"} 4"#), "{text}");
    assert!(text.contains(r#"checkfu_operator_reconcile_errors_total{controller="sandbox",kind="kubernetes"} 4"#), "{text}");
    assert!(text.contains("checkfu_operator_reconcile_seconds"), "{text}");
}
