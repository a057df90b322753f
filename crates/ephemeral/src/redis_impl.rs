//! Redis: PUBLISH/PSUBSCRIBE for fan-out, `INCR` + `PEXPIRE` (one
//! script, atomic) for fixed-window limits shared by every gateway replica,
//! and `GET` / `SET` (`NX`) for epochs.

use crate::{Admit, Epochs, Fanout, RateLimiter};
use checkfu_core::{Error, Result};
use futures_util::StreamExt;
use redis::aio::ConnectionManager;
use std::time::Duration;
use tokio::sync::mpsc;

fn redis_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::unavailable(format!("redis {what}: {e}"))
}

#[derive(Clone)]
pub struct Redis {
    client: redis::Client,
    conn: ConnectionManager,
}

impl Redis {
    pub async fn connect(url: &str) -> Result<Redis> {
        let client = redis::Client::open(url).map_err(|e| redis_err("url", e))?;
        let conn = client.get_connection_manager().await.map_err(|e| redis_err("connect", e))?;
        Ok(Redis { client, conn })
    }

    pub async fn ping(&self) -> bool {
        redis::cmd("PING").query_async::<String>(&mut self.conn.clone()).await.is_ok()
    }
}

#[async_trait::async_trait]
impl Fanout for Redis {
    async fn publish(&self, channel: &str, payload: Vec<u8>) -> Result<()> {
        redis::cmd("PUBLISH")
            .arg(channel)
            .arg(payload)
            .query_async::<i64>(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err("publish", e))?;
        Ok(())
    }

    async fn subscribe_prefix(&self, prefix: &str) -> Result<mpsc::Receiver<(String, Vec<u8>)>> {
        let (out, recv) = mpsc::channel(4096);
        let pattern = format!("{prefix}*");
        let client = self.client.clone();
        // The first subscription is made before returning, so nothing
        // published after this call is missed.
        let mut pubsub = client.get_async_pubsub().await.map_err(|e| redis_err("subscribe", e))?;
        pubsub.psubscribe(&pattern).await.map_err(|e| redis_err("subscribe", e))?;
        tokio::spawn(async move {
            let outage = crate::outage::FailureLog::new("redis fan-out: cannot reach Redis; retrying every 500 ms");
            loop {
                {
                    let mut messages = pubsub.on_message();
                    while let Some(m) = messages.next().await {
                        let channel = m.get_channel_name().to_string();
                        if out.send((channel, m.get_payload_bytes().to_vec())).await.is_err() {
                            return;
                        }
                    }
                }
                // The connection dropped: reconnect and subscribe again,
                // every 500 ms.
                loop {
                    if out.is_closed() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    let again = async {
                        let mut p = client.get_async_pubsub().await?;
                        p.psubscribe(&pattern).await?;
                        Ok::<_, redis::RedisError>(p)
                    };
                    match again.await {
                        Ok(p) => {
                            outage.recovered();
                            pubsub = p;
                            break;
                        }
                        Err(e) => {
                            outage.failed(&e);
                        }
                    }
                }
            }
        });
        Ok(recv)
    }
}

/// Counts a hit and, on a window's first hit, starts its expiry; returns
/// the count and the milliseconds left in the window.
const HIT: &str = r"
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
return {n, ttl}
";

#[async_trait::async_trait]
impl RateLimiter for Redis {
    async fn hit(&self, key: &str, limit: u32, window: Duration) -> Result<Admit> {
        let (n, ttl): (i64, i64) = redis::Script::new(HIT)
            .key(format!("checkfu:rl:{key}"))
            .arg(window.as_millis() as i64)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err("rate limit", e))?;
        if n <= i64::from(limit) { Ok(Admit::Yes) } else { Ok(Admit::No { retry_after: Duration::from_millis(ttl.max(1) as u64) }) }
    }
}

fn epoch_key(name: &str) -> String {
    format!("checkfu:epoch:{name}")
}

#[async_trait::async_trait]
impl Epochs for Redis {
    async fn current(&self, name: &str) -> Result<Option<String>> {
        redis::cmd("GET").arg(epoch_key(name)).query_async(&mut self.conn.clone()).await.map_err(|e| redis_err("epoch", e))
    }

    async fn advance(&self, name: &str) -> Result<()> {
        redis::cmd("SET")
            .arg(epoch_key(name))
            .arg(crate::fresh_token())
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err("epoch", e))
    }

    async fn ensure(&self, name: &str) -> Result<()> {
        redis::cmd("SET")
            .arg(epoch_key(name))
            .arg(crate::fresh_token())
            .arg("NX")
            .query_async::<Option<String>>(&mut self.conn.clone())
            .await
            .map(|_| ())
            .map_err(|e| redis_err("epoch", e))
    }
}
