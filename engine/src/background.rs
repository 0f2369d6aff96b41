//! Background loops that run inside `onceflow serve`: the lease reaper, the scheduler
//! (cron ticks), and the listener that wakes long-polls when work is scheduled. Every loop is safe to run in any number
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
    let scheduler = {
        let engine = engine.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move { run_scheduler(engine, shutdown).await })
    };
    let listener = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.listen_for_work(shutdown).await })
    };
    vec![reaper, scheduler, listener]
}

/// The longest the scheduler sleeps between passes: a schedule created or resumed by
/// another engine is seen within this long.
const SCHEDULER_MAX_SLEEP: Duration = Duration::from_secs(1);

/// Runs scheduler passes at each due tick (and at least every second), until `shutdown`.
async fn run_scheduler(engine: Engine, shutdown: CancellationToken) {
    let changed = engine.schedules_signal();
    loop {
        let outcome = engine.run_schedules().await;
        // A tick another engine holds (SKIP LOCKED) stays due until it commits: re-check
        // soon, not in a spin; after an error, back off a little.
        let floor = Duration::from_millis(if outcome.is_err() { 500 } else { 20 });
        match outcome {
            Ok(report) if report.fired + report.skipped_overlap + report.skipped_too_old > 0 => {
                tracing::debug!(fired = report.fired, skipped_overlap = report.skipped_overlap,
                    skipped_too_old = report.skipped_too_old, "scheduler pass");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "scheduler pass failed; retrying"),
        }
        let wait = match engine.next_schedule_fire_at().await {
            Ok(Some(next)) => (next - chrono::Utc::now()).to_std().unwrap_or(Duration::ZERO).min(SCHEDULER_MAX_SLEEP),
            _ => SCHEDULER_MAX_SLEEP,
        }
        .max(floor);
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = changed.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}
