//! Shared vocabulary of the Checkfu services: prefixed ids, the single error
//! classification every service maps into, timestamps and list paging.
//! Nothing here knows about a particular service's business rules.

pub mod error;
pub mod id;
pub mod page;
pub mod time;

pub use error::{Code, Error, Result};

/// Lowercase hex SHA-256 of some bytes; used for release digests and key hashes.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes.as_ref()))
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
            pub fn as_str(self) -> &'static str {
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
    };
}
