//! The domain's nouns (DESIGN.md, Vocabulary): jobs, activities, attempts, events,
//! contracts and certifications, with their statuses spelled exactly as in API.md.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// Which owners an operation may see or touch.
///
/// A client token acts for one owner; operators and worker tokens of owner `*` act across
/// owners. Anything outside the scope answers `not_found`, never `forbidden`
/// (invariant 8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Only this owner's rows.
    Owner(String),
    /// Every owner's rows (operators, platform workers).
    AllOwners,
}

impl Scope {
    /// The scope a worker token of `owner` serves: `*` serves every owner.
    pub fn for_worker(owner: &str) -> Scope {
        if owner == "*" {
            Scope::AllOwners
        } else {
            Scope::Owner(owner.to_owned())
        }
    }

    /// Whether a row of `owner` is visible in this scope.
    pub fn allows(&self, owner: &str) -> bool {
        match self {
            Scope::Owner(o) => o == owner,
            Scope::AllOwners => true,
        }
    }

    /// The single owner of this scope, if it is narrowed to one.
    pub fn owner(&self) -> Option<&str> {
        match self {
            Scope::Owner(o) => Some(o),
            Scope::AllOwners => None,
        }
    }
}

macro_rules! status_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant),+ }

        impl $name {
            /// The exact word API.md and the database use for this status.
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
                f.write_str(self.as_str())
            }
        }
    };
}

status_enum! {
    /// A job's status: `queued → running → succeeded | failed | cancelled`.
    JobStatus {
        Queued => "queued",
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
        Cancelled => "cancelled",
    }
}

impl JobStatus {
    /// Whether the job is closed: its result slots can no longer be taken.
    pub fn is_closed(self) -> bool {
        matches!(self, JobStatus::Succeeded | JobStatus::Failed | JobStatus::Cancelled)
    }
}

status_enum! {
    /// An activity's status. `blocked` while its live attempt is `unknown`; `waiting`
    /// when failover is manual and a person must choose the next attempt.
    ActivityStatus {
        Scheduled => "scheduled",
        Running => "running",
        Blocked => "blocked",
        Waiting => "waiting",
        Succeeded => "succeeded",
        Failed => "failed",
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
    /// An attempt's status (DESIGN.md, State machines).
    AttemptStatus {
        Scheduled => "scheduled",
        Started => "started",
        Succeeded => "succeeded",
        Lost => "lost",
        Failed => "failed",
        Invalid => "invalid",
        Unknown => "unknown",
        Expired => "expired",
        Cancelled => "cancelled",
    }
}

impl AttemptStatus {
    /// Live attempts block new ones (invariant 2): `scheduled`, `started`, `unknown`.
    pub const LIVE: [AttemptStatus; 3] =
        [AttemptStatus::Scheduled, AttemptStatus::Started, AttemptStatus::Unknown];

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
        Won => "won",
        Lost => "lost",
        Recorded => "recorded",
        ContractViolation => "contract_violation",
    }
}

status_enum! {
    /// A job is either a workflow job (runs Rust workflow code) or an activity job.
    JobKind {
        Workflow => "workflow",
        Activity => "activity",
    }
}

status_enum! {
    /// Whether the engine moves to the next provider by itself (`auto`) or waits for a
    /// person to create the next attempt (`manual`).
    Failover {
        Auto => "auto",
        Manual => "manual",
    }
}

/// The retry budget and backoff of an activity at each provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
        ErrorInfo { code: code.to_owned(), message: message.into(), retryable: None, details: None }
    }
}

/// A job as API.md shows it, with its activities and their attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub id: Uuid,
    pub owner: String,
    pub idempotency_key: String,
    pub kind: JobKind,
    pub workflow: Option<String>,
    pub activity: Option<String>,
    pub task_queue: String,
    pub input: Value,
    pub status: JobStatus,
    pub version: i64,
    pub result: Option<Value>,
    pub error: Option<ErrorInfo>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub activities: Vec<ActivityView>,
}

/// An activity of a job, with its attempts in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivityView {
    pub seq: i32,
    pub name: String,
    pub providers: Vec<String>,
    pub status: ActivityStatus,
    pub version: i64,
    pub completed_by: Option<Uuid>,
    pub result: Option<Value>,
    pub error: Option<ErrorInfo>,
    pub attempts: Vec<AttemptView>,
}

/// One attempt as API.md shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptView {
    pub id: Uuid,
    pub number: i32,
    pub provider: String,
    pub status: AttemptStatus,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub heartbeat_at: Option<DateTime<Utc>>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<ErrorInfo>,
    pub cancelled_by: Option<String>,
    pub cancel_reason: Option<String>,
}

/// An attempt listed for operators, with the job and owner it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StuckAttempt {
    #[serde(flatten)]
    pub attempt: AttemptView,
    pub job_id: Uuid,
    pub owner: String,
    pub activity: String,
    /// Since when it has been in its status: `started_at` for `started`, the moment the
    /// lease expired for `unknown`.
    pub since: DateTime<Utc>,
}

/// One entry of a job's append-only history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobEvent {
    pub seq: i64,
    pub at: DateTime<Utc>,
    #[serde(rename = "type")]
    pub kind: String,
    pub attempt_id: Option<Uuid>,
    pub actor: String,
    pub data: Value,
}

/// A task handed to a worker: the right to run one attempt under a lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivityTask {
    pub kind: String,
    pub attempt_id: Uuid,
    pub lease_token: Uuid,
    pub read_version: i64,
    pub job_id: Uuid,
    pub owner: String,
    pub activity: String,
    pub provider: String,
    pub input: Value,
    pub attempt_number: i32,
    /// Stable for the activity across all its attempts: pass it to the downstream provider.
    pub idempotency_key: String,
    pub heartbeat_timeout_ms: Option<u64>,
    pub start_to_close_timeout_ms: Option<u64>,
}

/// A registered output contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contract {
    pub owner: String,
    pub activity: String,
    pub contract_hash: String,
    pub output_schema: Value,
}

/// A recorded run of a provider's contract tests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Certification {
    pub id: Uuid,
    pub owner: String,
    pub activity: String,
    pub provider: String,
    pub contract_hash: String,
    pub passed: bool,
    pub report: Value,
    pub created_at: DateTime<Utc>,
}

/// The event types written to `job_events`.
pub mod event {
    pub const JOB_CREATED: &str = "job_created";
    pub const JOB_REPLAYED: &str = "job_replayed";
    pub const ATTEMPT_SCHEDULED: &str = "attempt_scheduled";
    pub const ATTEMPT_STARTED: &str = "attempt_started";
    pub const ATTEMPT_HEARTBEAT_LOST: &str = "attempt_heartbeat_lost";
    pub const ATTEMPT_REVIVED: &str = "attempt_revived";
    pub const ATTEMPT_EXPIRED: &str = "attempt_expired";
    pub const ATTEMPT_CANCELLED: &str = "attempt_cancelled";
    pub const ATTEMPT_SUCCEEDED: &str = "attempt_succeeded";
    pub const RACE_LOST: &str = "race_lost";
    pub const ATTEMPT_FAILED: &str = "attempt_failed";
    pub const ATTEMPT_INVALID: &str = "attempt_invalid";
    pub const ACTIVITY_WAITING: &str = "activity_waiting";
    pub const ACTIVITY_FAILED: &str = "activity_failed";
    pub const FAILOVER: &str = "failover";
    pub const FAILOVER_SKIPPED: &str = "failover_skipped";
    pub const JOB_SUCCEEDED: &str = "job_succeeded";
    pub const JOB_FAILED: &str = "job_failed";
    pub const JOB_CANCELLED: &str = "job_cancelled";
}
