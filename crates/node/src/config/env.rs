//! The environment: the one place Checkfu reads it.
//!
//! [`Env`] is a snapshot taken once at start (tests build their own), and
//! [`VARIABLES`] is the table of `CHECKFU_*` variables, each overriding one
//! configuration key. An empty variable counts as unset.

use std::collections::BTreeMap;

/// How a variable's text becomes a configuration value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Integer,
    Boolean,
}

/// A variable, the key it sets, and how its text is read.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    pub name: &'static str,
    pub key: &'static str,
    pub kind: Kind,
}

const fn var(name: &'static str, key: &'static str, kind: Kind) -> Variable {
    Variable { name, key, kind }
}

/// Every variable Checkfu reads, and the key each one overrides.
pub const VARIABLES: &[Variable] = &[
    var("CHECKFU_LISTEN", "listen", Kind::Text),
    var("CHECKFU_INTERNAL_LISTEN", "internal_listen", Kind::Text),
    var("CHECKFU_DATA_DIR", "data_dir", Kind::Text),
    var("CHECKFU_DATABASE_URL", "storage", Kind::Text),
    var("CHECKFU_BOOTSTRAP_KEY_FILE", "bootstrap_key_file", Kind::Text),
    var("CHECKFU_KAFKA_BROKERS", "kafka_brokers", Kind::Text),
    var("CHECKFU_REDIS_URL", "redis_url", Kind::Text),
    var("CHECKFU_ALLOW_PRIVATE_TARGETS", "allow_private_targets", Kind::Boolean),
    var("CHECKFU_ALLOW_UNRESTRICTED_NETWORK", "allow_unrestricted_network", Kind::Boolean),
    var("CHECKFU_CMA_PREFIX", "cma_prefix", Kind::Text),
    var("CHECKFU_PUBLIC_URL", "public_url", Kind::Text),
    var("CHECKFU_TEST_PROVIDERS", "test_providers", Kind::Boolean),
    var("CHECKFU_SECRETS_KEY", "secrets_key", Kind::Text),
    var("CHECKFU_CREDENTIAL_KEY_FILE", "credential_key_file", Kind::Text),
    var("CHECKFU_FEATURES_DISABLED", "features_disabled", Kind::Text),
    var("CHECKFU_FILES_RETENTION_DAYS", "files_retention_days", Kind::Integer),
    var("CHECKFU_EGRESS_LISTEN", "egress_listen", Kind::Text),
    var("CHECKFU_EGRESS_ADVERTISE", "egress_advertise", Kind::Text),
    var("CHECKFU_BLOB_STORE", "blob_store", Kind::Text),
    var("CHECKFU_RATE_LIMIT_PER_SECOND", "limits.rate_limit_per_second", Kind::Integer),
    var("CHECKFU_MAX_STREAMS_PER_PRINCIPAL", "limits.max_streams_per_principal", Kind::Integer),
    var("CHECKFU_AUTH_FAILURES_PER_WINDOW", "limits.auth_failures_per_window", Kind::Integer),
    var("CHECKFU_SSE_PING_SECONDS", "timing.sse_ping_seconds", Kind::Integer),
    var("CHECKFU_APPROVAL_TTL_SECONDS", "timing.approval_ttl_seconds", Kind::Integer),
    var("CHECKFU_RUN_LEASE_MS", "timing.run_lease_ms", Kind::Integer),
    var("CHECKFU_RUNNER_ID", "runner.id", Kind::Text),
    var("CHECKFU_RUNNER_HEARTBEAT_MS", "runner.heartbeat_ms", Kind::Integer),
    var("CHECKFU_WORKSPACES", "runner.workspaces", Kind::Text),
    var("CHECKFU_SANDBOX_CGROUP", "runner.sandbox_cgroup", Kind::Text),
    var("CHECKFU_SANDBOX_DRIVER", "runner.sandbox_driver", Kind::Text),
    var("CHECKFU_SANDBOX_NAMESPACE", "runner.sandbox_namespace", Kind::Text),
    var("CHECKFU_SANDBOX_STORAGE_CLASS", "runner.sandbox_storage_class", Kind::Text),
    var("CHECKFU_OPENAI_API_KEY", "providers.openai_api_key", Kind::Text),
    var("CHECKFU_ANTHROPIC_API_KEY", "providers.anthropic_api_key", Kind::Text),
];

/// The OpenTelemetry variable naming the OTLP/gRPC collector (the
/// standard name, read before any configuration is loaded).
pub const OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// The variable holding a sandbox agent's token (the Sandbox's Secret
/// provides it; never a configuration key, so never in a file).
pub const SANDBOX_AGENT_TOKEN: &str = "CHECKFU_SANDBOX_AGENT_TOKEN";

/// Where this process runs, as Kubernetes tells a pod through its
/// environment: the pod's name (`HOSTNAME`) and, from the downward API the
/// chart sets up, its namespace (`POD_NAMESPACE`). Outside a cluster both
/// are usually absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pod {
    pub name: Option<String>,
    pub namespace: Option<String>,
}

impl Pod {
    pub fn of(env: &Env) -> Pod {
        Pod { name: env.get("HOSTNAME"), namespace: env.get("POD_NAMESPACE") }
    }
}

/// A snapshot of the environment.
#[derive(Debug, Clone, Default)]
pub struct Env(BTreeMap<String, String>);

impl Env {
    /// This process's environment (variables that are not UTF-8 are left out).
    pub fn process() -> Env {
        Env(std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect())
    }

    /// A variable's value; empty counts as unset.
    pub fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).filter(|v| !v.is_empty()).cloned()
    }
}

impl<const N: usize> From<[(&str, &str); N]> for Env {
    fn from(pairs: [(&str, &str); N]) -> Env {
        Env(pairs.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }
}
