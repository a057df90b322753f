//! A Connection (api.md §16.1): an endpoint the platform reaches for an
//! Environment or a person, and the credential it holds for it.

use super::credential::StoredCredential;
use checkfu_core::id::{ConnectionId, EnvironmentId, PrincipalId};
use checkfu_core::{Error, Result, string_enum};
use serde_json::Value;

string_enum!(ConnectionKind { Mcp = "mcp", Http = "http" });

string_enum!(ConnectionStatus { Active = "active", Disabled = "disabled", Revoked = "revoked" });

/// Who a Connection belongs to: the Environment (managed by `manage`
/// holders) or one Principal (a personal Connection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Environment,
    Principal(PrincipalId),
}

impl Owner {
    pub fn parse(kind: &str, id: &str) -> Result<Owner> {
        match kind {
            "" | "environment" if id.is_empty() => Ok(Owner::Environment),
            "environment" => Err(Error::invalid_field("owner.id", "an environment owner names no id")),
            "principal" => Ok(Owner::Principal(PrincipalId::parse("owner.id", id)?)),
            _ => Err(Error::invalid_field("owner.kind", "owner.kind must be environment or principal")),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Owner::Environment => "environment",
            Owner::Principal(_) => "principal",
        }
    }

    pub fn id(&self) -> &str {
        match self {
            Owner::Environment => "",
            Owner::Principal(p) => p,
        }
    }
}

pub const MAX_URL: usize = 2048;
pub const MAX_DESCRIPTION: usize = 2000;
pub const MAX_METADATA: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct Connection {
    pub id: ConnectionId,
    pub environment_id: EnvironmentId,
    pub name: String,
    pub description: String,
    pub metadata: Value,
    pub kind: ConnectionKind,
    pub url: String,
    pub owner: Owner,
    pub status: ConnectionStatus,
    pub credential: Option<StoredCredential>,
    pub created_by: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub revoked_ms: Option<i64>,
    pub version: i64,
}

impl Connection {
    /// Refuses a write to a revoked Connection.
    pub fn writable(&self) -> Result<()> {
        if self.status == ConnectionStatus::Revoked {
            return Err(Error::conflict(format!("connection {} is revoked", self.id)).with_reason("connection_revoked"));
        }
        Ok(())
    }
}

/// Names are 1–200 printable characters.
pub fn check_name(name: &str) -> Result<()> {
    checkfu_core::check_name("name", name)
}

pub fn check_description(d: &str) -> Result<()> {
    if d.chars().count() > MAX_DESCRIPTION {
        return Err(Error::invalid_field("description", format!("description is at most {MAX_DESCRIPTION} characters")));
    }
    Ok(())
}

/// Metadata is a JSON object of at most 16 KiB.
pub fn parse_metadata(json: &str) -> Result<Value> {
    if json.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    if json.len() > MAX_METADATA {
        return Err(Error::invalid_field("metadata", "metadata is at most 16 KiB of JSON"));
    }
    match serde_json::from_str::<Value>(json) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(Error::invalid_field("metadata", "metadata must be a JSON object")),
    }
}

/// Checks an endpoint (or token endpoint) URL: absolute `https`, at most
/// 2,048 bytes, no userinfo; `http` and private, loopback or link-local
/// hosts only where the installation allows private targets. Names are
/// checked again, resolved, at every use.
pub fn check_url(field: &str, url: &str, allow_private: bool) -> Result<String> {
    if url.len() > MAX_URL {
        return Err(Error::invalid_field(field, format!("{field} is longer than {MAX_URL} bytes")));
    }
    let parsed = reqwest::Url::parse(url).map_err(|_| Error::invalid_field(field, format!("{field} is not an absolute URL")))?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // Never echo the URL: its userinfo is a secret sent in the wrong place.
        return Err(Error::invalid_field(field, format!("{field} must not carry credentials; set the Connection's credential instead"))
            .with_reason("credential_in_url"));
    }
    match parsed.scheme() {
        "https" => {}
        "http" if allow_private => {}
        "http" => {
            return Err(Error::invalid_field(field, format!("{field} must use https")).with_reason("non_public_target"));
        }
        _ => return Err(Error::invalid_field(field, format!("{field} must be an https URL"))),
    }
    let host = parsed.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    if host.is_empty() {
        return Err(Error::invalid_field(field, format!("{field} has no host")));
    }
    let private = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => !checkfu_core::net::is_public(ip),
        Err(_) => host == "localhost" || host.ends_with(".localhost") || host.ends_with(".local") || host.ends_with(".internal"),
    };
    if private && !allow_private {
        return Err(
            Error::invalid_field(field, format!("{field} names a private, loopback or link-local host")).with_reason("non_public_target")
        );
    }
    if parsed.fragment().is_some() {
        return Err(Error::invalid_field(field, format!("{field} must not have a fragment")));
    }
    Ok(parsed.to_string())
}

impl crate::versioned::Versioned for Connection {
    const KIND: &'static str = "connection";

    fn version(&self) -> i64 {
        self.version
    }

    fn bump(&mut self, now_ms: i64) {
        self.version += 1;
        self.updated_ms = now_ms;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(e: Error) -> String {
        e.details["reason"].as_str().unwrap_or_default().to_string()
    }

    #[test]
    fn urls_follow_the_installation_rules() {
        assert!(check_url("u", "https://mcp.example.com/mcp", false).is_ok());
        assert_eq!(reason(check_url("u", "https://me:pw@mcp.example.com/", false).expect_err("userinfo")), "credential_in_url");
        assert_eq!(reason(check_url("u", "http://mcp.example.com/", false).expect_err("http")), "non_public_target");
        assert_eq!(reason(check_url("u", "https://127.0.0.1:9/mcp", false).expect_err("loopback")), "non_public_target");
        assert_eq!(reason(check_url("u", "https://[::1]/", false).expect_err("v6 loopback")), "non_public_target");
        assert_eq!(reason(check_url("u", "https://10.1.2.3/", false).expect_err("private")), "non_public_target");
        assert_eq!(reason(check_url("u", "https://localhost/", false).expect_err("localhost")), "non_public_target");
        assert!(check_url("u", "http://127.0.0.1:9/mcp", true).is_ok());
        assert!(check_url("u", "ftp://example.com/", true).is_err());
        assert!(check_url("u", "/relative", true).is_err());
        assert!(check_url("u", &format!("https://e.com/{}", "a".repeat(MAX_URL)), true).is_err());
        let e = check_url("u", "https://me:s3cret@e.com/", true).expect_err("userinfo");
        assert!(!e.message.contains("s3cret"));
    }

    #[test]
    fn owners_and_metadata_are_checked() {
        assert_eq!(Owner::parse("", "").ok(), Some(Owner::Environment));
        assert!(Owner::parse("environment", "prin_x").is_err());
        assert!(Owner::parse("principal", "env_x").is_err());
        assert!(parse_metadata("[1]").is_err());
        assert!(parse_metadata(&format!("{{\"a\":\"{}\"}}", "x".repeat(MAX_METADATA))).is_err());
    }
}
