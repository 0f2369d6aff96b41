//! `impl StoreTx for SqliteTx`: the guarded statements the domain composes into one
//! write transaction (`BEGIN IMMEDIATE`) per state change.

use std::sync::{Arc, Mutex as StdMutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{Row, Sqlite, Transaction};
use tokio::sync::{Notify, OwnedMutexGuard};
use uuid::Uuid;

use super::clock::*;
use super::decode::*;
use super::queries::*;
use crate::error::StoreError;
use crate::model::{
    ActivityOptions, ActivityStatus, AttemptStatus, Certification, Contract, ErrorInfo, JobKind,
    JobStatus, Scope,
};
use crate::store::*;

/// A SQLite write transaction (`BEGIN IMMEDIATE`).
pub struct SqliteTx {
    pub(super) tx: Transaction<'static, Sqlite>,
    /// The transaction's clock, like PostgreSQL's `now()`.
    pub(super) now: i64,
    pub(super) _writer: OwnedMutexGuard<()>,
    pub(super) listeners: Arc<StdMutex<Vec<Arc<Notify>>>>,
    pub(super) wake: bool,
}

#[async_trait]
impl StoreTx for SqliteTx {
    async fn commit(self: Box<Self>) -> StoreResult<()> {
        let SqliteTx {
            tx,
            wake,
            listeners,
            ..
        } = *self;
        tx.commit().await?;
        if wake {
            if let Ok(listeners) = listeners.lock() {
                listeners.iter().for_each(|l| l.notify_waiters());
            }
        }
        Ok(())
    }

    async fn now(&mut self) -> StoreResult<DateTime<Utc>> {
        Ok(ts(self.now))
    }

    async fn insert_job(&mut self, job: &NewJob) -> StoreResult<Option<JobRow>> {
        let row = sqlx::query(INSERT_JOB_SQL)
            .bind(&job.owner_id)
            .bind(job.id.to_string())
            .bind(&job.idempotency_key)
            .bind(&job.fingerprint)
            .bind(job.kind.as_str())
            .bind(&job.workflow)
            .bind(&job.activity)
            .bind(&job.task_queue)
            .bind(job.input.to_string())
            .bind(self.now)
            .bind(self.now)
            .bind(job.kind == JobKind::Workflow)
            .bind(job.parent_job_id.map(|id| id.to_string()))
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn job_by_idempotency_key(
        &mut self,
        owner: &str,
        key: &str,
    ) -> StoreResult<Option<JobRow>> {
        let row = sqlx::query(JOB_BY_IDEMPOTENCY_KEY_SQL)
            .bind(owner)
            .bind(key)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn lock_job_of_attempt(
        &mut self,
        scope: &Scope,
        attempt_id: Uuid,
    ) -> StoreResult<Option<JobRow>> {
        let row = sqlx::query(LOCK_JOB_OF_ATTEMPT_SQL)
            .bind(attempt_id.to_string())
            .bind(scope.owner())
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn lock_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Option<JobRow>> {
        let row = sqlx::query(LOCK_JOB_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn mark_job_running(&mut self, owner: &str, job_id: Uuid) -> StoreResult<bool> {
        let done = sqlx::query(MARK_JOB_RUNNING_SQL)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn commit_job_result(&mut self, commit: &JobResultCommit<'_>) -> StoreResult<bool> {
        let JobResultCommit {
            owner,
            job_id,
            version,
            attempt_id,
            result,
        } = *commit;
        let done = sqlx::query(COMMIT_JOB_RESULT_SQL)
            .bind(result.to_string())
            .bind(attempt_id.map(|a| a.to_string()))
            .bind(self.now)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(version)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn close_job(&mut self, closing: &JobClosing<'_>) -> StoreResult<bool> {
        let JobClosing {
            owner,
            job_id,
            version,
            status,
            error,
        } = *closing;
        let done = sqlx::query(CLOSE_JOB_SQL)
            .bind(status.as_str())
            .bind(error.map(text).transpose()?)
            .bind(self.now)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(version)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn resume_job(&mut self, owner: &str, job_id: Uuid, version: i64) -> StoreResult<bool> {
        let done = sqlx::query(RESUME_JOB_SQL)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(version)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn reopen_activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
        resumed_after: i32,
    ) -> StoreResult<bool> {
        let done = sqlx::query(REOPEN_ACTIVITY_SQL)
            .bind(owner)
            .bind(activity_id.to_string())
            .bind(resumed_after)
            .bind(self.now)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn activity_resumed_after(
        &mut self,
        owner: &str,
        activity_id: Uuid,
    ) -> StoreResult<Option<i32>> {
        Ok(sqlx::query_scalar(ACTIVITY_RESUMED_AFTER_SQL)
            .bind(owner)
            .bind(activity_id.to_string())
            .fetch_optional(&mut *self.tx)
            .await?)
    }

    async fn insert_activity(&mut self, a: &NewActivity) -> StoreResult<()> {
        sqlx::query(INSERT_ACTIVITY_SQL)
            .bind(&a.owner_id)
            .bind(a.id.to_string())
            .bind(a.job_id.to_string())
            .bind(a.seq)
            .bind(&a.name)
            .bind(text(&a.providers)?)
            .bind(text(&a.options)?)
            .bind(&a.task_queue)
            .bind(a.input.to_string())
            .bind(self.now)
            .bind(self.now)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    async fn activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
    ) -> StoreResult<Option<ActivityRow>> {
        let row = sqlx::query(ACTIVITY_SQL)
            .bind(owner)
            .bind(activity_id.to_string())
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(activity_row).transpose()
    }

    async fn activity_by_seq(
        &mut self,
        owner: &str,
        job_id: Uuid,
        seq: i32,
    ) -> StoreResult<Option<ActivityRow>> {
        let row = sqlx::query(ACTIVITY_BY_SEQ_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(seq)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(activity_row).transpose()
    }

    async fn activities_of_job(
        &mut self,
        owner: &str,
        job_id: Uuid,
    ) -> StoreResult<Vec<ActivityRow>> {
        let rows = sqlx::query(ACTIVITIES_OF_JOB_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(activity_row).collect()
    }

    async fn set_activity_status(
        &mut self,
        owner: &str,
        activity_id: Uuid,
        from: &[ActivityStatus],
        to: ActivityStatus,
    ) -> StoreResult<bool> {
        let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
        let done = sqlx::query(SET_ACTIVITY_STATUS_SQL)
            .bind(to.as_str())
            .bind(self.now)
            .bind(owner)
            .bind(activity_id.to_string())
            .bind(text(&from)?)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn commit_activity_result(
        &mut self,
        commit: &ActivityResultCommit<'_>,
    ) -> StoreResult<bool> {
        let ActivityResultCommit {
            owner,
            activity_id,
            read_version,
            attempt_id,
            result,
        } = *commit;
        let done = sqlx::query(COMMIT_ACTIVITY_RESULT_SQL)
            .bind(result.to_string())
            .bind(attempt_id.to_string())
            .bind(self.now)
            .bind(self.now)
            .bind(owner)
            .bind(activity_id.to_string())
            .bind(read_version)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn close_activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
        status: ActivityStatus,
        error: Option<&ErrorInfo>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(CLOSE_ACTIVITY_SQL)
            .bind(status.as_str())
            .bind(error.map(text).transpose()?)
            .bind(self.now)
            .bind(self.now)
            .bind(owner)
            .bind(activity_id.to_string())
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn insert_attempt(&mut self, a: &NewAttempt) -> StoreResult<Option<AttemptRow>> {
        let available = self.now + (a.delay_ms as i64).saturating_mul(1000);
        let row = sqlx::query(INSERT_ATTEMPT_SQL)
            .bind(&a.owner_id)
            .bind(a.id.to_string())
            .bind(a.activity_id.to_string())
            .bind(a.job_id.to_string())
            .bind(a.number)
            .bind(&a.activity)
            .bind(&a.task_queue)
            .bind(&a.provider)
            .bind(available)
            .bind(secs_us(a.schedule_to_start_timeout_s).map(|d| available + d))
            .bind(self.now)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(attempt_row).transpose()
    }

    async fn attempt(&mut self, owner: &str, attempt_id: Uuid) -> StoreResult<Option<AttemptRow>> {
        let row = sqlx::query(ATTEMPT_SQL)
            .bind(owner)
            .bind(attempt_id.to_string())
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(attempt_row).transpose()
    }

    async fn attempts_of_activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
    ) -> StoreResult<Vec<AttemptRow>> {
        let rows = sqlx::query(ATTEMPTS_OF_ACTIVITY_SQL)
            .bind(owner)
            .bind(activity_id.to_string())
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(attempt_row).collect()
    }

    async fn finish_attempt(&mut self, ending: &AttemptEnding<'_>) -> StoreResult<bool> {
        let AttemptEnding {
            owner,
            attempt_id,
            from,
            to,
            error,
            outcome,
        } = *ending;
        let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
        let done = sqlx::query(FINISH_ATTEMPT_SQL)
            .bind(to.as_str())
            .bind(error.map(text).transpose()?)
            .bind(outcome.map(|o| o.as_str()))
            .bind(self.now)
            .bind(owner)
            .bind(attempt_id.to_string())
            .bind(text(&from)?)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn mark_attempt_unknown(&mut self, owner: &str, attempt_id: Uuid) -> StoreResult<bool> {
        let done = sqlx::query(MARK_ATTEMPT_UNKNOWN_SQL)
            .bind(owner)
            .bind(attempt_id.to_string())
            .bind(self.now)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn revive_attempt(
        &mut self,
        owner: &str,
        attempt_id: Uuid,
        token: Uuid,
        details: Option<&Value>,
    ) -> StoreResult<bool> {
        let row = sqlx::query(LEASE_TERMS_OF_ATTEMPT_SQL)
            .bind(owner)
            .bind(attempt_id.to_string())
            .fetch_optional(&mut *self.tx)
            .await?;
        let Some(row) = row else { return Ok(false) };
        let options: ActivityOptions = serde_json::from_value(json(&row, "options")?)
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let started: i64 = row
            .try_get::<Option<i64>, _>("started_at")?
            .unwrap_or(self.now);
        // Past its start-to-close deadline an attempt stays unknown: no revival.
        if secs_us(options.start_to_close_timeout_s).is_some_and(|d| started + d <= self.now) {
            return Ok(false);
        }
        let done = sqlx::query(REVIVE_UNKNOWN_ATTEMPT_SQL)
            .bind(self.now)
            .bind(details.map(|d| d.to_string()))
            .bind(lease_until(&options, self.now, started))
            .bind(owner)
            .bind(attempt_id.to_string())
            .bind(token.to_string())
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn cancel_live_attempts(
        &mut self,
        cancellation: &LiveAttemptsCancellation<'_>,
    ) -> StoreResult<Vec<(Uuid, AttemptStatus)>> {
        let LiveAttemptsCancellation {
            owner,
            activity_id,
            except,
            cancelled_by,
            reason,
        } = *cancellation;
        let live = sqlx::query(CANCEL_LIVE_ATTEMPTS_SQL)
            .bind(owner)
            .bind(activity_id.to_string())
            .bind(except.map(|e| e.to_string()))
            .fetch_all(&mut *self.tx)
            .await?;
        let mut cancelled = Vec::with_capacity(live.len());
        for row in live {
            let id = uid(&row, "id")?;
            let was: String = row.try_get("status")?;
            if self.cancel_attempt(owner, id, cancelled_by, reason).await? {
                cancelled.push((
                    id,
                    AttemptStatus::parse(&was).ok_or_else(|| corrupt("attempt status", &was))?,
                ));
            }
        }
        Ok(cancelled)
    }

    async fn cancel_attempt(
        &mut self,
        owner: &str,
        attempt_id: Uuid,
        cancelled_by: &str,
        reason: &str,
    ) -> StoreResult<bool> {
        let done = sqlx::query(CANCEL_ATTEMPT_SQL)
            .bind(cancelled_by)
            .bind(reason)
            .bind(self.now)
            .bind(self.now)
            .bind(owner)
            .bind(attempt_id.to_string())
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn notify_work(&mut self, _task_queue: &str) -> StoreResult<()> {
        // In-process wake-up, delivered at commit.
        self.wake = true;
        Ok(())
    }

    async fn append_events(&mut self, events: &[NewEvent]) -> StoreResult<()> {
        for e in events {
            sqlx::query(APPEND_EVENTS_SQL)
                .bind(&e.owner_id)
                .bind(e.job_id.to_string())
                .bind(self.now)
                .bind(e.kind)
                .bind(e.attempt_id.map(|a| a.to_string()))
                .bind(&e.actor)
                .bind(e.data.to_string())
                .execute(&mut *self.tx)
                .await?;
        }
        Ok(())
    }

    async fn current_contract(
        &mut self,
        owner: &str,
        activity: &str,
    ) -> StoreResult<Option<Contract>> {
        let row = sqlx::query(CURRENT_CONTRACT_SQL)
            .bind(owner)
            .bind(activity)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.map(|r| {
            Ok(Contract {
                owner: r.try_get("owner_id")?,
                activity: r.try_get("activity")?,
                contract_hash: r.try_get("contract_hash")?,
                output_schema: json(&r, "output_schema")?,
            })
        })
        .transpose()
    }

    async fn latest_certification(
        &mut self,
        owner: &str,
        activity: &str,
        provider: &str,
        contract_hash: &str,
    ) -> StoreResult<Option<Certification>> {
        let row = sqlx::query(LATEST_CERTIFICATION_SQL)
            .bind(owner)
            .bind(activity)
            .bind(provider)
            .bind(contract_hash)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(certification_row).transpose()
    }

    async fn claim_attempts(&mut self, filter: &ClaimFilter) -> StoreResult<Vec<ClaimedAttempt>> {
        let pairs: Vec<(String, String)> = filter.providers.clone();
        let candidates = sqlx::query(CLAIMABLE_ATTEMPTS_SQL)
            .bind(&filter.task_queue)
            .bind(self.now)
            .bind(filter.scope.owner())
            .bind(text(&pairs)?)
            .bind(filter.limit)
            .fetch_all(&mut *self.tx)
            .await?;
        let mut claimed = Vec::with_capacity(candidates.len());
        for candidate in candidates {
            let owner: String = candidate.try_get("owner_id")?;
            let id: String = candidate.try_get("id")?;
            let activity = sqlx::query(ACTIVITY_OF_CLAIMED_ATTEMPT_SQL)
                .bind(&owner)
                .bind(&id)
                .fetch_one(&mut *self.tx)
                .await?;
            let options: ActivityOptions = serde_json::from_value(json(&activity, "options")?)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let row = sqlx::query(START_CLAIMED_ATTEMPT_SQL)
                .bind(Uuid::new_v4().to_string())
                .bind(&filter.worker_id)
                .bind(self.now)
                .bind(self.now)
                .bind(activity.try_get::<i64, _>("version")?)
                .bind(lease_until(&options, self.now, self.now))
                .bind(&owner)
                .bind(&id)
                .fetch_optional(&mut *self.tx)
                .await?;
            let Some(row) = row else { continue };
            let attempt = attempt_row(&row)?;
            sqlx::query(START_CLAIMED_ACTIVITY_SQL)
                .bind(self.now)
                .bind(&owner)
                .bind(attempt.activity_id.to_string())
                .execute(&mut *self.tx)
                .await?;
            sqlx::query(START_CLAIMED_JOB_SQL)
                .bind(self.now)
                .bind(&owner)
                .bind(attempt.job_id.to_string())
                .execute(&mut *self.tx)
                .await?;
            claimed.push(ClaimedAttempt {
                attempt,
                activity_seq: activity.try_get("seq")?,
                input: json(&activity, "input")?,
                options,
            });
        }
        Ok(claimed)
    }

    async fn claim_workflow_tasks(
        &mut self,
        filter: &WorkflowClaimFilter,
    ) -> StoreResult<Vec<ClaimedWorkflowTask>> {
        let candidates = sqlx::query(CLAIMABLE_WORKFLOW_TASKS_SQL)
            .bind(&filter.task_queue)
            .bind(text(&filter.workflows)?)
            .bind(filter.scope.owner())
            .bind(self.now)
            .bind(filter.limit)
            .fetch_all(&mut *self.tx)
            .await?;
        let mut jobs = Vec::with_capacity(candidates.len());
        for candidate in candidates {
            let row = sqlx::query(START_WORKFLOW_TASK_SQL)
                .bind(Uuid::new_v4().to_string())
                .bind(&filter.worker_id)
                .bind(self.now + (filter.lease_ms as i64).saturating_mul(1000))
                .bind(self.now)
                .bind(candidate.try_get::<String, _>("owner_id")?)
                .bind(candidate.try_get::<String, _>("id")?)
                .bind(&filter.worker_id)
                .fetch_one(&mut *self.tx)
                .await?;
            jobs.push(ClaimedWorkflowTask {
                job: job_row(&row)?,
                run: workflow_run(&row)?,
            });
        }
        Ok(jobs)
    }

    async fn complete_workflow_task(
        &mut self,
        owner: &str,
        job_id: Uuid,
        token: Uuid,
        read_version: i64,
        sticky_horizon: Option<i64>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(COMPLETE_WORKFLOW_TASK_SQL)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(token.to_string())
            .bind(read_version)
            .bind(sticky_horizon)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn workflow_run(
        &mut self,
        owner: &str,
        job_id: Uuid,
    ) -> StoreResult<Option<WorkflowRun>> {
        let row = sqlx::query(WORKFLOW_RUN_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(workflow_run).transpose()
    }

    async fn journal_activities(
        &mut self,
        owner: &str,
        job_id: Uuid,
        first_seq: i32,
    ) -> StoreResult<Vec<(ActivityRow, Option<i64>)>> {
        let rows = sqlx::query(JOURNAL_ACTIVITIES_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(first_seq)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(journal_activity).collect()
    }

    async fn activities_arrived_since(
        &mut self,
        owner: &str,
        job_id: Uuid,
        first_seq: i32,
        since: i64,
    ) -> StoreResult<Vec<(ActivityRow, Option<i64>)>> {
        let rows = sqlx::query(ACTIVITIES_ARRIVED_SINCE_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(first_seq)
            .bind(since)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(journal_activity).collect()
    }

    async fn activities_at(
        &mut self,
        owner: &str,
        job_id: Uuid,
        seqs: &[i32],
    ) -> StoreResult<Vec<(ActivityRow, Option<i64>)>> {
        let rows = sqlx::query(ACTIVITIES_AT_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(text(&seqs)?)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(journal_activity).collect()
    }

    async fn journal_timers(
        &mut self,
        owner: &str,
        job_id: Uuid,
        first_seq: i32,
    ) -> StoreResult<Vec<TimerRow>> {
        let rows = sqlx::query(JOURNAL_TIMERS_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(first_seq)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(timer_row).collect()
    }

    async fn timers_arrived_since(
        &mut self,
        owner: &str,
        job_id: Uuid,
        first_seq: i32,
        since: i64,
    ) -> StoreResult<Vec<TimerRow>> {
        let rows = sqlx::query(TIMERS_ARRIVED_SINCE_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(first_seq)
            .bind(since)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(timer_row).collect()
    }

    async fn timers_at(
        &mut self,
        owner: &str,
        job_id: Uuid,
        seqs: &[i32],
    ) -> StoreResult<Vec<TimerRow>> {
        let rows = sqlx::query(TIMERS_AT_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(text(&seqs)?)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(timer_row).collect()
    }

    async fn journal_signals(
        &mut self,
        owner: &str,
        job_id: Uuid,
        first_seq: i32,
    ) -> StoreResult<Vec<SignalRow>> {
        let rows = sqlx::query(JOURNAL_SIGNALS_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(first_seq)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(signal_row).collect()
    }

    async fn signals_arrived_since(
        &mut self,
        owner: &str,
        job_id: Uuid,
        since: i64,
    ) -> StoreResult<Vec<SignalRow>> {
        let rows = sqlx::query(SIGNALS_ARRIVED_SINCE_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(since)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(signal_row).collect()
    }

    async fn continue_as_new(
        &mut self,
        owner: &str,
        job_id: Uuid,
        version: i64,
        first_seq: i32,
        input: &Value,
    ) -> StoreResult<bool> {
        let done = sqlx::query(CONTINUE_AS_NEW_SQL)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(version)
            .bind(first_seq)
            .bind(text(input)?)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn drop_timers_before(
        &mut self,
        owner: &str,
        job_id: Uuid,
        first_seq: i32,
    ) -> StoreResult<u64> {
        let done = sqlx::query(DROP_TIMERS_BEFORE_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(first_seq)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected())
    }

    async fn mark_workflow_ready(
        &mut self,
        owner: &str,
        job_id: Uuid,
        arrived: Arrival,
    ) -> StoreResult<()> {
        let number: Option<i64> = sqlx::query_scalar(MARK_WORKFLOW_READY_SQL)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .fetch_optional(&mut *self.tx)
            .await?;
        let Some(number) = number else {
            return Ok(());
        };
        self.wake = true;
        match arrived {
            Arrival::Activity(activity_id) => {
                sqlx::query(RECORD_ACTIVITY_ARRIVAL_SQL)
                    .bind(number)
                    .bind(owner)
                    .bind(activity_id.to_string())
                    .execute(&mut *self.tx)
                    .await?;
            }
            Arrival::Signal(seq) => {
                sqlx::query(RECORD_SIGNAL_ARRIVAL_SQL)
                    .bind(number)
                    .bind(owner)
                    .bind(job_id.to_string())
                    .bind(seq)
                    .execute(&mut *self.tx)
                    .await?;
            }
            Arrival::Timer(seq) => {
                sqlx::query(RECORD_TIMER_ARRIVAL_SQL)
                    .bind(number)
                    .bind(owner)
                    .bind(job_id.to_string())
                    .bind(seq)
                    .execute(&mut *self.tx)
                    .await?;
            }
            Arrival::Child(child_id) => {
                sqlx::query(RECORD_CHILD_ARRIVAL_SQL)
                    .bind(number)
                    .bind(owner)
                    .bind(job_id.to_string())
                    .bind(child_id.to_string())
                    .execute(&mut *self.tx)
                    .await?;
            }
            Arrival::Cancel => {
                sqlx::query(RECORD_CANCEL_ARRIVAL_SQL)
                    .bind(number)
                    .bind(owner)
                    .bind(job_id.to_string())
                    .execute(&mut *self.tx)
                    .await?;
            }
        }
        Ok(())
    }

    async fn children_of_job(&mut self, owner: &str, parent: Uuid) -> StoreResult<Vec<ChildRow>> {
        let rows = sqlx::query(CHILDREN_OF_JOB_SQL)
            .bind(owner)
            .bind(parent.to_string())
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(child_row).collect()
    }

    async fn children_at(
        &mut self,
        owner: &str,
        parent: Uuid,
        seqs: &[i32],
    ) -> StoreResult<Vec<ChildRow>> {
        let keys: Vec<String> = seqs
            .iter()
            .map(|seq| format!("{parent}:child:{seq}"))
            .collect();
        let rows = sqlx::query(CHILDREN_AT_SQL)
            .bind(owner)
            .bind(parent.to_string())
            .bind(text(&keys)?)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(child_row).collect()
    }

    async fn declare_compensation(
        &mut self,
        owner: &str,
        job_id: Uuid,
        within_ms: Option<i64>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(DECLARE_COMPENSATION_SQL)
            .bind(within_ms)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn request_workflow_cancel(
        &mut self,
        owner: &str,
        job_id: Uuid,
        version: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(REQUEST_WORKFLOW_CANCEL_SQL)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(version)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn end_compensation(
        &mut self,
        owner: &str,
        job_id: Uuid,
        version: i64,
        error: &ErrorInfo,
    ) -> StoreResult<bool> {
        let done = sqlx::query(END_COMPENSATION_SQL)
            .bind(text(error)?)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(version)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn close_overdue_compensation(
        &mut self,
        owner: &str,
        job_id: Uuid,
        error: &ErrorInfo,
    ) -> StoreResult<bool> {
        let done = sqlx::query(CLOSE_OVERDUE_COMPENSATION_SQL)
            .bind(text(error)?)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lock_due_compensations(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>> {
        let rows = sqlx::query(LOCK_DUE_COMPENSATIONS_SQL)
            .bind(self.now)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_id")?, uid(r, "id")?)))
            .collect()
    }

    async fn park_workflow(
        &mut self,
        owner: &str,
        job_id: Uuid,
        error: &ErrorInfo,
    ) -> StoreResult<()> {
        sqlx::query(PARK_WORKFLOW_SQL)
            .bind(text(error)?)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    async fn insert_timer(
        &mut self,
        owner: &str,
        job_id: Uuid,
        seq: i32,
        delay_ms: u64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(INSERT_TIMER_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(seq)
            .bind(self.now + (delay_ms as i64).saturating_mul(1000))
            .bind(self.now)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn insert_signal(&mut self, signal: &NewSignal<'_>) -> StoreResult<Option<SignalRow>> {
        let row = sqlx::query(INSERT_SIGNAL_SQL)
            .bind(signal.owner)
            .bind(signal.job_id.to_string())
            .bind(signal.id.to_string())
            .bind(signal.name)
            .bind(signal.idempotency_key)
            .bind(signal.fingerprint)
            .bind(signal.payload.to_string())
            .bind(self.now)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(signal_row).transpose()
    }

    async fn signal_by_key(
        &mut self,
        owner: &str,
        job_id: Uuid,
        key: &str,
    ) -> StoreResult<Option<SignalRow>> {
        let row = sqlx::query(SIGNAL_BY_KEY_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(key)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(signal_row).transpose()
    }

    async fn signals_of_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Vec<SignalRow>> {
        let rows = sqlx::query(SIGNALS_OF_JOB_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(signal_row).collect()
    }

    async fn insert_patch(
        &mut self,
        owner: &str,
        job_id: Uuid,
        patch_id: &str,
        deprecated: bool,
    ) -> StoreResult<bool> {
        let done = sqlx::query(INSERT_PATCH_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(patch_id)
            .bind(deprecated)
            .bind(self.now)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn patches_of_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(PATCHES_OF_JOB_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(|r| Ok(r.try_get("patch_id")?)).collect()
    }

    async fn consume_signal(
        &mut self,
        owner: &str,
        job_id: Uuid,
        seq: i64,
        position: i32,
    ) -> StoreResult<bool> {
        let done = sqlx::query(CONSUME_SIGNAL_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(seq)
            .bind(position)
            .bind(self.now)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lock_due_timers(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid, i32)>> {
        let rows = sqlx::query(LOCK_DUE_TIMERS_SQL)
            .bind(self.now)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_id")?, uid(r, "job_id")?, r.try_get("seq")?)))
            .collect()
    }

    async fn fire_timer(&mut self, owner: &str, job_id: Uuid, seq: i32) -> StoreResult<bool> {
        let done = sqlx::query(FIRE_TIMER_SQL)
            .bind(self.now)
            .bind(owner)
            .bind(job_id.to_string())
            .bind(seq)
            .bind(self.now)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lock_expired_leases(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>> {
        let rows = sqlx::query(LOCK_EXPIRED_LEASES_SQL)
            .bind(self.now)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_id")?, uid(r, "id")?)))
            .collect()
    }

    async fn lock_overdue_scheduled(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>> {
        let rows = sqlx::query(LOCK_OVERDUE_SCHEDULED_SQL)
            .bind(self.now)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_id")?, uid(r, "id")?)))
            .collect()
    }

    async fn lock_schedule(&mut self, owner: &str, name: &str) -> StoreResult<Option<ScheduleRow>> {
        let row = sqlx::query(LOCK_SCHEDULE_SQL)
            .bind(owner)
            .bind(name)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(schedule_row).transpose()
    }

    async fn insert_schedule(&mut self, s: &ScheduleRow) -> StoreResult<bool> {
        let v = &s.view;
        let done = sqlx::query(INSERT_SCHEDULE_SQL)
            .bind(&v.owner)
            .bind(&v.name)
            .bind(&v.cron)
            .bind(&v.timezone)
            .bind(v.job.to_string())
            .bind(v.overlap.as_str())
            .bind(v.catchup_window_s as i64)
            .bind(v.paused)
            .bind(v.next_fire_at.map(|t| t.timestamp_micros()))
            .bind(s.version)
            .bind(v.created_at.timestamp_micros())
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn update_schedule(&mut self, s: &ScheduleRow) -> StoreResult<bool> {
        let v = &s.view;
        let done = sqlx::query(UPDATE_SCHEDULE_SQL)
            .bind(&v.owner)
            .bind(&v.name)
            .bind(s.version)
            .bind(&v.cron)
            .bind(&v.timezone)
            .bind(v.job.to_string())
            .bind(v.overlap.as_str())
            .bind(v.catchup_window_s as i64)
            .bind(v.paused)
            .bind(v.next_fire_at.map(|t| t.timestamp_micros()))
            .bind(v.last_fired_at.map(|t| t.timestamp_micros()))
            .bind(v.last_job_id.map(|j| j.to_string()))
            .bind(v.fired_count as i64)
            .bind(v.skipped_overlap_count as i64)
            .bind(v.skipped_too_old_count as i64)
            .bind(v.updated_at.timestamp_micros())
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn delete_schedule(&mut self, owner: &str, name: &str) -> StoreResult<bool> {
        let done = sqlx::query(DELETE_SCHEDULE_SQL)
            .bind(owner)
            .bind(name)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lock_due_schedules(&mut self, limit: i64) -> StoreResult<Vec<ScheduleRow>> {
        let rows = sqlx::query(LOCK_DUE_SCHEDULES_SQL)
            .bind(self.now)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(schedule_row).collect()
    }

    async fn job_status(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Option<JobStatus>> {
        let status: Option<String> = sqlx::query_scalar(JOB_STATUS_SQL)
            .bind(owner)
            .bind(job_id.to_string())
            .fetch_optional(&mut *self.tx)
            .await?;
        status
            .map(|s| JobStatus::parse(&s).ok_or_else(|| corrupt("job status", &s)))
            .transpose()
    }

    async fn append_schedule_events(&mut self, events: &[NewScheduleEvent]) -> StoreResult<()> {
        for e in events {
            sqlx::query(APPEND_SCHEDULE_EVENTS_SQL)
                .bind(&e.owner_id)
                .bind(&e.schedule_name)
                .bind(e.at.timestamp_micros())
                .bind(e.kind)
                .bind(e.tick_at.map(|t| t.timestamp_micros()))
                .bind(e.job_id.map(|j| j.to_string()))
                .bind(e.data.to_string())
                .execute(&mut *self.tx)
                .await?;
        }
        Ok(())
    }
}
