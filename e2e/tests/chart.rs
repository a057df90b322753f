//! The Helm chart, rendered offline (PyPI `helm-python-sdk`) with default
//! and production-like values, linted strictly, every manifest validated
//! against the Kubernetes schemas (`kubernetes-validate --strict`), then
//! read for what an operator relies on. The Tiltfile must parse. CI installs
//! the tools and sets `CHECKFU_REQUIRE_SERVICES=1`, so a missing tool fails
//! there instead of skipping.
#![cfg(test)]

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
        checkfu_core::testing::skip("the chart tests", "helm-python-sdk, kubernetes-validate or starlark-pyo3 is not installed");
    }
    ok
}

/// The chart rendered with default and production values, linted and
/// validated (`ci/render.py`): `{default: [...], production: [...]}`.
/// Rendering takes a while: the report is kept (in the test build's temp
/// directory) under a digest of every chart file, and reused while they
/// are unchanged.
fn render() -> Value {
    let digest = checkfu_core::sha256_hex(chart_files(&root().join("charts")));
    let cached = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("chart-report-{digest}.json"));
    if let Ok(bytes) = std::fs::read(&cached) {
        return serde_json::from_slice(&bytes).unwrap();
    }
    let out = Command::new("python3").arg(root().join("charts/checkfu/ci/render.py")).output().unwrap();
    assert!(out.status.success(), "render/validate failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let tmp = cached.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&tmp, &out.stdout).unwrap();
    std::fs::rename(&tmp, &cached).unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every file under `dir` (links followed), by path and content, in order.
fn chart_files(dir: &std::path::Path) -> Vec<u8> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    let mut out = vec![];
    for p in paths {
        if p.is_dir() {
            out.extend(chart_files(&p));
        } else {
            out.extend(p.display().to_string().into_bytes());
            out.extend(std::fs::read(&p).unwrap());
        }
    }
    out
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    &docs.iter().find(|d| d["kind"] == kind && d["name"] == name).unwrap_or_else(|| panic!("no {kind} {name}"))["doc"]
}

/// Who calls whom on the mesh: the chart's NetworkPolicies must admit
/// exactly these, as `checkfu_proto::mesh::allowed` does.
const MESH_CALLERS: [(&str, &[&str]); 7] = [
    ("governance", &["gateway", "sessions", "runner", "capability-gateway", "scheduler", "memory"]),
    ("sessions", &["gateway", "capability-gateway", "runner", "scheduler", "memory"]),
    ("model-gateway", &["gateway", "runner", "memory", "sessions", "scheduler"]),
    ("capability-gateway", &["gateway", "runner", "sessions", "scheduler"]),
    ("webhooks", &["gateway"]),
    ("scheduler", &["gateway"]),
    ("memory", &["gateway", "sessions", "scheduler"]),
];

/// The roles the chart deploys: the role table's, every one.
fn roles() -> Vec<&'static str> {
    checkfu_node::roles::TABLE.iter().map(|p| p.role().name()).collect()
}

#[test]
fn the_chart_renders_valid_manifests_for_every_role() {
    if !tools_present() {
        return;
    }
    let report = render();
    let default = report["default"].as_array().unwrap();
    let prod = report["production"].as_array().unwrap();

    let mut deployed: Vec<&str> = default
        .iter()
        .filter(|d| d["kind"] == "Deployment" && d["name"] != "checkfu-operator")
        .filter_map(|d| d["name"].as_str()?.strip_prefix("checkfu-"))
        .collect();
    let mut table = roles();
    deployed.sort();
    table.sort();
    assert_eq!(deployed, table, "the chart's roles (values.yaml `roles`) are the role table's");
    for role in roles() {
        let d = find(default, "Deployment", &format!("checkfu-{role}"));
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["args"], serde_json::json!(["serve", "--roles", role, "--config", "/etc/checkfu/checkfu.toml"]));
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
        let env = c["env"].as_array().unwrap();
        let db = env.iter().find(|e| e["name"] == "CHECKFU_DATABASE_URL").unwrap();
        assert_eq!(db["valueFrom"]["secretKeyRef"]["key"], "database-url", "credentials come by Secret reference");
        // Inline values name no key, except a key file's path.
        let inline_key =
            |e: &Value| e.get("value").is_some() && e["name"].as_str().is_some_and(|n| n.contains("KEY") && !n.ends_with("_FILE"));
        assert!(!env.iter().any(inline_key), "no inline secrets");
        // The credential key file reaches the capability gateway alone, from a Secret.
        let key_file = env.iter().find(|e| e["name"] == "CHECKFU_CREDENTIAL_KEY_FILE");
        assert_eq!(key_file.is_some(), role == "capability-gateway", "{role}");
        let keys_volume =
            d["spec"]["template"]["spec"]["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "credential-keys").cloned();
        assert_eq!(keys_volume.is_some(), role == "capability-gateway", "{role}");
        if let Some(v) = keys_volume {
            assert_eq!(v["secret"]["secretName"], "checkfu-credential-keys");
            assert_eq!(key_file.unwrap()["value"], "/etc/checkfu/credential-keys/keys");
            // The egress proxy: a port of its own, advertised by Service name.
            assert!(c["ports"].as_array().unwrap().iter().any(|p| p["name"] == "egress" && p["containerPort"] == 7422));
            let advertise = env.iter().find(|e| e["name"] == "CHECKFU_EGRESS_ADVERTISE").unwrap();
            assert_eq!(advertise["value"], "checkfu-capability-gateway.checkfu.svc:7422");
            let svc = find(default, "Service", "checkfu-capability-gateway");
            assert!(svc["spec"]["ports"].as_array().unwrap().iter().any(|p| p["name"] == "egress" && p["port"] == 7422), "{svc}");
        }
        let has_provider_keys = env.iter().any(|e| e["name"] == "CHECKFU_OPENAI_API_KEY");
        assert_eq!(has_provider_keys, role == "model-gateway", "provider keys reach only the model gateway");
        assert!(d["spec"]["template"]["spec"]["automountServiceAccountToken"] == false);
        assert!(c["resources"]["requests"]["cpu"].is_string());
        // Each pod mounts its own role's mesh certificate.
        let volumes = d["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
        let mesh = volumes.iter().find(|v| v["name"] == "mesh").unwrap();
        assert_eq!(mesh["secret"]["secretName"], format!("checkfu-mesh-{role}"));
        let called = MESH_CALLERS.iter().find(|(r, _)| *r == role);
        let ports: Vec<&str> = c["ports"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(ports.contains(&"mesh"), called.is_some(), "{role} listens on the mesh only if some role calls it");
        if role == "gateway" || called.is_some() {
            let svc = find(default, "Service", &format!("checkfu-{role}"));
            let exposed = svc["spec"]["ports"][0]["name"].as_str().unwrap();
            assert_eq!(exposed, if role == "gateway" { "http" } else { "mesh" }, "{role}'s Service exposes only what others use");
        }
        // Callers reach a mesh role through a headless Service: its name
        // resolves to every ready pod, so calls spread over the replicas.
        if called.is_some() {
            let peers = find(default, "Service", &format!("checkfu-{role}-peers"));
            assert_eq!(peers["spec"]["clusterIP"], "None", "{peers}");
            assert_eq!(peers["spec"]["selector"]["app.kubernetes.io/component"], role);
            assert_eq!(peers["spec"]["ports"][0]["targetPort"], "mesh");
        }
        // Reachable only from the roles that call it.
        let np = find(default, "NetworkPolicy", &format!("checkfu-{role}"));
        // No rule at all (the runner) admits nothing.
        let rules = np["spec"]["ingress"].as_array().cloned().unwrap_or_default();
        let from_roles: Vec<&str> = rules
            .iter()
            .filter(|r| r["ports"][0]["port"] == "mesh")
            .flat_map(|r| r["from"].as_array().unwrap())
            .map(|f| f["podSelector"]["matchLabels"]["app.kubernetes.io/component"].as_str().unwrap())
            .collect();
        assert_eq!(from_roles, called.map(|(_, c)| c.to_vec()).unwrap_or_default(), "{role}'s mesh callers");
        let open_http = rules.iter().any(|r| r["ports"][0]["port"] == "http" && r.get("from").is_none());
        assert_eq!(open_http, role == "gateway", "only the gateway's port is open to everyone ({role})");
    }
    let cfg = find(default, "ConfigMap", "checkfu-config");
    let toml = cfg["data"]["checkfu.toml"].as_str().unwrap();
    // The rendered configuration is one checkfu accepts, with what the
    // Secret gives each pod through the environment.
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), toml).unwrap();
    let pod_env = checkfu_node::config::Env::from([
        ("CHECKFU_DATABASE_URL", "postgres://checkfu:pw@postgres:5432/checkfu"),
        ("CHECKFU_KAFKA_BROKERS", "kafka:9092"),
        ("CHECKFU_REDIS_URL", "redis://redis:6379"),
        ("CHECKFU_RATE_LIMIT_PER_SECOND", "2000"),
    ]);
    let loaded = checkfu_node::config::Config::load(checkfu_node::config::Mode::Serve, Some(file.path()), &pod_env, &[])
        .unwrap_or_else(|e| panic!("the chart's default configuration is valid: {e}"));
    assert_eq!(loaded.bootstrap_key_file(), std::path::PathBuf::from("/var/lib/checkfu/admin.key"));
    assert_eq!(loaded.remotes().len(), toml.lines().filter(|l| l.contains("= \"https://")).count(), "every [endpoints] entry is a role");
    assert!(toml.contains("sessions = \"https://checkfu-sessions-peers:7421\""), "{toml}");
    assert!(toml.contains("internal_listen = \"0.0.0.0:7421\"") && toml.contains("[mesh]"), "{toml}");
    assert!(
        !toml.lines().any(|l| l.starts_with("gateway =") || l.starts_with("runner =")),
        "nobody calls the gateway or the runner: {toml}"
    );
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
    // Configured provider endpoints: named in the config, keyed from the
    // Secret in the model gateway only, and parsed as checkfu parses them.
    let prod_toml = find(prod, "ConfigMap", "checkfu-config")["data"]["checkfu.toml"].as_str().unwrap().to_string();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &prod_toml).unwrap();
    let env = checkfu_node::config::Env::from([("CHECKFU_MODEL_ENDPOINT_VLLM_KEY", "sk-vllm")]);
    let parsed = checkfu_node::config::Config::load(checkfu_node::config::Mode::Serve, Some(file.path()), &env, &[])
        .unwrap_or_else(|e| panic!("the chart's configuration is valid: {e}"));
    assert!(parsed.model_endpoints.get("vllm").is_some_and(|e| e.has_key()));
    let vllm = &parsed.config.model_endpoints["vllm"];
    assert_eq!((vllm.provider.as_str(), vllm.base_url.as_str(), vllm.allow_private), ("openai", "http://vllm.inference:8000/v1", true));
    assert_eq!(vllm.api_key_env.as_deref(), Some("CHECKFU_MODEL_ENDPOINT_VLLM_KEY"));
    for role in roles() {
        let env = find(prod, "Deployment", &format!("checkfu-{role}"))["spec"]["template"]["spec"]["containers"][0]["env"].clone();
        let has = env.as_array().unwrap().iter().any(|e| e["name"] == "CHECKFU_MODEL_ENDPOINT_VLLM_KEY");
        assert_eq!(has, role == "model-gateway", "{role}");
        let sealing = env.as_array().unwrap().iter().any(|e| e["name"] == "CHECKFU_SECRETS_KEY");
        assert_eq!(sealing, !matches!(role, "gateway" | "runner"), "the installation key reaches every role that seals or signs ({role})");
        let blobs: Vec<&str> = env
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["name"].as_str())
            .filter(|n| n.contains("BLOB") || n.starts_with("AWS_"))
            .collect();
        // Sessions keeps files and snapshots there, memory large documents.
        if role == "sessions" || role == "memory" {
            assert_eq!(blobs, ["CHECKFU_BLOB_STORE", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]);
        } else {
            assert!(blobs.is_empty(), "blob store credentials reach only the sessions and memory roles ({role}): {blobs:?}");
        }
        let cg = env.as_array().unwrap().iter().any(|e| e["name"] == "CHECKFU_SANDBOX_CGROUP");
        assert_eq!(cg, role == "runner", "{role}");
    }
    let image = &find(prod, "Deployment", "checkfu-sessions")["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_eq!(image, "registry.example.com/checkfu:0.1.0");
}

/// The operator, the CRDs and the RBAC: namespaced Roles holding exactly
/// what each account uses, nothing cluster-wide; the runner gets an account
/// (allowed to create Sandboxes) only with the Kubernetes sandbox driver.
/// The chart's HorizontalPodAutoscalers: none by default; with
/// `autoscaling.enabled`, one autoscaling/v2 HPA on CPU per role that scales
/// horizontally, its Deployment leaving `replicas` to it, and a PDB.
#[test]
fn autoscalers_render_for_every_horizontal_role_when_asked() {
    if !tools_present() {
        return;
    }
    let report = render();
    for label in ["default", "production", "kubernetes"] {
        let docs = report[label].as_array().unwrap();
        assert!(!docs.iter().any(|d| d["kind"] == "HorizontalPodAutoscaler"), "off unless asked ({label})");
    }
    let scaled = report["autoscaling"].as_array().unwrap();
    let mut hpas: Vec<&str> = scaled
        .iter()
        .filter(|d| d["kind"] == "HorizontalPodAutoscaler")
        .filter_map(|d| d["name"].as_str()?.strip_prefix("checkfu-"))
        .collect();
    hpas.sort();
    let mut horizontal: Vec<&str> = roles().into_iter().filter(|r| *r != "memory").collect();
    horizontal.sort();
    assert_eq!(hpas, horizontal, "every role but memory");
    for role in &horizontal {
        let hpa = &find(scaled, "HorizontalPodAutoscaler", &format!("checkfu-{role}"));
        assert_eq!(hpa["apiVersion"], "autoscaling/v2");
        assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], format!("checkfu-{role}"));
        assert_eq!(hpa["spec"]["metrics"][0]["resource"]["name"], "cpu");
        assert!(hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"].as_i64().unwrap() > 0);
        let deployment = find(scaled, "Deployment", &format!("checkfu-{role}"));
        assert!(deployment["spec"].get("replicas").is_none(), "{role}: the HPA owns the replica count");
    }
    let gw = find(scaled, "HorizontalPodAutoscaler", "checkfu-gateway");
    assert_eq!((gw["spec"]["minReplicas"].as_i64(), gw["spec"]["maxReplicas"].as_i64()), (Some(3), Some(12)));
    assert!(scaled.iter().any(|d| d["kind"] == "PodDisruptionBudget" && d["name"] == "checkfu-governance"));
    assert_eq!(find(scaled, "Deployment", "checkfu-memory")["spec"]["replicas"], 1, "memory keeps its one replica");
}

#[test]
fn the_operator_crds_and_rbac_render_scoped() {
    if !tools_present() {
        return;
    }
    let report = render();
    for (label, docs) in report.as_object().unwrap() {
        let docs = docs.as_array().unwrap();
        let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
        assert!(!kinds.contains(&"ClusterRole") && !kinds.contains(&"ClusterRoleBinding"), "{label}: nothing cluster-wide");
        let crds: Vec<&str> = docs.iter().filter(|d| d["kind"] == "CustomResourceDefinition").filter_map(|d| d["name"].as_str()).collect();
        assert_eq!(crds, ["runners.checkfu.dev", "sandboxes.checkfu.dev"], "{label}: the CRD chart is installed");
        for role in docs.iter().filter(|d| d["kind"] == "Role") {
            for rule in role["doc"]["rules"].as_array().unwrap() {
                let all = |k: &str| rule[k].as_array().into_iter().flatten().any(|v| v == "*");
                assert!(!all("verbs") && !all("resources") && !all("apiGroups"), "{label}: no wildcard in {}: {rule}", role["name"]);
            }
        }
        let op = find(docs, "Deployment", "checkfu-operator");
        let spec = &op["spec"]["template"]["spec"];
        assert_eq!(spec["serviceAccountName"], "checkfu-operator");
        assert_eq!(op["spec"]["replicas"], 2, "a standby replica (leader election)");
        let c = &spec["containers"][0];
        let ns = if label == "kubernetes" { "agents" } else { "checkfu" };
        assert_eq!(c["args"], serde_json::json!(["operator", "--namespace", ns]));
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
        let env: Vec<&str> = c["env"].as_array().unwrap().iter().filter_map(|e| e["name"].as_str()).collect();
        assert!(env.contains(&"CHECKFU_OPERATOR_IMAGE") && env.contains(&"POD_NAME") && env.contains(&"POD_NAMESPACE"));

        let role = find(docs, "Role", "checkfu-operator");
        assert_eq!(role["metadata"]["namespace"], ns, "{label}: the operator's Role is in the namespace it watches");
        let grants = |doc: &Value| -> Vec<String> {
            let mut out = vec![];
            for r in doc["rules"].as_array().unwrap() {
                for g in r["apiGroups"].as_array().unwrap() {
                    for res in r["resources"].as_array().unwrap() {
                        for v in r["verbs"].as_array().unwrap() {
                            out.push(format!("{}/{}:{}", g.as_str().unwrap(), res.as_str().unwrap(), v.as_str().unwrap()));
                        }
                    }
                }
            }
            out.sort();
            out
        };
        let g = grants(role);
        for must in [
            "checkfu.dev/sandboxes/status:patch",
            "checkfu.dev/runners:watch",
            "/pods:create",
            "/pods:delete",
            "apps/deployments:patch",
            "networking.k8s.io/networkpolicies:create",
            "events.k8s.io/events:create",
            "/secrets:get",
            "/secrets:create",
            "checkfu.dev/sandboxes/finalizers:update",
        ] {
            assert!(g.contains(&must.to_string()), "{label}: the operator needs {must}: {g:?}");
        }
        for never in ["/secrets:list", "/secrets:watch", "/secrets:delete", "checkfu.dev/sandboxes:create", "checkfu.dev/runners:delete"] {
            assert!(!g.contains(&never.to_string()), "{label}: the operator does not need {never}");
        }
        let leader = find(docs, "Role", "checkfu-operator-leader");
        let renew =
            leader["rules"].as_array().unwrap().iter().find(|r| r["verbs"].as_array().unwrap().iter().any(|v| v == "update")).unwrap();
        assert_eq!(renew["resourceNames"], serde_json::json!(["checkfu-operator"]), "{label}: only its own Lease");

        let runner = find(docs, "Deployment", "checkfu-runner");
        let rs = &runner["spec"]["template"]["spec"];
        let driver =
            rs["containers"][0]["env"].as_array().unwrap().iter().find(|e| e["name"] == "CHECKFU_SANDBOX_DRIVER").unwrap()["value"].clone();
        let kube = label == "kubernetes";
        assert_eq!(driver, if kube { "kubernetes" } else { "local" }, "{label}");
        assert_eq!(rs["automountServiceAccountToken"], kube, "{label}: the runner gets a token only to create Sandboxes");
        let has_role = docs.iter().any(|d| d["kind"] == "Role" && d["name"] == "checkfu-runner-sandboxes");
        assert_eq!(has_role, kube, "{label}");
        if kube {
            assert_eq!(rs["serviceAccountName"], "checkfu-runner");
            let r = find(docs, "Role", "checkfu-runner-sandboxes");
            assert_eq!(r["metadata"]["namespace"], "agents");
            let g = grants(r);
            assert_eq!(
                g,
                [
                    "/secrets:create",
                    "/secrets:get",
                    "checkfu.dev/sandboxes:create",
                    "checkfu.dev/sandboxes:delete",
                    "checkfu.dev/sandboxes:get",
                    "checkfu.dev/sandboxes:list",
                    "checkfu.dev/sandboxes:patch"
                ]
            );
            let env = rs["containers"][0]["env"].as_array().unwrap();
            let val = |n: &str| env.iter().find(|e| e["name"] == n).map(|e| e["value"].clone()).unwrap_or_default();
            assert_eq!(val("CHECKFU_SANDBOX_NAMESPACE"), "agents");
            assert_eq!(val("CHECKFU_SANDBOX_STORAGE_CLASS"), "fast-ssd");
        }
    }
}

/// The CRD chart (generated from the operator's types; the operator's own
/// test checks they are current) validates against the Kubernetes schemas.
#[test]
fn the_crd_chart_validates() {
    if !tools_present() {
        return;
    }
    let dir = root().join("charts/checkfu-crds/templates");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert_eq!(files.len(), 2, "Runner and Sandbox");
    let out = Command::new("kubernetes-validate").arg("--strict").args(&files).output().unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// What the operator makes at run time — a Sandbox's pod, workspace claim
/// and network policy, a Runner's Deployment and credentials Secret, and
/// sample Runner and Sandbox resources — validates against the Kubernetes
/// schemas and the CRDs, as a cluster would check them.
#[test]
fn the_objects_the_operator_makes_validate() {
    if !tools_present() {
        return;
    }
    use checkfu_operator_api::crd::{Resources, Runner, RunnerSpec, Sandbox, SandboxSpec, SecretKeyRef};
    let mut sb = Sandbox::new(
        "sess-01jx",
        SandboxSpec {
            session_id: "sess_01JX".into(),
            environment_id: "env_1".into(),
            image: "python:3.12-slim".into(),
            resources: Resources { cpu_millis: 1500, memory_mib: 2048, disk_mib: 4096 },
            expires_at: "2026-12-31T00:00:00Z".into(),
            storage_class: Some("fast".into()),
            agent_secret: "sess-01jx-agent".into(),
            platform_namespace: Some("checkfu".into()),
        },
    );
    sb.metadata.namespace = Some("agents".into());
    sb.metadata.uid = Some("7d3c0c1e-0000-4000-8000-000000000001".into());
    let mut runner = Runner::new(
        "edge",
        RunnerSpec {
            server: "https://checkfu.example.com".into(),
            environment_id: "env_1".into(),
            pool: "edge".into(),
            replicas: 2,
            image: None,
            resources: Some(Resources { cpu_millis: 2000, memory_mib: 4096, disk_mib: 20480 }),
            credential_secret: SecretKeyRef { name: "edge-install-key".into(), key: "api-key".into() },
            principal_id: "prn_1".into(),
            rotation: Some("2".into()),
        },
    );
    runner.metadata.namespace = Some("agents".into());
    runner.metadata.uid = Some("7d3c0c1e-0000-4000-8000-000000000002".into());
    let with_kind = |v: Value, api_version: &str, kind: &str| {
        let mut v = v;
        v["apiVersion"] = api_version.into();
        v["kind"] = kind.into();
        v
    };
    let builtin = [
        with_kind(serde_json::to_value(checkfu_operator::pod::sandbox_pod(&sb, "ghcr.io/checkfu/checkfu:0.1.0")).unwrap(), "v1", "Pod"),
        with_kind(serde_json::to_value(checkfu_operator::pod::workspace_claim(&sb)).unwrap(), "v1", "PersistentVolumeClaim"),
        with_kind(serde_json::to_value(checkfu_operator::pod::network_policy(&sb)).unwrap(), "networking.k8s.io/v1", "NetworkPolicy"),
        with_kind(
            serde_json::to_value(checkfu_operator::runners::deployment(&runner, "ghcr.io/checkfu/checkfu:0.1.0")).unwrap(),
            "apps/v1",
            "Deployment",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let mut files = vec![];
    for (i, o) in builtin.iter().enumerate() {
        let path = dir.path().join(format!("{i}-{}.yaml", o["kind"].as_str().unwrap()));
        std::fs::write(&path, serde_json::to_vec_pretty(o).unwrap()).unwrap();
        files.push(path);
    }
    let out = Command::new("kubernetes-validate").arg("--strict").args(&files).output().unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));

    // The resources themselves, against their CRDs' schemas.
    for (name, sample) in [("sandboxes", serde_json::to_value(&sb).unwrap()), ("runners", serde_json::to_value(&runner).unwrap())] {
        let crd = root().join(format!("charts/checkfu-crds/templates/{name}.checkfu.dev.yaml"));
        let sample_path = dir.path().join(format!("{name}-sample.json"));
        std::fs::write(&sample_path, serde_json::to_vec(&sample).unwrap()).unwrap();
        let validate = root().join("charts/checkfu-crds/ci/validate.py");
        let out = Command::new("python3").arg(&validate).arg(&crd).arg(&sample_path).output().unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        // And a wrong one is refused (the check is real).
        let mut wrong = sample.clone();
        wrong["spec"].as_object_mut().unwrap().remove(if name == "sandboxes" { "image" } else { "pool" });
        std::fs::write(&sample_path, serde_json::to_vec(&wrong).unwrap()).unwrap();
        let out = Command::new("python3").arg(&validate).arg(&crd).arg(&sample_path).output().unwrap();
        assert!(!out.status.success(), "{name}: a spec missing a required field must not validate");
    }
}

#[test]
fn the_tiltfile_parses() {
    if !tools_present() {
        return;
    }
    let script = "import starlark, sys; starlark.parse('Tiltfile', open(sys.argv[1]).read()); print('ok')";
    let out = Command::new("python3").args(["-c", script]).arg(root().join("Tiltfile")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Every resource it names is a Deployment of the chart, the operator's too.
    let tilt = std::fs::read_to_string(root().join("Tiltfile")).unwrap();
    let report = render();
    let default = report["default"].as_array().unwrap();
    let named: Vec<&str> = tilt.split("k8s_resource('").skip(1).filter_map(|r| r.split('\'').next()).collect();
    assert!(named.contains(&"checkfu-operator"), "the Tiltfile brings the operator up");
    for name in named.iter().filter(|n| !n.ends_with("-")) {
        find(default, "Deployment", name);
    }
}

#[test]
fn the_charts_mesh_callers_are_the_servers_authorization_table() {
    use checkfu_proto::mesh::allowed;
    let methods: [(&str, &[&str]); 7] = [
        (
            "governance",
            &[
                "/checkfu.governance.v1.GovernanceService/ListPrincipals",
                "/checkfu.governance.v1.GovernanceService/Check",
                "/checkfu.governance.v1.GovernanceService/RequestApproval",
                "/checkfu.governance.v1.GovernanceService/WithdrawApproval",
                "/checkfu.governance.v1.GovernanceService/RecordAudit",
            ],
        ),
        (
            "sessions",
            &[
                "/checkfu.sessions.v1.SessionsService/CreateSession",
                "/checkfu.sessions.v1.SessionsService/GetSessionSandbox",
                "/checkfu.sessions.v1.SessionsService/GetSession",
                "/checkfu.sessions.v1.FilesService/CreateFile",
                "/checkfu.runner.v1.RunnerService/Claim",
            ],
        ),
        (
            "model-gateway",
            &[
                "/checkfu.modelgateway.v1.ModelGatewayService/Generate",
                "/checkfu.modelgateway.v1.ModelGatewayService/CreateRoutingProfile",
                "/checkfu.modelgateway.v1.ModelGatewayService/RunTask",
            ],
        ),
        (
            "capability-gateway",
            &[
                "/checkfu.capability.v1.CapabilityGatewayService/WebFetch",
                "/checkfu.capability.v1.CapabilityGatewayService/CallStepTool",
                "/checkfu.capability.v1.ConnectionsService/CreateConnection",
                "/checkfu.capability.v1.ToolSourcesService/ResolveForPublication",
            ],
        ),
        ("webhooks", &["/checkfu.webhooks.v1.WebhooksService/CreateEndpoint"]),
        ("scheduler", &["/checkfu.scheduler.v1.SchedulerService/CreateAutomation"]),
        (
            "memory",
            &[
                "/checkfu.memory.v1.MemoryService/GetServiceInfo",
                "/checkfu.memory.v1.MemoryService/Mount",
                "/checkfu.memory.v1.MemoryService/AutomationWrite",
            ],
        ),
    ];
    for (role, paths) in methods {
        let mut callers: Vec<&str> = paths.iter().flat_map(|p| allowed(p).iter().map(|r| r.name())).collect();
        callers.sort();
        callers.dedup();
        let mut chart = MESH_CALLERS.iter().find(|(r, _)| *r == role).unwrap().1.to_vec();
        chart.sort();
        assert_eq!(callers, chart, "{role}");
    }
}

/// The certificates the chart makes (sprig's genCA / genSignedCert) work
/// with the mesh as it is: a governance node on Helm's governance
/// certificate answers Helm's gateway certificate and refuses its runner's.
#[tokio::test(flavor = "multi_thread")]
async fn the_charts_certificates_authenticate_the_mesh() {
    use checkfu_proto::governance::v1 as gov;
    use checkfu_proto::governance::v1::governance_service_client::GovernanceServiceClient;
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
    if !tools_present() {
        return;
    }
    let report = render();
    let default = report["default"].as_array().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let secret = |role: &str, key: &str| -> Vec<u8> {
        use base64::Engine;
        let s = find(default, "Secret", &format!("checkfu-mesh-{role}"));
        base64::engine::general_purpose::STANDARD.decode(s["data"][key].as_str().unwrap()).unwrap()
    };
    for role in ["governance", "gateway", "runner"] {
        for key in ["ca.crt", "tls.crt", "tls.key"] {
            std::fs::write(dir.path().join(format!("{role}-{key}")), secret(role, key)).unwrap();
        }
    }
    let files = |role: &str| checkfu_node::mesh::MeshFiles {
        ca: dir.path().join(format!("{role}-ca.crt")),
        cert: dir.path().join(format!("{role}-tls.crt")),
        key: dir.path().join(format!("{role}-tls.key")),
    };
    let data = tempfile::tempdir().unwrap();
    let opts = checkfu_node::NodeOptions {
        roles: [checkfu_node::Role::Governance].into_iter().collect(),
        storage: checkfu_store::Location::SqliteDir(data.path().to_path_buf()),
        remotes: Default::default(),
        mesh: Some(checkfu_node::mesh::MeshTls::load(&files("governance")).unwrap()),
        embedded: false,
        ..checkfu_e2e::embedded_options(data.path(), &checkfu_e2e::Tuning::default())
    };
    let public = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let internal = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let node = checkfu_node::Node::start_with(public, Some(internal), opts).await.unwrap();
    let url = format!("https://{}", node.internal_addr.unwrap());
    let client = |role: &str| {
        let f = files(role);
        ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(std::fs::read(f.ca).unwrap()))
            .identity(Identity::from_pem(std::fs::read(f.cert).unwrap(), std::fs::read(f.key).unwrap()))
            .domain_name("governance.role.checkfu")
    };
    let list = gov::ListRequest { limit: 10, page: String::new() };
    let ch = Endpoint::from_shared(url.clone()).unwrap().tls_config(client("gateway")).unwrap().connect().await.unwrap();
    let listed = GovernanceServiceClient::new(ch).list_principals(list.clone()).await;
    assert!(listed.is_ok(), "{listed:?}");
    let ch = Endpoint::from_shared(url).unwrap().tls_config(client("runner")).unwrap().connect().await.unwrap();
    let e = GovernanceServiceClient::new(ch).list_principals(list).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied);
    node.stop().await;
}
