//! Values that must not be printed: API keys, the installation key, and
//! the passwords inside service URLs.

use serde::{Deserialize, Serialize, Serializer};

/// A secret setting. Its `Debug` and `Serialize` print `<redacted>`, so a
/// configuration can be logged or shown by `checkfu config` whole; only
/// [`Secret::expose`] gives the text, at the one place that uses it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

pub const REDACTED: &str = "<redacted>";

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(REDACTED)
    }
}

/// `url` with the password of its user info replaced (a PostgreSQL or
/// Redis URL may carry one); text that is not a URL is returned whole.
pub fn redact_url(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut url) if url.password().is_some() => {
            let _ = url.set_password(Some(REDACTED));
            url.to_string()
        }
        _ => text.to_string(),
    }
}
