//! What the traits' methods take: the rows to insert, the filters of the reads, and one
//! struct per guarded write of five or more fields.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::{AttemptRow, JobRow};
use crate::model::{
    ActivityOptions, AttemptStatus, CompletionOutcome, ErrorInfo, JobKind, JobStatus, Scope,
};

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
    /// The workflow job starting it as its child; `None` for a submitted job.
    pub parent_job_id: Option<Uuid>,
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

/// One heartbeat's claim to extend a lease (see [`Store::extend_leases`](super::Store::extend_leases)).
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

/// An event to append to a schedule's history.
#[derive(Debug, Clone)]
pub struct NewScheduleEvent {
    /// The owner of the schedule.
    pub owner_id: String,
    /// The schedule whose history it joins.
    pub schedule_name: String,
    /// When it happened (the transaction's clock, [`StoreTx::now`](super::StoreTx::now), like the ticks).
    pub at: DateTime<Utc>,
    /// The event type (see [`ScheduleEvent::kind`](crate::model::ScheduleEvent::kind)).
    pub kind: &'static str,
    /// The tick it concerns.
    pub tick_at: Option<DateTime<Utc>>,
    /// The job it concerns.
    pub job_id: Option<Uuid>,
    /// What else is known about it.
    pub data: Value,
}

/// A certification run to record; the store stamps it ([`Store::insert_certification`](super::Store::insert_certification)).
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

/// A job CAS ([`StoreTx::commit_job_result`](super::StoreTx::commit_job_result)): takes the job's result slot if `version`
/// is current and nobody took it.
#[derive(Debug, Clone, Copy)]
pub struct JobResultCommit<'a> {
    /// The owner of the job.
    pub owner: &'a str,
    /// The job.
    pub job_id: Uuid,
    /// The job's version when its lock was taken; the CAS compares it.
    pub version: i64,
    /// The winning attempt of an activity job; `None` for a workflow job.
    pub attempt_id: Option<Uuid>,
    /// The result.
    pub result: &'a Value,
}

/// An open job to close ([`StoreTx::close_job`](super::StoreTx::close_job)) if `version` is current.
#[derive(Debug, Clone, Copy)]
pub struct JobClosing<'a> {
    /// The owner of the job.
    pub owner: &'a str,
    /// The job.
    pub job_id: Uuid,
    /// The job's version when its lock was taken; the close compares it.
    pub version: i64,
    /// `failed` or `cancelled`.
    pub status: JobStatus,
    /// Why it closes.
    pub error: Option<&'a ErrorInfo>,
}

/// An activity CAS ([`StoreTx::commit_activity_result`](super::StoreTx::commit_activity_result), invariant 4): takes the result
/// slot for `attempt_id` if the activity's version is still `read_version`.
#[derive(Debug, Clone, Copy)]
pub struct ActivityResultCommit<'a> {
    /// The owner of the activity's job.
    pub owner: &'a str,
    /// The activity.
    pub activity_id: Uuid,
    /// The activity version the attempt read when it was handed out.
    pub read_version: i64,
    /// The attempt whose result it is.
    pub attempt_id: Uuid,
    /// The result.
    pub result: &'a Value,
}

/// The end of an attempt ([`StoreTx::finish_attempt`](super::StoreTx::finish_attempt)) that is in one of `from`.
#[derive(Debug, Clone, Copy)]
pub struct AttemptEnding<'a> {
    /// The owner of the attempt's job.
    pub owner: &'a str,
    /// The attempt.
    pub attempt_id: Uuid,
    /// The statuses it may end from; in any other, nothing changes.
    pub from: &'a [AttemptStatus],
    /// The status it ends in.
    pub to: AttemptStatus,
    /// The error it ends with, if any.
    pub error: Option<&'a ErrorInfo>,
    /// What its completion answered, if a completion ended it.
    pub outcome: Option<CompletionOutcome>,
}

/// The cancellation of an activity's live attempts ([`StoreTx::cancel_live_attempts`](super::StoreTx::cancel_live_attempts)).
#[derive(Debug, Clone, Copy)]
pub struct LiveAttemptsCancellation<'a> {
    /// The owner of the activity's job.
    pub owner: &'a str,
    /// The activity.
    pub activity_id: Uuid,
    /// The one attempt left alone, if any.
    pub except: Option<Uuid>,
    /// Who cancels them.
    pub cancelled_by: &'a str,
    /// Why.
    pub reason: &'a str,
}
