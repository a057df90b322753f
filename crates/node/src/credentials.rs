//! `checkfu credentials rewrap`: run beside the capability gateway's store
//! and key file, after a credential key rotation.

use clap::Subcommand;
use serde_json::json;
use std::io::Write;

#[derive(Debug, Clone, Subcommand)]
pub enum CredentialsAction {
    /// Wrap every stored credential's data key with the key file's first
    /// key (after a new key was put first and the capability gateway
    /// restarted); idempotent. Then the old line can be dropped.
    Rewrap {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

pub async fn credentials(config: &crate::config::Loaded, action: CredentialsAction, out: &mut impl Write) -> anyhow::Result<()> {
    let CredentialsAction::Rewrap { json } = action;
    let location = config.config.location();
    let keys = crate::roles::capability_gateway::credential_keys(config.config.credential_key_file.as_deref(), &location, false)?;
    let done = checkfu_capability_gateway::rewrap(&location, &keys).await.map_err(|e| anyhow::anyhow!("{}", e.message))?;
    if json {
        writeln!(
            out,
            "{}",
            json!({"key_id": keys.current(), "rewrapped": done.rewrapped, "current": done.current, "unreadable": done.unreadable})
        )?;
    } else {
        writeln!(
            out,
            "rewrapped {} credential(s) under key {}; {} already under it; {} unreadable (their key is no longer in the key file)",
            done.rewrapped,
            keys.current(),
            done.current,
            done.unreadable
        )?;
    }
    if done.unreadable > 0 {
        anyhow::bail!("{} credential(s) could not be rewrapped: put their key back in the key file and run this again", done.unreadable);
    }
    Ok(())
}
