//! The `checkfu serve` configuration file (TOML):
//!
//! ```toml
//! listen = "0.0.0.0:7420"
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
//! [endpoints]          # roles this process does not play (a runner needs
//!                      # sessions, model-gateway and governance)
//! governance = "http://checkfu-governance:7420"
//! sessions = "http://checkfu-sessions:7420"
//! model-gateway = "http://checkfu-model-gateway:7420"
//! ```

use crate::roles::Role;
use anyhow::{Context, bail};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub storage: Option<String>,
    pub bootstrap_key_file: Option<PathBuf>,
    pub kafka_brokers: Option<String>,
    pub redis_url: Option<String>,
    #[serde(default)]
    pub endpoints: BTreeMap<String, String>,
}

impl FileConfig {
    pub fn load(path: &std::path::Path) -> anyhow::Result<FileConfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    pub fn remotes(&self) -> anyhow::Result<BTreeMap<Role, String>> {
        let mut out = BTreeMap::new();
        for (name, url) in &self.endpoints {
            let Some(role) = Role::ALL.iter().find(|r| r.name() == name) else {
                bail!("unknown role {name:?} in [endpoints]");
            };
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                bail!("endpoint {name} must be an http(s) URL, got {url:?}");
            }
            out.insert(*role, url.clone());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_endpoints_and_refuses_unknown_keys() {
        let c: FileConfig = toml::from_str("storage = \"postgres://x\"\n[endpoints]\nsessions = \"http://s:1\"\n").expect("valid");
        assert_eq!(c.remotes().expect("remotes").get(&Role::Sessions).map(String::as_str), Some("http://s:1"));
        assert!(toml::from_str::<FileConfig>("nope = 1").is_err());
        let bad: FileConfig = toml::from_str("[endpoints]\nfoo = \"http://x\"").expect("parses");
        assert!(bad.remotes().is_err());
    }
}
