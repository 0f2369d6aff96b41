//! `impl StoreTx for PgTx`: the guarded statements the domain composes into one
//! transaction per state change.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::{Postgres, Row, Transaction};
use uuid::Uuid;

use super::bell::*;
use super::decode::*;
use super::queries::*;
use super::submit::*;
use super::Citus;
use crate::error::StoreError;
use crate::model::{
    ActivityStatus, AttemptStatus, Certification, Contract, ErrorInfo, JobStatus, Scope,
};
use crate::store::*;

/// A PostgreSQL transaction.
pub struct PgTx {
    pub(super) tx: Transaction<'static, Postgres>,
    pub(super) bell: Arc<WorkBell>,
    pub(super) wake: bool,
    /// The transaction's `now()`, once read.
    pub(super) now: Option<chrono::DateTime<chrono::Utc>>,
    /// On Citus: statements that lock or change rows reach one shard each (see
    /// [`super::PgStore::citus`]).
    pub(super) citus: Option<Arc<Citus>>,
}

impl PgTx {
    /// The owner and job of an attempt visible in `scope`, read without locking.
    async fn locate(
        &mut self,
        scope: &Scope,
        attempt_id: Uuid,
    ) -> StoreResult<Option<(String, Uuid)>> {
        Ok(sqlx::query_as(LOCATE_ATTEMPT_SQL)
            .bind(attempt_id)
            .bind(scope.owner())
            .fetch_optional(&mut *self.tx)
            .await?)
    }

    /// The owners a Citus pass visits: `scope`'s one, or those `discover` reads (every
    /// shard, no lock), in the store's rotating order.
    async fn owners_to_visit(
        &mut self,
        citus: &Citus,
        scope: Option<&str>,
        discover: sqlx::query::QueryScalar<'_, sqlx::Postgres, String, sqlx::postgres::PgArguments>,
    ) -> StoreResult<Vec<String>> {
        Ok(match scope {
            Some(owner) => vec![owner.to_owned()],
            None => citus.rotate(discover.fetch_all(&mut *self.tx).await?),
        })
    }

    /// A Citus pass that locks without waiting: `lock(owner, left)` for each owner that
    /// `discover` reads, until `limit` rows are held.
    async fn lock_owner_by_owner<
        T: Send + Unpin + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
    >(
        &mut self,
        citus: &Citus,
        discover: &'static str,
        lock: &'static str,
        limit: i64,
    ) -> StoreResult<Vec<T>> {
        let owners: Vec<String> = sqlx::query_scalar(discover)
            .fetch_all(&mut *self.tx)
            .await?;
        let mut held = Vec::new();
        for owner in citus.rotate(owners) {
            let left = limit - held.len() as i64;
            if left <= 0 {
                break;
            }
            let rows: Vec<T> = sqlx::query_as(lock)
                .bind(&owner)
                .bind(left)
                .fetch_all(&mut *self.tx)
                .await?;
            held.extend(rows);
        }
        Ok(held)
    }
}

#[async_trait]
impl StoreTx for PgTx {
    async fn commit(self: Box<Self>) -> StoreResult<()> {
        let PgTx { tx, bell, wake, .. } = *self;
        tx.commit().await?;
        if wake {
            bell.ring();
        }
        Ok(())
    }

    async fn now(&mut self) -> StoreResult<chrono::DateTime<chrono::Utc>> {
        if let Some(now) = self.now {
            return Ok(now);
        }
        let now = sqlx::query_scalar(NOW_SQL).fetch_one(&mut *self.tx).await?;
        self.now = Some(now);
        Ok(now)
    }

    async fn insert_job(&mut self, job: &NewJob) -> StoreResult<Option<JobRow>> {
        let row = sqlx::query(INSERT_JOB_SQL)
            .bind(&job.owner_id)
            .bind(job.id)
            .bind(&job.idempotency_key)
            .bind(&job.fingerprint)
            .bind(job.kind.as_str())
            .bind(&job.workflow)
            .bind(&job.activity)
            .bind(&job.task_queue)
            .bind(&job.input)
            .bind(job.parent_job_id)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn insert_activity_job(
        &mut self,
        job: &NewJob,
        activity: &NewActivity,
        attempt: &NewAttempt,
        events: &[NewEvent],
    ) -> StoreResult<Option<(JobRow, AttemptRow)>> {
        let inserted =
            insert_activity_job_on(&mut *self.tx, job, activity, attempt, events).await?;
        if inserted.is_some() {
            self.wake = true;
        }
        Ok(inserted)
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
        if self.citus.is_some() {
            // Found on every shard without locking, then locked on its owner's.
            let Some((owner, job_id)) = self.locate(scope, attempt_id).await? else {
                return Ok(None);
            };
            return self.lock_job(&owner, job_id).await;
        }
        let row = sqlx::query(LOCK_JOB_OF_ATTEMPT_SQL)
            .bind(attempt_id)
            .bind(scope.owner())
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn lock_jobs_of_attempts(
        &mut self,
        attempt_ids: &[Uuid],
    ) -> StoreResult<Vec<LockedAttempt>> {
        // Locking discipline: the jobs first, in (owner, id) order, so that batches never
        // wait on each other in a cycle; each attempt is read once its job is held.
        if self.citus.is_some() {
            // Found on every shard without locking, then each job locked on its owner's.
            let mut found: Vec<(String, Uuid, Uuid)> = sqlx::query_as(CITUS_LOCATE_ATTEMPTS_SQL)
                .bind(attempt_ids)
                .fetch_all(&mut *self.tx)
                .await?;
            found.sort();
            let mut locked: Vec<LockedAttempt> = Vec::with_capacity(found.len());
            let mut job: Option<JobRow> = None;
            for (owner, job_id, id) in found {
                if job
                    .as_ref()
                    .is_none_or(|j| j.owner_id != owner || j.id != job_id)
                {
                    job = self.lock_job(&owner, job_id).await?;
                }
                let Some(job) = job
                    .clone()
                    .filter(|j| j.owner_id == owner && j.id == job_id)
                else {
                    continue;
                };
                let Some(attempt) = self.attempt(&owner, id).await? else {
                    continue;
                };
                let known = locked
                    .iter()
                    .find(|l| l.job.owner_id == owner && l.attempt.activity == attempt.activity);
                let contract = match known {
                    Some(l) => l.contract.clone(),
                    None => self.current_contract(&owner, &attempt.activity).await?,
                };
                locked.push(LockedAttempt {
                    job,
                    attempt,
                    contract,
                });
            }
            return Ok(locked);
        }
        let rows = sqlx::query(LOCK_JOBS_OF_ATTEMPTS_SQL)
            .bind(attempt_ids)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|row| {
                let contract: Option<String> = row.try_get("c_contract_hash")?;
                Ok(LockedAttempt {
                    job: job_row_in(Cols { row, prefix: "j_" })?,
                    attempt: attempt_row(row)?,
                    contract: contract
                        .map(|_| contract_row_in(Cols { row, prefix: "c_" }))
                        .transpose()?,
                })
            })
            .collect()
    }

    async fn lock_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Option<JobRow>> {
        let row = sqlx::query(LOCK_JOB_SQL)
            .bind(owner)
            .bind(job_id)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(job_row).transpose()
    }

    async fn mark_job_running(&mut self, owner: &str, job_id: Uuid) -> StoreResult<bool> {
        let result = sqlx::query(MARK_JOB_RUNNING_SQL)
            .bind(owner)
            .bind(job_id)
            .execute(&mut *self.tx)
            .await?;
        Ok(result.rows_affected() == 1)
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
            .bind(owner)
            .bind(job_id)
            .bind(version)
            .bind(attempt_id)
            .bind(result)
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
        let error = error.map(to_json).transpose()?;
        let done = sqlx::query(CLOSE_JOB_SQL)
            .bind(owner)
            .bind(job_id)
            .bind(version)
            .bind(status.as_str())
            .bind(error)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn resume_job(&mut self, owner: &str, job_id: Uuid, version: i64) -> StoreResult<bool> {
        let done = sqlx::query(RESUME_JOB_SQL)
            .bind(owner)
            .bind(job_id)
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
            .bind(activity_id)
            .bind(resumed_after)
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
            .bind(activity_id)
            .fetch_optional(&mut *self.tx)
            .await?)
    }

    async fn insert_activity(&mut self, a: &NewActivity) -> StoreResult<()> {
        sqlx::query(INSERT_ACTIVITY_SQL)
            .bind(&a.owner_id)
            .bind(a.id)
            .bind(a.job_id)
            .bind(a.seq)
            .bind(&a.name)
            .bind(&a.providers)
            .bind(to_json(&a.options)?)
            .bind(&a.task_queue)
            .bind(&a.input)
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
            .bind(activity_id)
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
            .bind(job_id)
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
            .bind(job_id)
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
            .bind(owner)
            .bind(activity_id)
            .bind(&from)
            .bind(to.as_str())
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
            .bind(owner)
            .bind(activity_id)
            .bind(read_version)
            .bind(attempt_id)
            .bind(result)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn commit_activity_job_result(
        &mut self,
        win: &WinningResult,
        from: &[AttemptStatus],
    ) -> StoreResult<(bool, bool)> {
        let (owner, job_id, job_version) = (win.owner_id.as_str(), win.job_id, win.job_version);
        let (activity_id, read_version) = (win.activity_id, win.read_version);
        let (attempt_id, result) = (win.attempt_id, &win.result);
        // The torture run's CAS mutant (never in a normal build: `off` is then `false`).
        let sql = if crate::mutants::off("cas") {
            MUTANT_COMMIT_ACTIVITY_JOB_RESULT_SQL
        } else {
            COMMIT_ACTIVITY_JOB_RESULT_SQL
        };
        let row = sqlx::query(sql)
            .bind(owner)
            .bind(activity_id)
            .bind(read_version)
            .bind(attempt_id)
            .bind(result)
            .bind(status_words(from))
            .bind(job_id)
            .bind(job_version)
            .fetch_one(&mut *self.tx)
            .await?;
        Ok((row.try_get("activity_won")?, row.try_get("job_won")?))
    }

    async fn commit_activity_job_results(
        &mut self,
        wins: &[WinningResult],
        from: &[AttemptStatus],
    ) -> StoreResult<Vec<(bool, bool)>> {
        if self.citus.is_some() || crate::mutants::off("cas") {
            // One result at a time, each on its owner's shard (or through the mutant).
            let mut taken = Vec::with_capacity(wins.len());
            for w in wins {
                taken.push(self.commit_activity_job_result(w, from).await?);
            }
            return Ok(taken);
        }
        let owners: Vec<&str> = wins.iter().map(|w| w.owner_id.as_str()).collect();
        let jobs: Vec<Uuid> = wins.iter().map(|w| w.job_id).collect();
        let job_versions: Vec<i64> = wins.iter().map(|w| w.job_version).collect();
        let activities: Vec<Uuid> = wins.iter().map(|w| w.activity_id).collect();
        let read_versions: Vec<i64> = wins.iter().map(|w| w.read_version).collect();
        let attempts: Vec<Uuid> = wins.iter().map(|w| w.attempt_id).collect();
        let results: Vec<&Value> = wins.iter().map(|w| &w.result).collect();
        let rows = sqlx::query(COMMIT_ACTIVITY_JOB_RESULTS_SQL)
            .bind(&owners)
            .bind(&jobs)
            .bind(&job_versions)
            .bind(&activities)
            .bind(&read_versions)
            .bind(&attempts)
            .bind(&results)
            .bind(status_words(from))
            .fetch_all(&mut *self.tx)
            .await?;
        let mut taken = vec![(false, false); wins.len()];
        for row in &rows {
            let at: i64 = row.try_get("ord")?;
            let slot = usize::try_from(at - 1).ok().and_then(|i| taken.get_mut(i));
            let slot = slot.ok_or_else(|| {
                StoreError::Corrupt("a batched CAS answered a result it was not given".into())
            })?;
            *slot = (row.try_get("activity_won")?, row.try_get("job_won")?);
        }
        Ok(taken)
    }

    async fn close_activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
        status: ActivityStatus,
        error: Option<&ErrorInfo>,
    ) -> StoreResult<bool> {
        let error = error.map(to_json).transpose()?;
        let done = sqlx::query(CLOSE_ACTIVITY_SQL)
            .bind(owner)
            .bind(activity_id)
            .bind(status.as_str())
            .bind(error)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn insert_attempt(&mut self, a: &NewAttempt) -> StoreResult<Option<AttemptRow>> {
        let row = sqlx::query(INSERT_ATTEMPT_SQL)
            .bind(&a.owner_id)
            .bind(a.id)
            .bind(a.activity_id)
            .bind(a.job_id)
            .bind(a.number)
            .bind(&a.activity)
            .bind(&a.task_queue)
            .bind(&a.provider)
            .bind(a.delay_ms as f64 / 1000.0)
            .bind(a.schedule_to_start_timeout_s.map(|s| s as f64))
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(attempt_row).transpose()
    }

    async fn attempt(&mut self, owner: &str, attempt_id: Uuid) -> StoreResult<Option<AttemptRow>> {
        let row = sqlx::query(ATTEMPT_SQL)
            .bind(owner)
            .bind(attempt_id)
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
            .bind(activity_id)
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
        let error = error.map(to_json).transpose()?;
        let done = sqlx::query(FINISH_ATTEMPT_SQL)
            .bind(owner)
            .bind(attempt_id)
            .bind(status_words(from))
            .bind(to.as_str())
            .bind(error)
            .bind(outcome.map(|o| o.as_str()))
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn mark_attempt_unknown(&mut self, owner: &str, attempt_id: Uuid) -> StoreResult<bool> {
        let done = sqlx::query(MARK_ATTEMPT_UNKNOWN_SQL)
            .bind(owner)
            .bind(attempt_id)
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
        let done = sqlx::query(REVIVE_ATTEMPT_SQL)
            .bind(owner)
            .bind(attempt_id)
            .bind(token)
            .bind(details)
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
        let rows = sqlx::query(CANCEL_LIVE_ATTEMPTS_SQL)
            .bind(owner)
            .bind(activity_id)
            .bind(except)
            .bind(cancelled_by)
            .bind(reason)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| {
                let was: String = r.try_get("was")?;
                Ok((
                    r.try_get("id")?,
                    AttemptStatus::parse(&was).ok_or_else(|| corrupt("attempt status", &was))?,
                ))
            })
            .collect()
    }

    async fn cancel_attempt(
        &mut self,
        owner: &str,
        attempt_id: Uuid,
        cancelled_by: &str,
        reason: &str,
    ) -> StoreResult<bool> {
        let done = sqlx::query(CANCEL_ATTEMPT_SQL)
            .bind(owner)
            .bind(attempt_id)
            .bind(cancelled_by)
            .bind(reason)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn notify_work(&mut self, _task_queue: &str) -> StoreResult<()> {
        // A wake-up hint, rung after commit (merged with others; see `WorkBell`).
        self.wake = true;
        Ok(())
    }

    async fn append_events(&mut self, events: &[NewEvent]) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        if self.citus.is_some() {
            // One statement per owner (one shard each), events in the order given.
            let mut owners: Vec<&str> = events.iter().map(|e| e.owner_id.as_str()).collect();
            owners.sort_unstable();
            owners.dedup();
            for owner in owners {
                let mine = || events.iter().filter(|e| e.owner_id == owner);
                sqlx::query(CITUS_APPEND_EVENTS_SQL)
                    .bind(owner)
                    .bind(mine().map(|e| e.job_id).collect::<Vec<_>>())
                    .bind(mine().map(|e| e.kind).collect::<Vec<_>>())
                    .bind(mine().map(|e| e.attempt_id).collect::<Vec<_>>())
                    .bind(mine().map(|e| e.actor.as_str()).collect::<Vec<_>>())
                    .bind(mine().map(|e| &e.data).collect::<Vec<_>>())
                    .execute(&mut *self.tx)
                    .await?;
            }
            return Ok(());
        }
        let mut owners = Vec::with_capacity(events.len());
        let mut jobs = Vec::with_capacity(events.len());
        let mut kinds = Vec::with_capacity(events.len());
        let mut attempts = Vec::with_capacity(events.len());
        let mut actors = Vec::with_capacity(events.len());
        let mut data = Vec::with_capacity(events.len());
        for e in events {
            owners.push(e.owner_id.clone());
            jobs.push(e.job_id);
            kinds.push(e.kind.to_owned());
            attempts.push(e.attempt_id);
            actors.push(e.actor.clone());
            data.push(e.data.clone());
        }
        sqlx::query(APPEND_EVENTS_SQL)
            .bind(&owners)
            .bind(&jobs)
            .bind(&kinds)
            .bind(&attempts)
            .bind(&actors)
            .bind(&data)
            .execute(&mut *self.tx)
            .await?;
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
        row.as_ref().map(contract_row).transpose()
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
        let (activities, providers): (Vec<String>, Vec<String>) =
            filter.providers.iter().cloned().unzip();
        // Dispatch: SKIP LOCKED hands each scheduled attempt to one worker only; the job
        // row is locked with it (lock order: job before its attempts).
        let rows = if let Some(citus) = self.citus.clone() {
            // Owner by owner (one shard each), starting one owner further at each claim
            // of a worker serving every owner: fair between owners.
            let discover = sqlx::query_scalar(CITUS_DISPATCH_OWNERS_SQL)
                .bind(&filter.task_queue)
                .bind(&activities)
                .bind(&providers);
            let owners = self
                .owners_to_visit(&citus, filter.scope.owner(), discover)
                .await?;
            let mut rows = Vec::new();
            for owner in owners {
                let left = filter.limit - rows.len() as i64;
                if left <= 0 {
                    break;
                }
                let tokens: Vec<Uuid> = (0..left).map(|_| Uuid::new_v4()).collect();
                rows.extend(
                    sqlx::query(CITUS_CLAIM_ATTEMPTS_SQL)
                        .bind(&filter.task_queue)
                        .bind(&owner)
                        .bind(&activities)
                        .bind(&providers)
                        .bind(left)
                        .bind(&filter.worker_id)
                        .bind(&tokens)
                        .fetch_all(&mut *self.tx)
                        .await?,
                );
            }
            rows
        } else {
            sqlx::query(CLAIM_ATTEMPTS_SQL)
                .bind(&filter.task_queue)
                .bind(filter.scope.owner())
                .bind(&activities)
                .bind(&providers)
                .bind(filter.limit)
                .bind(&filter.worker_id)
                .fetch_all(&mut *self.tx)
                .await?
        };
        rows.iter()
            .map(|r| {
                let options: Value = r.try_get("activity_options")?;
                Ok(ClaimedAttempt {
                    attempt: attempt_row(r)?,
                    activity_seq: r.try_get("activity_seq")?,
                    input: r.try_get("activity_input")?,
                    options: serde_json::from_value(options)
                        .map_err(|e| StoreError::Corrupt(format!("activity options: {e}")))?,
                })
            })
            .collect()
    }

    async fn claim_workflow_tasks(
        &mut self,
        filter: &WorkflowClaimFilter,
    ) -> StoreResult<Vec<ClaimedWorkflowTask>> {
        // Dispatch: SKIP LOCKED hands each workflow task to one worker; a task whose
        // lease expired is simply handed out again (workflow code has no side effects).
        if let Some(citus) = self.citus.clone() {
            // Owner by owner (one shard each), as claim_attempts.
            let discover = sqlx::query_scalar(CITUS_WORKFLOW_OWNERS_SQL)
                .bind(&filter.task_queue)
                .bind(&filter.workflows);
            let owners = self
                .owners_to_visit(&citus, filter.scope.owner(), discover)
                .await?;
            let mut jobs = Vec::new();
            for owner in owners {
                let left = filter.limit - jobs.len() as i64;
                if left <= 0 {
                    break;
                }
                let tokens: Vec<Uuid> = (0..left).map(|_| Uuid::new_v4()).collect();
                let rows = sqlx::query(CITUS_CLAIM_WORKFLOW_TASKS_SQL)
                    .bind(&filter.task_queue)
                    .bind(&filter.workflows)
                    .bind(&owner)
                    .bind(left)
                    .bind(&filter.worker_id)
                    .bind(filter.lease_ms as f64 / 1000.0)
                    .bind(&tokens)
                    .fetch_all(&mut *self.tx)
                    .await?;
                for row in &rows {
                    jobs.push(claimed_workflow_task(row)?);
                }
            }
            return Ok(jobs);
        }
        let rows = sqlx::query(CLAIM_WORKFLOW_TASKS_SQL)
            .bind(&filter.task_queue)
            .bind(&filter.workflows)
            .bind(filter.scope.owner())
            .bind(filter.limit)
            .bind(&filter.worker_id)
            .bind(filter.lease_ms as f64 / 1000.0)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(claimed_workflow_task).collect()
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
            .bind(owner)
            .bind(job_id)
            .bind(token)
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
            .bind(job_id)
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
            .bind(job_id)
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
            .bind(job_id)
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
            .bind(job_id)
            .bind(seqs)
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
            .bind(job_id)
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
            .bind(job_id)
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
            .bind(job_id)
            .bind(seqs)
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
            .bind(job_id)
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
            .bind(job_id)
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
            .bind(owner)
            .bind(job_id)
            .bind(version)
            .bind(first_seq)
            .bind(input)
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
            .bind(job_id)
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
        let woken: Option<(String, i64)> = sqlx::query_as(MARK_WORKFLOW_READY_SQL)
            .bind(owner)
            .bind(job_id)
            .fetch_optional(&mut *self.tx)
            .await?;
        let Some((queue, number)) = woken else {
            return Ok(());
        };
        match arrived {
            Arrival::Activity(activity_id) => {
                sqlx::query(RECORD_ACTIVITY_ARRIVAL_SQL)
                    .bind(owner)
                    .bind(activity_id)
                    .bind(number)
                    .execute(&mut *self.tx)
                    .await?;
            }
            Arrival::Signal(seq) => {
                sqlx::query(RECORD_SIGNAL_ARRIVAL_SQL)
                    .bind(owner)
                    .bind(job_id)
                    .bind(seq)
                    .bind(number)
                    .execute(&mut *self.tx)
                    .await?;
            }
            Arrival::Timer(seq) => {
                sqlx::query(RECORD_TIMER_ARRIVAL_SQL)
                    .bind(owner)
                    .bind(job_id)
                    .bind(seq)
                    .bind(number)
                    .execute(&mut *self.tx)
                    .await?;
            }
            Arrival::Child(child_id) => {
                sqlx::query(RECORD_CHILD_ARRIVAL_SQL)
                    .bind(owner)
                    .bind(job_id)
                    .bind(child_id)
                    .bind(number)
                    .execute(&mut *self.tx)
                    .await?;
            }
            Arrival::Cancel => {
                sqlx::query(RECORD_CANCEL_ARRIVAL_SQL)
                    .bind(owner)
                    .bind(job_id)
                    .bind(number)
                    .execute(&mut *self.tx)
                    .await?;
            }
        }
        self.notify_work(&queue).await?;
        Ok(())
    }

    async fn children_of_job(&mut self, owner: &str, parent: Uuid) -> StoreResult<Vec<ChildRow>> {
        let rows = sqlx::query(CHILDREN_OF_JOB_SQL)
            .bind(owner)
            .bind(parent)
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
            .bind(parent)
            .bind(keys)
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
            .bind(owner)
            .bind(job_id)
            .bind(within_ms)
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
            .bind(owner)
            .bind(job_id)
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
            .bind(owner)
            .bind(job_id)
            .bind(version)
            .bind(to_json(error)?)
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
            .bind(owner)
            .bind(job_id)
            .bind(to_json(error)?)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lock_due_compensations(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>> {
        // Compensation deadlines: each overdue job is taken by one engine only (SKIP LOCKED).
        if let Some(citus) = self.citus.clone() {
            return self
                .lock_owner_by_owner(
                    &citus,
                    CITUS_DUE_COMPENSATION_OWNERS_SQL,
                    CITUS_LOCK_DUE_COMPENSATIONS_SQL,
                    limit,
                )
                .await;
        }
        Ok(sqlx::query_as(LOCK_DUE_COMPENSATIONS_SQL)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?)
    }

    async fn park_workflow(
        &mut self,
        owner: &str,
        job_id: Uuid,
        error: &ErrorInfo,
    ) -> StoreResult<()> {
        sqlx::query(PARK_WORKFLOW_SQL)
            .bind(owner)
            .bind(job_id)
            .bind(to_json(error)?)
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
            .bind(job_id)
            .bind(seq)
            .bind(delay_ms as f64 / 1000.0)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn insert_signal(&mut self, signal: &NewSignal<'_>) -> StoreResult<Option<SignalRow>> {
        let row = sqlx::query(INSERT_SIGNAL_SQL)
            .bind(signal.owner)
            .bind(signal.job_id)
            .bind(signal.id)
            .bind(signal.name)
            .bind(signal.idempotency_key)
            .bind(signal.fingerprint)
            .bind(signal.payload)
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
            .bind(job_id)
            .bind(key)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(signal_row).transpose()
    }

    async fn signals_of_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Vec<SignalRow>> {
        let rows = sqlx::query(SIGNALS_OF_JOB_SQL)
            .bind(owner)
            .bind(job_id)
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
            .bind(job_id)
            .bind(patch_id)
            .bind(deprecated)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn patches_of_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(PATCHES_OF_JOB_SQL)
            .bind(owner)
            .bind(job_id)
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
            .bind(job_id)
            .bind(seq)
            .bind(position)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lock_due_timers(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid, i32)>> {
        // Timer loop: each due timer is taken by one engine only (SKIP LOCKED).
        if let Some(citus) = self.citus.clone() {
            return self
                .lock_owner_by_owner(
                    &citus,
                    CITUS_DUE_TIMER_OWNERS_SQL,
                    CITUS_LOCK_DUE_TIMERS_SQL,
                    limit,
                )
                .await;
        }
        let rows = sqlx::query(LOCK_DUE_TIMERS_SQL)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("owner_id")?,
                    r.try_get("job_id")?,
                    r.try_get("seq")?,
                ))
            })
            .collect()
    }

    async fn fire_timer(&mut self, owner: &str, job_id: Uuid, seq: i32) -> StoreResult<bool> {
        let done = sqlx::query(FIRE_TIMER_SQL)
            .bind(owner)
            .bind(job_id)
            .bind(seq)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn lock_expired_leases(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>> {
        // Reaper: each expired lease is taken by one reaper only (SKIP LOCKED).
        if let Some(citus) = self.citus.clone() {
            return self
                .lock_owner_by_owner(
                    &citus,
                    CITUS_EXPIRED_LEASE_OWNERS_SQL,
                    CITUS_LOCK_EXPIRED_LEASES_SQL,
                    limit,
                )
                .await;
        }
        let rows = sqlx::query(LOCK_EXPIRED_LEASES_SQL)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_id")?, r.try_get("id")?)))
            .collect()
    }

    async fn lock_overdue_scheduled(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>> {
        // Reaper: each overdue scheduled attempt is taken by one reaper only (SKIP LOCKED).
        if let Some(citus) = self.citus.clone() {
            return self
                .lock_owner_by_owner(
                    &citus,
                    CITUS_OVERDUE_SCHEDULED_OWNERS_SQL,
                    CITUS_LOCK_OVERDUE_SCHEDULED_SQL,
                    limit,
                )
                .await;
        }
        let rows = sqlx::query(LOCK_OVERDUE_SCHEDULED_SQL)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("owner_id")?, r.try_get("id")?)))
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
            .bind(&v.job)
            .bind(v.overlap.as_str())
            .bind(v.catchup_window_s as i64)
            .bind(v.paused)
            .bind(v.next_fire_at)
            .bind(s.version)
            .bind(v.created_at)
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
            .bind(&v.job)
            .bind(v.overlap.as_str())
            .bind(v.catchup_window_s as i64)
            .bind(v.paused)
            .bind(v.next_fire_at)
            .bind(v.last_fired_at)
            .bind(v.last_job_id)
            .bind(v.fired_count as i64)
            .bind(v.skipped_overlap_count as i64)
            .bind(v.skipped_too_old_count as i64)
            .bind(v.updated_at)
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
        if let Some(citus) = self.citus.clone() {
            let owners: Vec<String> = sqlx::query_scalar(CITUS_DUE_SCHEDULE_OWNERS_SQL)
                .fetch_all(&mut *self.tx)
                .await?;
            let mut due = Vec::new();
            for owner in citus.rotate(owners) {
                let left = limit - due.len() as i64;
                if left <= 0 {
                    break;
                }
                let rows = sqlx::query(CITUS_LOCK_DUE_SCHEDULES_SQL)
                    .bind(&owner)
                    .bind(left)
                    .fetch_all(&mut *self.tx)
                    .await?;
                for row in &rows {
                    due.push(schedule_row(row)?);
                }
            }
            return Ok(due);
        }
        let rows = sqlx::query(LOCK_DUE_SCHEDULES_SQL)
            .bind(limit)
            .fetch_all(&mut *self.tx)
            .await?;
        rows.iter().map(schedule_row).collect()
    }

    async fn job_status(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Option<JobStatus>> {
        let status: Option<String> = sqlx::query_scalar(JOB_STATUS_SQL)
            .bind(owner)
            .bind(job_id)
            .fetch_optional(&mut *self.tx)
            .await?;
        status
            .map(|s| JobStatus::parse(&s).ok_or_else(|| corrupt("job status", &s)))
            .transpose()
    }

    async fn append_schedule_events(&mut self, events: &[NewScheduleEvent]) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        if self.citus.is_some() {
            let mut owners: Vec<&str> = events.iter().map(|e| e.owner_id.as_str()).collect();
            owners.sort_unstable();
            owners.dedup();
            if owners.len() > 1 {
                // One statement per owner (one shard each), events in the order given.
                for owner in owners {
                    let mine: Vec<NewScheduleEvent> = events
                        .iter()
                        .filter(|e| e.owner_id == owner)
                        .cloned()
                        .collect();
                    self.append_schedule_events(&mine).await?;
                }
                return Ok(());
            }
        }
        let mut owners = Vec::with_capacity(events.len());
        let mut names = Vec::with_capacity(events.len());
        let mut ats = Vec::with_capacity(events.len());
        let mut kinds = Vec::with_capacity(events.len());
        let mut ticks = Vec::with_capacity(events.len());
        let mut jobs = Vec::with_capacity(events.len());
        let mut data = Vec::with_capacity(events.len());
        for e in events {
            owners.push(e.owner_id.clone());
            names.push(e.schedule_name.clone());
            ats.push(e.at);
            kinds.push(e.kind.to_owned());
            ticks.push(e.tick_at);
            jobs.push(e.job_id);
            data.push(e.data.clone());
        }
        sqlx::query(APPEND_SCHEDULE_EVENTS_SQL)
            .bind(&owners)
            .bind(&names)
            .bind(&ats)
            .bind(&kinds)
            .bind(&ticks)
            .bind(&jobs)
            .bind(&data)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }
}
