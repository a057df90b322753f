//! A Connection's credential (api.md §16.2): what a client sends once, what
//! is sealed, what may be shown, and what goes upstream.
//!
//! The input arrives as named fields (`CredentialFields`, read from the
//! public JSON by `checkfu_proto::credential_input` rather than through
//! serde's derive, whose messages quote the offending value): an error
//! names a field, never carries a secret.

use checkfu_core::{Error, Result, string_enum};
use serde::{Deserialize, Serialize};

/// Secrets are 1 to 8,192 bytes.
pub const MAX_SECRET: usize = 8192;

string_enum!(
    CredentialType { StaticBearer = "static_bearer", ApiKey = "api_key", OAuth2Refresh = "oauth2_refresh" }
);

string_enum!(
    /// How the token endpoint learns who the client is.
    TokenEndpointAuth { ClientSecretBasic = "client_secret_basic", ClientSecretPost = "client_secret_post", None = "none" }
);

string_enum!(
    CredentialState { Ok = "ok", RefreshFailed = "refresh_failed", Unreadable = "unreadable" }
);

/// The credential's fields that are not secret: stored in clear, shown in
/// the read form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialMeta {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth: Option<String>,
}

impl CredentialMeta {
    pub fn kind(&self) -> CredentialType {
        CredentialType::parse("credential.type", &self.kind).unwrap_or(CredentialType::StaticBearer)
    }
}

/// The secret parts, sealed together. Never `Debug`-printed in full.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Secret {
    StaticBearer {
        token: String,
    },
    ApiKey {
        value: String,
    },
    #[serde(rename = "oauth2_refresh")]
    OAuth2Refresh {
        refresh_token: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_secret: Option<String>,
        /// The access token last issued, and until when it is good.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        access_token: Option<String>,
        #[serde(default)]
        access_expires_ms: i64,
    },
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl Secret {
    /// Every secret string this credential holds, for redaction.
    pub fn values(&self) -> Vec<&str> {
        match self {
            Secret::StaticBearer { token } => vec![token],
            Secret::ApiKey { value } => vec![value],
            Secret::OAuth2Refresh { refresh_token, client_secret, access_token, .. } => {
                let mut v = vec![refresh_token.as_str()];
                v.extend(client_secret.as_deref());
                v.extend(access_token.as_deref());
                v
            }
        }
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(self).map_err(|_| Error::internal("a credential could not be encoded"))
    }

    pub fn from_bytes(b: &[u8]) -> Option<Secret> {
        serde_json::from_slice(b).ok()
    }
}

/// A credential as a client sent it, checked.
#[derive(Debug, Clone)]
pub struct NewCredential {
    pub meta: CredentialMeta,
    pub secret: Secret,
}

/// A credential's fields as a client sent them (absent or null: `None`),
/// and the names of any it sent that no credential has. Its `Debug` shows
/// none of them: it holds secrets.
#[derive(Clone, Default)]
pub struct CredentialFields {
    pub kind: Option<String>,
    pub token: Option<String>,
    pub header: Option<String>,
    pub value: Option<String>,
    pub token_endpoint: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub token_endpoint_auth: Option<String>,
    pub refresh_token: Option<String>,
    pub scope: Option<String>,
    pub unknown: Vec<String>,
}

impl std::fmt::Debug for CredentialFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CredentialFields([redacted])")
    }
}

impl CredentialFields {
    fn named(&self) -> [(&'static str, Option<&str>); 10] {
        [
            ("type", self.kind.as_deref()),
            ("token", self.token.as_deref()),
            ("header", self.header.as_deref()),
            ("value", self.value.as_deref()),
            ("token_endpoint", self.token_endpoint.as_deref()),
            ("client_id", self.client_id.as_deref()),
            ("client_secret", self.client_secret.as_deref()),
            ("token_endpoint_auth", self.token_endpoint_auth.as_deref()),
            ("refresh_token", self.refresh_token.as_deref()),
            ("scope", self.scope.as_deref()),
        ]
    }

    fn get(&self, field: &str) -> Option<&str> {
        self.named().into_iter().find(|(n, _)| *n == field).and_then(|(_, v)| v)
    }

    /// Every name it sent, in the order a JSON object's keys sort.
    fn sent(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.named().into_iter().filter(|(_, v)| v.is_some()).map(|(n, _)| n).collect();
        names.extend(self.unknown.iter().map(String::as_str));
        names.sort_unstable();
        names
    }
}

fn required<'a>(o: &'a CredentialFields, field: &str) -> Result<&'a str> {
    o.get(field).ok_or_else(|| Error::invalid_field(&format!("credential.{field}"), format!("credential.{field} is required")))
}

fn secret(o: &CredentialFields, field: &str) -> Result<String> {
    let s = required(o, field)?;
    if s.is_empty() || s.len() > MAX_SECRET {
        return Err(Error::invalid_field(&format!("credential.{field}"), format!("credential.{field} must be 1 to {MAX_SECRET} bytes")));
    }
    // It travels in a header: no control characters.
    if s.chars().any(char::is_control) {
        return Err(Error::invalid_field(&format!("credential.{field}"), format!("credential.{field} must not hold control characters")));
    }
    Ok(s.to_string())
}

/// Headers an `api_key` credential may not set: routing, framing and the
/// MCP protocol's own.
fn header_forbidden(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n == "host"
        || n.starts_with("content-")
        || n.starts_with("mcp-")
        || n.starts_with("proxy-")
        || matches!(n.as_str(), "connection" | "transfer-encoding" | "te" | "upgrade" | "keep-alive" | "trailer" | "accept")
}

impl NewCredential {
    /// Checks a credential body. `check_url` applies the Connection's URL
    /// rules to an OAuth token endpoint.
    pub fn parse(o: &CredentialFields, check_url: impl Fn(&str, &str) -> Result<String>) -> Result<NewCredential> {
        let kind = CredentialType::parse("credential.type", required(o, "type")?).map_err(|_| {
            Error::invalid_field("credential.type", "credential.type must be one of static_bearer, api_key, oauth2_refresh")
        })?;
        let allowed: &[&str] = match kind {
            CredentialType::StaticBearer => &["type", "token"],
            CredentialType::ApiKey => &["type", "header", "value"],
            CredentialType::OAuth2Refresh => {
                &["type", "token_endpoint", "client_id", "client_secret", "token_endpoint_auth", "refresh_token", "scope"]
            }
        };
        if let Some(extra) = o.sent().into_iter().find(|k| !allowed.contains(k)) {
            // The field's name is the client's own text, bounded; never its value.
            let name: String = extra.chars().take(64).collect();
            return Err(Error::invalid_field("credential", format!("credential.{name} is not a field of a {} credential", kind.as_str())));
        }
        let mut meta = CredentialMeta {
            kind: kind.as_str().into(),
            header: None,
            token_endpoint: None,
            client_id: None,
            scope: None,
            token_endpoint_auth: None,
        };
        let secret = match kind {
            CredentialType::StaticBearer => Secret::StaticBearer { token: secret(o, "token")? },
            CredentialType::ApiKey => {
                let header = required(o, "header")?;
                if header.is_empty() || header.len() > 128 || http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                    return Err(Error::invalid_field("credential.header", "credential.header must be an HTTP header name"));
                }
                if header_forbidden(header) {
                    return Err(Error::invalid_field(
                        "credential.header",
                        "credential.header may not be host, content-*, mcp-* or a hop-by-hop header",
                    )
                    .with_reason("header_forbidden"));
                }
                meta.header = Some(header.to_ascii_lowercase());
                Secret::ApiKey { value: secret(o, "value")? }
            }
            CredentialType::OAuth2Refresh => {
                meta.token_endpoint = Some(check_url("credential.token_endpoint", required(o, "token_endpoint")?)?);
                let client_id = required(o, "client_id")?;
                if client_id.is_empty() || client_id.len() > 1024 || client_id.chars().any(char::is_control) {
                    return Err(Error::invalid_field("credential.client_id", "credential.client_id must be 1 to 1,024 printable bytes"));
                }
                meta.client_id = Some(client_id.into());
                if let Some(scope) = o.get("scope") {
                    if scope.len() > 1024 || scope.chars().any(char::is_control) {
                        return Err(Error::invalid_field("credential.scope", "credential.scope must be at most 1,024 printable bytes"));
                    }
                    meta.scope = Some(scope.into());
                }
                let client_secret = o.client_secret.as_ref().map(|_| secret(o, "client_secret")).transpose()?;
                let auth = match o.get("token_endpoint_auth") {
                    Some(a) => TokenEndpointAuth::parse("credential.token_endpoint_auth", a).map_err(|_| {
                        Error::invalid_field(
                            "credential.token_endpoint_auth",
                            "credential.token_endpoint_auth must be client_secret_basic, client_secret_post or none",
                        )
                    })?,
                    None if client_secret.is_some() => TokenEndpointAuth::ClientSecretBasic,
                    None => TokenEndpointAuth::None,
                };
                if (auth == TokenEndpointAuth::None) != client_secret.is_none() {
                    return Err(Error::invalid_field(
                        "credential.client_secret",
                        "credential.client_secret is needed by client_secret_basic and client_secret_post, and refused with none",
                    ));
                }
                meta.token_endpoint_auth = Some(auth.as_str().into());
                Secret::OAuth2Refresh {
                    refresh_token: secret(o, "refresh_token")?,
                    client_secret,
                    access_token: None,
                    access_expires_ms: 0,
                }
            }
        };
        Ok(NewCredential { meta, secret })
    }
}

/// A stored credential: its clear fields, its sealed secret, how it fares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredCredential {
    pub meta: CredentialMeta,
    pub envelope: checkfu_store::envelope::Envelope,
    pub state: CredentialState,
    pub created_ms: i64,
    pub rotated_ms: Option<i64>,
    pub last_used_ms: Option<i64>,
}

/// The headers that carry `secret` upstream, marked sensitive (never
/// printed by the HTTP stack, never indexed by HPACK). `access_token` is
/// the OAuth access token to use.
pub fn upstream_headers(meta: &CredentialMeta, secret: &Secret) -> Result<http::HeaderMap> {
    let mut h = http::HeaderMap::new();
    let (name, value) = match secret {
        Secret::StaticBearer { token } => (http::header::AUTHORIZATION, format!("Bearer {token}")),
        Secret::ApiKey { value } => {
            let name = meta.header.as_deref().unwrap_or("authorization");
            let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| Error::internal("a stored header name is unusable"))?;
            (name, value.clone())
        }
        Secret::OAuth2Refresh { access_token, .. } => {
            let token = access_token.as_deref().ok_or_else(|| Error::internal("no access token has been issued"))?;
            (http::header::AUTHORIZATION, format!("Bearer {token}"))
        }
    };
    let mut value = http::HeaderValue::from_str(&value).map_err(|_| Error::internal("a stored credential is not a header value"))?;
    value.set_sensitive(true);
    h.insert(name, value);
    Ok(h)
}

/// Secrets shorter than this are not searched for in upstream text: they
/// would match nearly everywhere.
const MIN_REDACTED: usize = 4;

/// `text` with each secret, and its base64 (standard and URL-safe, padded
/// or not) and percent-encoded forms, replaced by `[redacted]`.
pub fn redact(text: &str, secrets: &[&str]) -> String {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let mut forms: Vec<String> = vec![];
    for s in secrets.iter().filter(|s| s.len() >= MIN_REDACTED) {
        forms.push((*s).to_string());
        for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
            forms.push(engine.encode(s.as_bytes()));
        }
        forms.push(percent_encode(s));
        forms.push(percent_encode(s).replace("%20", "+"));
    }
    // Longest first, so a form that contains another is replaced whole.
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms.dedup();
    let mut out = text.to_string();
    for f in forms.iter().filter(|f| !f.is_empty()) {
        if out.contains(f.as_str()) {
            out = out.replace(f.as_str(), "[redacted]");
        }
        // Percent-encoding is case-insensitive in its hex digits.
        let lower = f.to_ascii_lowercase();
        if lower != *f && f.contains('%') && out.contains(lower.as_str()) {
            out = out.replace(lower.as_str(), "[redacted]");
        }
    }
    out
}

/// Every byte outside the unreserved set as `%XX` (upper case).
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn any_url(_: &str, u: &str) -> Result<String> {
        Ok(u.to_string())
    }

    /// A body as the gateway reads it.
    fn fields(v: &serde_json::Value) -> Result<CredentialFields> {
        Ok(checkfu_proto::capability::v1::CredentialInput::from_json(v)?.into())
    }

    #[test]
    fn errors_name_fields_never_values() {
        let bad = [
            json!({"type": "static_bearer", "token": 42}),
            json!({"type": "static_bearer", "token": ""}),
            json!({"type": "static_bearer", "token": "s3cret-XYZ\n"}),
            json!({"type": "static_bearer", "token": "s3cret-XYZ", "s3cret-XYZ": 1}),
            json!({"type": "api_key", "header": "content-type", "value": "s3cret-XYZ"}),
            json!({"type": "api_key", "header": "Mcp-Session-Id", "value": "s3cret-XYZ"}),
            json!({"type": "oauth2_refresh", "token_endpoint": "https://t", "client_id": "c", "refresh_token": "s3cret-XYZ", "token_endpoint_auth": "client_secret_post"}),
            json!({"type": "s3cret-XYZ"}),
        ];
        for b in bad {
            let e = fields(&b).and_then(|f| NewCredential::parse(&f, any_url)).expect_err("refused");
            let shown = format!("{} {}", e.message, e.details);
            assert!(!shown.contains("s3cret-XYZ\n") && !shown.contains("\"s3cret-XYZ\""), "{shown}");
        }
        let long = "x".repeat(MAX_SECRET + 1);
        assert!(NewCredential::parse(&fields(&json!({"type": "static_bearer", "token": long})).expect("fields"), any_url).is_err());
    }

    #[test]
    fn each_type_reads_and_injects() {
        let c = NewCredential::parse(
            &fields(&json!({"type": "api_key", "header": "X-Api-Key", "value": "k-123456"})).expect("fields"),
            any_url,
        )
        .expect("ok");
        let h = upstream_headers(&c.meta, &c.secret).expect("h");
        assert_eq!(h.get("x-api-key").map(|v| v.as_bytes()), Some(&b"k-123456"[..]));
        assert!(h.get("x-api-key").is_some_and(http::HeaderValue::is_sensitive));
        let c = NewCredential::parse(
            &fields(&json!({"type": "oauth2_refresh", "token_endpoint": "https://t/token", "client_id": "c", "client_secret": "cs-1234", "refresh_token": "r-1234"})).expect("fields"),
            any_url,
        )
        .expect("ok");
        assert_eq!(c.meta.token_endpoint_auth.as_deref(), Some("client_secret_basic"));
        assert_eq!(c.secret.values(), vec!["r-1234", "cs-1234"]);
        assert_eq!(format!("{:?}", c.secret), "Secret([redacted])");
    }

    #[test]
    fn redaction_covers_encoded_forms() {
        use base64::Engine;
        let s = "s3cret-XYZ";
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("user:{s}"));
        let text = format!(
            "a Bearer {s} b {} c {} d s3cret%2DXYZ e {}",
            base64::engine::general_purpose::STANDARD.encode(s),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s),
            b64
        );
        let out = redact(&text, &[s]);
        assert!(!out.contains(s));
        assert!(out.starts_with("a Bearer [redacted] b [redacted] c [redacted]"), "{out}");
        assert_eq!(redact("p&q=s+3", &["s 3"]), "p&q=s+3", "shorter than the minimum: untouched");
        assert_eq!(redact("x%2fy%2Fz", &["a/b/"]), "x%2fy%2Fz");
        assert_eq!(redact("token a%2Fb%2F!", &["a/b/"]), "token [redacted]!");
        assert_eq!(redact("token a%2fb%2f!", &["a/b/"]), "token [redacted]!");
    }
}
