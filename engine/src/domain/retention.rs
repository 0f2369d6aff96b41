//! Retention (DESIGN.md, Performance shape): finished jobs are pruned by a setting, never
//! by hand. Safe to run in any number of processes at once.

use std::time::Duration;

use super::{retry_transient, Engine};
use crate::error::EngineError;

/// How many jobs one retention statement deletes at most.
pub const PRUNE_BATCH: i64 = 500;

impl Engine {
    /// Deletes every job that finished (`succeeded`, `failed` or `cancelled`) more than
    /// `retention` ago by the database clock and has no live attempt, with its
    /// activities, attempts, events and timers, `batch` jobs per transaction; answers how
    /// many.
    ///
    /// Guarantees: a job that is not finished, finished less than `retention` ago, or has
    /// an attempt still `scheduled`, `started` or `unknown` is never touched, so a late
    /// result still finds its job; a job another transaction holds (a replay, an
    /// operator's action) is left for a later pass; concurrent passes in several engines
    /// delete each job once. Once a job is gone its idempotency key is free again: a
    /// later submission of that key creates a new job.
    pub async fn prune_finished_jobs(&self, retention: Duration, batch: i64) -> Result<u64, EngineError> {
        let batch = batch.max(1);
        let mut pruned = 0;
        loop {
            let deleted = retry_transient!(async { Ok::<_, EngineError>(self.store.prune_finished_jobs(retention, batch).await?) })?;
            pruned += deleted;
            self.metrics.pruned(deleted);
            if deleted < batch as u64 {
                return Ok(pruned);
            }
        }
    }
}

impl Engine {
    /// Deletes every schedule event (fired, skipped, changed) written more than
    /// `retention` ago by the database clock, `batch` per transaction; answers how many.
    /// Schedules themselves, and their counters, are kept.
    pub async fn prune_schedule_events(&self, retention: Duration, batch: i64) -> Result<u64, EngineError> {
        let batch = batch.max(1);
        let mut pruned = 0;
        loop {
            let deleted = retry_transient!(async { Ok::<_, EngineError>(self.store.prune_schedule_events(retention, batch).await?) })?;
            pruned += deleted;
            if deleted < batch as u64 {
                return Ok(pruned);
            }
        }
    }
}
