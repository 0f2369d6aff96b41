//! The rows both stores decode, and the one view assembly they share: a job's view is
//! built from its job, activity and attempt rows the same way whichever store read them.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::StoreResult;
use crate::error::StoreError;
use crate::model::{
    ActivityOptions, ActivityStatus, ActivityView, AttemptStatus, AttemptView, CompletionOutcome,
    Contract, ErrorInfo, JobKind, JobStatus, JobView, Overlap, Role, ScheduleView, SignalView,
};

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
    /// Workflow jobs: the compensation bound the workflow declared, in milliseconds (1 ms
    /// to 24 h); `None` when it declared none, and a cancel closes the job at once.
    pub wf_compensation_ms: Option<i64>,
    /// Workflow jobs: when the owner asked to cancel a job that declared a compensation
    /// bound; the job stays open while its workflow compensates.
    pub wf_cancel_requested_at: Option<DateTime<Utc>>,
    /// Workflow jobs compensating now: when the job ends `cancelled` regardless. Cleared
    /// when the job closes.
    pub wf_cancel_deadline: Option<DateTime<Utc>>,
    /// Workflow jobs: the cancel's number in the job's arrival order.
    pub wf_cancel_arrival: Option<i64>,
    /// The workflow job that started this one as its child; `None` for a top-level job.
    /// Set at the insert, never changed.
    pub parent_job_id: Option<Uuid>,
}

/// A workflow job's current run, and which part of its history a task of it carries.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowRun {
    /// The run's number: 1, then one more per continue-as-new.
    pub run: i32,
    /// The run's first position; its journal is the positions from here on.
    pub first_seq: i32,
    /// The input the workflow continued as new with; `None` for the first run (the job's
    /// input).
    pub input: Option<Value>,
    /// When the run started; `None` for the first run (the job's creation).
    pub started_at: Option<DateTime<Utc>>,
    /// Sticky execution: set when the task goes to the worker that keeps the job's
    /// replayed state at the job's current version, with the place in the arrival order
    /// that state has seen; the task then carries only what arrived after it.
    pub since_arrival: Option<i64>,
}

/// A workflow task handed out by [`StoreTx::claim_workflow_tasks`](super::StoreTx::claim_workflow_tasks):
/// the job, leased, and its run.
#[derive(Debug, Clone)]
pub struct ClaimedWorkflowTask {
    /// The job, with the task's lease.
    pub job: JobRow,
    /// Its current run.
    pub run: WorkflowRun,
}

/// A child job of a workflow, as [`StoreTx::children_of_job`](super::StoreTx::children_of_job)
/// returns it.
#[derive(Debug, Clone)]
pub struct ChildRow {
    /// The child job.
    pub job: JobRow,
    /// Its outcome's number in the parent's arrival order; `None` until it reached a
    /// final status while its parent was open.
    pub arrival: Option<i64>,
    /// When the child was resumed after its parent saw it fail: the error the parent saw
    /// (`None` otherwise). The parent's journal keeps showing that failure.
    pub seen_error: Option<ErrorInfo>,
    /// When the child was resumed after its parent saw it fail: when it had failed.
    pub seen_finished_at: Option<DateTime<Utc>>,
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

/// A job holding a key that replays asked for, as [`Store::replay_now`](super::Store::replay_now) returns it.
#[derive(Debug, Clone)]
pub struct ReplayedJob {
    /// The job (its fingerprint judges each replay).
    pub job: JobRow,
    /// The job with its activities and attempts, read in or after the replays' statement;
    /// `None` when it could not be read with them.
    pub view: Option<JobView>,
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

/// An attempt whose job a transaction holds, as [`StoreTx::lock_jobs_of_attempts`](super::StoreTx::lock_jobs_of_attempts)
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

/// Where an attempt lives.
#[derive(Debug, Clone)]
pub struct AttemptLocation {
    /// The owner of the attempt's job.
    pub owner_id: String,
    /// The job the attempt belongs to.
    pub job_id: Uuid,
}

/// A registered output contract with the moment it was (last) registered.
#[derive(Debug, Clone)]
pub struct ContractRecord {
    /// The contract.
    pub contract: Contract,
    /// When it was registered; the latest of an (owner, activity) is the current one.
    pub registered_at: DateTime<Utc>,
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
    /// Its firing's number in the job's arrival order; `None` until it fired (and for
    /// timers fired before arrivals were numbered).
    pub arrival: Option<i64>,
}

/// The outcome that woke a workflow job, numbered in the job's arrival order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The activity with this id reached a final status.
    Activity(Uuid),
    /// The timer at this position fired.
    Timer(i32),
    /// The owner asked to cancel the job (it declared a compensation bound): the number
    /// goes to `jobs.wf_cancel_arrival`.
    Cancel,
    /// The child job with this id reached a final status (its number is recorded on the
    /// child's row, in the parent's order).
    Child(Uuid),
    /// The signal with this seq was recorded.
    Signal(i64),
}

/// A signal recorded for a workflow job.
#[derive(Debug, Clone)]
pub struct SignalRow {
    /// Its place among the job's signals (1, 2, …).
    pub seq: i64,
    /// Its id (UUIDv7).
    pub id: Uuid,
    /// Its name.
    pub name: String,
    /// The key it was sent under; one signal per (job, key).
    pub idempotency_key: String,
    /// Tells a replay from a reused key.
    pub fingerprint: String,
    /// What was sent with it.
    pub payload: Value,
    /// When it was recorded.
    pub received_at: DateTime<Utc>,
    /// Its number in the job's arrival order.
    pub arrival: Option<i64>,
    /// When the workflow took it.
    pub consumed_at: Option<DateTime<Utc>>,
    /// The workflow position of the wait that took it.
    pub consumed_by: Option<i32>,
}

impl SignalRow {
    /// The signal as the API shows it.
    pub fn view(&self, job_id: Uuid) -> SignalView {
        SignalView {
            signal_id: self.id,
            job_id,
            name: self.name.clone(),
            seq: self.seq,
            payload: self.payload.clone(),
            received_at: self.received_at,
            consumed: self.consumed_by.is_some(),
            consumed_at: self.consumed_at,
        }
    }
}

/// A signal to record ([`super::StoreTx::insert_signal`]).
#[derive(Debug, Clone)]
pub struct NewSignal<'a> {
    /// The job's owner.
    pub owner: &'a str,
    /// The workflow job.
    pub job_id: Uuid,
    /// The signal's id.
    pub id: Uuid,
    /// Its name.
    pub name: &'a str,
    /// The key it is sent under.
    pub idempotency_key: &'a str,
    /// The fingerprint of its name and payload.
    pub fingerprint: &'a str,
    /// What is sent with it.
    pub payload: &'a Value,
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
    /// Moves with every change; [`StoreTx::update_schedule`](super::StoreTx::update_schedule) compares it.
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

/// When the earliest unpaused schedule is due, with the database's clock read by the
/// same statement ([`Store::next_schedule_fire`](super::Store::next_schedule_fire)).
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

impl AttemptRow {
    /// The attempt as the API shows it (docs/api.md).
    pub fn view(&self) -> AttemptView {
        AttemptView {
            id: self.id,
            number: self.number,
            provider: self.provider.clone(),
            status: self.status,
            created_at: self.created_at,
            started_at: self.started_at,
            heartbeat_at: self.heartbeat_at,
            lease_expires_at: self.lease_expires_at,
            finished_at: self.finished_at,
            error: self.error.clone(),
            cancelled_by: self.cancelled_by.clone(),
            cancel_reason: self.cancel_reason.clone(),
        }
    }
}

/// A job's view, with those of `activities` and `attempts` that are its own.
pub(crate) fn view_of(job: JobRow, activities: &[ActivityRow], attempts: &[AttemptRow]) -> JobView {
    let activities = activities
        .iter()
        .filter(|a| a.job_id == job.id && a.owner_id == job.owner_id)
        .map(|a| ActivityView {
            seq: a.seq,
            name: a.name.clone(),
            providers: a.providers.clone(),
            status: a.status,
            version: a.version,
            completed_by: a.completed_by,
            result: a.result.clone(),
            error: a.error.clone(),
            attempts: attempts
                .iter()
                .filter(|t| t.activity_id == a.id && t.owner_id == a.owner_id)
                .map(AttemptRow::view)
                .collect(),
        })
        .collect();
    JobView {
        id: job.id,
        owner: job.owner_id,
        idempotency_key: job.idempotency_key,
        kind: job.kind,
        workflow: job.workflow,
        activity: job.activity,
        task_queue: job.task_queue,
        input: job.input,
        status: job.status,
        version: job.version,
        result: job.result,
        error: job.error,
        created_at: job.created_at,
        updated_at: job.updated_at,
        finished_at: job.finished_at,
        parent_job_id: job.parent_job_id,
        // Filled by the view assembly, which reads them (`children_of_jobs`).
        children: Vec::new(),
        cancel_requested_at: job.wf_cancel_requested_at,
        activities,
        signals: None,
    }
}
