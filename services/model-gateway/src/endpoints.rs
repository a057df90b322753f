//! Provider endpoints: where the installation sends a provider's requests
//! and which key goes with them.
//!
//! Endpoints are installation configuration, never API input: a routing
//! profile names one (`endpoint`), so an Environment manager chooses among
//! the hosts the operator configured but cannot point a credential at a
//! host of their own. Each provider has a default endpoint of its own name
//! (`openai`, `anthropic`) on its public API.
//!
//! A call resolves the endpoint's host, refuses private, loopback and
//! link-local addresses unless the endpoint (or the installation) allows
//! them, and connects to exactly the address it checked. Redirects are
//! never followed, so a key never travels to a host it was not meant for.

use crate::model::Provider;
use checkfu_core::{Error, Result};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One configured endpoint.
#[derive(Clone)]
pub struct Endpoint {
    pub name: String,
    pub provider: Provider,
    pub base_url: url::Url,
    /// The key sent with each request; `None` for servers that need none
    /// (a local vLLM, say).
    api_key: Option<String>,
    /// Whether this endpoint may be on a private address.
    pub allow_private: bool,
    /// A client pinned to the address last checked.
    pinned: Arc<Mutex<Option<(std::net::SocketAddr, reqwest::Client)>>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("name", &self.name)
            .field("provider", &self.provider)
            .field("base_url", &self.public_url())
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// How the configuration describes an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    pub provider: String,
    pub base_url: String,
    /// The environment variable holding the key (keys never sit in files).
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub allow_private: bool,
}

pub const DEFAULT_OPENAI: &str = "https://api.openai.com/v1";
pub const DEFAULT_ANTHROPIC: &str = "https://api.anthropic.com";

impl Endpoint {
    pub fn new(name: &str, provider: Provider, base_url: &str, api_key: Option<String>, allow_private: bool) -> Result<Endpoint> {
        let invalid = |why: String| Error::invalid_field("model_endpoints", format!("endpoint {name:?}: {why}"));
        if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(invalid("a name is 1 to 64 letters, digits, '-' or '_'".into()));
        }
        if provider == Provider::Scripted {
            return Err(invalid("the scripted model has no endpoint".into()));
        }
        let url = url::Url::parse(base_url).map_err(|e| invalid(format!("base_url: {e}")))?;
        checkfu_core::net::http_target(&url).map_err(|e| invalid(e.message))?;
        Ok(Endpoint {
            name: name.into(),
            provider,
            base_url: url,
            api_key: api_key.filter(|k| !k.is_empty()),
            allow_private,
            pinned: Arc::default(),
        })
    }

    pub fn from_config(name: &str, c: &EndpointConfig, env: impl Fn(&str) -> Option<String>) -> Result<Endpoint> {
        let provider = Provider::parse("provider", &c.provider)?;
        Endpoint::new(name, provider, &c.base_url, c.api_key_env.as_deref().and_then(env), c.allow_private)
    }

    pub fn has_key(&self) -> bool {
        self.api_key.is_some()
    }

    pub fn api_key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    /// The base URL without anything secret in it (no user info, no query).
    pub fn public_url(&self) -> String {
        let mut u = self.base_url.clone();
        let _ = u.set_username("");
        let _ = u.set_password(None);
        u.set_query(None);
        u.to_string().trim_end_matches('/').to_string()
    }

    /// `base_url` with `path` appended to its path (its query kept).
    pub fn url(&self, path: &str) -> String {
        let mut u = self.base_url.clone();
        let joined = format!("{}/{}", u.path().trim_end_matches('/'), path.trim_start_matches('/'));
        u.set_path(&joined);
        u.to_string()
    }

    /// A client that connects only to the endpoint's checked address and
    /// follows no redirect.
    pub async fn client(&self, allow_private_everywhere: bool) -> Result<reqwest::Client> {
        let (host, port) = checkfu_core::net::http_target(&self.base_url)?;
        let addr = checkfu_core::net::resolve_target(&host, port, self.allow_private || allow_private_everywhere).await?;
        let mut pinned = self.pinned.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((a, c)) = pinned.as_ref()
            && *a == addr
        {
            return Ok(c.clone());
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .resolve(&host, addr)
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .map_err(|e| Error::internal(format!("building the provider client: {e}")))?;
        *pinned = Some((addr, client.clone()));
        Ok(client)
    }
}

/// The installation's endpoints by name.
#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    by_name: BTreeMap<String, Endpoint>,
    /// Private addresses are allowed for every endpoint (local development).
    pub allow_private: bool,
}

impl Endpoints {
    /// The providers' defaults (`openai`, `anthropic`, with the keys given)
    /// and then the configured ones, which may replace a default.
    pub fn new(openai_key: Option<String>, anthropic_key: Option<String>, configured: Vec<Endpoint>, allow_private: bool) -> Result<Self> {
        let mut by_name = BTreeMap::new();
        let defaults = [
            Endpoint::new("openai", Provider::OpenAi, DEFAULT_OPENAI, openai_key, false)?,
            Endpoint::new("anthropic", Provider::Anthropic, DEFAULT_ANTHROPIC, anthropic_key, false)?,
        ];
        for e in defaults.into_iter().chain(configured) {
            by_name.insert(e.name.clone(), e);
        }
        Ok(Endpoints { by_name, allow_private })
    }

    pub fn get(&self, name: &str) -> Option<&Endpoint> {
        self.by_name.get(name)
    }

    /// The endpoint a candidate uses: the one it names, else its provider's default.
    pub fn for_candidate(&self, provider: Provider, endpoint: Option<&str>) -> Option<&Endpoint> {
        match endpoint {
            Some(n) => self.get(n),
            None => self.get(provider.as_str()),
        }
    }

    pub fn list(&self) -> impl Iterator<Item = &Endpoint> {
        self.by_name.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_keep_their_keys_to_themselves() {
        assert!(
            Endpoint::new("creds", Provider::OpenAi, "http://user:pw@10.0.0.5:8000/v1", None, true).is_err(),
            "keys go in the key, not the URL"
        );
        let e = Endpoint::new("vllm", Provider::OpenAi, "http://10.0.0.5:8000/v1?x=1", Some("sk-secret".into()), true).expect("valid");
        assert_eq!(e.public_url(), "http://10.0.0.5:8000/v1");
        assert!(!format!("{e:?}").contains("sk-secret"));
        assert_eq!(e.url("/chat/completions"), "http://10.0.0.5:8000/v1/chat/completions?x=1");
        assert!(Endpoint::new("bad name", Provider::OpenAi, "https://x", None, false).is_err());
        assert!(Endpoint::new("s", Provider::Scripted, "https://x", None, false).is_err());
        assert!(Endpoint::new("f", Provider::OpenAi, "ftp://x", None, false).is_err());
        let all = Endpoints::new(Some("k".into()), None, vec![e], false).expect("endpoints");
        assert_eq!(all.for_candidate(Provider::OpenAi, None).map(|e| e.name.as_str()), Some("openai"));
        assert_eq!(all.for_candidate(Provider::OpenAi, Some("vllm")).map(|e| e.name.as_str()), Some("vllm"));
        assert!(all.for_candidate(Provider::OpenAi, Some("nope")).is_none());
        assert!(!all.get("anthropic").expect("default").has_key());
    }

    #[tokio::test]
    async fn private_addresses_need_permission() {
        let e = Endpoint::new("local", Provider::OpenAi, "http://127.0.0.1:9/v1", None, false).expect("valid");
        let refused = e.client(false).await.expect_err("refused");
        assert_eq!(refused.code, checkfu_core::Code::PermissionDenied);
        assert!(e.client(true).await.is_ok(), "the installation may allow private targets");
        let allowed = Endpoint::new("local2", Provider::OpenAi, "http://127.0.0.1:9/v1", None, true).expect("valid");
        assert!(allowed.client(false).await.is_ok(), "or the endpoint itself");
    }
}
