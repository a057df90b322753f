//! The in-process twins: one process is the whole installation.

use crate::{Admit, Epochs, Fanout, RateLimiter};
use checkfu_core::Result;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc};

pub struct MemoryFanout {
    tx: broadcast::Sender<(String, Vec<u8>)>,
}

impl Default for MemoryFanout {
    fn default() -> Self {
        MemoryFanout { tx: broadcast::channel(4096).0 }
    }
}

#[async_trait::async_trait]
impl Fanout for MemoryFanout {
    async fn publish(&self, channel: &str, payload: Vec<u8>) -> Result<()> {
        let _ = self.tx.send((channel.to_string(), payload));
        Ok(())
    }

    async fn subscribe_prefix(&self, prefix: &str) -> Result<mpsc::Receiver<(String, Vec<u8>)>> {
        let mut rx = self.tx.subscribe();
        let (out, recv) = mpsc::channel(4096);
        let prefix = prefix.to_string();
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok((ch, p)) if ch.starts_with(&prefix) => {
                        if out.send((ch, p)).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(recv)
    }
}

/// Keeps at most this many keys; beyond it, expired windows are dropped.
const MAX_KEYS: usize = 100_000;

#[derive(Default)]
pub struct MemoryLimiter {
    windows: Mutex<HashMap<String, (Instant, u32)>>,
}

#[async_trait::async_trait]
impl RateLimiter for MemoryLimiter {
    async fn hit(&self, key: &str, limit: u32, window: Duration) -> Result<Admit> {
        let now = Instant::now();
        let mut map = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > MAX_KEYS {
            map.retain(|_, (start, _)| now.duration_since(*start) < window);
        }
        let entry = map.entry(key.to_string()).or_insert((now, 0));
        if now.duration_since(entry.0) >= window {
            *entry = (now, 0);
        }
        entry.1 += 1;
        if entry.1 <= limit { Ok(Admit::Yes) } else { Ok(Admit::No { retry_after: window.saturating_sub(now.duration_since(entry.0)) }) }
    }
}

/// Epochs of one process: the twin for an installation that is one process
/// (every writer and every cache in it).
#[derive(Default)]
pub struct MemoryEpochs {
    tokens: Mutex<HashMap<String, String>>,
}

#[async_trait::async_trait]
impl Epochs for MemoryEpochs {
    async fn current(&self, name: &str) -> Result<Option<String>> {
        Ok(self.tokens.lock().unwrap_or_else(|p| p.into_inner()).get(name).cloned())
    }

    async fn advance(&self, name: &str) -> Result<()> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), crate::fresh_token());
        Ok(())
    }

    async fn ensure(&self, name: &str) -> Result<()> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner()).entry(name.to_string()).or_insert_with(crate::fresh_token);
        Ok(())
    }
}
