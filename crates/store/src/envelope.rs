//! Envelope encryption for credentials the platform holds and never shows
//! (Connection credentials, api.md §16.2): each secret is sealed with a
//! fresh 256-bit data key (AES-256-GCM, the Connection's id as associated
//! data, so a sealed credential moved to another Connection does not open),
//! and the data key is wrapped by an installation key named by its id.
//!
//! The key file holds lines `<key_id>:<base64 of 32 bytes>`: the first line
//! wraps, every line unwraps. Rotation is: put a new line first, restart,
//! run `checkfu credentials rewrap` ([`KeyRing::rewrap`] on every stored
//! credential: only the data key is wrapped again), then drop the old line.
//! A credential whose key is gone does not open (it reads `unreadable`).

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine;
use checkfu_core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The stored form of a sealed credential: nothing in it is secret without
/// the key file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The installation key that wrapped `wrapped_key`.
    pub key_id: String,
    /// The data key, sealed by the installation key (nonce, then
    /// ciphertext and tag; hex).
    pub wrapped_key: String,
    /// The secret, sealed by the data key (nonce, then ciphertext and tag;
    /// hex).
    pub sealed: String,
}

/// The installation keys, in the key file's order.
pub struct KeyRing {
    keys: Vec<(String, LessSafeKey)>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("KeyRing").field("key_ids", &ids).finish_non_exhaustive()
    }
}

fn aes(bytes: &[u8]) -> Result<LessSafeKey> {
    let key = UnboundKey::new(&AES_256_GCM, bytes).map_err(|_| Error::invalid("a key must be 32 bytes"))?;
    Ok(LessSafeKey::new(key))
}

fn random<const N: usize>() -> Result<[u8; N]> {
    let mut b = [0u8; N];
    aws_lc_rs::rand::fill(&mut b).map_err(|_| Error::internal("no randomness"))?;
    Ok(b)
}

/// `nonce || ciphertext || tag`, hex.
fn seal(key: &LessSafeKey, aad: &[u8], plain: &[u8]) -> Result<String> {
    let nonce = random::<NONCE_LEN>()?;
    let mut data = plain.to_vec();
    key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), &mut data)
        .map_err(|_| Error::internal("sealing failed"))?;
    Ok(format!("{}{}", hex::encode(nonce), hex::encode(data)))
}

fn open(key: &LessSafeKey, aad: &[u8], sealed: &str) -> Option<Vec<u8>> {
    let bytes = hex::decode(sealed).ok()?;
    if bytes.len() < NONCE_LEN {
        return None;
    }
    let (nonce, rest) = bytes.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut data = rest.to_vec();
    key.open_in_place(nonce, Aad::from(aad), &mut data).ok().map(|p| p.to_vec())
}

/// What the data key is bound to besides the installation key: the key id.
fn wrap_aad(key_id: &str) -> Vec<u8> {
    format!("checkfu credential data key v1\0{key_id}").into_bytes()
}

impl KeyRing {
    /// Parses a key file's text: `<key_id>:<base64 of 32 bytes>` per line
    /// (blank lines and `#` comments skipped); at least one key, ids
    /// unique and made of `[A-Za-z0-9._-]`.
    pub fn parse(text: &str) -> Result<KeyRing> {
        let mut keys: Vec<(String, LessSafeKey)> = vec![];
        for (n, line) in text.lines().enumerate().map(|(n, l)| (n + 1, l.trim())) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| Error::invalid(format!("credential key file, line {n}: {why}"));
            let (id, b64) = line.split_once(':').ok_or_else(|| bad("expected <key_id>:<base64 of 32 bytes>"))?;
            let id = id.trim();
            if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
                return Err(bad("a key id is 1–64 of A-Z a-z 0-9 . _ -"));
            }
            if keys.iter().any(|(k, _)| k == id) {
                return Err(bad("the key id appears twice"));
            }
            let bytes = base64::engine::general_purpose::STANDARD.decode(b64.trim()).map_err(|_| bad("the key is not base64"))?;
            if bytes.len() != 32 {
                return Err(bad("the key must be 32 bytes"));
            }
            keys.push((id.to_string(), aes(&bytes)?));
        }
        if keys.is_empty() {
            return Err(Error::invalid("the credential key file holds no key"));
        }
        Ok(KeyRing { keys })
    }

    /// Reads the key file at `path`.
    pub fn load(path: &Path) -> Result<KeyRing> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::internal(format!("reading {}: {e}", path.display())))?;
        KeyRing::parse(&text)
    }

    /// The embedded installation's key file: read, or made (one random
    /// key, mode 0600, exclusive create) on first use.
    pub fn load_or_create(path: &Path) -> Result<KeyRing> {
        use std::io::Write;
        if path.exists() {
            return KeyRing::load(path);
        }
        let key = base64::engine::general_purpose::STANDARD.encode(random::<32>()?);
        let id = format!("k{}", hex::encode(random::<4>()?));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(path).map_err(|e| Error::internal(format!("creating {}: {e}", path.display())))?;
        f.write_all(format!("{id}:{key}\n").as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| Error::internal(format!("writing {}: {e}", path.display())))?;
        KeyRing::load(path)
    }

    /// The id of the key that wraps new data keys (the file's first).
    pub fn current(&self) -> &str {
        &self.keys[0].0
    }

    /// Whether the key file still holds the key `id`.
    pub fn has(&self, id: &str) -> bool {
        self.key(id).is_some()
    }

    fn key(&self, id: &str) -> Option<&LessSafeKey> {
        self.keys.iter().find(|(k, _)| k == id).map(|(_, key)| key)
    }

    /// Seals `secret` for the owner `bound_to` (a Connection id).
    pub fn seal(&self, bound_to: &str, secret: &[u8]) -> Result<Envelope> {
        let data_key = random::<32>()?;
        let sealed = seal(&aes(&data_key)?, bound_to.as_bytes(), secret)?;
        let (id, wrapping) = &self.keys[0];
        Ok(Envelope { key_id: id.clone(), wrapped_key: seal(wrapping, &wrap_aad(id), &data_key)?, sealed })
    }

    fn data_key(&self, e: &Envelope) -> Option<LessSafeKey> {
        let wrapping = self.key(&e.key_id)?;
        let bytes = open(wrapping, &wrap_aad(&e.key_id), &e.wrapped_key)?;
        aes(&bytes).ok()
    }

    /// The secret, or `None` when it does not open here: its key is gone,
    /// it was sealed for another owner, or it is damaged.
    pub fn open(&self, bound_to: &str, e: &Envelope) -> Option<Vec<u8>> {
        open(&self.data_key(e)?, bound_to.as_bytes(), &e.sealed)
    }

    /// The envelope with its data key wrapped by the current key (the
    /// secret itself is not touched); `None` when its key is gone. An
    /// envelope already under the current key comes back unchanged.
    pub fn rewrap(&self, e: &Envelope) -> Option<Envelope> {
        if e.key_id == self.current() {
            return self.data_key(e).map(|_| e.clone());
        }
        let wrapping = self.key(&e.key_id)?;
        let data_key = open(wrapping, &wrap_aad(&e.key_id), &e.wrapped_key)?;
        let (id, current) = &self.keys[0];
        let wrapped_key = seal(current, &wrap_aad(id), &data_key).ok()?;
        Some(Envelope { key_id: id.clone(), wrapped_key, sealed: e.sealed.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, byte: u8) -> String {
        format!("{id}:{}\n", base64::engine::general_purpose::STANDARD.encode([byte; 32]))
    }

    #[test]
    fn a_credential_opens_only_for_its_connection_and_with_its_key() {
        let ring = KeyRing::parse(&line("k1", 1)).expect("ring");
        let e = ring.seal("conn_a", b"s3cret-XYZ").expect("seal");
        let stored = serde_json::to_string(&e).expect("json");
        assert!(!stored.contains("s3cret"), "nothing in the stored form is the secret");
        assert_eq!(ring.open("conn_a", &e).as_deref(), Some(b"s3cret-XYZ".as_slice()));
        assert_ne!(ring.seal("conn_a", b"s3cret-XYZ").expect("seal"), e, "a fresh data key and nonce each time");
        assert_eq!(ring.open("conn_b", &e), None, "bound to its Connection");
        let other = KeyRing::parse(&line("k1", 2)).expect("ring");
        assert_eq!(other.open("conn_a", &e), None, "another installation's key of the same id");
        let mut damaged = e.clone();
        let flipped = if &damaged.sealed[40..41] == "0" { "1" } else { "0" };
        damaged.sealed.replace_range(40..41, flipped);
        assert_eq!(ring.open("conn_a", &damaged), None);
    }

    #[test]
    fn rotation_rewraps_the_data_keys_and_the_old_key_can_go() {
        let old = KeyRing::parse(&line("k1", 1)).expect("ring");
        let e = old.seal("conn_a", b"token").expect("seal");
        // A new key first: new credentials use it, old ones still open.
        let both = KeyRing::parse(&(line("k2", 2) + &line("k1", 1))).expect("ring");
        assert_eq!(both.current(), "k2");
        assert_eq!(both.open("conn_a", &e).as_deref(), Some(b"token".as_slice()));
        let fresh = both.seal("conn_b", b"other").expect("seal");
        assert_eq!(fresh.key_id, "k2");
        // Rewrap (idempotent), then only the new key is needed.
        let rewrapped = both.rewrap(&e).expect("rewrap");
        assert_eq!(rewrapped.key_id, "k2");
        assert_eq!(rewrapped.sealed, e.sealed, "the secret itself is not re-encrypted");
        assert_eq!(both.rewrap(&rewrapped), Some(rewrapped.clone()), "idempotent");
        let new_only = KeyRing::parse(&line("k2", 2)).expect("ring");
        assert_eq!(new_only.open("conn_a", &rewrapped).as_deref(), Some(b"token".as_slice()));
        assert_eq!(new_only.open("conn_a", &e), None, "not rewrapped: unreadable once its key is gone");
        assert_eq!(new_only.rewrap(&e), None);
    }

    #[test]
    fn key_files_are_checked_and_made_private() {
        for bad in ["", "# only a comment\n", "k1\n", "k1:notbase64!\n", "k1:AAAA\n", "bad id:AAAA\n", &(line("k1", 1) + &line("k1", 2))] {
            let e = KeyRing::parse(bad).expect_err(bad);
            assert!(!e.to_string().contains(&line("k1", 1).trim()[3..]), "no key in an error");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("credential.keys");
        let a = KeyRing::load_or_create(&path).expect("create");
        let b = KeyRing::load_or_create(&path).expect("load");
        assert_eq!(a.current(), b.current());
        let e = a.seal("conn_a", b"x").expect("seal");
        assert_eq!(b.open("conn_a", &e).as_deref(), Some(b"x".as_slice()), "the same key after a restart");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777, 0o600);
        }
        assert!(!format!("{a:?}").contains(&std::fs::read_to_string(&path).expect("read")[10..30]), "Debug shows ids only");
    }
}
