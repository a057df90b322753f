//! A credential body as the public JSON gives it, read into the typed
//! `CredentialInput`: by the gateway from a request, and by the capability
//! gateway from a 0.1.0 caller's text. Errors name fields, never values: a
//! value may be a secret.

use crate::capability::v1::CredentialInput;
use checkfu_core::Error;
use serde_json::Value;

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
