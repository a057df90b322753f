//! Secrets a service must keep in order to use them (a webhook endpoint's
//! signing secret), sealed at rest: AES-256-GCM under an installation key
//! that lives outside the database, so a copy of the database (a backup,
//! a dump, a replica) holds no usable secret.
//!
//! A sealed value reads `sealed1:<hex nonce><hex ciphertext and tag>`; a
//! value stored before sealing existed is read as it is and sealed when it
//! is next written.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use checkfu_core::{Error, Result};
use std::path::Path;
use std::sync::Arc;

const PREFIX: &str = "sealed1:";
/// The shortest installation key accepted (it is hashed to 256 bits).
pub const MIN_KEY_CHARS: usize = 32;

/// Seals and opens secrets under the installation key.
#[derive(Clone)]
pub struct Sealer {
    key: Arc<LessSafeKey>,
    /// The installation key's digest, from which keys for other purposes
    /// are derived.
    root: Arc<[u8; 32]>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(<key>)")
    }
}

impl Sealer {
    /// From the installation key (`CHECKFU_SECRETS_KEY`): at least 32
    /// characters, hashed to an AES-256 key.
    pub fn from_key(key: &str) -> Result<Sealer> {
        if key.chars().count() < MIN_KEY_CHARS {
            return Err(Error::invalid(format!("the secrets key must be at least {MIN_KEY_CHARS} characters")));
        }
        let digest = hex::decode(checkfu_core::sha256_hex(key)).map_err(|e| Error::internal(e.to_string()))?;
        let unbound = UnboundKey::new(&AES_256_GCM, &digest).map_err(|_| Error::internal("the secrets key was refused"))?;
        let mut root = [0u8; 32];
        root.copy_from_slice(&digest);
        Ok(Sealer { key: Arc::new(LessSafeKey::new(unbound)), root: Arc::new(root) })
    }

    /// The embedded installation's key: read from `path`, or made there
    /// (random, mode 0600, exclusive create) on first use.
    pub fn load_or_create(path: &Path) -> Result<Sealer> {
        use std::io::Write;
        if let Ok(text) = std::fs::read_to_string(path) {
            return Sealer::from_key(text.trim());
        }
        let mut bytes = [0u8; 32];
        aws_lc_rs::rand::fill(&mut bytes).map_err(|_| Error::internal("no randomness for the secrets key"))?;
        let key = hex::encode(bytes);
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(path).map_err(|e| Error::internal(format!("creating {}: {e}", path.display())))?;
        f.write_all(key.as_bytes()).and_then(|()| f.sync_all()).map_err(|e| Error::internal(format!("writing {}: {e}", path.display())))?;
        Sealer::from_key(&key)
    }

    /// A key for `purpose` derived from the installation key
    /// (HMAC-SHA256 of the purpose under the key's digest): every process
    /// of the installation derives the same one, and no purpose's key
    /// reveals another's.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, self.root.as_slice());
        let mut out = [0u8; 32];
        out.copy_from_slice(aws_lc_rs::hmac::sign(&key, purpose.as_bytes()).as_ref());
        out
    }

    /// The key capability tokens are signed with.
    pub fn token_key(&self) -> checkfu_core::capability::TokenKey {
        checkfu_core::capability::TokenKey::new(self.derive("checkfu capability tokens v1"))
    }

    /// Signs egress tokens (the sandbox's pass to the egress proxy): a key
    /// of its own, so such a token is good for nothing else.
    pub fn egress_key(&self) -> checkfu_core::capability::TokenKey {
        checkfu_core::capability::TokenKey::new(self.derive("checkfu egress tokens v1"))
    }

    pub fn seal(&self, plaintext: &str) -> Result<String> {
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).map_err(|_| Error::internal("no randomness for a nonce"))?;
        let mut data = plaintext.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut data)
            .map_err(|_| Error::internal("sealing a secret failed"))?;
        Ok(format!("{PREFIX}{}{}", hex::encode(nonce), hex::encode(data)))
    }

    /// The secret in `stored` (which may predate sealing).
    pub fn open(&self, stored: &str) -> Result<String> {
        let Some(rest) = stored.strip_prefix(PREFIX) else { return Ok(stored.to_string()) };
        let bytes = hex::decode(rest).map_err(|_| Error::internal("a sealed secret is damaged"))?;
        if bytes.len() < NONCE_LEN {
            return Err(Error::internal("a sealed secret is damaged"));
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| Error::internal("a sealed secret is damaged"))?;
        let mut data = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::empty(), &mut data)
            .map_err(|_| Error::internal("a sealed secret does not open with this installation's secrets key"))?;
        String::from_utf8(plain.to_vec()).map_err(|_| Error::internal("a sealed secret is damaged"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_round_trip_and_stay_unreadable_without_the_key() {
        let s = Sealer::from_key("an installation key of at least 32 chars").expect("key");
        let sealed = s.seal("whsec_abc").expect("seal");
        assert!(sealed.starts_with(PREFIX) && !sealed.contains("whsec_abc"));
        assert_ne!(sealed, s.seal("whsec_abc").expect("seal"), "a fresh nonce each time");
        assert_eq!(s.open(&sealed).expect("open"), "whsec_abc");
        assert_eq!(s.open("whsec_legacy").expect("legacy"), "whsec_legacy", "values from before sealing read as they are");
        let other = Sealer::from_key("another installation key, also 32+").expect("key");
        assert!(other.open(&sealed).is_err());
        assert!(Sealer::from_key("short").is_err());
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("secrets.key");
        let a = Sealer::load_or_create(&path).expect("create");
        let b = Sealer::load_or_create(&path).expect("load");
        assert_eq!(b.open(&a.seal("x").expect("seal")).expect("open"), "x", "the same key after a restart");
    }
}
