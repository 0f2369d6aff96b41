//! Background loops that run inside `onceflow serve`: the lease reaper, and the listener
//! that wakes long-polls when work is scheduled. Every loop is safe to run in any number
//! of processes at once; the wake-ups are hints, never needed for correctness.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::Engine;

/// Starts the loops; they stop when `shutdown` is cancelled.
pub fn spawn(engine: &Engine, reaper_interval: Duration, shutdown: CancellationToken) -> Vec<JoinHandle<()>> {
    let reaper = {
        let engine = engine.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(reaper_interval) => {}
                }
                match engine.reap().await {
                    Ok(report) if report.unknown + report.expired > 0 => {
                        tracing::info!(unknown = report.unknown, expired = report.expired, "reaper pass");
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "reaper pass failed; retrying next interval"),
                }
            }
        })
    };
    let listener = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.listen_for_work(shutdown).await })
    };
    vec![reaper, listener]
}
