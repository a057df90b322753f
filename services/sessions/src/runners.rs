//! Self-hosted Runners: pairing codes minted by the API, redeemed over the
//! runner protocol for a Runner credential, and revocation that fences a
//! Runner at once. A component of the sessions service holding only the
//! store: it knows nothing of Runs; revoking a Runner answers the Runs it
//! held, which the service puts back in the queue (`work.rs`).
//!
//! Codes and credentials are high-entropy secrets shown once and stored as
//! their SHA-256. A revoked Runner's credential stops authenticating, and
//! each Run it held is put back in the queue under a new generation, so its
//! heartbeats answer `lost` and its appends and capability tokens are
//! refused from that commit on.

use crate::model::*;
use crate::store::SessionsStore;
use checkfu_core::id::{EnvironmentId, PairingId, PrincipalId, RunId, RunnerId, SessionId};
use checkfu_core::page::PageRequest;
use checkfu_core::time::now_ms;
use checkfu_core::{Code, Error, Result, sha256_hex};
use std::sync::Arc;

/// A Runner credential's prefix.
pub const CREDENTIAL_PREFIX: &str = checkfu_core::RUNNER_CREDENTIAL_PREFIX;
/// How often `last_seen_at` is written for a busy Runner.
const SEEN_EVERY_MS: i64 = 5_000;

/// A pairing code: 20 characters of Crockford base32 (100 bits) in groups
/// of four, easy to paste into a terminal.
fn new_code() -> String {
    const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    // 256 is a multiple of 32, so each character is uniform: 5 bits.
    let chars: Vec<char> = checkfu_core::random_bytes::<20>().iter().map(|b| ALPHABET[usize::from(b % 32)] as char).collect();
    chars.chunks(4).map(|c| c.iter().collect::<String>()).collect::<Vec<_>>().join("-")
}

/// The digest a code is stored under; case and dashes do not matter.
fn code_digest(code: &str) -> String {
    let canonical: String = code.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_uppercase()).collect();
    sha256_hex(canonical)
}

fn invalid_credential() -> Error {
    Error::new(Code::InvalidKey, "the runner credential is unknown or revoked")
}

/// A new pairing: who may mint it was checked by the caller.
pub struct NewPairing<'a> {
    pub environment_id: &'a str,
    pub principal_id: &'a str,
    pub pool: &'a str,
    /// Unset: [`DEFAULT_PAIRING_TTL_SECONDS`].
    pub ttl_seconds: Option<i64>,
    pub created_by: &'a str,
}

#[derive(Clone)]
pub struct Runners {
    store: Arc<dyn SessionsStore>,
}

impl Runners {
    pub fn new(store: Arc<dyn SessionsStore>) -> Self {
        Runners { store }
    }

    /// Mints a pairing code; the code is returned once.
    pub async fn create_pairing(&self, p: NewPairing<'_>) -> Result<(Pairing, String)> {
        check_pool("pool", p.pool)?;
        let ttl = p.ttl_seconds.unwrap_or(DEFAULT_PAIRING_TTL_SECONDS);
        if !(1..=MAX_PAIRING_TTL_SECONDS).contains(&ttl) {
            return Err(Error::invalid_field("ttl_seconds", format!("ttl_seconds must be 1 to {MAX_PAIRING_TTL_SECONDS}")));
        }
        let code = new_code();
        let now = now_ms();
        let pairing = Pairing {
            id: PairingId::mint(),
            environment_id: EnvironmentId::parse("environment_id", p.environment_id)?,
            principal_id: PrincipalId::parse("principal_id", p.principal_id)?,
            pool: p.pool.to_string(),
            code_sha256: code_digest(&code),
            created_by: p.created_by.to_string(),
            created_ms: now,
            expires_ms: now + ttl * 1000,
        };
        self.store.insert_pairing(&pairing).await?;
        Ok((pairing, code))
    }

    /// Redeems a pairing code for a new Runner; its credential is returned
    /// once. A spent, expired or unknown code is refused alike.
    pub async fn redeem(&self, code: &str, name: &str) -> Result<(Runner, String)> {
        if code.is_empty() || code.len() > 64 {
            return Err(Error::invalid_field("pairing_code", "the pairing code is required"));
        }
        let name = if name.is_empty() { "runner" } else { name };
        if name.chars().count() > 200 {
            return Err(Error::invalid_field("name", "name must be at most 200 characters"));
        }
        let credential = checkfu_core::new_secret(CREDENTIAL_PREFIX);
        let draft = Runner {
            id: RunnerId::mint(),
            environment_id: checkfu_core::id::TypedId::stored(String::new()),
            pool: String::new(),
            principal_id: checkfu_core::id::TypedId::stored(String::new()),
            pairing_id: checkfu_core::id::TypedId::stored(String::new()),
            name: name.to_string(),
            credential_sha256: sha256_hex(&credential),
            status: RunnerStatus::Active,
            created_ms: now_ms(),
            last_seen_ms: None,
            revoked_ms: None,
        };
        match self.store.redeem_pairing(&code_digest(code), now_ms(), draft).await? {
            Some(runner) => {
                tracing::info!(runner_id = %runner.id, pool = %runner.pool, environment_id = %runner.environment_id, "runner paired");
                Ok((runner, credential))
            }
            None => Err(Error::new(Code::InvalidKey, "the pairing code is unknown, expired or already used")),
        }
    }

    /// The active Runner a credential names, noting that it was seen.
    pub async fn authenticate(&self, credential: &str) -> Result<Runner> {
        if !credential.starts_with(CREDENTIAL_PREFIX) || credential.len() > 200 {
            return Err(invalid_credential());
        }
        let runner = self.store.runner_by_credential(&sha256_hex(credential)).await?.ok_or_else(invalid_credential)?;
        if runner.status != RunnerStatus::Active {
            return Err(invalid_credential());
        }
        let now = now_ms();
        if runner.last_seen_ms.is_none_or(|seen| now - seen >= SEEN_EVERY_MS) {
            self.store.touch_runner(&runner.id, now).await?;
        }
        Ok(runner)
    }

    pub async fn get(&self, id: &str) -> Result<Runner> {
        let id = RunnerId::parse("id", id)?;
        self.store.get_runner(&id).await?.ok_or_else(|| Error::not_found("runner", &id))
    }

    pub async fn list(&self, environment_ids: &[String], page: &PageRequest) -> Result<Vec<Runner>> {
        self.store.list_runners(environment_ids, page).await
    }

    /// Revokes a Runner: its credential stops authenticating at once.
    /// Answers it, and the Runs it held (`(run, session)`), which go back
    /// in the queue.
    pub(crate) async fn revoke(&self, id: &str) -> Result<(Runner, Vec<(RunId, SessionId)>)> {
        let runner = self.get(id).await?;
        self.store.revoke_runner(&runner.id, now_ms()).await?;
        let held = self.store.runs_held_by(&runner.id).await?;
        Ok((self.get(id).await?, held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_grouped_and_compared_loosely() {
        let code = new_code();
        assert_eq!(code.len(), 24, "{code}");
        assert_eq!(code.split('-').count(), 5);
        assert_eq!(code_digest(&code), code_digest(&code.to_lowercase().replace('-', " ")));
        assert_ne!(code_digest(&code), code_digest(&new_code()));
    }

    /// Every character carries its 5 bits: over 40,000 characters each of
    /// the 32 appears about 1,250 times (the standard deviation is ~35).
    #[test]
    fn code_characters_are_uniform() {
        let mut counts = std::collections::BTreeMap::new();
        for _ in 0..2_000 {
            for c in new_code().chars().filter(|c| *c != '-') {
                *counts.entry(c).or_insert(0u32) += 1;
            }
        }
        assert_eq!(counts.len(), 32, "{counts:?}");
        assert!(counts.values().all(|n| (1_000..=1_500).contains(n)), "{counts:?}");
    }
}
