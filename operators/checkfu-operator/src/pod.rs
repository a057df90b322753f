//! What the operator keeps for a `Sandbox`: its pod, the workspace volume
//! claim and the network policy, as pure functions of the resource (so a
//! reconcile can compare and repair, and tests can read every field).
//!
//! The pod runs the pinned image as a non-root user with a read-only root
//! filesystem, no service-account token, the runtime's default seccomp
//! profile and every capability dropped; the profile's cpu, memory and disk
//! are its requests and limits. The in-pod agent is copied in by an init
//! container from the operator's image, so any image works.

use checkfu_operator_api::TOKEN_KEY;
use checkfu_operator_api::crd::Sandbox;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, PodSecurityContext, PodSpec, Probe, ResourceRequirements, SeccompProfile, SecretKeySelector,
    SecurityContext, TCPSocketAction, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicySpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;
use std::collections::BTreeMap;

/// The uid the sandbox runs as (any image: no user of its own is needed).
pub const SANDBOX_UID: i64 = 65_532;
/// Where the workspace is mounted in the pod (the path the tools show).
pub const WORKSPACE: &str = "/workspace";
/// Where the in-pod agent is copied to.
const AGENT_DIR: &str = "/checkfu";
/// Where the agent is in the operator's (Checkfu's) image.
const AGENT_IN_IMAGE: &str = "/usr/local/bin/checkfu";
/// The agent's port.
pub const AGENT_PORT: i32 = 7070;

/// The name of every child of a Sandbox.
pub fn name(sb: &Sandbox) -> String {
    format!("sandbox-{}", sb.metadata.name.clone().unwrap_or_default())
}

fn labels(sb: &Sandbox) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/managed-by".to_string(), "checkfu-operator".to_string()),
        ("app.kubernetes.io/component".to_string(), "sandbox".to_string()),
        ("checkfu.dev/session".to_string(), sb.spec.session_id.clone()),
    ])
}

/// The Sandbox as its children's controller: deleting it deletes them.
fn owner(sb: &Sandbox) -> Vec<OwnerReference> {
    sb.controller_owner_ref(&()).into_iter().collect()
}

fn meta(sb: &Sandbox) -> ObjectMeta {
    ObjectMeta {
        name: Some(name(sb)),
        namespace: sb.metadata.namespace.clone(),
        labels: Some(labels(sb)),
        owner_references: Some(owner(sb)),
        ..ObjectMeta::default()
    }
}

fn quantities(sb: &Sandbox) -> BTreeMap<String, Quantity> {
    let r = &sb.spec.resources;
    BTreeMap::from([
        ("cpu".to_string(), Quantity(format!("{}m", r.cpu_millis))),
        ("memory".to_string(), Quantity(format!("{}Mi", r.memory_mib))),
        ("ephemeral-storage".to_string(), Quantity(format!("{}Mi", r.disk_mib.min(1024)))),
    ])
}

fn locked_down() -> SecurityContext {
    SecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(SANDBOX_UID),
        run_as_group: Some(SANDBOX_UID),
        read_only_root_filesystem: Some(true),
        allow_privilege_escalation: Some(false),
        privileged: Some(false),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
        ..SecurityContext::default()
    }
}

/// The sandbox pod: the pinned image running the in-pod agent.
pub fn sandbox_pod(sb: &Sandbox, agent_image: &str) -> Pod {
    let mount = |name: &str, path: &str, read_only: bool| VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: Some(read_only),
        ..VolumeMount::default()
    };
    let limits = quantities(sb);
    Pod {
        metadata: meta(sb),
        spec: Some(PodSpec {
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            restart_policy: Some("Always".into()),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(SANDBOX_UID),
                fs_group: Some(SANDBOX_UID),
                seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
                ..PodSecurityContext::default()
            }),
            init_containers: Some(vec![Container {
                name: "agent".into(),
                image: Some(agent_image.into()),
                command: Some(vec![AGENT_IN_IMAGE.into(), "sandbox-agent".into(), "--install".into(), AGENT_DIR.into()]),
                security_context: Some(locked_down()),
                volume_mounts: Some(vec![mount("agent", AGENT_DIR, false)]),
                resources: Some(ResourceRequirements {
                    limits: Some(limits.clone()),
                    requests: Some(limits.clone()),
                    ..Default::default()
                }),
                ..Container::default()
            }]),
            containers: vec![Container {
                name: "sandbox".into(),
                image: Some(sb.spec.image.clone()),
                command: Some(vec![
                    format!("{AGENT_DIR}/checkfu"),
                    "sandbox-agent".into(),
                    "--workspace".into(),
                    WORKSPACE.into(),
                    "--listen".into(),
                    format!("0.0.0.0:{AGENT_PORT}"),
                ]),
                working_dir: Some(WORKSPACE.into()),
                env: Some(vec![EnvVar {
                    name: "CHECKFU_SANDBOX_AGENT_TOKEN".into(),
                    value_from: Some(EnvVarSource {
                        secret_key_ref: Some(SecretKeySelector {
                            name: sb.spec.agent_secret.clone(),
                            key: TOKEN_KEY.into(),
                            optional: Some(false),
                        }),
                        ..EnvVarSource::default()
                    }),
                    value: None,
                }]),
                ports: Some(vec![ContainerPort { name: Some("agent".into()), container_port: AGENT_PORT, ..ContainerPort::default() }]),
                readiness_probe: Some(Probe {
                    tcp_socket: Some(TCPSocketAction { port: IntOrString::Int(AGENT_PORT), host: None }),
                    period_seconds: Some(2),
                    ..Probe::default()
                }),
                security_context: Some(locked_down()),
                resources: Some(ResourceRequirements { limits: Some(limits.clone()), requests: Some(limits), ..Default::default() }),
                volume_mounts: Some(vec![
                    mount("workspace", WORKSPACE, false),
                    mount("agent", AGENT_DIR, true),
                    mount("tmp", "/tmp", false),
                ]),
                ..Container::default()
            }],
            volumes: Some(vec![
                Volume {
                    name: "workspace".into(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource { claim_name: name(sb), read_only: Some(false) }),
                    ..Volume::default()
                },
                Volume { name: "agent".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Volume::default() },
                Volume {
                    name: "tmp".into(),
                    empty_dir: Some(EmptyDirVolumeSource { size_limit: Some(Quantity("64Mi".into())), ..Default::default() }),
                    ..Volume::default()
                },
            ]),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The workspace volume claim: the profile's disk.
pub fn workspace_claim(sb: &Sandbox) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: meta(sb),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: sb.spec.storage_class.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity(format!("{}Mi", sb.spec.resources.disk_mib)))])),
                limits: None,
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// No ingress but from the runner pods (the agent's channel); egress only
/// to the capability gateway (the sandbox's one way out).
pub fn network_policy(sb: &Sandbox) -> NetworkPolicy {
    // The chart's pods (`app.kubernetes.io/name: checkfu`), so a
    // self-hosted runner pod in the same namespace is not a peer.
    // In the installation's namespace, when that is not the Sandbox's.
    let namespace = sb.spec.platform_namespace.as_ref().filter(|ns| Some(*ns) != sb.metadata.namespace.as_ref()).map(|ns| LabelSelector {
        match_labels: Some(BTreeMap::from([("kubernetes.io/metadata.name".to_string(), ns.clone())])),
        match_expressions: None,
    });
    let component = |c: &str| NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([
                ("app.kubernetes.io/name".to_string(), "checkfu".to_string()),
                ("app.kubernetes.io/component".to_string(), c.to_string()),
            ])),
            match_expressions: None,
        }),
        namespace_selector: namespace.clone(),
        ..NetworkPolicyPeer::default()
    };
    NetworkPolicy {
        metadata: meta(sb),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector { match_labels: Some(labels(sb)), match_expressions: None }),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(vec![k8s_openapi::api::networking::v1::NetworkPolicyIngressRule {
                from: Some(vec![component("runner")]),
                ports: Some(vec![k8s_openapi::api::networking::v1::NetworkPolicyPort {
                    port: Some(IntOrString::Int(AGENT_PORT)),
                    protocol: Some("TCP".into()),
                    end_port: None,
                }]),
            }]),
            egress: Some(vec![NetworkPolicyEgressRule { to: Some(vec![component("capability-gateway")]), ports: None }]),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use checkfu_operator_api::crd::{Resources, SandboxSpec};

    fn sandbox() -> Sandbox {
        let mut sb = Sandbox::new(
            "sess-01jx",
            SandboxSpec {
                session_id: "sess_01jx".into(),
                environment_id: "env_1".into(),
                image: "python:3.12-slim".into(),
                resources: Resources { cpu_millis: 1500, memory_mib: 2048, disk_mib: 4096 },
                expires_at: "2026-12-31T00:00:00Z".into(),
                storage_class: Some("fast".into()),
                agent_secret: "sandbox-sess-01jx-agent".into(),
                platform_namespace: None,
            },
        );
        sb.metadata.namespace = Some("agents".into());
        sb.metadata.uid = Some("uid-1".into());
        sb
    }

    fn check_locked(c: &Container) {
        let s = c.security_context.as_ref().expect("security context");
        assert_eq!(s.run_as_non_root, Some(true), "{}", c.name);
        assert_eq!(s.read_only_root_filesystem, Some(true), "{}", c.name);
        assert_eq!(s.allow_privilege_escalation, Some(false), "{}", c.name);
        assert_eq!(s.privileged, Some(false), "{}", c.name);
        assert_eq!(s.capabilities.as_ref().and_then(|c| c.drop.clone()), Some(vec!["ALL".to_string()]), "{}", c.name);
        assert!(s.capabilities.as_ref().is_some_and(|c| c.add.is_none()));
        assert_eq!(s.seccomp_profile.as_ref().map(|p| p.type_.as_str()), Some("RuntimeDefault"), "{}", c.name);
    }

    #[test]
    fn the_sandbox_pod_runs_the_pinned_image_locked_down_within_the_profile() {
        let sb = sandbox();
        let pod = sandbox_pod(&sb, "ghcr.io/checkfu/checkfu:0.1.0");
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.automount_service_account_token, Some(false), "no service-account token");
        assert_eq!(spec.security_context.as_ref().and_then(|s| s.run_as_non_root), Some(true));
        let main = &spec.containers[0];
        assert_eq!(main.image.as_deref(), Some("python:3.12-slim"), "the profile's image");
        check_locked(main);
        for init in spec.init_containers.as_ref().expect("init") {
            check_locked(init);
        }
        let limits = main.resources.as_ref().and_then(|r| r.limits.clone()).expect("limits");
        assert_eq!(limits["cpu"], Quantity("1500m".into()));
        assert_eq!(limits["memory"], Quantity("2048Mi".into()));
        assert!(limits.contains_key("ephemeral-storage"));
        assert_eq!(main.resources.as_ref().and_then(|r| r.requests.clone()), Some(limits), "requests are the limits");
        let env = serde_json::to_value(&main.env).expect("json");
        assert_eq!(env[0]["valueFrom"]["secretKeyRef"]["name"], "sandbox-sess-01jx-agent", "the token comes from the Secret");
        assert!(env[0].get("value").is_none_or(|v| v.is_null()), "never inline");
        assert_eq!(main.command.as_ref().map(|c| c[..2].to_vec()), Some(vec!["/checkfu/checkfu".to_string(), "sandbox-agent".to_string()]));
        let init = &spec.init_containers.as_ref().expect("init")[0];
        assert_eq!(init.image.as_deref(), Some("ghcr.io/checkfu/checkfu:0.1.0"), "the agent comes from Checkfu's image");
        let mounts = main.volume_mounts.clone().unwrap_or_default();
        assert!(mounts.iter().any(|m| m.mount_path == "/checkfu" && m.read_only == Some(true)), "the agent is read-only to the sandbox");
        assert!(mounts.iter().any(|m| m.mount_path == WORKSPACE && m.read_only == Some(false)));
        let owner = &pod.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!((owner.kind.as_str(), owner.controller), ("Sandbox", Some(true)));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("agents"));
        let claim = workspace_claim(&sb);
        let storage = claim.spec.as_ref().and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.clone()).expect("storage");
        assert_eq!(storage["storage"], Quantity("4096Mi".into()));
        assert_eq!(claim.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()), Some("fast"));
    }

    #[test]
    fn the_sandbox_reaches_only_the_capability_gateway() {
        let np = network_policy(&sandbox());
        let spec = np.spec.expect("spec");
        assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string(), "Egress".to_string()]));
        let egress = spec.egress.expect("egress");
        assert_eq!(egress.len(), 1);
        let to = serde_json::to_value(&egress[0]).expect("json");
        assert_eq!(to["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"], "capability-gateway");
        assert_eq!(to["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"], "checkfu");
        assert!(to.get("ports").is_none() || to["ports"].is_null());
        let ingress = serde_json::to_value(&spec.ingress).expect("json");
        assert_eq!(ingress.as_array().map(Vec::len), Some(1), "only the managed runner reaches the agent");
        assert_eq!(ingress[0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"], "runner");
        assert_eq!(ingress[0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"], "checkfu");
        assert_eq!(ingress[0]["ports"][0]["port"], AGENT_PORT);
        assert!(to["to"][0].get("namespaceSelector").is_none(), "the same namespace");

        // Sandboxes in a namespace of their own: the peers are the installation's.
        let mut elsewhere = sandbox();
        elsewhere.spec.platform_namespace = Some("checkfu".into());
        let spec = network_policy(&elsewhere).spec.expect("spec");
        for peer in [
            serde_json::to_value(&spec.ingress).expect("json")[0]["from"][0].clone(),
            serde_json::to_value(&spec.egress).expect("json")[0]["to"][0].clone(),
        ] {
            assert_eq!(peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"], "checkfu", "{peer}");
            assert_eq!(peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"], "checkfu", "{peer}");
        }
    }
}
