//! Storage: the [`Store`] trait is the only door to the database and the only place with
//! SQL. The domain ([`crate::Engine`]) composes the fine-grained, guarded statements of a
//! [`StoreTx`] into one transaction per state change.
//!
//! Locking discipline, which every implementation keeps: a transaction that changes a
//! job's activities or attempts first locks the job row ([`StoreTx::lock_job`]), or takes
//! job and attempt together without waiting (`SKIP LOCKED` in the batch operations). With
//! one lock order everywhere, concurrent engines cannot deadlock each other.

pub mod postgres;
pub mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::StoreError;
use crate::model::{
    ActivityOptions, ActivityStatus, AttemptStatus, Certification, CompletionOutcome, Contract,
    ErrorInfo, JobEvent, JobKind, JobStatus, JobView, Overlap, Role, ScheduleEvent, ScheduleView,
    Scope, StuckAttempt,
};

/// A result of the storage layer.
pub type StoreResult<T> = Result<T, StoreError>;

/// How an engine connects to its database: the pool's size and the limits every pooled
/// PostgreSQL connection runs under. [`ConnectSettings::default`] is what
/// `onceflow serve` uses without flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectSettings {
    /// The most connections the pool opens (default 20). On PostgreSQL, a pool larger than
    /// the server has room for is lowered to fit, never below
    /// [`postgres::MIN_POOL_CONNECTIONS`] (or the size asked for, if smaller): if the
    /// server has no room for that, connecting fails and says why.
    pub max_connections: u32,
    /// PostgreSQL's `statement_timeout` on every pooled connection (default 30 s; zero
    /// turns it off): a statement running longer is cancelled, and the request that ran
    /// it answers `503 unavailable`. Migrations and retention run without it.
    pub statement_timeout: std::time::Duration,
    /// PostgreSQL's `idle_in_transaction_session_timeout` on every pooled connection
    /// (default 60 s; zero turns it off): a session that holds a transaction open without
    /// a statement this long is ended by the server, which rolls the transaction back and
    /// releases its locks.
    pub idle_in_transaction_timeout: std::time::Duration,
}

impl Default for ConnectSettings {
    fn default() -> Self {
        ConnectSettings {
            max_connections: 20,
            statement_timeout: std::time::Duration::from_secs(30),
            idle_in_transaction_timeout: std::time::Duration::from_secs(60),
        }
    }
}

impl ConnectSettings {
    /// The defaults with a pool of `max_connections`.
    pub fn with_max_connections(max_connections: u32) -> Self {
        ConnectSettings {
            max_connections,
            ..ConnectSettings::default()
        }
    }
}

/// A job row.
#[derive(Debug, Clone)]
pub struct JobRow {
    /// The owner the row belongs to; every key includes it.
    pub owner_id: String,
    /// The job's id (UUIDv7).
    pub id: Uuid,
    /// The key it was submitted with; one job per (owner, key).
    pub idempotency_key: String,
    /// The request fingerprint that tells a replay from a reused key.
    pub fingerprint: String,
    /// Whether it is a workflow job or an activity job.
    pub kind: JobKind,
    /// The workflow it runs; set exactly for a workflow job.
    pub workflow: Option<String>,
    /// The activity it runs; set exactly for an activity job.
    pub activity: Option<String>,
    /// The task queue its work is dispatched on.
    pub task_queue: String,
    /// The input it was submitted with.
    pub input: Value,
    /// Where the job stands.
    pub status: JobStatus,
    /// Moves each time the result slot is taken or the job closed; the job CAS compares it.
    pub version: i64,
    /// The job's result once it succeeded.
    pub result: Option<Value>,
    /// Why the job failed or was cancelled.
    pub error: Option<ErrorInfo>,
    /// The attempt whose result the job took; `None` until then.
    pub completed_by: Option<Uuid>,
    /// When the job was submitted.
    pub created_at: DateTime<Utc>,
    /// When the job last changed.
    pub updated_at: DateTime<Utc>,
    /// When the job closed; `None` while it is open.
    pub finished_at: Option<DateTime<Utc>>,
    /// Workflow jobs: something happened that the workflow has not replayed yet.
    pub wf_ready: bool,
    /// Workflow jobs: the fencing token of the workflow task in flight, if any.
    pub wf_lease_token: Option<Uuid>,
    /// Workflow jobs: parked (e.g. non-determinism); no more workflow tasks.
    pub wf_parked: bool,
}

/// An activity row.
#[derive(Debug, Clone)]
pub struct ActivityRow {
    /// The owner the row belongs to; every key includes it.
    pub owner_id: String,
    /// The activity's id.
    pub id: Uuid,
    /// The job it belongs to.
    pub job_id: Uuid,
    /// Its position in the job, from 0.
    pub seq: i32,
    /// The activity's name.
    pub name: String,
    /// Its providers in failover order; the first is the primary.
    pub providers: Vec<String>,
    /// Its timeouts, failover mode and retry policy.
    pub options: ActivityOptions,
    /// The task queue its attempts are dispatched on.
    pub task_queue: String,
    /// The input every attempt runs with.
    pub input: Value,
    /// Where the activity stands.
    pub status: ActivityStatus,
    /// Moves only when the result slot is taken or closed; the activity CAS compares it.
    pub version: i64,
    /// The attempt whose result won the slot; `None` until one wins.
    pub completed_by: Option<Uuid>,
    /// The winning attempt's result.
    pub result: Option<Value>,
    /// Why the activity failed or was cancelled.
    pub error: Option<ErrorInfo>,
    /// When the activity reached its final status.
    pub finished_at: Option<DateTime<Utc>>,
}

/// An attempt row.
#[derive(Debug, Clone)]
pub struct AttemptRow {
    /// The owner the row belongs to; every key includes it.
    pub owner_id: String,
    /// The attempt's id.
    pub id: Uuid,
    /// The activity it tries.
    pub activity_id: Uuid,
    /// The job of that activity.
    pub job_id: Uuid,
    /// Counts within the activity: 1, 2, 3 … across providers.
    pub number: i32,
    /// The activity's name, copied so that dispatch reads one table.
    pub activity: String,
    /// The task queue it is dispatched on.
    pub task_queue: String,
    /// The provider this attempt runs at.
    pub provider: String,
    /// Where the attempt stands; `scheduled`, `started` and `unknown` are live.
    pub status: AttemptStatus,
    /// The worker it was handed to; `None` while it is `scheduled`.
    pub worker_id: Option<String>,
    /// The attempt's fencing token, set once when a worker is handed the attempt.
    pub lease_token: Option<Uuid>,
    /// When the lease expires unless renewed by a heartbeat; `None` when it holds no lease.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// The activity version read when it was handed out; its CAS compares it.
    pub read_version: Option<i64>,
    /// The last heartbeat (or start) that renewed its lease.
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// When a worker was handed the attempt.
    pub started_at: Option<DateTime<Utc>>,
    /// When its lease expired, making it `unknown`; `None` unless it is `unknown`.
    pub unknown_at: Option<DateTime<Utc>>,
    /// When the attempt ended; `None` while it is live.
    pub finished_at: Option<DateTime<Utc>>,
    /// The error it ended with, if any.
    pub error: Option<ErrorInfo>,
    /// What its first completion answered; a repeated completion answers the same.
    pub completion_outcome: Option<CompletionOutcome>,
    /// Who cancelled it; stays set after a late result.
    pub cancelled_by: Option<String>,
    /// Why it was cancelled.
    pub cancel_reason: Option<String>,
    /// When the attempt was created.
    pub created_at: DateTime<Utc>,
}

/// A job to insert.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// The owner submitting the job.
    pub owner_id: String,
    /// The new job's id (UUIDv7).
    pub id: Uuid,
    /// The key that makes the job one per intent for its owner.
    pub idempotency_key: String,
    /// The request fingerprint, compared when the key comes again.
    pub fingerprint: String,
    /// Whether it is a workflow job or an activity job.
    pub kind: JobKind,
    /// The workflow it runs; set exactly for a workflow job.
    pub workflow: Option<String>,
    /// The activity it runs; set exactly for an activity job.
    pub activity: Option<String>,
    /// The task queue its work is dispatched on.
    pub task_queue: String,
    /// The job's input.
    pub input: Value,
}

/// An activity to insert (status `scheduled`, version 0).
#[derive(Debug, Clone)]
pub struct NewActivity {
    /// The owner of its job.
    pub owner_id: String,
    /// The new activity's id.
    pub id: Uuid,
    /// The job it belongs to.
    pub job_id: Uuid,
    /// Its position in the job, from 0.
    pub seq: i32,
    /// The activity's name.
    pub name: String,
    /// Its providers in failover order (at least one); the first is the primary.
    pub providers: Vec<String>,
    /// Its timeouts, failover mode and retry policy.
    pub options: ActivityOptions,
    /// The task queue its attempts are dispatched on.
    pub task_queue: String,
    /// The input every attempt runs with.
    pub input: Value,
}

/// An attempt to insert (status `scheduled`).
#[derive(Debug, Clone)]
pub struct NewAttempt {
    /// The owner of its job.
    pub owner_id: String,
    /// The new attempt's id.
    pub id: Uuid,
    /// The activity it tries.
    pub activity_id: Uuid,
    /// The job of that activity.
    pub job_id: Uuid,
    /// Its number within the activity; taken numbers are refused.
    pub number: i32,
    /// The activity's name.
    pub activity: String,
    /// The task queue it is dispatched on.
    pub task_queue: String,
    /// The provider it runs at.
    pub provider: String,
    /// Not handed out before now + this delay (retry backoff).
    pub delay_ms: u64,
    /// Expires when nobody started it within this long after it became available.
    pub schedule_to_start_timeout_s: Option<u64>,
}

/// A new activity job with everything created with it: activity 0, its attempt 1 and
/// the job's first events.
#[derive(Debug, Clone)]
pub struct NewActivityJob {
    /// The job.
    pub job: NewJob,
    /// Its activity 0.
    pub activity: NewActivity,
    /// That activity's attempt 1.
    pub attempt: NewAttempt,
    /// The job's first events.
    pub events: Vec<NewEvent>,
}

/// A valid result of an activity job's attempt, for the CAS that lets the first one win.
#[derive(Debug, Clone)]
pub struct WinningResult {
    /// The owner of the job.
    pub owner_id: String,
    /// The activity job.
    pub job_id: Uuid,
    /// The job's version when its lock was taken; the job CAS compares it.
    pub job_version: i64,
    /// The job's activity 0.
    pub activity_id: Uuid,
    /// The activity version the attempt read when it was handed out; the activity CAS
    /// compares it.
    pub read_version: i64,
    /// The attempt whose result it is.
    pub attempt_id: Uuid,
    /// The result.
    pub result: Value,
}

impl WinningResult {
    /// The CAS of `attempt`'s `result`, for `job` as locked.
    pub fn of(job: &JobRow, attempt: &AttemptRow, result: &Value) -> Self {
        WinningResult {
            owner_id: job.owner_id.clone(),
            job_id: job.id,
            job_version: job.version,
            activity_id: attempt.activity_id,
            read_version: attempt.read_version.unwrap_or(-1),
            attempt_id: attempt.id,
            result: result.clone(),
        }
    }
}

/// An event to append to a job's history.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The owner of the job.
    pub owner_id: String,
    /// The job whose history it joins.
    pub job_id: Uuid,
    /// The event type, one of [`crate::model::event`].
    pub kind: &'static str,
    /// The attempt it concerns, if any.
    pub attempt_id: Option<Uuid>,
    /// Who did it: `engine`, `reaper`, `client:…`, `worker:…` or `operator:…`.
    pub actor: String,
    /// What else is known about it.
    pub data: Value,
}

/// A submission whose key a committed job may hold, to be judged as a replay of it.
#[derive(Debug, Clone)]
pub struct NewReplay {
    /// The owner submitting.
    pub owner_id: String,
    /// The key submitted.
    pub idempotency_key: String,
    /// The request's fingerprint: only a job with the same one is replayed.
    pub fingerprint: String,
    /// Who submits (the actor of its `job_replayed`).
    pub actor: String,
    /// The data of its `job_replayed`.
    pub data: Value,
}

/// A job holding a key that replays asked for, as [`Store::replay_now`] returns it.
#[derive(Debug, Clone)]
pub struct ReplayedJob {
    /// The job (its fingerprint judges each replay).
    pub job: JobRow,
    /// The job with its activities and attempts, read in or after the replays' statement;
    /// `None` when it could not be read with them.
    pub view: Option<JobView>,
}

/// What a worker asks for when it polls.
#[derive(Debug, Clone)]
pub struct ClaimFilter {
    /// Whose attempts the worker serves.
    pub scope: Scope,
    /// Only attempts dispatched on this task queue.
    pub task_queue: String,
    /// The (activity, provider) pairs the worker has registered.
    pub providers: Vec<(String, String)>,
    /// The polling worker, recorded on each attempt it is handed.
    pub worker_id: String,
    /// At most this many attempts are handed out.
    pub limit: i64,
}

/// An attempt just handed out, with what its task needs from the activity.
#[derive(Debug, Clone)]
pub struct ClaimedAttempt {
    /// The attempt, now `started` with its lease token.
    pub attempt: AttemptRow,
    /// Its activity's position in the job.
    pub activity_seq: i32,
    /// The activity's input.
    pub input: Value,
    /// The activity's options, for the task's timeouts.
    pub options: ActivityOptions,
}

/// An attempt whose job a transaction holds, as [`StoreTx::lock_jobs_of_attempts`]
/// returns it.
#[derive(Debug, Clone)]
pub struct LockedAttempt {
    /// The job, locked.
    pub job: JobRow,
    /// The attempt, read once its job was locked.
    pub attempt: AttemptRow,
    /// The current output contract of the attempt's activity for the job's owner.
    pub contract: Option<Contract>,
}

/// One heartbeat's claim to extend a lease (see [`Store::extend_leases`]).
#[derive(Debug, Clone)]
pub struct LeaseRenewal {
    /// Only an attempt of this owner is extended; `None`: of any owner.
    pub owner: Option<String>,
    /// The attempt.
    pub attempt_id: Uuid,
    /// The lease token the heartbeat presents.
    pub token: Uuid,
    /// Progress details to keep, if any (otherwise the last ones stay).
    pub details: Option<Value>,
}

/// Where an attempt lives.
#[derive(Debug, Clone)]
pub struct AttemptLocation {
    /// The owner of the attempt's job.
    pub owner_id: String,
    /// The job the attempt belongs to.
    pub job_id: Uuid,
}

/// Filters for listing jobs, newest first.
#[derive(Debug, Clone, Default)]
pub struct JobQuery {
    /// Only this owner's jobs; `None` for every owner.
    pub owner: Option<String>,
    /// Only jobs in this status.
    pub status: Option<JobStatus>,
    /// Only workflow jobs running this workflow.
    pub workflow: Option<String>,
    /// Only activity jobs running this activity.
    pub activity: Option<String>,
    /// Only jobs older than this id (the cursor).
    pub before_id: Option<Uuid>,
    /// Only jobs created at or after this moment.
    pub created_after: Option<DateTime<Utc>>,
    /// Only jobs created before this moment.
    pub created_before: Option<DateTime<Utc>>,
    /// At most this many jobs.
    pub limit: i64,
}

/// A registered output contract with the moment it was (last) registered.
#[derive(Debug, Clone)]
pub struct ContractRecord {
    /// The contract.
    pub contract: Contract,
    /// When it was registered; the latest of an (owner, activity) is the current one.
    pub registered_at: DateTime<Utc>,
}

/// Filters for listing stuck attempts across owners, oldest first.
#[derive(Debug, Clone)]
pub struct StuckQuery {
    /// Only attempts in these statuses.
    pub statuses: Vec<AttemptStatus>,
    /// Only attempts in their status for at least this long.
    pub older_than_s: u64,
    /// At most this many attempts.
    pub limit: i64,
}

/// The answer of the heartbeat fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseExtension {
    /// The attempt is `started` and held by this token: its lease now runs longer.
    Extended,
    /// Anything else; the domain looks closer under the job lock.
    NotExtended,
}

/// A durable timer of a workflow job.
#[derive(Debug, Clone)]
pub struct TimerRow {
    /// Its position in the workflow's call order.
    pub seq: i32,
    /// When it fires.
    pub fire_at: DateTime<Utc>,
    /// When it fired.
    pub fired_at: Option<DateTime<Utc>>,
}

/// What a worker asks for when it polls for workflow tasks.
#[derive(Debug, Clone)]
pub struct WorkflowClaimFilter {
    /// Whose jobs the worker serves.
    pub scope: Scope,
    /// The task queue it polls.
    pub task_queue: String,
    /// The workflows it has registered.
    pub workflows: Vec<String>,
    /// The worker's name.
    pub worker_id: String,
    /// At most this many tasks.
    pub limit: i64,
    /// How long a workflow task's lease lasts.
    pub lease_ms: u64,
}

/// A stored API token: only its hash, never the token.
#[derive(Debug, Clone)]
pub struct TokenRow {
    /// The owner the token acts for.
    pub owner_id: String,
    /// Names the token.
    pub id: Uuid,
    /// What the token may do.
    pub role: Role,
    /// SHA-256 of the token, hex.
    pub token_hash: String,
}

/// A schedule row: what the API shows, plus the version every update compares.
#[derive(Debug, Clone)]
pub struct ScheduleRow {
    /// The schedule as the API shows it.
    pub view: ScheduleView,
    /// Moves with every change; [`StoreTx::update_schedule`] compares it.
    pub version: i64,
}

impl ScheduleRow {
    /// The owner the row belongs to.
    pub fn owner(&self) -> &str {
        &self.view.owner
    }
    /// The schedule's name.
    pub fn name(&self) -> &str {
        &self.view.name
    }
}

/// An event to append to a schedule's history.
#[derive(Debug, Clone)]
pub struct NewScheduleEvent {
    /// The owner of the schedule.
    pub owner_id: String,
    /// The schedule whose history it joins.
    pub schedule_name: String,
    /// When it happened (the transaction's clock, [`StoreTx::now`], like the ticks).
    pub at: DateTime<Utc>,
    /// The event type (see [`ScheduleEvent::kind`]).
    pub kind: &'static str,
    /// The tick it concerns.
    pub tick_at: Option<DateTime<Utc>>,
    /// The job it concerns.
    pub job_id: Option<Uuid>,
    /// What else is known about it.
    pub data: Value,
}

/// The columns of a schedule kept as text, parsed back into their types.
/// What one retention batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrunedJobs {
    /// Jobs deleted.
    pub deleted: u64,
    /// Jobs chosen (and locked) for deletion; fewer than the batch's limit means none is
    /// left above `after` for now.
    pub chosen: u64,
    /// The highest id chosen: where the next batch of the same pass starts.
    pub last: Option<Uuid>,
}

/// A certification run to record; the store stamps it ([`Store::insert_certification`]).
#[derive(Debug, Clone)]
pub struct NewCertification {
    /// The owner it belongs to (`*` for every owner).
    pub owner: String,
    /// The certification's id.
    pub id: Uuid,
    /// The activity it certifies the provider for.
    pub activity: String,
    /// The provider that ran the contract tests.
    pub provider: String,
    /// The output contract it was tested against.
    pub contract_hash: String,
    /// Whether the provider passed.
    pub passed: bool,
    /// The test run's report.
    pub report: Value,
}

/// When the earliest unpaused schedule is due, with the database's clock read by the
/// same statement ([`Store::next_schedule_fire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextScheduleFire {
    /// The earliest `next_fire_at` of an unpaused schedule of any owner; `None` when none.
    pub at: Option<DateTime<Utc>>,
    /// The database's clock when it was read.
    pub now: DateTime<Utc>,
}

pub(crate) fn overlap_of(text: &str) -> StoreResult<Overlap> {
    Overlap::parse(text).ok_or_else(|| StoreError::Corrupt(format!("unknown overlap `{text}`")))
}

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

    /// Judges replays in a transaction of their own, committed when this returns: locks
    /// the jobs holding the replays' keys (in (owner, id) order, so two calls never wait on
    /// each other in a cycle) and appends one `job_replayed`, in the order given, for each
    /// replay whose fingerprint is that of the job holding its key. Returns those jobs,
    /// each with its view (activities and attempts) when it could be read with it; keys no
    /// job holds are left out. On an error nothing is written.
    async fn replay_now(&self, replays: &[NewReplay]) -> StoreResult<Vec<ReplayedJob>> {
        let mut keys: Vec<(String, String)> = replays
            .iter()
            .map(|r| (r.owner_id.clone(), r.idempotency_key.clone()))
            .collect();
        keys.sort();
        keys.dedup();
        let mut tx = self.begin().await?;
        let jobs = tx.lock_jobs_by_keys(&keys).await?;
        let events: Vec<NewEvent> = replays
            .iter()
            .filter_map(|r| {
                let job = jobs
                    .iter()
                    .find(|j| j.owner_id == r.owner_id && j.idempotency_key == r.idempotency_key)?;
                (job.fingerprint == r.fingerprint).then(|| NewEvent {
                    owner_id: job.owner_id.clone(),
                    job_id: job.id,
                    kind: crate::model::event::JOB_REPLAYED,
                    attempt_id: None,
                    actor: r.actor.clone(),
                    data: r.data.clone(),
                })
            })
            .collect();
        tx.append_events(&events).await?;
        tx.commit().await?;
        // The replays are written: a job whose view cannot be read now is returned
        // without one (its callers read it alone).
        let views = match self.views_of(jobs.clone()).await {
            Ok(views) => views,
            Err(e) => {
                tracing::debug!(error = %e, "reading replayed jobs failed");
                Vec::new()
            }
        };
        Ok(jobs
            .into_iter()
            .map(|job| {
                let view = views
                    .iter()
                    .find(|v| v.owner == job.owner_id && v.id == job.id)
                    .cloned();
                ReplayedJob { job, view }
            })
            .collect())
    }

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

    /// A job visible in `scope`, with its activities and attempts.
    async fn job_view(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<JobView>>;

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
    /// ([`StoreTx::notify_work`]). A hint only: pollers re-check on a timer too.
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
    async fn commit_job_result(
        &mut self,
        owner: &str,
        job_id: Uuid,
        version: i64,
        attempt_id: Option<Uuid>,
        result: &Value,
    ) -> StoreResult<bool>;

    /// Closes an open job (`failed` or `cancelled`) if `version` is current.
    async fn close_job(
        &mut self,
        owner: &str,
        job_id: Uuid,
        version: i64,
        status: JobStatus,
        error: Option<&ErrorInfo>,
    ) -> StoreResult<bool>;

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
        owner: &str,
        activity_id: Uuid,
        read_version: i64,
        attempt_id: Uuid,
        result: &Value,
    ) -> StoreResult<bool>;

    /// The commit of a winning result of an activity job's attempt, in one step: the
    /// activity CAS (invariant 4) and, only when it takes the slot, the attempt →
    /// `succeeded` (from one of `from`, outcome `won`) and the job CAS (at `job_version`).
    /// Returns whether the activity's and the job's slots were taken.
    #[allow(clippy::too_many_arguments)]
    async fn commit_activity_job_result(
        &mut self,
        owner: &str,
        job_id: Uuid,
        job_version: i64,
        activity_id: Uuid,
        read_version: i64,
        attempt_id: Uuid,
        from: &[AttemptStatus],
        result: &Value,
    ) -> StoreResult<(bool, bool)> {
        if !self
            .commit_activity_result(owner, activity_id, read_version, attempt_id, result)
            .await?
        {
            return Ok((false, false));
        }
        self.finish_attempt(
            owner,
            attempt_id,
            from,
            AttemptStatus::Succeeded,
            None,
            Some(CompletionOutcome::Won),
        )
        .await?;
        let job_won = self
            .commit_job_result(owner, job_id, job_version, Some(attempt_id), result)
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
            taken.push(
                self.commit_activity_job_result(
                    &w.owner_id,
                    w.job_id,
                    w.job_version,
                    w.activity_id,
                    w.read_version,
                    w.attempt_id,
                    from,
                    &w.result,
                )
                .await?,
            );
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
    async fn finish_attempt(
        &mut self,
        owner: &str,
        attempt_id: Uuid,
        from: &[AttemptStatus],
        to: AttemptStatus,
        error: Option<&ErrorInfo>,
        outcome: Option<CompletionOutcome>,
    ) -> StoreResult<bool>;

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
        owner: &str,
        activity_id: Uuid,
        except: Option<Uuid>,
        cancelled_by: &str,
        reason: &str,
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
    async fn claim_workflow_tasks(
        &mut self,
        filter: &WorkflowClaimFilter,
    ) -> StoreResult<Vec<JobRow>>;

    /// Workflow-task CAS: ends the task held by `token` if the job's version is still
    /// `read_version` (moving it); `false` for a stale or duplicated task.
    async fn complete_workflow_task(
        &mut self,
        owner: &str,
        job_id: Uuid,
        token: Uuid,
        read_version: i64,
    ) -> StoreResult<bool>;

    /// Marks a workflow job ready for its next task and wakes pollers.
    async fn mark_workflow_ready(&mut self, owner: &str, job_id: Uuid) -> StoreResult<()>;

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

    /// A job's timers by position.
    async fn timers_of_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Vec<TimerRow>>;

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
