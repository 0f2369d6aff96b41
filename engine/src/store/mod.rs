//! Storage: the [`Store`] trait is the only door to the database and the only place with
//! SQL. The domain ([`crate::Engine`]) composes the fine-grained, guarded statements of a
//! [`StoreTx`] into one transaction per state change.
//!
//! Locking discipline, which every implementation keeps: a transaction that changes a
//! job's activities or attempts first locks the job row ([`StoreTx::lock_job`]), or takes
//! job and attempt together without waiting (`SKIP LOCKED` in the batch operations). With
//! one lock order everywhere, concurrent engines cannot deadlock each other.

pub mod postgres;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::error::StoreError;
use crate::model::{
    ActivityOptions, ActivityStatus, AttemptStatus, Certification, CompletionOutcome, Contract,
    ErrorInfo, JobEvent, JobKind, JobStatus, JobView, Scope, StuckAttempt,
};

/// A result of the storage layer.
pub type StoreResult<T> = Result<T, StoreError>;

/// A job row.
#[derive(Debug, Clone)]
pub struct JobRow {
    pub owner_id: String,
    pub id: Uuid,
    pub idempotency_key: String,
    pub fingerprint: String,
    pub kind: JobKind,
    pub workflow: Option<String>,
    pub activity: Option<String>,
    pub task_queue: String,
    pub input: Value,
    pub status: JobStatus,
    pub version: i64,
    pub result: Option<Value>,
    pub error: Option<ErrorInfo>,
    pub completed_by: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// An activity row.
#[derive(Debug, Clone)]
pub struct ActivityRow {
    pub owner_id: String,
    pub id: Uuid,
    pub job_id: Uuid,
    pub seq: i32,
    pub name: String,
    pub providers: Vec<String>,
    pub options: ActivityOptions,
    pub task_queue: String,
    pub input: Value,
    pub status: ActivityStatus,
    pub version: i64,
    pub completed_by: Option<Uuid>,
    pub result: Option<Value>,
    pub error: Option<ErrorInfo>,
}

/// An attempt row.
#[derive(Debug, Clone)]
pub struct AttemptRow {
    pub owner_id: String,
    pub id: Uuid,
    pub activity_id: Uuid,
    pub job_id: Uuid,
    pub number: i32,
    pub activity: String,
    pub task_queue: String,
    pub provider: String,
    pub status: AttemptStatus,
    pub worker_id: Option<String>,
    pub lease_token: Option<Uuid>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub read_version: Option<i64>,
    pub heartbeat_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub unknown_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<ErrorInfo>,
    pub completion_outcome: Option<CompletionOutcome>,
    pub cancelled_by: Option<String>,
    pub cancel_reason: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A job to insert.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub owner_id: String,
    pub id: Uuid,
    pub idempotency_key: String,
    pub fingerprint: String,
    pub kind: JobKind,
    pub workflow: Option<String>,
    pub activity: Option<String>,
    pub task_queue: String,
    pub input: Value,
}

/// An activity to insert (status `scheduled`, version 0).
#[derive(Debug, Clone)]
pub struct NewActivity {
    pub owner_id: String,
    pub id: Uuid,
    pub job_id: Uuid,
    pub seq: i32,
    pub name: String,
    pub providers: Vec<String>,
    pub options: ActivityOptions,
    pub task_queue: String,
    pub input: Value,
}

/// An attempt to insert (status `scheduled`).
#[derive(Debug, Clone)]
pub struct NewAttempt {
    pub owner_id: String,
    pub id: Uuid,
    pub activity_id: Uuid,
    pub job_id: Uuid,
    pub number: i32,
    pub activity: String,
    pub task_queue: String,
    pub provider: String,
    /// Not handed out before now + this delay (retry backoff).
    pub delay_ms: u64,
    /// Expires when nobody started it within this long after it became available.
    pub schedule_to_start_timeout_s: Option<u64>,
}

/// An event to append to a job's history.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub owner_id: String,
    pub job_id: Uuid,
    pub kind: &'static str,
    pub attempt_id: Option<Uuid>,
    pub actor: String,
    pub data: Value,
}

/// What a worker asks for when it polls.
#[derive(Debug, Clone)]
pub struct ClaimFilter {
    /// Whose attempts the worker serves.
    pub scope: Scope,
    pub task_queue: String,
    /// The (activity, provider) pairs the worker has registered.
    pub providers: Vec<(String, String)>,
    pub worker_id: String,
    pub limit: i64,
}

/// An attempt just handed out, with what its task needs from the activity.
#[derive(Debug, Clone)]
pub struct ClaimedAttempt {
    pub attempt: AttemptRow,
    pub activity_seq: i32,
    pub input: Value,
    pub options: ActivityOptions,
}

/// Where an attempt lives.
#[derive(Debug, Clone)]
pub struct AttemptLocation {
    pub owner_id: String,
    pub job_id: Uuid,
}

/// Filters for listing jobs, newest first.
#[derive(Debug, Clone, Default)]
pub struct JobQuery {
    pub owner: Option<String>,
    pub status: Option<JobStatus>,
    pub workflow: Option<String>,
    pub activity: Option<String>,
    /// Only jobs older than this id (the cursor).
    pub before_id: Option<Uuid>,
    pub limit: i64,
}

/// Filters for listing stuck attempts across owners, oldest first.
#[derive(Debug, Clone)]
pub struct StuckQuery {
    pub statuses: Vec<AttemptStatus>,
    pub older_than_s: u64,
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

/// The storage backend. Implementations: [`postgres::PgStore`].
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Starts a transaction.
    async fn begin(&self) -> StoreResult<Box<dyn StoreTx>>;

    /// Applies pending migrations.
    async fn migrate(&self) -> StoreResult<()>;

    /// Answers when the database answers.
    async fn ping(&self) -> StoreResult<()>;

    /// Finds the owner and job of an attempt visible in `scope`.
    async fn locate_attempt(&self, scope: &Scope, attempt_id: Uuid)
        -> StoreResult<Option<AttemptLocation>>;

    /// The owner of a job visible in `scope`.
    async fn job_owner(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<String>>;

    /// A job visible in `scope`, with its activities and attempts.
    async fn job_view(&self, scope: &Scope, job_id: Uuid) -> StoreResult<Option<JobView>>;

    /// A job's events in order, or `None` when the job is not visible in `scope`.
    async fn job_events(&self, scope: &Scope, job_id: Uuid)
        -> StoreResult<Option<Vec<JobEvent>>>;

    /// Jobs matching the query, newest first, with their activities and attempts.
    async fn list_jobs(&self, query: &JobQuery) -> StoreResult<Vec<JobView>>;

    /// Attempts in the given statuses for longer than the given age, oldest first.
    async fn stuck_attempts(&self, query: &StuckQuery) -> StoreResult<Vec<StuckAttempt>>;

    /// The heartbeat fast path: extends the lease of a `started` attempt held by `token`
    /// in one statement.
    async fn extend_lease(
        &self,
        location: &AttemptLocation,
        attempt_id: Uuid,
        token: Uuid,
        details: Option<&Value>,
    ) -> StoreResult<LeaseExtension>;

    /// Registers (or confirms, making it current again) an output contract.
    async fn register_contract(&self, contract: &Contract) -> StoreResult<()>;

    /// Records a certification run.
    async fn insert_certification(&self, certification: &Certification) -> StoreResult<()>;
}

/// One transaction. Dropping it without [`StoreTx::commit`] rolls it back.
#[async_trait]
pub trait StoreTx: Send {
    /// Commits every change made in this transaction at once.
    async fn commit(self: Box<Self>) -> StoreResult<()>;

    /// Inserts a job unless `(owner, idempotency key)` exists (invariant 1). Returns
    /// whether this call inserted it.
    async fn insert_job(&mut self, job: &NewJob) -> StoreResult<bool>;

    /// The job holding an idempotency key.
    async fn job_by_idempotency_key(&mut self, owner: &str, key: &str)
        -> StoreResult<Option<JobRow>>;

    /// Locks a job row for this transaction and returns it.
    async fn lock_job(&mut self, owner: &str, job_id: Uuid) -> StoreResult<Option<JobRow>>;

    /// Marks a queued job running.
    async fn mark_job_running(&mut self, owner: &str, job_id: Uuid) -> StoreResult<bool>;

    /// Job CAS: takes the job's result slot if `version` is current and nobody took it.
    async fn commit_job_result(
        &mut self,
        owner: &str,
        job_id: Uuid,
        version: i64,
        attempt_id: Uuid,
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
    async fn activity(&mut self, owner: &str, activity_id: Uuid)
        -> StoreResult<Option<ActivityRow>>;

    /// An activity by its position in the job.
    async fn activity_by_seq(&mut self, owner: &str, job_id: Uuid, seq: i32)
        -> StoreResult<Option<ActivityRow>>;

    /// A job's activities in order.
    async fn activities_of_job(&mut self, owner: &str, job_id: Uuid)
        -> StoreResult<Vec<ActivityRow>>;

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
    async fn attempts_of_activity(&mut self, owner: &str, activity_id: Uuid)
        -> StoreResult<Vec<AttemptRow>>;

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

    /// A live attempt → `cancelled`, with who and why.
    async fn cancel_attempt(
        &mut self,
        owner: &str,
        attempt_id: Uuid,
        cancelled_by: &str,
        reason: &str,
    ) -> StoreResult<bool>;

    /// Appends events to job histories, in order.
    async fn append_events(&mut self, events: &[NewEvent]) -> StoreResult<()>;

    /// The current output contract of an activity for an owner (its own, else `*`'s).
    async fn current_contract(&mut self, owner: &str, activity: &str)
        -> StoreResult<Option<Contract>>;

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
    /// `started` with a fresh lease token, once. Locks their jobs without waiting.
    async fn claim_attempts(&mut self, filter: &ClaimFilter) -> StoreResult<Vec<ClaimedAttempt>>;

    /// Locks (without waiting) up to `limit` started attempts whose lease has expired,
    /// with their jobs.
    async fn lock_expired_leases(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>>;

    /// Locks (without waiting) up to `limit` scheduled attempts past their
    /// schedule-to-start deadline, with their jobs.
    async fn lock_overdue_scheduled(&mut self, limit: i64) -> StoreResult<Vec<(String, Uuid)>>;
}
