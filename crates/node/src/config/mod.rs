//! One typed configuration for every command that runs roles.
//!
//! A [`Config`] is built in layers, each overriding the one before:
//! defaults (which depend on the [`Mode`]) → the TOML file (`--config`) →
//! the `CHECKFU_*` environment ([`env::VARIABLES`]) → command-line flags.
//! It is validated once at start; an error names the key, where its value
//! came from and the rule it broke. `checkfu config` prints the effective
//! configuration with secrets redacted. Nothing outside this module reads
//! the environment.
//!
//! ```toml
//! listen = "0.0.0.0:7420"            # public: REST/SSE (gateway), health, metrics
//! internal_listen = "0.0.0.0:7421"   # the mesh: mutual TLS, other roles only
//! data_dir = "/var/lib/checkfu"      # SQLite stores, workspaces, keys
//! # A postgres:// URL; without it the stores are SQLite files in data_dir.
//! # Keep credentials out of files: CHECKFU_DATABASE_URL.
//! storage = "postgres://checkfu@db/checkfu"
//! kafka_brokers = "kafka-0.kafka:9092"   # else events stay on an in-process bus
//! redis_url = "redis://redis:6379"       # else fan-out and limits stay in process
//!
//! [limits]
//! rate_limit_per_second = 2000
//!
//! [mesh]               # this process's identity on the internal mesh
//! ca = "/etc/checkfu/mesh/ca.crt"
//! cert = "/etc/checkfu/mesh/tls.crt"
//! key = "/etc/checkfu/mesh/tls.key"
//!
//! [endpoints]          # internal addresses of roles this process does not play:
//! governance = "https://checkfu-governance:7421"   # a name is re-resolved; a list
//! sessions = "https://10.0.0.7:7421,https://10.0.0.8:7421"   # is balanced
//!
//! [model_endpoints.vllm]
//! provider = "openai"
//! base_url = "http://vllm:8000/v1"
//! api_key_env = "VLLM_KEY"
//! allow_private = true
//! ```
//!
//! `docs/configuration.md` lists every key with its variable and default.

pub mod env;
mod layers;
mod secret;

pub use env::Env;
pub use layers::{ConfigError, Source};
pub use secret::Secret;

use checkfu_core::Role;
use checkfu_model_gateway::endpoints::{Endpoint, EndpointConfig, Endpoints};
use checkfu_store::sealed::Sealer;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Which command the configuration is for: the defaults differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// `checkfu up`: one process, every role, listening on loopback.
    Up,
    /// `checkfu serve`: some roles, listening on every interface.
    Serve,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The public listener: REST/SSE (with the gateway role), health, metrics.
    pub listen: String,
    /// The internal mesh listener (mutual TLS), under `serve`.
    pub internal_listen: String,
    /// SQLite stores (when `storage` is unset), workspaces, the bootstrap
    /// key and the embedded secrets key.
    pub data_dir: PathBuf,
    /// A `postgres://` URL (or `sqlite://DIR`); unset keeps the stores as
    /// SQLite in `data_dir`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// Where governance writes the bootstrap admin key; default
    /// `data_dir/admin.key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_key_file: Option<PathBuf>,
    /// Kafka bootstrap servers for durable events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka_brokers: Option<String>,
    /// Redis for live fan-out across replicas and shared rate limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_url: Option<String>,
    /// Where session files and workspace snapshots are kept: `s3://bucket[/prefix]`
    /// (credentials and endpoint from the `AWS_*` variables) or a directory;
    /// default `data_dir/blobs`. Every sessions replica needs the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob_store: Option<String>,
    /// Outbound fetches (web_fetch, webhooks, model endpoints) may reach
    /// private, loopback and link-local addresses: development only.
    pub allow_private_targets: bool,
    /// SandboxProfiles may allow every public host (`allowed_hosts:["*"]`,
    /// still through the egress proxy): on under `up`, off under `serve`.
    pub allow_unrestricted_network: bool,
    /// Where the CMA-compatible projection is mounted (docs/cma.md).
    pub cma_prefix: String,
    /// The public API's base URL as providers reach it
    /// (`https://checkfu.example.com`): provider webhooks call back under
    /// it. Unset: under `up`, the listener's own address; under `serve`,
    /// provider sources are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// Offer the `fake` provider (tests and local development only).
    pub test_providers: bool,
    /// The installation key sealing stored secrets (32+ characters); on
    /// SQLite a key is kept in `data_dir/secrets.key` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_key: Option<Secret>,
    /// The credential key file (lines `<key_id>:<base64 of 32 bytes>`; the
    /// first wraps, all unwrap) sealing Connection credentials. Unset: on
    /// SQLite one is made in `data_dir/credentials.key`; on PostgreSQL
    /// `credentials` is unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_key_file: Option<PathBuf>,
    /// The sandbox egress proxy's listener (the capability gateway): the
    /// only network route a sandbox has. `checkfu up`: a free loopback port.
    pub egress_listen: String,
    /// The proxy's address as runners reach it (`host:port`); default the
    /// bound address (set it under `serve`, e.g. the capability gateway's
    /// Service name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_advertise: Option<String>,
    /// Features switched off, comma-separated (`files,skills`): each
    /// answers 503 `unavailable` (`feature_disabled`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub features_disabled: String,
    /// Days an uploaded File lives when its upload names no expiry; 0
    /// keeps Files until they are deleted.
    #[serde(default = "default_files_retention_days")]
    pub files_retention_days: i64,
    pub limits: Limits,
    pub timing: Timing,
    pub runner: RunnerSettings,
    pub providers: Providers,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mesh: Option<MeshConfig>,
    /// Internal addresses (`https://`) of roles this process does not play.
    #[serde(default)]
    pub endpoints: BTreeMap<String, String>,
    /// Provider endpoints routing profiles may name.
    #[serde(default)]
    pub model_endpoints: BTreeMap<String, EndpointConfig>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Requests per second one principal may make.
    pub rate_limit_per_second: u32,
    /// Open SSE streams one principal may hold on one gateway.
    pub max_streams_per_principal: u32,
    /// Invalid API keys one client address may present per 10 s.
    pub auth_failures_per_window: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// How often an idle SSE stream gets a `: ping` comment.
    pub sse_ping_seconds: u64,
    /// How long an ActionApproval waits for an answer.
    pub approval_ttl_seconds: u64,
    /// How long a Run's lease lasts without a heartbeat (a shorter one hands
    /// a dead replica's Runs over sooner).
    pub run_lease_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerSettings {
    /// A stable `rnr_` id; a fresh one per start when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// How often a held lease is renewed.
    pub heartbeat_ms: u64,
    /// Session workspaces; default `data_dir/workspaces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspaces: Option<PathBuf>,
    /// A delegated cgroup v2 directory for sandbox limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_cgroup: Option<PathBuf>,
    /// Where the sandbox tools run: `local` (a workspace on the runner's
    /// host, under bubblewrap) or `kubernetes` (a sandbox pod per Session,
    /// kept by the operator).
    #[serde(default = "local")]
    pub sandbox_driver: String,
    /// The namespace of the sandbox pods (`kubernetes`); default the
    /// runner's own (`POD_NAMESPACE`), else `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_namespace: Option<String>,
    /// The sandbox workspaces' storage class (`kubernetes`); default the
    /// cluster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_storage_class: Option<String>,
}

fn local() -> String {
    "local".into()
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Providers {
    /// The key of the default `openai` endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openai_api_key: Option<Secret>,
    /// The key of the default `anthropic` endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anthropic_api_key: Option<Secret>,
}

/// `[mesh]`: the files of this process's mesh identity.
#[derive(Debug, Clone, Serialize, Deserialize)]
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

impl Config {
    /// The defaults for `mode`.
    pub fn defaults(mode: Mode) -> Config {
        Config {
            listen: match mode {
                Mode::Up => "127.0.0.1:7420",
                Mode::Serve => "0.0.0.0:7420",
            }
            .into(),
            internal_listen: "0.0.0.0:7421".into(),
            data_dir: ".checkfu".into(),
            storage: None,
            bootstrap_key_file: None,
            kafka_brokers: None,
            redis_url: None,
            allow_private_targets: false,
            allow_unrestricted_network: matches!(mode, Mode::Up),
            cma_prefix: "/cma".into(),
            public_url: None,
            test_providers: false,
            secrets_key: None,
            credential_key_file: None,
            egress_listen: match mode {
                Mode::Up => "127.0.0.1:0",
                Mode::Serve => "0.0.0.0:7422",
            }
            .into(),
            egress_advertise: None,
            features_disabled: String::new(),
            files_retention_days: default_files_retention_days(),
            limits: Limits {
                rate_limit_per_second: 2_000,
                max_streams_per_principal: checkfu_gateway::streams::DEFAULT_MAX_PER_PRINCIPAL as u32,
                auth_failures_per_window: checkfu_gateway::auth::AUTH_FAILURES_PER_WINDOW,
            },
            timing: Timing {
                sse_ping_seconds: 15,
                approval_ttl_seconds: 3_600,
                run_lease_ms: checkfu_sessions::service::DEFAULT_LEASE_MS as u64,
            },
            runner: RunnerSettings {
                id: None,
                heartbeat_ms: 4_000,
                workspaces: None,
                sandbox_cgroup: None,
                sandbox_driver: local(),
                sandbox_namespace: None,
                sandbox_storage_class: None,
            },
            blob_store: None,
            providers: Providers::default(),
            mesh: None,
            endpoints: BTreeMap::new(),
            model_endpoints: BTreeMap::new(),
        }
    }

    /// Builds the configuration: defaults for `mode`, then `file`, then
    /// `env`, then `flags` (key, value, the flag's name), and validates it.
    pub fn load(mode: Mode, file: Option<&Path>, env: &Env, flags: &[(&str, toml::Value, &'static str)]) -> Result<Loaded, ConfigError> {
        let mut layers = layers::Layers::new(&Config::defaults(mode))?;
        if let Some(path) = file {
            layers.file(path)?;
        }
        layers.env(env)?;
        for (key, value, flag) in flags {
            layers.set(key, value.clone(), Source::Flag(flag));
        }
        let (config, sources) = layers.finish::<Config>()?;
        let (sealer, model_endpoints) = validate(&config, &sources, env)?;
        Ok(Loaded { config, sources, sealer, model_endpoints, pod: env::Pod::of(env) })
    }

    /// The SQLite directory or the PostgreSQL URL the stores live in.
    pub fn location(&self) -> checkfu_store::Location {
        match &self.storage {
            Some(url) => checkfu_store::Location::parse(url),
            None => checkfu_store::Location::SqliteDir(self.data_dir.clone()),
        }
    }

    pub fn bootstrap_key_file(&self) -> PathBuf {
        self.bootstrap_key_file.clone().unwrap_or_else(|| self.data_dir.join("admin.key"))
    }

    pub fn workspaces(&self) -> PathBuf {
        self.runner.workspaces.clone().unwrap_or_else(|| self.data_dir.join("workspaces"))
    }

    /// `[endpoints]` by role.
    pub fn remotes(&self) -> BTreeMap<Role, String> {
        self.endpoints.iter().filter_map(|(name, url)| Some((Role::parse(name)?, url.clone()))).collect()
    }
}

/// A validated configuration, with where each key's value came from, and
/// what validating it built.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    pub sources: BTreeMap<String, Source>,
    /// Seals stored secrets under `secrets_key`, when it is set.
    pub sealer: Option<Sealer>,
    /// The model gateway's endpoints: the providers' defaults and those
    /// configured, each with its key (read from the variable it names).
    pub model_endpoints: Endpoints,
    /// The pod this process runs in, when in a cluster.
    pub pod: env::Pod,
}

impl std::ops::Deref for Loaded {
    type Target = Config;
    fn deref(&self) -> &Config {
        &self.config
    }
}

/// The rules no type states; builds what they check (the sealer, the
/// model endpoints) once. An error names the key and where it was set.
fn validate(c: &Config, sources: &BTreeMap<String, Source>, env: &Env) -> Result<(Option<Sealer>, Endpoints), ConfigError> {
    let fail = |key: &str, rule: String| ConfigError::new(key, layers::source_of(sources, key), rule);
    for (key, addr) in [("listen", &c.listen), ("internal_listen", &c.internal_listen)] {
        let port = addr.rsplit_once(':').map(|(host, port)| (host, port.parse::<u16>()));
        if !matches!(port, Some((host, Ok(_))) if !host.is_empty()) {
            return Err(fail(key, format!("must be HOST:PORT, got {addr:?}")));
        }
    }
    if let Some(url) = &c.storage
        && let Some((scheme, _)) = url.split_once("://")
        && !matches!(scheme, "postgres" | "postgresql" | "sqlite")
    {
        return Err(fail("storage", "must be a postgres:// URL, or sqlite://DIR (unset: SQLite in data_dir)".into()));
    }
    let prefix = &c.cma_prefix;
    let segments_ok = prefix.strip_prefix('/').is_some_and(|p| {
        !p.is_empty()
            && p.split('/').all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
    });
    if !segments_ok
        || prefix.len() > 100
        || ["/v1", "/healthz", "/readyz", "/metrics"].iter().any(|t| prefix == t || prefix.starts_with(&format!("{t}/")))
    {
        return Err(fail("cma_prefix", format!("must be a path such as /cma, apart from the native API's, got {prefix:?}")));
    }
    if let Some(url) = &c.redis_url
        && !(url.starts_with("redis://") || url.starts_with("rediss://"))
    {
        return Err(fail("redis_url", "must be a redis:// or rediss:// URL".into()));
    }
    for (key, n) in [
        ("limits.rate_limit_per_second", u64::from(c.limits.rate_limit_per_second)),
        ("limits.max_streams_per_principal", u64::from(c.limits.max_streams_per_principal)),
        ("limits.auth_failures_per_window", u64::from(c.limits.auth_failures_per_window)),
        ("timing.sse_ping_seconds", c.timing.sse_ping_seconds),
        ("timing.approval_ttl_seconds", c.timing.approval_ttl_seconds),
        ("runner.heartbeat_ms", c.runner.heartbeat_ms),
    ] {
        if n == 0 {
            return Err(fail(key, "must be at least 1".into()));
        }
    }
    if c.timing.run_lease_ms < 1_000 {
        return Err(fail("timing.run_lease_ms", format!("must be at least 1000, got {}", c.timing.run_lease_ms)));
    }
    if c.runner.heartbeat_ms >= c.timing.run_lease_ms {
        return Err(fail("runner.heartbeat_ms", "must be shorter than timing.run_lease_ms, or leases lapse between heartbeats".into()));
    }
    if !matches!(c.runner.sandbox_driver.as_str(), "local" | "kubernetes") {
        return Err(fail("runner.sandbox_driver", format!("must be local or kubernetes, got {:?}", c.runner.sandbox_driver)));
    }
    if let Some(id) = &c.runner.id
        && !checkfu_core::id::is_valid("rnr", id)
    {
        return Err(fail("runner.id", format!("must be an rnr_ id, got {id:?}")));
    }
    checkfu_core::features::Disabled::parse(&c.features_disabled).map_err(|e| fail("features_disabled", e.message))?;
    if !(0..=36_500).contains(&c.files_retention_days) {
        return Err(fail("files_retention_days", "must be 0 (never) to 36500 days".into()));
    }
    let sealer = c.secrets_key.as_ref().map(|k| Sealer::from_key(k.expose())).transpose().map_err(|e| fail("secrets_key", e.message))?;
    for (name, url) in &c.endpoints {
        let key = format!("endpoints.{name}");
        if Role::parse(name).is_none() {
            return Err(fail(&key, format!("{name:?} is not a role ({})", Role::ALL.map(|r| r.name()).join(", "))));
        }
        crate::peers::parse(url).map_err(|e| fail(&key, e))?;
    }
    let mut configured = vec![];
    for (name, e) in &c.model_endpoints {
        let endpoint =
            Endpoint::from_config(name, e, |var| env.get(var)).map_err(|e| fail(&format!("model_endpoints.{name}"), e.message))?;
        configured.push(endpoint);
    }
    let key = |s: &Option<Secret>| s.as_ref().map(|s| s.expose().to_string());
    // Private addresses are the installation's choice per endpoint; the
    // model gateway adds `allow_private_targets` when it starts.
    let endpoints = Endpoints::new(key(&c.providers.openai_api_key), key(&c.providers.anthropic_api_key), configured, false)
        .map_err(|e| fail("model_endpoints", e.message))?;
    Ok((sealer, endpoints))
}

impl Loaded {
    /// The effective configuration as TOML, secrets and URL passwords
    /// redacted, followed by where each value not a default came from.
    pub fn render(&self) -> String {
        let mut value = match toml::Value::try_from(&self.config) {
            Ok(v) => v,
            Err(e) => return format!("# the configuration could not be printed: {e}\n"),
        };
        for key in ["storage", "redis_url"] {
            if let Some(toml::Value::String(url)) = value.get_mut(key) {
                *url = secret::redact_url(url);
            }
        }
        let mut out = toml::to_string(&value).unwrap_or_else(|e| format!("# the configuration could not be printed: {e}\n"));
        let set: Vec<String> =
            self.sources.iter().filter(|(_, s)| **s != Source::Default).map(|(k, s)| format!("#   {k} <- {s}")).collect();
        if !set.is_empty() {
            out.push_str("\n# values not at their defaults, and where they came from:\n");
            out.push_str(&set.join("\n"));
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests;

fn default_files_retention_days() -> i64 {
    30
}
