//! The wire nouns of onceflow (docs/design.md, Vocabulary): jobs, activities, attempts, events,
//! contracts and certifications, with their statuses spelled exactly as in docs/api.md.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

macro_rules! status_enum {
    ($(#[$meta:meta])* $name:ident { $( $(#[$vmeta:meta])* $variant:ident => $text:literal ),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $( $(#[$vmeta])* $variant ),+ }

        impl $name {
            /// The exact word docs/api.md and the database use for this status.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses the word written by [`Self::as_str`].
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }
    };
}

status_enum! {
    /// A job's status: `queued → running → succeeded | failed | cancelled`.
    JobStatus {
        /// `queued`: submitted; no attempt or workflow task of the job has started yet.
        Queued => "queued",
        /// `running`: its first attempt or workflow task has started and the job is still open.
        Running => "running",
        /// `succeeded`: closed with a result; for an activity job, the winning attempt's result.
        Succeeded => "succeeded",
        /// `failed`: closed with an error (e.g. `providers_exhausted`); no result will be taken.
        Failed => "failed",
        /// `cancelled`: closed because its owner gave up the intent; every later result is `lost`.
        Cancelled => "cancelled",
    }
}

impl JobStatus {
    /// Whether the job is closed: its result slots can no longer be taken.
    pub fn is_closed(self) -> bool {
        matches!(
            self,
            JobStatus::Succeeded | JobStatus::Failed | JobStatus::Cancelled
        )
    }
}

status_enum! {
    /// An activity's status. `blocked` while its live attempt is `unknown`; `waiting`
    /// when failover is manual and a person must choose the next attempt.
    ActivityStatus {
        /// `scheduled`: its next attempt waits to be handed to a worker (after any retry backoff).
        Scheduled => "scheduled",
        /// `running`: an attempt has been handed to a worker and runs under a lease.
        Running => "running",
        /// `blocked`: its live attempt is `unknown`; no new attempt until it resolves or is cancelled.
        Blocked => "blocked",
        /// `waiting`: failover is manual and the last attempt ended; a person picks the next one.
        Waiting => "waiting",
        /// `succeeded`: its result slot is taken by the winning attempt's result.
        Succeeded => "succeeded",
        /// `failed`: closed with an error (e.g. `providers_exhausted`); its slot can't be taken.
        Failed => "failed",
        /// `cancelled`: closed because its job was cancelled; its slot can no longer be taken.
        Cancelled => "cancelled",
    }
}

impl ActivityStatus {
    /// Whether the activity's result slot is taken or closed.
    pub fn is_closed(self) -> bool {
        matches!(
            self,
            ActivityStatus::Succeeded | ActivityStatus::Failed | ActivityStatus::Cancelled
        )
    }
}

status_enum! {
    /// An attempt's status (docs/design.md, State machines).
    AttemptStatus {
        /// `scheduled`: live; waits to be handed to a worker, which gives it its lease token.
        Scheduled => "scheduled",
        /// `started`: live; a worker holds its lease and keeps it by heartbeating.
        Started => "started",
        /// `succeeded`: its result won: it took the activity's result slot by compare-and-swap.
        Succeeded => "succeeded",
        /// `lost`: its result came after another attempt won or the job closed, and was discarded.
        Lost => "lost",
        /// `failed`: the worker reported an error; the retry policy decides what comes next.
        Failed => "failed",
        /// `invalid`: its result broke the activity's output contract and was never committed.
        Invalid => "invalid",
        /// `unknown`: the lease expired while started: the remote side may still be working;
        /// blocks new attempts until resolved.
        Unknown => "unknown",
        /// `expired`: nobody started it within its schedule-to-start timeout; failover is safe.
        Expired => "expired",
        /// `cancelled`: stopped by an operator or with its job; its next heartbeat tells the worker.
        Cancelled => "cancelled",
    }
}

impl AttemptStatus {
    /// Live attempts block new ones (invariant 2): `scheduled`, `started`, `unknown`.
    pub const LIVE: [AttemptStatus; 3] = [
        AttemptStatus::Scheduled,
        AttemptStatus::Started,
        AttemptStatus::Unknown,
    ];

    /// Whether the attempt is live (`scheduled`, `started` or `unknown`).
    pub fn is_live(self) -> bool {
        Self::LIVE.contains(&self)
    }

    /// Whether the attempt is finished for good: no heartbeat or cancel applies to it.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            AttemptStatus::Succeeded
                | AttemptStatus::Lost
                | AttemptStatus::Failed
                | AttemptStatus::Invalid
                | AttemptStatus::Expired
        )
    }
}

status_enum! {
    /// What a completion answered. A repeated completion answers the same.
    CompletionOutcome {
        /// `won`: this result is now the activity's result.
        Won => "won",
        /// `lost`: another attempt already won or the job was closed; this result was discarded.
        Lost => "lost",
        /// `recorded`: an error was recorded; the retry policy decides what comes next.
        Recorded => "recorded",
        /// `contract_violation`: the result broke the output contract; the attempt is `invalid`.
        ContractViolation => "contract_violation",
        /// `invalid_result`: the result or error could not be stored as sent (it holds
        /// U+0000); the attempt is `invalid`.
        InvalidResult => "invalid_result",
    }
}

status_enum! {
    /// What a token may do (docs/api.md, Conventions).
    Role {
        /// Submits and reads its owner's jobs.
        Client => "client",
        /// Runs attempts of its owner's jobs (`*`: of every owner).
        Worker => "worker",
        /// Reads every owner's jobs and cancels stuck attempts out-of-band.
        Operator => "operator",
        /// Mints and revokes tokens.
        Admin => "admin",
    }
}

/// A token just minted. The `token` is shown this once; only its hash is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IssuedToken {
    /// Names the token, e.g. to revoke it.
    pub id: Uuid,
    /// The bearer token.
    pub token: String,
    /// The owner it acts for.
    pub owner: String,
    /// What it may do.
    pub role: Role,
}

status_enum! {
    /// A job is either a workflow job (runs Rust workflow code) or an activity job.
    JobKind {
        /// `workflow`: runs Rust workflow code, which schedules its activities.
        Workflow => "workflow",
        /// `activity`: runs one activity, trying its providers in order.
        Activity => "activity",
    }
}

status_enum! {
    /// Whether the engine moves to the next provider by itself (`auto`) or waits for a
    /// person to create the next attempt (`manual`).
    Failover {
        /// `auto`: after a definitive end the engine moves on to the next certified provider.
        Auto => "auto",
        /// `manual`: after a definitive end the activity is `waiting` for a person's next attempt.
        Manual => "manual",
    }
}

/// The retry budget and backoff of an activity at each provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RetryPolicy {
    /// Attempts made at one provider before moving to the next (at least 1).
    pub max_attempts_per_provider: u32,
    /// Delay before the first retry at the same provider.
    pub initial_backoff_ms: u64,
    /// Cap on the delay.
    pub max_backoff_ms: u64,
    /// Growth of the delay per retry (at least 1.0).
    pub multiplier: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts_per_provider: 3,
            initial_backoff_ms: 200,
            max_backoff_ms: 30_000,
            multiplier: 2.0,
        }
    }
}

impl RetryPolicy {
    /// The delay before retry number `retry` (0 for the first retry):
    /// `initial_backoff_ms × multiplier^retry`, capped at `max_backoff_ms`.
    pub fn backoff_ms(&self, retry: u32) -> u64 {
        let delay = self.initial_backoff_ms as f64 * self.multiplier.powi(retry as i32);
        if !delay.is_finite() || delay >= self.max_backoff_ms as f64 {
            self.max_backoff_ms
        } else {
            delay as u64
        }
    }
}

/// The options of an activity, every default filled in. `None` for a timeout means none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ActivityOptions {
    /// A started attempt that has not heartbeated for this long becomes `unknown`.
    pub heartbeat_timeout_s: Option<u64>,
    /// A started attempt still running this long after it started becomes `unknown`.
    pub start_to_close_timeout_s: Option<u64>,
    /// A scheduled attempt nobody started within this long becomes `expired`.
    pub schedule_to_start_timeout_s: Option<u64>,
    /// Automatic or manual failover.
    pub failover: Failover,
    /// Retry budget and backoff per provider.
    pub retry: RetryPolicy,
}

impl Default for ActivityOptions {
    fn default() -> Self {
        ActivityOptions {
            heartbeat_timeout_s: Some(30),
            start_to_close_timeout_s: Some(300),
            schedule_to_start_timeout_s: None,
            failover: Failover::Auto,
            retry: RetryPolicy::default(),
        }
    }
}

/// An error recorded on a job, activity or attempt: `{"code", "message"}` plus, for
/// attempts, whether the worker said it may be retried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorInfo {
    /// A snake_case code, e.g. `providers_exhausted`.
    pub code: String,
    /// For humans.
    pub message: String,
    /// Set on errors reported by workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// More about the error (e.g. a contract violation's list of failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ErrorInfo {
    /// An error with a code and a message.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        ErrorInfo {
            code: code.to_owned(),
            message: message.into(),
            retryable: None,
            details: None,
        }
    }
}

/// A job as docs/api.md shows it, with its activities and their attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct JobView {
    /// The job's id (UUIDv7), as in `GET /v1/jobs/{id}`.
    pub id: Uuid,
    /// The owner the job belongs to; other owners never see it.
    pub owner: String,
    /// The idempotency key it was submitted with; one job per (owner, key).
    pub idempotency_key: String,
    /// Whether it is a workflow job or an activity job.
    pub kind: JobKind,
    /// The workflow it runs; `None` for an activity job.
    pub workflow: Option<String>,
    /// The activity it runs; `None` for a workflow job.
    pub activity: Option<String>,
    /// The task queue its work is dispatched on.
    pub task_queue: String,
    /// The input it was submitted with.
    pub input: Value,
    /// Where the job stands: `queued`, `running`, `succeeded`, `failed` or `cancelled`.
    pub status: JobStatus,
    /// Moves each time the job's result slot is taken or the job is closed.
    pub version: i64,
    /// The job's result once it succeeded; for an activity job, the winning attempt's result.
    pub result: Option<Value>,
    /// Why the job failed or was cancelled; `None` otherwise.
    pub error: Option<ErrorInfo>,
    /// When the job was submitted.
    pub created_at: DateTime<Utc>,
    /// When the job last changed.
    pub updated_at: DateTime<Utc>,
    /// When the job closed; `None` while it is open.
    pub finished_at: Option<DateTime<Utc>>,
    /// The workflow job that started this one as its child; `null` for a top-level job.
    #[serde(default)]
    pub parent_job_id: Option<Uuid>,
    /// The child jobs this workflow started, by position (empty for none).
    #[serde(default)]
    pub children: Vec<Uuid>,
    /// When the owner asked to cancel a workflow job that declared a compensation bound:
    /// the job stays `running` while its workflow compensates, then ends `cancelled`.
    /// `None` otherwise (and for every job cancelled at once).
    #[serde(default)]
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// Its activities in order, each with its attempts.
    pub activities: Vec<ActivityView>,
    /// A workflow job's signals in the order they were recorded, consumed or not; only
    /// in the view of one job (`GET /v1/jobs/{id}`), absent from lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signals: Option<Vec<SignalView>>,
}

/// A signal recorded for a workflow job (`POST /v1/jobs/{id}/signals`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SignalView {
    /// The signal's id (UUIDv7).
    pub signal_id: Uuid,
    /// The workflow job it was sent to.
    pub job_id: Uuid,
    /// Its name, e.g. `approve`.
    pub name: String,
    /// Its place among the job's signals (1, 2, …): the order they are delivered in.
    pub seq: i64,
    /// What was sent with it (`null` when nothing was).
    #[schema(value_type = Object)]
    pub payload: Value,
    /// When the engine recorded it.
    pub received_at: DateTime<Utc>,
    /// Whether the workflow has taken it (each signal is taken by one wait, once).
    pub consumed: bool,
    /// When the workflow took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed_at: Option<DateTime<Utc>>,
}

/// An activity of a job, with its attempts in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ActivityView {
    /// The activity's position in its job, from 0.
    pub seq: i32,
    /// The activity's name, e.g. `generate`.
    pub name: String,
    /// Its providers in failover order; the first is the primary.
    pub providers: Vec<String>,
    /// Where the activity stands, e.g. `blocked` while its live attempt is `unknown`.
    pub status: ActivityStatus,
    /// Moves only when the result slot is taken or closed; an attempt's CAS compares it.
    pub version: i64,
    /// The attempt whose result won the slot; `None` until one wins.
    pub completed_by: Option<Uuid>,
    /// The winning attempt's result; `None` until one wins.
    pub result: Option<Value>,
    /// Why the activity failed or was cancelled, e.g. `providers_exhausted`.
    pub error: Option<ErrorInfo>,
    /// Its attempts in number order, across providers.
    pub attempts: Vec<AttemptView>,
}

/// One attempt as docs/api.md shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AttemptView {
    /// The attempt's id; workers address it by this id.
    pub id: Uuid,
    /// Counts within the activity: 1, 2, 3 … across providers.
    pub number: i32,
    /// The provider this attempt runs at.
    pub provider: String,
    /// Where the attempt stands; `scheduled`, `started` and `unknown` are live.
    pub status: AttemptStatus,
    /// When the attempt was created (`scheduled`).
    pub created_at: DateTime<Utc>,
    /// When a worker was handed the attempt; `None` while it is `scheduled`.
    pub started_at: Option<DateTime<Utc>>,
    /// The last heartbeat (or start) that renewed its lease; `None` if never started.
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// When the lease expires unless renewed by a heartbeat; `None` when it holds no lease.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// When the attempt ended; `None` while it is live.
    pub finished_at: Option<DateTime<Utc>>,
    /// The error the attempt ended with, if any.
    pub error: Option<ErrorInfo>,
    /// Who cancelled the attempt (an operator or the job's owner); stays set after a late result.
    pub cancelled_by: Option<String>,
    /// Why it was cancelled, e.g. `job cancelled`.
    pub cancel_reason: Option<String>,
}

/// An attempt listed for operators, with the job and owner it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StuckAttempt {
    /// The attempt, flattened into the same JSON object.
    #[serde(flatten)]
    pub attempt: AttemptView,
    /// The job the attempt belongs to.
    pub job_id: Uuid,
    /// The owner of that job.
    pub owner: String,
    /// The name of the attempt's activity.
    pub activity: String,
    /// Since when it has been in its status: `started_at` for `started`, the moment the
    /// lease expired for `unknown`.
    pub since: DateTime<Utc>,
}

/// One entry of a job's append-only history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct JobEvent {
    /// The event's position in the job's history, from 1.
    pub seq: i64,
    /// When it happened, by the database clock.
    pub at: DateTime<Utc>,
    /// The event type (JSON `type`), one of [`event`].
    #[serde(rename = "type")]
    pub kind: String,
    /// The attempt it concerns, if any.
    pub attempt_id: Option<Uuid>,
    /// Who did it: `engine`, `reaper`, `client:…`, `worker:…` or `operator:…`.
    pub actor: String,
    /// What else is known about it; `{}` when nothing.
    pub data: Value,
}

/// A task handed to a worker: the right to run one attempt under a lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ActivityTask {
    /// Always `activity` for an activity task.
    pub kind: String,
    /// The attempt the worker now runs.
    pub attempt_id: Uuid,
    /// The attempt's fencing token: send it with every heartbeat and completion.
    pub lease_token: Uuid,
    /// The activity version the attempt read; its completion's CAS compares it.
    pub read_version: i64,
    /// The job the attempt belongs to.
    pub job_id: Uuid,
    /// The owner of that job.
    pub owner: String,
    /// The activity to run.
    pub activity: String,
    /// The provider to run it at.
    pub provider: String,
    /// The activity's input.
    pub input: Value,
    /// The attempt's number within the activity (1, 2, 3 … across providers).
    pub attempt_number: i32,
    /// Stable for the activity across all its attempts: pass it to the downstream provider.
    pub idempotency_key: String,
    /// Heartbeat at least this often or the attempt becomes `unknown`; `None` for no limit.
    pub heartbeat_timeout_ms: Option<u64>,
    /// Finish within this long of starting or the attempt becomes `unknown`; `None` for no limit.
    pub start_to_close_timeout_ms: Option<u64>,
}

/// A registered output contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Contract {
    /// The owner the contract belongs to (`*` for every owner).
    pub owner: String,
    /// The activity whose results it constrains.
    pub activity: String,
    /// Identifies the schema; a new schema gives a new hash and voids older certifications.
    pub contract_hash: String,
    /// The JSON Schema every committed result must satisfy.
    pub output_schema: Value,
}

/// A recorded run of a provider's contract tests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Certification {
    /// The certification's id.
    pub id: Uuid,
    /// The owner it belongs to (`*` for every owner).
    pub owner: String,
    /// The activity it certifies the provider for.
    pub activity: String,
    /// The provider that ran the contract tests.
    pub provider: String,
    /// The output contract it was tested against; it counts only while that contract is current.
    pub contract_hash: String,
    /// Whether the provider passed; only the latest certification for the hash counts.
    pub passed: bool,
    /// The test run's report, as the worker sent it.
    pub report: Value,
    /// When it was recorded.
    pub created_at: DateTime<Utc>,
}

/// The event types written to `job_events`.
pub mod event {
    /// A new job was submitted.
    pub const JOB_CREATED: &str = "job_created";
    /// A submit repeated the key and fingerprint and got the existing job back.
    pub const JOB_REPLAYED: &str = "job_replayed";
    /// An attempt was created and waits for a worker.
    pub const ATTEMPT_SCHEDULED: &str = "attempt_scheduled";
    /// A worker was handed the attempt with a lease token.
    pub const ATTEMPT_STARTED: &str = "attempt_started";
    /// The lease expired while started: the attempt is `unknown`.
    pub const ATTEMPT_HEARTBEAT_LOST: &str = "attempt_heartbeat_lost";
    /// An `unknown` attempt heartbeated with its lease token and is `started` again.
    pub const ATTEMPT_REVIVED: &str = "attempt_revived";
    /// Nobody started the attempt within its schedule-to-start timeout.
    pub const ATTEMPT_EXPIRED: &str = "attempt_expired";
    /// An operator, or the job's cancel, cancelled the attempt.
    pub const ATTEMPT_CANCELLED: &str = "attempt_cancelled";
    /// The attempt's result won the activity's result slot.
    pub const ATTEMPT_SUCCEEDED: &str = "attempt_succeeded";
    /// A result arrived after the slot was taken or the job closed, and was discarded.
    pub const RACE_LOST: &str = "race_lost";
    /// The worker reported an error for the attempt.
    pub const ATTEMPT_FAILED: &str = "attempt_failed";
    /// The attempt's result broke the output contract.
    pub const ATTEMPT_INVALID: &str = "attempt_invalid";
    /// Failover is manual: the activity waits for a person to create the next attempt.
    pub const ACTIVITY_WAITING: &str = "activity_waiting";
    /// The activity failed, e.g. with `providers_exhausted`.
    pub const ACTIVITY_FAILED: &str = "activity_failed";
    /// The activity moved on to the next certified provider.
    pub const FAILOVER: &str = "failover";
    /// A provider was passed over because it is not certified for the current contract.
    pub const FAILOVER_SKIPPED: &str = "failover_skipped";
    /// The job closed with a result.
    pub const JOB_SUCCEEDED: &str = "job_succeeded";
    /// The job closed with an error.
    pub const JOB_FAILED: &str = "job_failed";
    /// The owner cancelled the job.
    pub const JOB_CANCELLED: &str = "job_cancelled";
    /// A worker took a workflow task (replaying the workflow).
    pub const WORKFLOW_TASK_STARTED: &str = "workflow_task_started";
    /// A workflow task's commands were applied.
    pub const WORKFLOW_TASK_COMPLETED: &str = "workflow_task_completed";
    /// A workflow task failed (e.g. `nondeterminism`); the job is parked.
    pub const WORKFLOW_TASK_FAILED: &str = "workflow_task_failed";
    /// A workflow started a durable timer.
    pub const TIMER_STARTED: &str = "timer_started";
    /// A durable timer fired.
    pub const TIMER_FIRED: &str = "timer_fired";
    /// A signal was recorded for a workflow job.
    pub const SIGNAL_RECEIVED: &str = "signal_received";
    /// A workflow took a signal at one of its waits.
    pub const SIGNAL_CONSUMED: &str = "signal_consumed";
    /// A workflow started a child workflow job (on the parent: `seq`, `child_job_id`,
    /// `workflow`).
    pub const CHILD_STARTED: &str = "child_started";
    /// A child workflow job reached a final status (on the parent: `child_job_id`,
    /// `status`).
    pub const CHILD_FINISHED: &str = "child_finished";
    /// The owner cancelled a workflow job that declared a compensation bound: the workflow
    /// was woken to compensate, its open activities were cancelled.
    pub const CANCEL_REQUESTED: &str = "cancel_requested";
    /// A workflow declared (or changed) its compensation bound.
    pub const COMPENSATION_DECLARED: &str = "compensation_declared";
    /// A cancelled workflow's compensation bound passed before it returned: the job was
    /// closed `cancelled` regardless.
    pub const COMPENSATION_TIMED_OUT: &str = "compensation_timed_out";
    /// A workflow recorded a patch marker (`ctx.patched` reached at the frontier of its
    /// history, or `ctx.deprecate_patch`): `data` `patch_id`, `deprecated`.
    pub const PATCH_RECORDED: &str = "patch_recorded";
    /// A failed job (or a parked workflow) was resumed under its own id and key (`reason`;
    /// the actor is `client:<owner>` or `operator:<name>`).
    pub const JOB_RESUMED: &str = "job_resumed";
    /// A workflow continued as new: its job (same id, key and signals) started run `run`
    /// from position `first_seq` with a fresh journal.
    pub const WORKFLOW_CONTINUED_AS_NEW: &str = "workflow_continued_as_new";
}

status_enum! {
    /// What a schedule does with a tick while the job of its previous tick is still open.
    Overlap {
        /// `skip`: the tick is skipped (a `skipped_overlap` event on the schedule).
        Skip => "skip",
        /// `allow`: the tick fires anyway; jobs of several ticks may run at once.
        Allow => "allow",
    }
}

/// A cron schedule: each tick submits its job once, with idempotency key
/// `schedule:{name}:{tick time}`, however many engines run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ScheduleView {
    /// Unique per owner; part of every tick's idempotency key.
    pub name: String,
    /// The owner it submits for.
    pub owner: String,
    /// The cron expression, with seconds (`sec min hour day-of-month month day-of-week [year]`).
    pub cron: String,
    /// The IANA time zone the cron expression is read in.
    pub timezone: String,
    /// The `POST /v1/jobs` body each tick submits.
    #[schema(value_type = Object)]
    pub job: Value,
    /// What a tick does while the previous tick's job is still open.
    pub overlap: Overlap,
    /// A tick missed (no engine ran) fires if at most this old, else is skipped and counted.
    pub catchup_window_s: u64,
    /// A paused schedule fires nothing until resumed.
    pub paused: bool,
    /// The next tick; `null` while paused.
    pub next_fire_at: Option<DateTime<Utc>>,
    /// The time of the last tick that fired.
    pub last_fired_at: Option<DateTime<Utc>>,
    /// The job of the last tick that fired.
    pub last_job_id: Option<Uuid>,
    /// Ticks that fired (each one job).
    pub fired_count: u64,
    /// Ticks skipped because the previous job was still open (`overlap: skip`).
    pub skipped_overlap_count: u64,
    /// Ticks skipped because no engine reached them within `catchup_window_s`.
    pub skipped_too_old_count: u64,
    /// When the schedule was first created.
    pub created_at: DateTime<Utc>,
    /// When it last changed (definition, pause, resume or a tick).
    pub updated_at: DateTime<Utc>,
}

/// One entry of a schedule's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ScheduleEvent {
    /// Increases with each event of the schedule.
    pub id: i64,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// `created`, `replaced`, `paused`, `resumed`, `fired`, `skipped_overlap`,
    /// `skipped_too_old` or `exhausted` (JSON `type`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The tick it concerns (the first one, for `skipped_too_old`).
    pub tick_at: Option<DateTime<Utc>>,
    /// The job the tick submitted (`fired`), or that was still open (`skipped_overlap`).
    pub job_id: Option<Uuid>,
    /// What else is known: `count` and `last_tick_at` for `skipped_too_old`, …
    #[schema(value_type = Object)]
    pub data: Value,
}
