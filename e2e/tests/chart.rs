//! The Helm chart, rendered offline (PyPI `helm-python-sdk`) with default
//! and production-like values, linted strictly, every manifest validated
//! against the Kubernetes schemas (`kubernetes-validate --strict`), then
//! read for what an operator relies on. The Tiltfile must parse. CI installs
//! the tools and sets `CHECKFU_REQUIRE_CHART_TOOLS=1`, so a missing tool
//! fails there instead of skipping.
#![allow(clippy::unwrap_used)]

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn tools_present() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import helm_python, yaml, starlark, shutil; assert shutil.which('kubernetes-validate')"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(std::env::var("CHECKFU_REQUIRE_CHART_TOOLS").is_err(), "the chart tools are required here but missing");
        eprintln!("helm-python-sdk / kubernetes-validate / starlark-pyo3 are not installed; skipping");
    }
    ok
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    &docs.iter().find(|d| d["kind"] == kind && d["name"] == name).unwrap_or_else(|| panic!("no {kind} {name}"))["doc"]
}

const ROLES: [&str; 9] =
    ["gateway", "sessions", "governance", "model-gateway", "capability-gateway", "scheduler", "webhooks", "memory", "runner"];

#[test]
fn the_chart_renders_valid_manifests_for_every_role() {
    if !tools_present() {
        return;
    }
    let out = Command::new("python3").arg(root().join("charts/checkfu/ci/render.py")).output().unwrap();
    assert!(out.status.success(), "render/validate failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let default = report["default"].as_array().unwrap();
    let prod = report["production"].as_array().unwrap();

    for role in ROLES {
        let d = find(default, "Deployment", &format!("checkfu-{role}"));
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["args"], serde_json::json!(["serve", "--roles", role, "--config", "/etc/checkfu/checkfu.toml"]));
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
        let env = c["env"].as_array().unwrap();
        let db = env.iter().find(|e| e["name"] == "CHECKFU_DATABASE_URL").unwrap();
        assert_eq!(db["valueFrom"]["secretKeyRef"]["key"], "database-url", "credentials come by Secret reference");
        assert!(env.iter().all(|e| e.get("value").is_none() || !e["name"].as_str().unwrap().contains("KEY")), "no inline secrets");
        let has_provider_keys = env.iter().any(|e| e["name"] == "CHECKFU_OPENAI_API_KEY");
        assert_eq!(has_provider_keys, role == "model-gateway", "provider keys reach only the model gateway");
        assert!(d["spec"]["template"]["spec"]["automountServiceAccountToken"] == false);
        assert!(c["resources"]["requests"]["cpu"].is_string());
        if role != "runner" {
            find(default, "Service", &format!("checkfu-{role}"));
        }
    }
    let cfg = find(default, "ConfigMap", "checkfu-config");
    let toml = cfg["data"]["checkfu.toml"].as_str().unwrap();
    assert!(toml.contains("sessions = \"http://checkfu-sessions:7420\""), "{toml}");
    let job = default.iter().find(|d| d["kind"] == "Job").unwrap();
    assert_eq!(job["doc"]["metadata"]["annotations"]["helm.sh/hook"], "pre-install,pre-upgrade");
    assert_eq!(job["doc"]["spec"]["template"]["spec"]["containers"][0]["args"], serde_json::json!(["migrate"]));
    assert!(!default.iter().any(|d| d["kind"] == "PodDisruptionBudget"), "single replicas need no PDB");

    let replicas = |role: &str| find(prod, "Deployment", &format!("checkfu-{role}"))["spec"]["replicas"].as_i64().unwrap();
    assert_eq!((replicas("gateway"), replicas("sessions"), replicas("runner")), (3, 3, 4));
    let pdbs: Vec<&str> = prod.iter().filter(|d| d["kind"] == "PodDisruptionBudget").map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(pdbs.len(), 7, "{pdbs:?}");
    assert!(!pdbs.contains(&"checkfu-scheduler"));
    let svc = find(prod, "Service", "checkfu-gateway");
    assert_eq!((svc["spec"]["type"].as_str(), svc["spec"]["ports"][0]["port"].as_i64()), (Some("LoadBalancer"), Some(443)));
    let image = &find(prod, "Deployment", "checkfu-sessions")["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_eq!(image, "registry.example.com/checkfu:0.1.0");
}

#[test]
fn the_tiltfile_parses() {
    if !tools_present() {
        return;
    }
    let script = "import starlark, sys; starlark.parse('Tiltfile', open(sys.argv[1]).read()); print('ok')";
    let out = Command::new("python3").args(["-c", script]).arg(root().join("Tiltfile")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
