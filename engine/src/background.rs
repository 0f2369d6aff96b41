//! Background loops that run inside `onceflow serve`: the lease reaper, the scheduler
//! (cron ticks), retention (when set), and the listener that wakes long-polls when work
//! is scheduled. Every loop is safe to run in any number
//! of processes at once; the wake-ups are hints, never needed for correctness.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::Engine;

/// Starts the loops; they stop when `shutdown` is cancelled. With a `retention`, finished
/// jobs older than it are pruned every [`retention_interval`].
pub fn spawn(
    engine: &Engine,
    reaper_interval: Duration,
    retention: Option<Duration>,
    shutdown: CancellationToken,
) -> Vec<JoinHandle<()>> {
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
                    Ok(report)
                        if report.unknown + report.expired + report.compensations_timed_out > 0 =>
                    {
                        tracing::info!(
                            unknown = report.unknown,
                            expired = report.expired,
                            compensations_timed_out = report.compensations_timed_out,
                            "reaper pass"
                        );
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "reaper pass failed; retrying next interval")
                    }
                }
            }
        })
    };
    let scheduler = {
        let engine = engine.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move { run_scheduler(engine, shutdown).await })
    };
    let mut loops = vec![reaper, scheduler];
    if let Some(retention) = retention {
        let engine = engine.clone();
        let shutdown = shutdown.clone();
        loops.push(tokio::spawn(async move {
            run_retention(engine, retention, shutdown).await
        }));
    }
    let listener = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.listen_for_work(shutdown).await })
    };
    loops.push(listener);
    loops
}

/// How often retention runs: a quarter of the retention, between 1 s and 1 min, so a job
/// is deleted at most that long after its time is up.
pub fn retention_interval(retention: Duration) -> Duration {
    (retention / 4).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

/// Prunes finished jobs and schedule events past `retention` at once and then every
/// [`retention_interval`], until `shutdown`. A pass with a backlog (retention just turned
/// on over a long history, or a minute's worth of a busy engine's jobs) spends at most
/// half its time deleting: after each full batch it waits as long as the batch took, so
/// the hot path keeps the database's other half.
async fn run_retention(engine: Engine, retention: Duration, shutdown: CancellationToken) {
    let interval = retention_interval(retention);
    loop {
        let mut pass = crate::domain::PrunePass::default();
        loop {
            let started = tokio::time::Instant::now();
            match engine
                .prune_finished_jobs_batch(retention, crate::domain::PRUNE_BATCH, &mut pass)
                .await
            {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "retention pass failed; retrying next interval");
                    break;
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(started.elapsed()) => {}
            }
        }
        if pass.deleted > 0 {
            tracing::info!(
                pruned = pass.deleted,
                retention_s = retention.as_secs(),
                "retention pass deleted finished jobs"
            );
        }
        match engine
            .prune_schedule_events(retention, crate::domain::PRUNE_BATCH)
            .await
        {
            Ok(0) => {}
            Ok(pruned) => tracing::info!(
                pruned,
                retention_s = retention.as_secs(),
                "retention pass deleted schedule events"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "retention pass over schedule events failed; retrying next interval")
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(interval) => {}
        }
    }
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
        // soon, not in a spin; after an error, or with a schedule that failed (it stays
        // due until it can fire), back off a little.
        let troubled = outcome.as_ref().map_or(true, |report| report.failed > 0);
        let floor = Duration::from_millis(if troubled { 500 } else { 20 });
        match outcome {
            Ok(report) if report.fired + report.skipped_overlap + report.skipped_too_old > 0 => {
                tracing::debug!(
                    fired = report.fired,
                    skipped_overlap = report.skipped_overlap,
                    skipped_too_old = report.skipped_too_old,
                    "scheduler pass"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "scheduler pass failed; retrying"),
        }
        let wait = match engine.next_schedule_due_in().await {
            Ok(Some(due_in)) => due_in.min(SCHEDULER_MAX_SLEEP),
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
