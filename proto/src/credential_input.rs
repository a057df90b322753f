//! A credential body as the public JSON gives it, read into the typed
//! `CredentialInput`: by the gateway from a request, and by the capability
//! gateway from a 0.1.0 caller's text. Errors name fields, never values: a
//! value may be a secret. The messages that carry one print their secrets
//! as `<redacted>` when debugged (their derived Debug is skipped in
//! `build.rs`).

use crate::capability::v1::{CreateConnectionRequest, CredentialInput, SetCredentialRequest};
use checkfu_core::Error;
use serde_json::Value;
use std::fmt;

/// A secret as Debug shows it: whether it is there, never what it is.
struct Redacted(bool);

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0 { "<redacted>" } else { "<none>" })
    }
}

impl fmt::Debug for CredentialInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CredentialInput")
            .field("type", &self.r#type)
            .field("token", &Redacted(self.token.is_some()))
            .field("header", &self.header)
            .field("value", &Redacted(self.value.is_some()))
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &Redacted(self.client_secret.is_some()))
            .field("token_endpoint_auth", &self.token_endpoint_auth)
            .field("refresh_token", &Redacted(self.refresh_token.is_some()))
            .field("scope", &self.scope)
            .field("unknown_fields", &self.unknown_fields)
            .finish()
    }
}

impl fmt::Debug for CreateConnectionRequest {
    #[allow(deprecated)] // credential_json: a 0.1.0 caller's, redacted too
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreateConnectionRequest")
            .field("environment_id", &self.environment_id)
            .field("name", &self.name)
            .field("description", &self.description)
            .field("metadata_json", &self.metadata_json)
            .field("kind", &self.kind)
            .field("url", &self.url)
            .field("owner_kind", &self.owner_kind)
            .field("owner_id", &self.owner_id)
            .field("credential_json", &Redacted(!self.credential_json.is_empty()))
            .field("actor_id", &self.actor_id)
            .field("credential", &self.credential)
            .finish()
    }
}

impl fmt::Debug for SetCredentialRequest {
    #[allow(deprecated)] // credential_json: a 0.1.0 caller's, redacted too
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetCredentialRequest")
            .field("id", &self.id)
            .field("credential_json", &Redacted(!self.credential_json.is_empty()))
            .field("actor_id", &self.actor_id)
            .field("credential", &self.credential)
            .finish()
    }
}

impl CredentialInput {
    /// The fields of a credential object; a known field must be a string
    /// (or null, for absent), an unknown one is listed by name only.
    pub fn from_json(v: &Value) -> Result<CredentialInput, Error> {
        let o = v.as_object().ok_or_else(|| Error::invalid_field("credential", "credential must be an object"))?;
        let mut c = CredentialInput::default();
        for (name, value) in o {
            let slot = match name.as_str() {
                "type" => &mut c.r#type,
                "token" => &mut c.token,
                "header" => &mut c.header,
                "value" => &mut c.value,
                "token_endpoint" => &mut c.token_endpoint,
                "client_id" => &mut c.client_id,
                "client_secret" => &mut c.client_secret,
                "token_endpoint_auth" => &mut c.token_endpoint_auth,
                "refresh_token" => &mut c.refresh_token,
                "scope" => &mut c.scope,
                _ => {
                    c.unknown_fields.push(name.chars().take(64).collect());
                    continue;
                }
            };
            *slot = match value {
                Value::Null => None,
                Value::String(s) => Some(s.clone()),
                _ => return Err(Error::invalid_field(&format!("credential.{name}"), format!("credential.{name} must be a string"))),
            };
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(deprecated)] // credential_json: a 0.1.0 caller's
    fn debugging_a_credential_shows_no_secret() {
        let c = CredentialInput {
            r#type: Some("oauth2_refresh".into()),
            token: Some("tok-SECRET-1".into()),
            value: Some("val-SECRET-2".into()),
            client_id: Some("client-7".into()),
            client_secret: Some("cs-SECRET-3".into()),
            refresh_token: Some("rt-SECRET-4".into()),
            ..Default::default()
        };
        let create = CreateConnectionRequest {
            name: "github".into(),
            credential_json: r#"{"token":"tok-SECRET-5"}"#.into(),
            credential: Some(c.clone()),
            ..Default::default()
        };
        let set =
            SetCredentialRequest { id: "conn_1".into(), credential_json: "x-SECRET-6".into(), credential: Some(c), ..Default::default() };
        for shown in [format!("{create:?}"), format!("{set:?}"), format!("{create:#?}")] {
            assert!(!shown.contains("SECRET"), "{shown}");
            assert!(shown.contains("<redacted>") && shown.contains("client-7"), "what is not secret still shows: {shown}");
        }
    }
    use serde_json::json;

    #[test]
    fn fields_are_read_and_errors_never_show_a_value() {
        let c = CredentialInput::from_json(&json!({"type": "api_key", "header": "X-Key", "value": "s3cret", "scope": null, "extra": 1}))
            .expect("read");
        assert_eq!(
            (c.r#type.as_deref(), c.value.as_deref(), c.scope, c.unknown_fields),
            (Some("api_key"), Some("s3cret"), None, vec!["extra".into()])
        );
        let e = CredentialInput::from_json(&json!({"type": "static_bearer", "token": ["s3cret"]})).expect_err("not a string");
        assert_eq!(e.details["field"], "credential.token");
        assert!(!format!("{} {}", e.message, e.details).contains("s3cret"));
        assert!(CredentialInput::from_json(&json!("s3cret")).is_err(), "not an object");
    }
}
