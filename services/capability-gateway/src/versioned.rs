//! Compare-and-set changes of a versioned row (a Connection, a ToolSource):
//! read it, check the caller's `expected_version`, apply the change, and
//! write it only if the row is still at the version read. A writer that lost
//! the race starts again from a fresh read; after three losses the caller
//! is told to read again.

use checkfu_core::time::now_ms;
use checkfu_core::{Error, Result};
use serde_json::json;
use std::future::Future;

/// A row that carries an optimistic-concurrency `version`.
pub trait Versioned: Clone {
    /// What it is, for messages (`connection`, `tool source`).
    const KIND: &'static str;
    fn version(&self) -> i64;
    /// The next version, changed now.
    fn bump(&mut self, now_ms: i64);
}

/// Applies `change` to the row `read` returns and writes it with `write`
/// (which answers whether the row was still at the version given); the row
/// before and after.
pub async fn change<T, R, RF, W, WF>(
    expected_version: Option<i64>,
    read: R,
    change: impl Fn(&mut T) -> Result<()>,
    write: W,
) -> Result<(T, T)>
where
    T: Versioned,
    R: Fn() -> RF,
    RF: Future<Output = Result<T>>,
    W: Fn(T, i64) -> WF,
    WF: Future<Output = Result<bool>>,
{
    for _ in 0..3 {
        let current = read().await?;
        if let Some(v) = expected_version
            && v != current.version()
        {
            return Err(Error::conflict(format!("{} is at version {}, not {v}", T::KIND, current.version()))
                .with_details(json!({"current_version": current.version()})));
        }
        let mut next = current.clone();
        change(&mut next)?;
        next.bump(now_ms());
        if write(next.clone(), current.version()).await? {
            return Ok((current, next));
        }
    }
    Err(Error::conflict(format!("the {} changed concurrently; read it again", T::KIND)))
}
