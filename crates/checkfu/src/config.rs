//! The `checkfu serve` configuration file (TOML):
//!
//! ```toml
//! listen = "0.0.0.0:7420"            # public: REST/SSE (gateway), health, metrics
//! internal_listen = "0.0.0.0:7421"   # the mesh: mutual TLS, other roles only
//! # A postgres:// URL, or a directory for the embedded SQLite stores.
//! # CHECKFU_DATABASE_URL overrides it (keep credentials out of files).
//! storage = "postgres://checkfu@db/checkfu"
//! bootstrap_key_file = "/var/lib/checkfu/admin.key"
//! # Kafka bootstrap servers for durable events (CHECKFU_KAFKA_BROKERS
//! # overrides it); without it events stay on an in-process bus.
//! kafka_brokers = "kafka-0.kafka:9092"
//! # Redis for live fan-out across replicas and shared rate limits
//! # (CHECKFU_REDIS_URL overrides it); without it both stay in process.
//! redis_url = "redis://redis:6379"
//!
//! [mesh]               # this process's identity on the internal mesh
//! ca = "/etc/checkfu/mesh/ca.crt"     # the installation CA
//! cert = "/etc/checkfu/mesh/tls.crt"  # names the roles it plays
//! key = "/etc/checkfu/mesh/tls.key"
//!
//! [endpoints]          # internal addresses of roles this process does not
//!                      # play (a runner needs sessions, model-gateway,
//!                      # governance and capability-gateway)
//! governance = "https://checkfu-governance:7421"
//! sessions = "https://checkfu-sessions:7421"
//! model-gateway = "https://checkfu-model-gateway:7421"
//! ```

use anyhow::{Context, bail};
use checkfu_core::Role;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub internal_listen: Option<String>,
    pub storage: Option<String>,
    pub bootstrap_key_file: Option<PathBuf>,
    pub kafka_brokers: Option<String>,
    pub redis_url: Option<String>,
    pub mesh: Option<MeshConfig>,
    #[serde(default)]
    pub endpoints: BTreeMap<String, String>,
    /// Provider endpoints routing profiles may name:
    /// `[model_endpoints.vllm] provider = "openai", base_url = "http://vllm:8000/v1",
    /// api_key_env = "VLLM_KEY", allow_private = true`.
    #[serde(default)]
    pub model_endpoints: BTreeMap<String, checkfu_model_gateway::endpoints::EndpointConfig>,
}

/// `[mesh]`: the files of this process's mesh identity.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshConfig {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl MeshConfig {
    pub fn files(&self) -> crate::mesh::MeshFiles {
        crate::mesh::MeshFiles { ca: self.ca.clone(), cert: self.cert.clone(), key: self.key.clone() }
    }
}

impl FileConfig {
    /// The model gateway's endpoints: the providers' defaults (keys from
    /// `CHECKFU_OPENAI_API_KEY` / `CHECKFU_ANTHROPIC_API_KEY`) and those
    /// configured here (keys from the variables they name).
    pub fn model_endpoints(&self, allow_private: bool) -> anyhow::Result<checkfu_model_gateway::endpoints::Endpoints> {
        use checkfu_model_gateway::endpoints::{Endpoint, Endpoints};
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let configured = self
            .model_endpoints
            .iter()
            .map(|(name, c)| Endpoint::from_config(name, c, env))
            .collect::<checkfu_core::Result<Vec<_>>>()
            .map_err(|e| anyhow::anyhow!("[model_endpoints]: {}", e.message))?;
        Endpoints::new(env("CHECKFU_OPENAI_API_KEY"), env("CHECKFU_ANTHROPIC_API_KEY"), configured, allow_private)
            .map_err(|e| anyhow::anyhow!("[model_endpoints]: {}", e.message))
    }

    pub fn load(path: &std::path::Path) -> anyhow::Result<FileConfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    pub fn remotes(&self) -> anyhow::Result<BTreeMap<Role, String>> {
        let mut out = BTreeMap::new();
        for (name, url) in &self.endpoints {
            let Some(role) = Role::parse(name) else {
                bail!("unknown role {name:?} in [endpoints]");
            };
            if !url.starts_with("https://") {
                bail!("endpoint {name} must be an https:// URL (the mesh is mutual TLS), got {url:?}");
            }
            out.insert(role, url.clone());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_endpoints_and_refuses_unknown_keys() {
        let c: FileConfig = toml::from_str("storage = \"postgres://x\"\n[endpoints]\nsessions = \"https://s:1\"\n").expect("valid");
        assert_eq!(c.remotes().expect("remotes").get(&Role::Sessions).map(String::as_str), Some("https://s:1"));
        let plain: FileConfig = toml::from_str("[endpoints]\nsessions = \"http://s:1\"").expect("parses");
        assert!(plain.remotes().is_err(), "a plaintext internal endpoint is refused");
        assert!(toml::from_str::<FileConfig>("nope = 1").is_err());
        let bad: FileConfig = toml::from_str("[endpoints]\nfoo = \"http://x\"").expect("parses");
        assert!(bad.remotes().is_err());
    }
}
