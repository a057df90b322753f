//! The custom resources, as Rust types; their CRDs are generated from them
//! (`crds()`), so the schema a cluster validates is the one the operator
//! reads.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of every Checkfu resource.
pub const GROUP: &str = "checkfu.dev";

/// A condition, as Kubernetes conventions have them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Ready`, `Paired`, `Degraded`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub message: String,
    /// RFC 3339.
    pub last_transition_time: String,
    pub observed_generation: Option<i64>,
}

/// A Secret key holding a credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    pub name: String,
    pub key: String,
}

/// CPU, memory and ephemeral storage, in the SandboxProfile's units.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    pub cpu_millis: u32,
    pub memory_mib: u32,
    pub disk_mib: u32,
}

/// Self-hosted runner pods for one Environment and pool, paired with the
/// installation through its public API.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "checkfu.dev",
    version = "v1alpha1",
    kind = "Runner",
    namespaced,
    status = "RunnerStatus",
    shortname = "ckr",
    printcolumn = r#"{"name":"Pool","type":"string","jsonPath":".spec.pool"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas"}"#,
    printcolumn = r#"{"name":"Paired","type":"integer","jsonPath":".status.pairedRunners"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RunnerSpec {
    /// The installation's public URL (the runner pods' `--server`).
    pub server: String,
    pub environment_id: String,
    pub pool: String,
    pub replicas: u32,
    /// The runner image; default the operator's own version.
    pub image: Option<String>,
    pub resources: Option<Resources>,
    /// An installation API key allowed to mint pairing codes (`manage` on
    /// the Environment and `act_as` on `principalId`).
    pub credential_secret: SecretKeyRef,
    /// The Principal the Runners act as.
    pub principal_id: String,
    /// Change it to pair every pod again with fresh credentials (the old
    /// Runners are revoked).
    pub rotation: Option<String>,
}

/// What the operator last saw of the Runner's pods.
// Every field may be absent (a status written by another version, or by
// hand): a partial status still reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct RunnerStatus {
    pub observed_generation: Option<i64>,
    pub ready_replicas: u32,
    pub paired_runners: u32,
    pub conditions: Vec<Condition>,
}

/// One live SessionSandbox of the Kubernetes managed plane: the pod whose
/// image is the pinned SandboxProfile revision's, its workspace volume and
/// its network policy. Created by the runner role; reconciled by the
/// operator; gone when the Session ends or at `expiresAt`.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "checkfu.dev",
    version = "v1alpha1",
    kind = "Sandbox",
    namespaced,
    status = "SandboxStatus",
    shortname = "cks",
    printcolumn = r#"{"name":"Session","type":"string","jsonPath":".spec.sessionId"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Expires","type":"string","jsonPath":".spec.expiresAt"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSpec {
    pub session_id: String,
    pub environment_id: String,
    /// The pinned SandboxProfile revision's image.
    pub image: String,
    pub resources: Resources,
    /// `sandbox_expires_at` (RFC 3339): the operator deletes the children then.
    pub expires_at: String,
    /// The workspace volume's storage class; default the cluster's.
    pub storage_class: Option<String>,
    /// The Secret (made by the runner, owned by this Sandbox) whose `token`
    /// the in-pod agent requires on every call.
    pub agent_secret: String,
    /// The namespace of the installation's pods (the managed runner that
    /// calls the agent, the capability gateway it may reach), when it is
    /// not the Sandbox's own.
    pub platform_namespace: Option<String>,
}

/// What the operator last saw of the Sandbox's pod.
// Every field may be absent, as for `RunnerStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct SandboxStatus {
    pub observed_generation: Option<i64>,
    /// `Pending`, `Ready`, `Expired` or `Failed`.
    pub phase: String,
    pub pod_phase: Option<String>,
    /// `ip:port` of the in-pod agent, once the pod is ready.
    pub address: Option<String>,
    pub conditions: Vec<Condition>,
}

/// Every CRD, by file name, as committed to `charts/checkfu-crds/templates`
/// (JSON, which is YAML).
pub fn crds() -> Vec<(&'static str, serde_json::Value)> {
    use kube::CustomResourceExt;
    let json = |c| serde_json::to_value(c).unwrap_or(serde_json::Value::Null);
    vec![("runners.checkfu.dev.yaml", json(Runner::crd())), ("sandboxes.checkfu.dev.yaml", json(Sandbox::crd()))]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn committed(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/checkfu-crds/templates").join(name)
    }

    /// The committed CRDs are the generated ones: regenerate with
    /// `CHECKFU_WRITE_CRDS=1 cargo test -p checkfu-operator-api` after changing a type.
    #[test]
    fn the_committed_crds_are_generated_from_the_types() {
        for (name, crd) in crds() {
            let text = format!("{}\n", serde_json::to_string_pretty(&crd).expect("json"));
            if std::env::var("CHECKFU_WRITE_CRDS").is_ok() {
                std::fs::write(committed(name), &text).expect("write");
            }
            let on_disk = std::fs::read_to_string(committed(name)).unwrap_or_default();
            assert!(on_disk == text, "{name} differs from the generated CRD: run CHECKFU_WRITE_CRDS=1 cargo test -p checkfu-operator-api");
        }
    }

    #[test]
    fn the_crds_name_their_group_scope_and_status() {
        for (_, crd) in crds() {
            assert_eq!(crd["spec"]["group"], GROUP);
            assert_eq!(crd["spec"]["scope"], "Namespaced");
            let v = &crd["spec"]["versions"][0];
            assert_eq!(v["name"], "v1alpha1");
            assert!(v["subresources"]["status"].is_object(), "status is a subresource (written by server-side apply)");
            assert!(v["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"].is_array());
        }
    }
}
