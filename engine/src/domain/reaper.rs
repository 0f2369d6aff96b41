//! The lease reaper (invariant 3): a started attempt whose lease expired becomes
//! `unknown` and blocks its activity; a scheduled attempt nobody started in time becomes
//! `expired` and fails over at once. Beside it, due workflow timers fire and cancelled
//! workflows past their compensation bound close. Safe to run in any number of processes
//! at once.

use serde_json::json;
use uuid::Uuid;

use super::{actor, retry_transient, Engine, Events};
use crate::error::EngineError;
use crate::model::{event, ActivityStatus, AttemptStatus, ErrorInfo, Scope};
use crate::store::AttemptEnding;
use crate::store::{NewEvent, StoreTx};

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
    /// Open child jobs of cancelled parents, now cancelled (a parent's cancel cascade
    /// cut short, e.g. by a crash).
    pub children_cancelled: u64,
    /// Cancelled workflow jobs whose compensation bound passed, now `cancelled`.
    pub compensations_timed_out: u64,
    /// Attempts that failed in a transaction of their own (a stored row that no longer
    /// parses, say): each was logged and counted
    /// (`onceflow_pass_item_failures_total{pass="reaper"}`), left as it was, and is tried
    /// again at the next pass. The other attempts were reaped as usual.
    pub failed: u64,
}

/// The two kinds of attempts the reaper changes.
#[derive(Debug, Clone, Copy)]
enum Reaping {
    /// Started attempts whose lease expired: → `unknown`.
    ExpiredLeases,
    /// Scheduled attempts past their schedule-to-start deadline: → `expired`.
    OverdueScheduled,
}

/// What one reaper batch did.
#[derive(Debug, Default)]
struct Batch {
    /// Attempts the batch took (besides those that failed earlier in the pass).
    fresh: u64,
    /// Attempts it changed.
    changed: u64,
    /// Attempts that failed alone in it.
    failed: u64,
}

impl Engine {
    /// One pass of the lease reaper over every owner.
    ///
    /// Guarantees: each attempt is changed by one reaper only, once, even with many
    /// reapers running at once; an attempt whose lease a heartbeat extended in the
    /// meantime is left alone; an `unknown` attempt is never retried automatically; an
    /// attempt that cannot be changed stops no other (see [`ReapReport::failed`]).
    pub async fn reap(&self) -> Result<ReapReport, EngineError> {
        let mut report = ReapReport::default();
        for kind in [Reaping::ExpiredLeases, Reaping::OverdueScheduled] {
            // Attempts that failed alone in this pass: left as they are, skipped until the
            // next pass.
            let mut failed = Vec::new();
            loop {
                let batch = retry_transient!(self.reap_batch(kind, &mut failed))?;
                match kind {
                    Reaping::ExpiredLeases => report.unknown += batch.changed,
                    Reaping::OverdueScheduled => report.expired += batch.changed,
                }
                report.failed += batch.failed;
                if batch.fresh < BATCH as u64 || (batch.changed == 0 && batch.failed == 0) {
                    break;
                }
            }
        }
        loop {
            let (seen, fired) = retry_transient!(self.fire_due_timers())?;
            report.timers_fired += fired;
            if seen < BATCH as u64 || fired == 0 {
                break;
            }
        }
        loop {
            let (seen, closed) = retry_transient!(self.close_overdue_compensations(BATCH))?;
            report.compensations_timed_out += closed;
            if seen < BATCH as u64 || closed == 0 {
                break;
            }
        }
        report.children_cancelled = self.cancel_children_of_cancelled_parents().await?;
        Ok(report)
    }

    /// One batch of attempts of `kind` in one transaction, leaving out those in `failed`.
    /// When an attempt of the batch fails (other than transiently: then the whole batch is
    /// tried again), the batch is rolled back and each of its attempts is reaped in a
    /// transaction of its own, so that one bad attempt cannot stop the others; one that
    /// fails alone is logged, counted, left as it was and added to `failed`.
    async fn reap_batch(
        &self,
        kind: Reaping,
        failed: &mut Vec<Uuid>,
    ) -> Result<Batch, EngineError> {
        let mut tx = self.begin().await?;
        // Failed attempts stay due (they did not change): take them too, and leave them.
        let limit = BATCH + failed.len() as i64;
        let mut due = match kind {
            Reaping::ExpiredLeases => tx.lock_expired_leases(limit).await?,
            Reaping::OverdueScheduled => tx.lock_overdue_scheduled(limit).await?,
        };
        due.retain(|(_, id)| !failed.contains(id));
        let mut batch = Batch {
            fresh: due.len() as u64,
            ..Batch::default()
        };
        let mut events = Vec::new();
        let mut failure = None;
        for (owner, attempt_id) in &due {
            match self
                .reap_attempt(tx.as_mut(), kind, owner, *attempt_id, &mut events)
                .await
            {
                Ok(changed) => batch.changed += u64::from(changed),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        match failure {
            None => {
                tx.append_events(&events).await?;
                tx.commit().await?;
                // Counted once committed: a scrape that sees the heartbeat loss also sees
                // the attempt unknown (the gauges are read from the database).
                self.metrics.events_written(events.iter().map(|e| e.kind));
                return Ok(batch);
            }
            Some(EngineError::Internal(e)) if e.is_transient() => {
                return Err(EngineError::Internal(e))
            }
            Some(_) => drop(tx),
        }
        // Each attempt alone, in the order taken.
        batch.changed = 0;
        for (owner, attempt_id) in &due {
            match retry_transient!(self.reap_attempt_alone(kind, owner, *attempt_id)) {
                Ok(changed) => batch.changed += u64::from(changed),
                Err(e) => {
                    self.metrics.pass_item_failed("reaper");
                    batch.failed += 1;
                    tracing::error!(owner = %owner, attempt_id = %attempt_id, reaping = ?kind, error = %e,
                        "attempt failed in the reaper pass: left as it was, skipped until the next pass");
                    failed.push(*attempt_id);
                }
            }
        }
        Ok(batch)
    }

    /// [`Engine::reap_attempt`] in a transaction of its own, which first locks the
    /// attempt's job (the batch took it with the attempt).
    async fn reap_attempt_alone(
        &self,
        kind: Reaping,
        owner: &str,
        attempt_id: Uuid,
    ) -> Result<bool, EngineError> {
        let mut tx = self.begin().await?;
        if tx
            .lock_job_of_attempt(&Scope::Owner(owner.to_owned()), attempt_id)
            .await?
            .is_none()
        {
            return Ok(false);
        }
        let mut events = Vec::new();
        let changed = self
            .reap_attempt(tx.as_mut(), kind, owner, attempt_id, &mut events)
            .await?;
        tx.append_events(&events).await?;
        tx.commit().await?;
        self.metrics.events_written(events.iter().map(|e| e.kind));
        Ok(changed)
    }

    /// Reaps one attempt whose job `tx` holds, if it is still due (its guards are in the
    /// statements): `true` when it changed. A lease's `attempt_heartbeat_lost` joins
    /// `events`, to be written and counted with the batch's; an expiry writes its own.
    async fn reap_attempt(
        &self,
        tx: &mut dyn StoreTx,
        kind: Reaping,
        owner: &str,
        attempt_id: Uuid,
        events: &mut Vec<NewEvent>,
    ) -> Result<bool, EngineError> {
        match kind {
            Reaping::ExpiredLeases => self.mark_lease_expired(tx, owner, attempt_id, events).await,
            Reaping::OverdueScheduled => self.expire_unstarted(tx, owner, attempt_id).await,
        }
    }

    /// A started attempt whose lease expired → `unknown`, its activity `blocked`.
    async fn mark_lease_expired(
        &self,
        tx: &mut dyn StoreTx,
        owner: &str,
        attempt_id: Uuid,
        all_events: &mut Vec<NewEvent>,
    ) -> Result<bool, EngineError> {
        if !tx.mark_attempt_unknown(owner, attempt_id).await? {
            return Ok(false);
        }
        let Some(attempt) = tx.attempt(owner, attempt_id).await? else {
            return Ok(false);
        };
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
        Ok(true)
    }

    /// A scheduled attempt nobody started before its deadline → `expired`, and the policy
    /// after an attempt ends (failover); writes its job's events at once.
    async fn expire_unstarted(
        &self,
        tx: &mut dyn StoreTx,
        owner: &str,
        attempt_id: Uuid,
    ) -> Result<bool, EngineError> {
        let Some(attempt) = tx.attempt(owner, attempt_id).await? else {
            return Ok(false);
        };
        let Some(job) = tx.lock_job(owner, attempt.job_id).await? else {
            return Ok(false);
        };
        let error = ErrorInfo::new(
            "schedule_to_start_timeout",
            "no worker started the attempt in time",
        );
        if !tx
            .finish_attempt(&AttemptEnding {
                owner,
                attempt_id: attempt.id,
                from: &[AttemptStatus::Scheduled],
                to: AttemptStatus::Expired,
                error: Some(&error),
                outcome: None,
            })
            .await?
        {
            return Ok(false);
        }
        let mut events = Events::for_job(owner, attempt.job_id);
        events.push(
            event::ATTEMPT_EXPIRED,
            Some(attempt.id),
            actor::REAPER,
            json!({ "provider": attempt.provider, "number": attempt.number }),
        );
        self.after_attempt_end(
            tx,
            &mut events,
            &job,
            &attempt,
            AttemptStatus::Expired,
            false,
        )
        .await?;
        events.flush(tx, &self.metrics).await?;
        tracing::info!(job_id = %attempt.job_id, attempt_id = %attempt.id, owner = %owner, "attempt expired before any worker started it");
        Ok(true)
    }
}
