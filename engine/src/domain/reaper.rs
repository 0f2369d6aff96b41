//! The lease reaper (invariant 3): a started attempt whose lease expired becomes
//! `unknown` and blocks its activity; a scheduled attempt nobody started in time becomes
//! `expired` and fails over at once. Safe to run in any number of processes at once.

use serde_json::json;

use super::{actor, retry_transient, Engine, Events};
use crate::error::EngineError;
use crate::model::{event, ActivityStatus, AttemptStatus, ErrorInfo};

/// How many rows one reaper transaction takes at most.
const BATCH: i64 = 200;

/// What one [`Engine::reap`] pass changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// Started attempts whose lease expired, now `unknown`.
    pub unknown: u64,
    /// Scheduled attempts past their schedule-to-start deadline, now `expired`.
    pub expired: u64,
    /// Durable timers that fired.
    pub timers_fired: u64,
}

impl Engine {
    /// One pass of the lease reaper over every owner.
    ///
    /// Guarantees: each attempt is changed by one reaper only, once, even with many
    /// reapers running at once; an attempt whose lease a heartbeat extended in the
    /// meantime is left alone; an `unknown` attempt is never retried automatically.
    pub async fn reap(&self) -> Result<ReapReport, EngineError> {
        let mut report = ReapReport::default();
        loop {
            let (seen, changed) = retry_transient!(self.reap_expired_leases())?;
            report.unknown += changed;
            if seen < BATCH as u64 || changed == 0 {
                break;
            }
        }
        loop {
            let (seen, changed) = retry_transient!(self.reap_overdue_scheduled())?;
            report.expired += changed;
            if seen < BATCH as u64 || changed == 0 {
                break;
            }
        }
        loop {
            let (seen, fired) = retry_transient!(self.fire_due_timers())?;
            report.timers_fired += fired;
            if seen < BATCH as u64 || fired == 0 {
                break;
            }
        }
        Ok(report)
    }

    async fn reap_expired_leases(&self) -> Result<(u64, u64), EngineError> {
        let mut tx = self.begin().await?;
        let expired = tx.lock_expired_leases(BATCH).await?;
        let mut changed = 0;
        let mut all_events = Vec::new();
        for (owner, attempt_id) in &expired {
            if !tx.mark_attempt_unknown(owner, *attempt_id).await? {
                continue;
            }
            let Some(attempt) = tx.attempt(owner, *attempt_id).await? else {
                continue;
            };
            changed += 1;
            tx.set_activity_status(
                owner,
                attempt.activity_id,
                &[ActivityStatus::Running, ActivityStatus::Scheduled],
                ActivityStatus::Blocked,
            )
            .await?;
            let mut events = Events::for_job(owner, attempt.job_id);
            events.push(
                event::ATTEMPT_HEARTBEAT_LOST,
                Some(attempt.id),
                actor::REAPER,
                json!({ "provider": attempt.provider, "number": attempt.number,
                        "lease_expired_at": attempt.unknown_at, "worker_id": attempt.worker_id }),
            );
            all_events.extend(events.pending);
            tracing::warn!(job_id = %attempt.job_id, attempt_id = %attempt.id, owner = %owner,
                provider = %attempt.provider, "heartbeat lost: attempt is unknown until it resolves or an operator cancels it");
        }
        tx.append_events(&all_events).await?;
        tx.commit().await?;
        // Counted once committed: a scrape that sees the heartbeat loss also sees the
        // attempt unknown (the gauges are read from the database).
        self.metrics
            .events_written(all_events.iter().map(|e| e.kind));
        Ok((expired.len() as u64, changed))
    }

    async fn reap_overdue_scheduled(&self) -> Result<(u64, u64), EngineError> {
        let mut tx = self.begin().await?;
        let overdue = tx.lock_overdue_scheduled(BATCH).await?;
        let mut changed = 0;
        for (owner, attempt_id) in &overdue {
            let Some(attempt) = tx.attempt(owner, *attempt_id).await? else {
                continue;
            };
            let Some(job) = tx.lock_job(owner, attempt.job_id).await? else {
                continue;
            };
            let error = ErrorInfo::new(
                "schedule_to_start_timeout",
                "no worker started the attempt in time",
            );
            if !tx
                .finish_attempt(
                    owner,
                    attempt.id,
                    &[AttemptStatus::Scheduled],
                    AttemptStatus::Expired,
                    Some(&error),
                    None,
                )
                .await?
            {
                continue;
            }
            changed += 1;
            let mut events = Events::for_job(owner, attempt.job_id);
            events.push(
                event::ATTEMPT_EXPIRED,
                Some(attempt.id),
                actor::REAPER,
                json!({ "provider": attempt.provider, "number": attempt.number }),
            );
            self.after_attempt_end(
                tx.as_mut(),
                &mut events,
                &job,
                &attempt,
                AttemptStatus::Expired,
                false,
            )
            .await?;
            events.flush(tx.as_mut(), &self.metrics).await?;
            tracing::info!(job_id = %attempt.job_id, attempt_id = %attempt.id, owner = %owner, "attempt expired before any worker started it");
        }
        tx.commit().await?;
        Ok((overdue.len() as u64, changed))
    }
}
