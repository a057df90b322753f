//! Shared vocabulary of the Checkfu services: prefixed ids, the single error
//! classification every service maps into, timestamps and list paging.
//! Nothing here knows about a particular service's business rules.

pub mod cache;
pub mod capability;
pub mod delivery_screen;
pub mod error;
pub mod events;
pub mod features;
pub mod glob;
pub mod id;
pub mod metadata;
pub mod net;
pub mod notice;
pub mod page;
pub mod plane;
pub mod role;
pub mod signature;
pub mod skill_md;
pub mod sse;
pub mod testing;
pub mod time;
pub mod tools;

pub use error::{Code, Error, Result};
pub use role::Role;

/// Lowercase hex SHA-256 of some bytes; used for release digests and key hashes.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes.as_ref()))
}

/// Names (of Environments, Agents, Connections, stores, ...) are 1 to 200
/// printable characters, not only spaces; the error names `field`.
pub fn check_name(field: &str, name: &str) -> Result<()> {
    if name.trim().is_empty() || name.chars().count() > 200 || name.chars().any(char::is_control) {
        return Err(Error::invalid_field(field, format!("{field} must be 1 to 200 printable characters")));
    }
    Ok(())
}

/// A self-hosted Runner's credential starts so (the gateway tells it from
/// an API key by it).
pub const RUNNER_CREDENTIAL_PREFIX: &str = "crr_";
/// A work item delivery's token (api.md §17.13) starts so.
pub const WORK_TOKEN_PREFIX: &str = "cwt_";

/// A new secret: `prefix` and 256 random bits in hex. Stored only as its
/// SHA-256; a fast hash suffices because the secret itself is high-entropy.
pub fn new_secret(prefix: &str) -> String {
    format!("{prefix}{}", hex::encode(random_bytes::<32>()))
}

/// `N` bytes from the operating system's generator (via `rand`).
pub fn random_bytes<const N: usize>() -> [u8; N] {
    use rand::Rng;
    let mut bytes = [0u8; N];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

/// Declares a closed string enum: the wire spelling of each variant, `ALL`,
/// `as_str` and a `parse` whose error names the field and the allowed values.
#[macro_export]
macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($variant),+ }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s),+ }
            }
            pub fn parse(field: &str, s: &str) -> $crate::Result<Self> {
                match s {
                    $($s => Ok($name::$variant),)+
                    _ => Err($crate::Error::invalid_field(field, format!(
                        "{field} must be one of {}, got {s:?}",
                        [$($s),+].join(", ")
                    ))),
                }
            }
        }
        /// Serialized as its string form.
        impl $crate::__serde::Serialize for $name {
            fn serialize<S: $crate::__serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
        impl<'de> $crate::__serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let s = <String as $crate::__serde::Deserialize>::deserialize(d)?;
                $name::parse(stringify!($name), &s).map_err(|e| <D::Error as $crate::__serde::de::Error>::custom(e.message))
            }
        }
    };
}

#[doc(hidden)]
pub use serde as __serde;
