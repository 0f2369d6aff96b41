//! Storage: the [`Store`] trait is the only door to the database and the only place with
//! SQL. The domain ([`crate::Engine`]) composes the fine-grained, guarded statements of a
//! [`StoreTx`] into one transaction per state change.
//!
//! Locking discipline, which every implementation keeps: a transaction that changes a
//! job's activities or attempts first locks the job row ([`StoreTx::lock_job`]), or takes
//! job and attempt together without waiting (`SKIP LOCKED` in the batch operations). With
//! one lock order everywhere, concurrent engines cannot deadlock each other.

mod params;
pub mod postgres;
mod rows;
mod settings;
pub mod sqlite;

pub use params::*;
pub use rows::*;
pub use settings::ConnectSettings;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::StoreError;
use crate::model::{
    ActivityStatus, AttemptStatus, Certification, CompletionOutcome, Contract, ErrorInfo, JobEvent,
    JobStatus, JobView, ScheduleEvent, Scope, StuckAttempt,
};

/// A result of the storage layer.
pub type StoreResult<T> = Result<T, StoreError>;

/// The storage backend. Implementations: [`postgres::PgStore`].
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Starts a transaction.
    async fn begin(&self) -> StoreResult<Box<dyn StoreTx>>;

    /// Whether write transactions begun at once run at the same time (`true`) or one
    /// after another (a store with a single writer, the default). The engine splits work
    /// it may do in separate transactions only where they run at the same time.
    fn concurrent_writes(&self) -> bool {
        false
    }

    /// [`StoreTx::insert_activity_job`] as a transaction of its own, committed when it
    /// inserted (a store may do it in one autocommit statement).
    async fn insert_activity_job_now(
        &self,
        job: &NewJob,
        activity: &NewActivity,
        attempt: &NewAttempt,
        events: &[NewEvent],
    ) -> StoreResult<Option<(JobRow, AttemptRow)>> {
        let mut tx = self.begin().await?;
        let inserted = tx
            .insert_activity_job(job, activity, attempt, events)
            .await?;
        if inserted.is_some() {
            tx.commit().await?;
        }
        Ok(inserted)
    }

    /// [`Store::insert_activity_job_now`] for many jobs at once: one answer per job, in
    /// order, `None` where the key was taken (by a committed job, or by an earlier job of
    /// the same call). Every job inserted is committed when this returns.
    async fn insert_activity_jobs_now(
        &self,
        jobs: &[NewActivityJob],
    ) -> StoreResult<Vec<Option<(JobRow, AttemptRow)>>> {
        let mut tx = self.begin().await?;
        let mut answers = Vec::with_capacity(jobs.len());
        for j in jobs {
            answers.push(
                tx.insert_activity_job(&j.job, &j.activity, &j.attempt, &j.events)
                    .await?,
            );
        }
        tx.commit().await?;
        Ok(answers)
    }

    /// Judges replays in one autocommit statement, when the store has one (`None` when it
    /// has not: then [`crate::domain::replay`] composes the same from a transaction's
    /// primitives). The statement locks the jobs holding the replays' keys (in (owner, id)
    /// order, so two calls never wait on each other in a cycle) and appends one
    /// `job_replayed`, in the order given, for each replay whose fingerprint is that of
    /// the job holding its key. Returns those jobs, each with its view (activities and
    /// attempts) read by the same statement; keys no job holds are left out. On an error
    /// nothing is written.
    async fn replay_now(&self, replays: &[NewReplay]) -> StoreResult<Option<Vec<ReplayedJob>>>;

    /// The views of these jobs (as given) with their activities and attempts read now.
    async fn views_of(&self, jobs: Vec<JobRow>) -> StoreResult<Vec<JobView>> {
        let ids: Vec<(String, Uuid)> = jobs.into_iter().map(|j| (j.owner_id, j.id)).collect();
        self.job_views(&ids).await
    }

    /// Applies pending migrations.
    async fn migrate(&self) -> StoreResult<()>;

    /// Answers when the database answers.
    async fn ping(&self) -> StoreResult<()>;

    /// Finds the owner and job of an attempt visible in `scope`.
    async fn locate_attempt(
        &self,
        scope: &Scope,
        attempt_id: Uuid,
    ) -> StoreResult<Option<AttemptLocation>>;

    /// The owner of a job visible in `scope`.
    async fn job_owner(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<String>>;

    /// A job visible in `scope`, with its activities and attempts, and its parent and
    /// children.
    async fn job_view(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<JobView>>;

    /// A job's signals in the order they were recorded, read now.
    async fn job_signals(&self, owner: &str, job_id: Uuid) -> StoreResult<Vec<SignalRow>>;
    /// Up to `limit` open (`queued` or `running`) child jobs whose parent is `cancelled`,
    /// as `(owner, child id)`; reads only, locks nothing.
    async fn open_children_of_cancelled_parents(
        &self,
        limit: i64,
    ) -> StoreResult<Vec<(String, Uuid)>>;

    /// The jobs `(owner, id)` with their activities and attempts, in any order; jobs
    /// that do not exist are left out.
    async fn job_views(&self, jobs: &[(String, Uuid)]) -> StoreResult<Vec<JobView>> {
        let mut views = Vec::with_capacity(jobs.len());
        for (owner, id) in jobs {
            views.extend(self.job_view(&Scope::Owner(owner.clone()), *id).await?);
        }
        Ok(views)
    }

    /// A job's events in order, those numbered above `after_seq`, at most `limit` of them
    /// (all when `None`); `None` when the job is not visible in `scope`.
    async fn job_events(
        &self,
        scope: &Scope,
        job_id: Uuid,
        after_seq: i64,
        limit: Option<i64>,
    ) -> StoreResult<Option<Vec<JobEvent>>>;

    /// Jobs matching the query, newest first, with their activities and attempts.
    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Vec<JobView>>;

    /// The output contracts of these owners (of every owner when `None`).
    async fn list_contracts(&self, owners: Option<&[String]>) -> StoreResult<Vec<ContractRecord>>;

    /// The latest certification of each (owner, activity, contract hash, provider) of
    /// these owners (of every owner when `None`).
    async fn latest_certifications(
        &self,
        owners: Option<&[String]>,
    ) -> StoreResult<Vec<Certification>>;

    /// Attempts in the given statuses for longer than the given age, oldest first.
    async fn stuck_attempts(&self, query: &StuckQuery) -> StoreResult<Vec<StuckAttempt>>;

    /// Live attempts by status, and the age in seconds of the oldest `unknown` one (0
    /// when none), for the metrics gauges.
    async fn live_attempt_counts(&self) -> StoreResult<(Vec<(String, i64)>, i64)>;

    /// Retention: deletes at most `limit` jobs that finished (`succeeded`, `failed` or
    /// `cancelled`) more than `retention` ago by the database clock and have no live
    /// attempt, with everything they own (activities, attempts, events, timers), oldest
    /// first, only jobs whose id is above `after` when given (where the previous batch of
    /// the same pass stopped, so a pass does not walk again what it already passed). A job
    /// another transaction holds is left for a later pass. Once a job is gone its
    /// idempotency key is free: submitting it again creates a new job.
    async fn prune_finished_jobs(
        &self,
        retention: std::time::Duration,
        limit: i64,
        after: Option<Uuid>,
    ) -> StoreResult<PrunedJobs>;

    /// Retention of schedules' history: deletes at most `limit` schedule events written
    /// more than `retention` ago by the database clock, oldest first; answers how many.
    /// Schedules themselves are never deleted by retention.
    async fn prune_schedule_events(
        &self,
        retention: std::time::Duration,
        limit: i64,
    ) -> StoreResult<u64>;

    /// The heartbeat fast path: extends the lease of a `started` attempt held by `token`
    /// in one statement.
    async fn extend_lease(
        &self,
        location: &AttemptLocation,
        attempt_id: Uuid,
        token: Uuid,
        details: Option<&Value>,
    ) -> StoreResult<LeaseExtension>;

    /// The heartbeat fast path for many heartbeats at once: extends the lease of each
    /// `started` attempt held by its renewal's token, within its renewal's owner, exactly
    /// as [`Store::extend_lease`] does one; answers, per renewal and in order, whether it
    /// was extended. A renewal that was not (wrong token, not `started`, not found) is
    /// left unchanged, whatever the others in the call. A store may do this one renewal at
    /// a time (the default) or in one statement.
    async fn extend_leases(&self, renewals: &[LeaseRenewal]) -> StoreResult<Vec<bool>> {
        let mut extended = Vec::with_capacity(renewals.len());
        for r in renewals {
            let scope = match &r.owner {
                Some(owner) => Scope::Owner(owner.clone()),
                None => Scope::AllOwners,
            };
            extended.push(match self.locate_attempt(&scope, r.attempt_id).await? {
                Some(location) => {
                    self.extend_lease(&location, r.attempt_id, r.token, r.details.as_ref())
                        .await?
                        == LeaseExtension::Extended
                }
                None => false,
            });
        }
        Ok(extended)
    }

    /// Registers (or confirms, making it current again) an output contract.
    async fn register_contract(&self, contract: &Contract) -> StoreResult<()>;

    /// Records a certification run, stamped with the database's clock when it is written
    /// (never an engine's): of two runs recorded one after the other, the later one has
    /// the later `created_at` whatever the clocks of the engines that recorded them, and
    /// is the one [`StoreTx::latest_certification`] and [`Store::latest_certifications`]
    /// answer. Returns the run as recorded.
    async fn insert_certification(
        &self,
        certification: &NewCertification,
    ) -> StoreResult<Certification>;

    /// Stores a new token (its hash).
    async fn insert_token(&self, token: &TokenRow) -> StoreResult<()>;

    /// The unrevoked token with this hash.
    async fn token_by_hash(&self, token_hash: &str) -> StoreResult<Option<TokenRow>>;

    /// The unrevoked tokens with any of these hashes (in any order; a hash that no
    /// unrevoked token has is left out).
    async fn tokens_by_hash(&self, token_hashes: &[String]) -> StoreResult<Vec<TokenRow>> {
        let mut rows = Vec::with_capacity(token_hashes.len());
        for hash in token_hashes {
            rows.extend(self.token_by_hash(hash).await?);
        }
        Ok(rows)
    }

    /// Revokes a token; `false` when no unrevoked token has this id.
    async fn revoke_token(&self, token_id: Uuid) -> StoreResult<bool>;

    /// A schedule of `owner`.
    async fn schedule(&self, owner: &str, name: &str) -> StoreResult<Option<ScheduleRow>>;

    /// The schedules of `owner`, by name.
    async fn list_schedules(&self, owner: &str) -> StoreResult<Vec<ScheduleRow>>;

    /// The latest `limit` events of a schedule, oldest first.
    async fn schedule_events(
        &self,
        owner: &str,
        name: &str,
        limit: i64,
    ) -> StoreResult<Vec<ScheduleEvent>>;

    /// When the earliest unpaused schedule of any owner is due next, with the database's
    /// clock, so that the caller can tell whether it is due without reading its own.
    async fn next_schedule_fire(&self) -> StoreResult<NextScheduleFire>;

    /// Until `shutdown`, wakes `signal`'s waiters whenever any process schedules work
    /// ([`StoreTx::notify_work`]). A hint only: pollers re-check on a timer too. On
    /// PostgreSQL with a URL that lists several servers, it also follows the writable
    /// server until `shutdown` (database failover).
    async fn listen_for_work(&self, signal: Arc<Notify>, shutdown: CancellationToken);
}

/// One transaction. Dropping it without [`StoreTx::commit`] rolls it back.
#[async_trait]
pub trait StoreTx: Send {
    /// Commits every change made in this transaction at once.
    async fn commit(self: Box<Self>) -> StoreResult<()>;

    /// The transaction's clock: the database's time when the transaction began
    /// (PostgreSQL's `now()`), the same at every call, and the time the transaction's
    /// statements compare with (leases, deadlines, due schedules).
    async fn now(&mut self) -> StoreResult<DateTime<Utc>>;

    /// Inserts a job unless `(owner, idempotency key)` exists (invariant 1). Returns the
    /// inserted row, or `None` when the key was taken.
    async fn insert_job(&mut self, job: &NewJob) -> StoreResult<Option<JobRow>>;

    /// Inserts an activity job with its activity 0, that activity's attempt 1 and the
    /// job's first events, unless `(owner, idempotency key)` exists (invariant 1): then
    /// nothing is inserted and the answer is `None`. Wakes pollers at commit.
    async fn insert_activity_job(
        &mut self,
        job: &NewJob,
        activity: &NewActivity,
        attempt: &NewAttempt,
        events: &[NewEvent],
    ) -> StoreResult<Option<(JobRow, AttemptRow)>> {
        let Some(job_row) = self.insert_job(job).await? else {
            return Ok(None);
        };
        self.insert_activity(activity).await?;
        let attempt_row = self.insert_attempt(attempt).await?.ok_or_else(|| {
            StoreError::Corrupt("a new activity already had a live attempt".into())
        })?;
        self.notify_work(&attempt.task_queue).await?;
        self.append_events(events).await?;
        Ok(Some((job_row, attempt_row)))
    }

    /// The job holding an idempotency key.
    async fn job_by_idempotency_key(
        &mut self,
        owner: &str,
        key: &str,
    ) -> StoreResult<Option<JobRow>>;

    /// Locks the job of an attempt visible in `scope` and returns it (one round trip
    /// for what `locate_attempt` + `lock_job` would do).
    async fn lock_job_of_attempt(
        &mut self,
        scope: &Scope,
        attempt_id: Uuid,
    ) -> StoreResult<Option<JobRow>>;

    /// Locks the jobs of these attempts (of any owner) and returns each attempt, read
    /// after its job's lock was taken, with its job and the current output contract of
    /// its activity for the job's owner (as [`StoreTx::current_contract`] reads it).
    /// Locks are taken in one order (owner, job id), so two such calls never wait on
    /// each other in a cycle. Attempts that do not exist are left out.
    async fn lock_jobs_of_attempts(
        &mut self,
        attempt_ids: &[Uuid],
    ) -> StoreResult<Vec<LockedAttempt>> {
        let mut locked: Vec<LockedAttempt> = Vec::with_capacity(attempt_ids.len());
        for &id in attempt_ids {
            let Some(job) = self.lock_job_of_attempt(&Scope::AllOwners, id).await? else {
                continue;
            };
            let Some(attempt) = self.attempt(&job.owner_id, id).await? else {
                continue;
            };
            let known = locked
                .iter()
                .find(|l| l.job.owner_id == job.owner_id && l.attempt.activity == attempt.activity);
            let contract = match known {
                Some(l) => l.contract.clone(),
                None => {
                    self.current_contract(&job.owner_id, &attempt.activity)
                        .await?
                }
            };
            locked.push(LockedAttempt {
                job,
                attempt,
                contract,
            });
        }
        Ok(locked)
    }

    /// Locks a job row for this transaction and returns it.
    async fn lock_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Option<JobRow>>;

    /// Locks the jobs holding these `(owner, idempotency key)` pairs and returns them, as
    /// they are once locked. Locks are taken in one order (owner, job id), so two such
    /// calls never wait on each other in a cycle. Keys no job holds are left out.
    async fn lock_jobs_by_keys(&mut self, keys: &[(String, String)]) -> StoreResult<Vec<JobRow>> {
        let mut found = Vec::with_capacity(keys.len());
        for (owner, key) in keys {
            if let Some(job) = self.job_by_idempotency_key(owner, key).await? {
                found.push((job.owner_id, job.id));
            }
        }
        found.sort();
        found.dedup();
        let mut locked = Vec::with_capacity(found.len());
        for (owner, id) in found {
            locked.extend(self.lock_job(&owner, id).await?);
        }
        Ok(locked)
    }

    /// Marks a queued job running.
    async fn mark_job_running(&mut self, owner: &str, job_id: Uuid) -> StoreResult<bool>;

    /// Job CAS: takes the job's result slot if `version` is current and nobody took it.
    /// `attempt_id` is the winning attempt of an activity job (`None` for a workflow).
    async fn commit_job_result(&mut self, commit: &JobResultCommit<'_>) -> StoreResult<bool>;

    /// Closes an open job (`failed` or `cancelled`) if `version` is current.
    async fn close_job(&mut self, closing: &JobClosing<'_>) -> StoreResult<bool>;

    /// Resumes a job at `version`: a `failed` job, or an open parked workflow, becomes
    /// `running` with its error and end cleared and its version moved; a workflow is
    /// unparked and made ready for a fresh workflow task. A child whose parent saw it
    /// fail keeps the outcome its parent saw (first resume only). `false` (nothing
    /// changed) for any other status or a moved version: of concurrent resumes, one.
    async fn resume_job(&mut self, owner: &str, job_id: Uuid, version: i64) -> StoreResult<bool>;

    /// Reopens a `failed` or `cancelled` activity nobody won: `scheduled`, its error,
    /// end and arrival cleared, its version moved, and its retry budget counting only
    /// attempts numbered above `resumed_after`. `false` for any other activity.
    async fn reopen_activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
        resumed_after: i32,
    ) -> StoreResult<bool>;

    /// The highest attempt number an activity had when a resume last reopened it (0 when
    /// never; `None` for no such activity).
    async fn activity_resumed_after(
        &mut self,
        owner: &str,
        activity_id: Uuid,
    ) -> StoreResult<Option<i32>>;

    /// Inserts an activity.
    async fn insert_activity(&mut self, activity: &NewActivity) -> StoreResult<()>;

    /// An activity by id.
    async fn activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
    ) -> StoreResult<Option<ActivityRow>>;

    /// An activity by its position in the job.
    async fn activity_by_seq(
        &mut self,
        owner: &str,
        job_id: Uuid,
        seq: i32,
    ) -> StoreResult<Option<ActivityRow>>;

    /// A job's activities in order.
    async fn activities_of_job(
        &mut self,
        owner: &str,
        job_id: Uuid,
    ) -> StoreResult<Vec<ActivityRow>>;

    /// Moves an activity between open statuses when it is in one of `from`.
    async fn set_activity_status(
        &mut self,
        owner: &str,
        activity_id: Uuid,
        from: &[ActivityStatus],
        to: ActivityStatus,
    ) -> StoreResult<bool>;

    /// Activity CAS (invariant 4): takes the result slot for `attempt_id` if the
    /// activity's version is still `read_version` and nobody completed it.
    async fn commit_activity_result(
        &mut self,
        commit: &ActivityResultCommit<'_>,
    ) -> StoreResult<bool>;

    /// The commit of a winning result of an activity job's attempt, in one step: the
    /// activity CAS (invariant 4) and, only when it takes the slot, the attempt →
    /// `succeeded` (from one of `from`, outcome `won`) and the job CAS (at `job_version`).
    /// Returns whether the activity's and the job's slots were taken.
    async fn commit_activity_job_result(
        &mut self,
        win: &WinningResult,
        from: &[AttemptStatus],
    ) -> StoreResult<(bool, bool)> {
        let activity = ActivityResultCommit {
            owner: &win.owner_id,
            activity_id: win.activity_id,
            read_version: win.read_version,
            attempt_id: win.attempt_id,
            result: &win.result,
        };
        if !self.commit_activity_result(&activity).await? {
            return Ok((false, false));
        }
        self.finish_attempt(&AttemptEnding {
            owner: &win.owner_id,
            attempt_id: win.attempt_id,
            from,
            to: AttemptStatus::Succeeded,
            error: None,
            outcome: Some(CompletionOutcome::Won),
        })
        .await?;
        let job_won = self
            .commit_job_result(&JobResultCommit {
                owner: &win.owner_id,
                job_id: win.job_id,
                version: win.job_version,
                attempt_id: Some(win.attempt_id),
                result: &win.result,
            })
            .await?;
        Ok((true, job_won))
    }

    /// [`StoreTx::commit_activity_job_result`] for results of distinct jobs at once, each
    /// with its own CAS: one answer per result, in order. The caller holds every job's
    /// lock.
    async fn commit_activity_job_results(
        &mut self,
        wins: &[WinningResult],
        from: &[AttemptStatus],
    ) -> StoreResult<Vec<(bool, bool)>> {
        let mut taken = Vec::with_capacity(wins.len());
        for w in wins {
            taken.push(self.commit_activity_job_result(w, from).await?);
        }
        Ok(taken)
    }

    /// Closes an open activity (`failed` or `cancelled`), moving its version so that no
    /// later result can take the slot.
    async fn close_activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
        status: ActivityStatus,
        error: Option<&ErrorInfo>,
    ) -> StoreResult<bool>;

    /// Inserts an attempt unless the activity already has a live one (invariant 2) or the
    /// number is taken. `None` when refused.
    async fn insert_attempt(&mut self, attempt: &NewAttempt) -> StoreResult<Option<AttemptRow>>;

    /// An attempt by id.
    async fn attempt(&mut self, owner: &str, attempt_id: Uuid) -> StoreResult<Option<AttemptRow>>;

    /// An activity's attempts in number order.
    async fn attempts_of_activity(
        &mut self,
        owner: &str,
        activity_id: Uuid,
    ) -> StoreResult<Vec<AttemptRow>>;

    /// Ends an attempt that is in one of `from`, recording its error and what its
    /// completion answered.
    async fn finish_attempt(&mut self, ending: &AttemptEnding<'_>) -> StoreResult<bool>;

    /// `started` with an expired lease → `unknown` (invariant 3).
    async fn mark_attempt_unknown(&mut self, owner: &str, attempt_id: Uuid) -> StoreResult<bool>;

    /// `unknown` → `started` with a fresh lease, for the holder of its lease token.
    async fn revive_attempt(
        &mut self,
        owner: &str,
        attempt_id: Uuid,
        token: Uuid,
        details: Option<&Value>,
    ) -> StoreResult<bool>;

    /// Every live attempt of an activity but `except` → `cancelled`, with who and why;
    /// returns each one cancelled with the status it had.
    async fn cancel_live_attempts(
        &mut self,
        cancellation: &LiveAttemptsCancellation<'_>,
    ) -> StoreResult<Vec<(Uuid, AttemptStatus)>>;

    /// A live attempt → `cancelled`, with who and why.
    async fn cancel_attempt(
        &mut self,
        owner: &str,
        attempt_id: Uuid,
        cancelled_by: &str,
        reason: &str,
    ) -> StoreResult<bool>;

    /// Tells waiting pollers, once this transaction commits, that attempts on
    /// `task_queue` became available.
    async fn notify_work(&mut self, task_queue: &str) -> StoreResult<()>;

    /// Appends events to job histories, in order.
    async fn append_events(&mut self, events: &[NewEvent]) -> StoreResult<()>;

    /// The current output contract of an activity for an owner (its own, else `*`'s).
    async fn current_contract(
        &mut self,
        owner: &str,
        activity: &str,
    ) -> StoreResult<Option<Contract>>;

    /// The latest certification of a provider for a contract hash (the owner's own,
    /// else `*`'s).
    async fn latest_certification(
        &mut self,
        owner: &str,
        activity: &str,
        provider: &str,
        contract_hash: &str,
    ) -> StoreResult<Option<Certification>>;

    /// Hands out up to `filter.limit` available scheduled attempts: each becomes
    /// `started` with a fresh lease token, once; their activities become `running` and
    /// their queued jobs `running`. Locks their jobs without waiting.
    async fn claim_attempts(&mut self, filter: &ClaimFilter) -> StoreResult<Vec<ClaimedAttempt>>;

    /// Hands out up to `filter.limit` workflow tasks (ready and unleased, or with an
    /// expired lease), each with a fresh lease token. Locks their jobs without waiting.
    ///
    /// A task goes out with only the new part of its history
    /// ([`WorkflowRun::since_arrival`]) when the claiming worker is the one that completed
    /// the job's previous task keeping its state, and the job has not moved since.
    async fn claim_workflow_tasks(
        &mut self,
        filter: &WorkflowClaimFilter,
    ) -> StoreResult<Vec<ClaimedWorkflowTask>>;

    /// Workflow-task CAS: ends the task held by `token` if the job's version is still
    /// `read_version` (moving it); `false` for a stale or duplicated task. With
    /// `sticky_horizon` the task's worker keeps the workflow's state, having seen the
    /// outcomes up to that place in the arrival order (see [`WorkflowRun::since_arrival`]);
    /// without, the next task carries the whole history.
    async fn complete_workflow_task(
        &mut self,
        owner: &str,
        job_id: Uuid,
        token: Uuid,
        read_version: i64,
        sticky_horizon: Option<i64>,
    ) -> StoreResult<bool>;

    /// A workflow job's current run (never with `since_arrival`).
    async fn workflow_run(&mut self, owner: &str, job_id: Uuid)
        -> StoreResult<Option<WorkflowRun>>;

    /// The activities of a workflow job's run (positions from `first_seq`) by position,
    /// each with its outcome's number in the arrival order.
    async fn journal_activities(
        &mut self,
        owner: &str,
        job_id: Uuid,
        first_seq: i32,
    ) -> StoreResult<Vec<(ActivityRow, Option<i64>)>>;

    /// The activities of a workflow job's run whose outcome arrived after place `since`
    /// in the arrival order, in that order: read by arrival, whatever the history's
    /// length.
    async fn activities_arrived_since(
        &mut self,
        owner: &str,
        job_id: Uuid,
        first_seq: i32,
        since: i64,
    ) -> StoreResult<Vec<(ActivityRow, Option<i64>)>>;

    /// A job's activities at positions `seqs`, with their arrival numbers.
    async fn activities_at(
        &mut self,
        owner: &str,
        job_id: Uuid,
        seqs: &[i32],
    ) -> StoreResult<Vec<(ActivityRow, Option<i64>)>>;

    /// The timers of a workflow job's run (positions from `first_seq`) by position.
    async fn journal_timers(
        &mut self,
        owner: &str,
        job_id: Uuid,
        first_seq: i32,
    ) -> StoreResult<Vec<TimerRow>>;

    /// The timers of a workflow job's run that fired after place `since` in the arrival
    /// order.
    async fn timers_arrived_since(
        &mut self,
        owner: &str,
        job_id: Uuid,
        first_seq: i32,
        since: i64,
    ) -> StoreResult<Vec<TimerRow>>;

    /// A job's timers at positions `seqs`.
    async fn timers_at(
        &mut self,
        owner: &str,
        job_id: Uuid,
        seqs: &[i32],
    ) -> StoreResult<Vec<TimerRow>>;

    /// The signals a workflow job's run may see: untaken, or taken by a wait of the run
    /// (position from `first_seq`), in the order they were recorded.
    async fn journal_signals(
        &mut self,
        owner: &str,
        job_id: Uuid,
        first_seq: i32,
    ) -> StoreResult<Vec<SignalRow>>;

    /// A job's signals that arrived after place `since` in its arrival order, in the
    /// order they were recorded.
    async fn signals_arrived_since(
        &mut self,
        owner: &str,
        job_id: Uuid,
        since: i64,
    ) -> StoreResult<Vec<SignalRow>>;

    /// Continue-as-new: starts the next run of an open workflow job at `version` (the
    /// caller holds its row lock), from position `first_seq` (past the current run's)
    /// with `input`, and makes it ready for a task. `false` (nothing changed) otherwise.
    async fn continue_as_new(
        &mut self,
        owner: &str,
        job_id: Uuid,
        version: i64,
        first_seq: i32,
        input: &Value,
    ) -> StoreResult<bool>;

    /// Drops a job's unfired timers at positions before `first_seq` (a run that
    /// continued as new); how many.
    async fn drop_timers_before(
        &mut self,
        owner: &str,
        job_id: Uuid,
        first_seq: i32,
    ) -> StoreResult<u64>;

    /// Marks a workflow job ready for its next task and wakes pollers; an open job also
    /// gives `arrived` the next number in its arrival order (once: an outcome that has a
    /// number keeps it), which replay delivers outcomes by.
    async fn mark_workflow_ready(
        &mut self,
        owner: &str,
        job_id: Uuid,
        arrived: Arrival,
    ) -> StoreResult<()>;

    /// A workflow job's children (the jobs it started, `parent_job_id` = `parent`) by
    /// position, each with its outcome's number in the parent's arrival order.
    async fn children_of_job(&mut self, owner: &str, parent: Uuid) -> StoreResult<Vec<ChildRow>>;

    /// A workflow job's children at positions `seqs` (by their keys
    /// `{parent}:child:{seq}`), each with its outcome's number in the parent's arrival order.
    async fn children_at(
        &mut self,
        owner: &str,
        parent: Uuid,
        seqs: &[i32],
    ) -> StoreResult<Vec<ChildRow>>;
    /// Records the compensation bound a workflow declared (`None`: none) on an open job,
    /// under its workflow task's CAS; `false` for a closed job.
    async fn declare_compensation(
        &mut self,
        owner: &str,
        job_id: Uuid,
        within_ms: Option<i64>,
    ) -> StoreResult<bool>;

    /// Records the owner's cancel of an open workflow job that declared a compensation
    /// bound and has none recorded yet, if `version` is current: the request time, the
    /// deadline (now + the bound), a moved version and no workflow task in flight.
    /// `false` (nothing changed) otherwise. Its arrival is numbered by
    /// [`StoreTx::mark_workflow_ready`] with [`Arrival::Cancel`].
    async fn request_workflow_cancel(
        &mut self,
        owner: &str,
        job_id: Uuid,
        version: i64,
    ) -> StoreResult<bool>;

    /// A cancelled workflow returned: its job ends `cancelled` with `error` if `version`
    /// is current and its cancel was requested, and leaves the compensation deadlines.
    async fn end_compensation(
        &mut self,
        owner: &str,
        job_id: Uuid,
        version: i64,
        error: &ErrorInfo,
    ) -> StoreResult<bool>;

    /// A cancelled workflow's compensation bound passed: its job ends `cancelled` with
    /// `error`, once, if it is still open and overdue by the store's clock.
    async fn close_overdue_compensation(
        &mut self,
        owner: &str,
        job_id: Uuid,
        error: &ErrorInfo,
    ) -> StoreResult<bool>;

    /// Locks (without waiting) up to `limit` open jobs whose compensation bound passed:
    /// `(owner, job id)`.
    async fn lock_due_compensations(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>>;

    /// Parks a workflow job with a visible error: no more workflow tasks.
    async fn park_workflow(
        &mut self,
        owner: &str,
        job_id: Uuid,
        error: &ErrorInfo,
    ) -> StoreResult<()>;

    /// Starts a timer at a position unless one is there; `false` when it was.
    async fn insert_timer(
        &mut self,
        owner: &str,
        job_id: Uuid,
        seq: i32,
        delay_ms: u64,
    ) -> StoreResult<bool>;

    /// Records a signal as its job's next (the caller holds the job's row lock) unless the
    /// job already has a signal under its key (invariant 9); `None` when it had.
    async fn insert_signal(&mut self, signal: &NewSignal<'_>) -> StoreResult<Option<SignalRow>>;

    /// The signal a job holds under an idempotency key.
    async fn signal_by_key(
        &mut self,
        owner: &str,
        job_id: Uuid,
        key: &str,
    ) -> StoreResult<Option<SignalRow>>;

    /// A job's signals in the order they were recorded.
    async fn signals_of_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Vec<SignalRow>>;

    /// Hands signal `seq` to the wait at workflow position `position` unless a wait took
    /// it already; `false` when one had.
    async fn consume_signal(
        &mut self,
        owner: &str,
        job_id: Uuid,
        seq: i64,
        position: i32,
    ) -> StoreResult<bool>;

    /// Records patch marker `patch_id` for a workflow job (the caller holds the job's row
    /// lock) unless the job recorded it already; `false` when it had. A marker takes no
    /// position.
    async fn insert_patch(
        &mut self,
        owner: &str,
        job_id: Uuid,
        patch_id: &str,
        deprecated: bool,
    ) -> StoreResult<bool>;

    /// The patch markers a workflow job recorded, by patch id.
    async fn patches_of_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Vec<String>>;

    /// Locks (without waiting) up to `limit` due, unfired timers with their jobs.
    async fn lock_due_timers(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid, i32)>>;

    /// Fires a due timer once.
    async fn fire_timer(&mut self, owner: &str, job_id: Uuid, seq: i32) -> StoreResult<bool>;

    /// Locks (without waiting) up to `limit` started attempts whose lease has expired,
    /// with their jobs.
    async fn lock_expired_leases(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>>;

    /// Locks (without waiting) up to `limit` scheduled attempts past their
    /// schedule-to-start deadline, with their jobs.
    async fn lock_overdue_scheduled(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>>;

    /// Locks a schedule of `owner` for this transaction and returns it.
    async fn lock_schedule(&mut self, owner: &str, name: &str) -> StoreResult<Option<ScheduleRow>>;

    /// Inserts a schedule unless `(owner, name)` exists; `false` when it did.
    async fn insert_schedule(&mut self, schedule: &ScheduleRow) -> StoreResult<bool>;

    /// Writes every changeable field of `schedule` if its stored version is still
    /// `schedule.version`, moving the version; `false` for a stale writer.
    async fn update_schedule(&mut self, schedule: &ScheduleRow) -> StoreResult<bool>;

    /// Deletes a schedule and its events; `false` when there was none.
    async fn delete_schedule(&mut self, owner: &str, name: &str) -> StoreResult<bool>;

    /// Locks (without waiting) up to `limit` unpaused schedules due by the transaction's
    /// clock ([`StoreTx::now`]), earliest first.
    async fn lock_due_schedules(&mut self, limit: i64) -> StoreResult<Vec<ScheduleRow>>;

    /// The status of a job of `owner`, without locking it.
    async fn job_status(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Option<JobStatus>>;

    /// Appends events to schedule histories, in order.
    async fn append_schedule_events(&mut self, events: &[NewScheduleEvent]) -> StoreResult<()>;
}
