//! A SandboxProfile revision's spec between the public JSON and the mesh's
//! typed `SandboxSpec`: a body's `network` and `resources` read into it (the
//! sessions service checks ranges and hosts and compiles package-manager
//! reach) and a revision rendered back.

use checkfu_proto::sessions::v1 as ss;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `network` as a body gives it and a revision shows it.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    #[serde(default)]
    pub allow_package_managers: bool,
    #[serde(default)]
    pub allow_mcp_servers: bool,
}

/// `resources`: a body may leave any out (the service's defaults apply); a
/// stored revision has all three.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_millis: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_mib: Option<i64>,
}

impl From<Network> for ss::SandboxNetwork {
    fn from(n: Network) -> Self {
        ss::SandboxNetwork {
            allowed_hosts: n.allowed_hosts,
            allow_package_managers: n.allow_package_managers,
            allow_mcp_servers: n.allow_mcp_servers,
        }
    }
}

impl From<Resources> for ss::SandboxResources {
    fn from(r: Resources) -> Self {
        ss::SandboxResources { cpu_millis: r.cpu_millis, memory_mib: r.memory_mib, disk_mib: r.disk_mib }
    }
}

/// A revision's spec as the public JSON shows its parts.
pub struct Rendered {
    pub image: String,
    pub description: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub packages: Vec<String>,
    pub network: Network,
    pub resources: Resources,
    pub retention_days: i64,
    pub execution: String,
}

/// From the typed spec, or from the JSON text of a 0.1.0 sessions service.
#[allow(deprecated)] // spec_json: a 0.1.0 service's text
pub fn rendered(r: &ss::SandboxRevision) -> Rendered {
    let Some(s) = &r.spec else {
        let spec = crate::json_text::doc(&r.spec_json);
        return Rendered {
            image: spec["image"].as_str().unwrap_or_default().to_string(),
            description: spec["description"].as_str().map(String::from),
            metadata: serde_json::from_value(spec["metadata"].clone()).unwrap_or_default(),
            packages: serde_json::from_value(spec["packages"].clone()).unwrap_or_default(),
            network: serde_json::from_value(spec["network"].clone()).unwrap_or_default(),
            resources: serde_json::from_value(spec["resources"].clone()).unwrap_or_default(),
            retention_days: spec["retention_days"].as_i64().unwrap_or_default(),
            execution: spec["execution"].as_str().unwrap_or("managed").to_string(),
        };
    };
    let n = s.network.clone().unwrap_or_default();
    let network = Network {
        allowed_hosts: n.allowed_hosts,
        allow_package_managers: n.allow_package_managers,
        allow_mcp_servers: n.allow_mcp_servers,
    };
    let r = s.resources.unwrap_or_default();
    let resources = Resources { cpu_millis: r.cpu_millis, memory_mib: r.memory_mib, disk_mib: r.disk_mib };
    Rendered {
        image: s.image.clone(),
        description: s.description.clone(),
        metadata: s.metadata.clone().into_iter().collect(),
        packages: s.packages.clone(),
        network,
        resources,
        retention_days: s.retention_days.unwrap_or_default(),
        execution: if s.execution.is_empty() { "managed".into() } else { s.execution.clone() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[allow(deprecated)]
    fn revision(spec: Option<ss::SandboxSpec>, text: Value) -> ss::SandboxRevision {
        ss::SandboxRevision { spec, spec_json: text.to_string(), ..Default::default() }
    }

    #[test]
    fn a_revision_renders_the_same_typed_or_from_a_0_1_0_services_text() {
        let stored = json!({
            "image": "debian:12", "packages": ["git"], "retention_days": 7, "execution": "external_tools",
            "description": "builds", "metadata": {"team": "a"},
            "network": {"allowed_hosts": ["example.com"], "allow_package_managers": false, "allow_mcp_servers": true},
            "resources": {"cpu_millis": 2000, "memory_mib": 1024, "disk_mib": 4096},
        });
        let typed = ss::SandboxSpec {
            image: "debian:12".into(),
            description: Some("builds".into()),
            metadata: [("team".to_string(), "a".to_string())].into(),
            packages: vec!["git".into()],
            network: Some(parsed::<Network>(&stored["network"]).into()),
            resources: Some(parsed::<Resources>(&stored["resources"]).into()),
            retention_days: Some(7),
            execution: "external_tools".into(),
        };
        for r in [revision(Some(typed), Value::Null), revision(None, stored.clone())] {
            let v = rendered(&r);
            assert_eq!(
                (v.image.as_str(), v.packages, json!(v.network), json!(v.resources), v.retention_days, v.execution.as_str()),
                ("debian:12", vec!["git".to_string()], stored["network"].clone(), stored["resources"].clone(), 7, "external_tools")
            );
            assert_eq!((v.description.as_deref(), json!(v.metadata)), (Some("builds"), stored["metadata"].clone()));
        }
    }

    fn parsed<T: serde::de::DeserializeOwned>(v: &Value) -> T {
        serde_json::from_value(v.clone()).expect("shape")
    }

    #[test]
    fn a_body_names_a_misshapen_network_or_resources() {
        assert!(serde_json::from_value::<Network>(json!({"hosts": []})).is_err(), "an unknown field");
        assert!(serde_json::from_value::<Resources>(json!({"cpu_millis": "lots"})).is_err(), "not a number");
        let r: Resources = parsed(&json!({"memory_mib": 512}));
        assert_eq!((r.cpu_millis, r.memory_mib, r.disk_mib), (None, Some(512), None), "absent fields stay absent");
    }
}
