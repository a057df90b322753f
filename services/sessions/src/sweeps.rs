//! The service's background sweeps (expired approvals, uploads, sandboxes,
//! work items): each runs on a timer until the node stops.

use checkfu_core::Result;

/// Runs `sweep` every `every` until `stop`; a failed sweep is logged and
/// tried again next time.
pub(crate) async fn every<F, Fut, T>(every: std::time::Duration, stop: tokio_util::sync::CancellationToken, what: &str, sweep: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        if let Err(e) = sweep().await {
            tracing::warn!(error = %e, "{what} sweep failed; retrying");
        }
    }
}
