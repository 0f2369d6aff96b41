//! Retention (docs/design.md, Performance shape): finished jobs are pruned by a setting, never
//! by hand. Safe to run in any number of processes at once.

use std::time::Duration;

use super::{retry_transient, Engine};
use crate::error::EngineError;

/// How many jobs one retention statement deletes at most.
pub const PRUNE_BATCH: i64 = 500;

/// Where a retention pass stands: each batch starts after the last job the previous one
/// chose, so a pass over a long backlog never walks again what it already passed (on
/// PostgreSQL, the index entries of the rows it deleted, dead until vacuumed). A job
/// passed over (still open, or held by another transaction) is seen again next pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct PrunePass {
    /// Jobs deleted so far in this pass.
    pub deleted: u64,
    after: Option<uuid::Uuid>,
}

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
    pub async fn prune_finished_jobs(
        &self,
        retention: Duration,
        batch: i64,
    ) -> Result<u64, EngineError> {
        let mut pass = PrunePass::default();
        while self
            .prune_finished_jobs_batch(retention, batch, &mut pass)
            .await?
        {}
        Ok(pass.deleted)
    }

    /// One transaction of [`Engine::prune_finished_jobs`]: deletes at most `batch` jobs,
    /// oldest first after where `pass` stopped, under the same rule and guarantees, and
    /// moves `pass` on. Answers whether more may be left in this pass.
    pub async fn prune_finished_jobs_batch(
        &self,
        retention: Duration,
        batch: i64,
        pass: &mut PrunePass,
    ) -> Result<bool, EngineError> {
        let batch = batch.max(1);
        let after = pass.after;
        let done = retry_transient!(async {
            Ok::<_, EngineError>(
                self.store
                    .prune_finished_jobs(retention, batch, after)
                    .await?,
            )
        })?;
        self.metrics.pruned(done.deleted);
        pass.deleted += done.deleted;
        pass.after = done.last.or(pass.after);
        Ok(done.chosen >= batch as u64)
    }
}

impl Engine {
    /// Deletes every schedule event (fired, skipped, changed) written more than
    /// `retention` ago by the database clock, `batch` per transaction; answers how many.
    /// Schedules themselves, and their counters, are kept.
    pub async fn prune_schedule_events(
        &self,
        retention: Duration,
        batch: i64,
    ) -> Result<u64, EngineError> {
        let batch = batch.max(1);
        let mut pruned = 0;
        loop {
            let deleted = retry_transient!(async {
                Ok::<_, EngineError>(self.store.prune_schedule_events(retention, batch).await?)
            })?;
            pruned += deleted;
            if deleted < batch as u64 {
                return Ok(pruned);
            }
        }
    }
}
