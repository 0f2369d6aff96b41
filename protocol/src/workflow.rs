//! The workflow-task protocol between the engine and the worker SDK (internal to them,
//! documented in `docs/workflows.md`): the journal a worker replays, and the commands it
//! answers with.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::api::ActivityOptionsBody;
use crate::model::{ActivityStatus, ActivityTask, ErrorInfo, JobStatus};

/// A task handed to a worker by `POST /v1/worker/poll`: run an attempt, or replay a
/// workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Task {
    /// `"kind": "activity"`: run one attempt under its lease.
    Activity(ActivityTask),
    /// `"kind": "workflow"`: replay a workflow against its journal.
    Workflow(WorkflowTask),
}

/// The right to replay one workflow job once and answer with commands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkflowTask {
    /// Always `workflow`.
    pub kind: String,
    /// The workflow job.
    pub job_id: Uuid,
    /// Its owner.
    pub owner: String,
    /// The workflow to run.
    pub workflow: String,
    /// The run's input: the job's input, or the one its workflow continued as new with.
    #[schema(value_type = Object)]
    pub input: Value,
    /// Stable for the job: `ctx.idempotency_key()`.
    pub idempotency_key: String,
    /// When the run started (the job's creation for its first run): `ctx.now()` before
    /// anything was recorded.
    pub created_at: DateTime<Utc>,
    /// This task's fencing token.
    pub lease_token: Uuid,
    /// The job version the task read; its commands apply only if it is still current.
    pub read_version: i64,
    /// The run's number: 1, then one more each time the workflow continued as new.
    #[serde(default = "first_run")]
    pub run: i32,
    /// The run's first position: its steps are numbered from here (0 for the first run;
    /// a run continued as new starts after every position of the runs before it).
    #[serde(default)]
    pub first_seq: i32,
    /// `None`: the task carries the run's whole history. `Some(h)`: sticky execution —
    /// the worker that completed the job's previous task said it keeps the replayed
    /// state, having seen every outcome up to place `h` in the arrival order, and the job
    /// has not moved since; `journal`, `signals` and `cancel` then carry only what arrived
    /// after `h` (and `patches` nothing). A worker without that state asks for the whole
    /// history (`POST /v1/worker/workflow-tasks/{job_id}/history`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_arrival: Option<i64>,
    /// What the run did so far, by position (call order).
    pub journal: Vec<JournalEntry>,
    /// The job's signals in the order they were recorded, untaken or taken in this run:
    /// a wait takes the one recorded as consumed at its position, else the first untaken
    /// one of its name delivered so far.
    #[serde(default)]
    pub signals: Vec<RecordedSignal>,
    /// The owner's request to cancel the job, once made while the workflow had declared a
    /// compensation bound: replay delivers it at its place in the arrival order, and every
    /// step pending then resolves to a `job_cancelled` error. `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<CancelRequest>,
    /// The compensation bound the workflow declared (`ctx.compensate_within`), as the
    /// engine recorded it; `None` when it declared none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensation_ms: Option<u64>,
    /// The patch markers the job recorded (`ctx.patched`, `ctx.deprecate_patch`), by id.
    /// A marker takes no position: `ctx.patched(id)` is true for a job that recorded `id`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<String>,
}

fn first_run() -> i32 {
    1
}

/// The owner asked to cancel a workflow job that declared a compensation bound: the job
/// stays `running` while the workflow compensates, and ends `cancelled` when it returns
/// or when the bound has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CancelRequest {
    /// The cancel's place in the order the job's outcomes arrived (shared with activities
    /// and timers); replay delivers it there.
    pub arrival: i64,
    /// When the owner asked (the engine's clock).
    pub requested_at: DateTime<Utc>,
}

/// A signal sent to the workflow job (`POST /v1/jobs/{id}/signals`), as its task carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RecordedSignal {
    /// Its place among the job's signals (1, 2, …).
    pub seq: i64,
    /// Its name.
    pub name: String,
    /// What was sent with it.
    #[schema(value_type = Object)]
    pub payload: Value,
    /// When the engine recorded it: the workflow's clock moves to it when a wait takes it.
    pub received_at: DateTime<Utc>,
    /// Its place in the order the job's outcomes arrived (shared with activities and
    /// timers); replay delivers it there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<i64>,
    /// The position of the wait that took it, once one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed_by: Option<i32>,
}

/// One recorded step of a workflow, at its position in call order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum JournalEntry {
    /// An activity the workflow scheduled.
    Activity {
        /// Its position.
        seq: i32,
        /// The activity.
        name: String,
        /// The input it was scheduled with (replay must ask for the same).
        #[schema(value_type = Object)]
        input: Value,
        /// Where it stands; `succeeded` and `failed` are final.
        status: ActivityStatus,
        /// The winning result, once `succeeded`.
        #[schema(value_type = Option<Object>)]
        result: Option<Value>,
        /// Why it failed, once `failed` (e.g. `providers_exhausted`).
        error: Option<ErrorInfo>,
        /// When it reached its final status.
        finished_at: Option<DateTime<Utc>>,
        /// Its outcome's place in the order the job's outcomes arrived (1, 2, …; strictly
        /// increasing, shared with timers); replay delivers outcomes in this order. `None`
        /// while it has none, or when it arrived before arrivals were numbered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arrival: Option<i64>,
    },
    /// A durable timer the workflow started.
    Timer {
        /// Its position.
        seq: i32,
        /// When it fires.
        fire_at: DateTime<Utc>,
        /// When it fired; `None` while it has not.
        fired_at: Option<DateTime<Utc>>,
        /// Its firing's place in the order the job's outcomes arrived (see the activity's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arrival: Option<i64>,
    },
    /// A child workflow job the workflow started (idempotency key
    /// `{parent_job_id}:child:{seq}`, so it is started once).
    Child {
        /// Its position.
        seq: i32,
        /// The workflow the child runs.
        workflow: String,
        /// The input it was started with (replay must ask for the same).
        #[schema(value_type = Object)]
        input: Value,
        /// The child job.
        child_job_id: Uuid,
        /// Where the child stands; `succeeded`, `failed` and `cancelled` are final.
        status: JobStatus,
        /// The child's result, once `succeeded`.
        #[schema(value_type = Option<Object>)]
        result: Option<Value>,
        /// Why it failed or was cancelled (`job_cancelled`), once final.
        error: Option<ErrorInfo>,
        /// When it reached its final status.
        finished_at: Option<DateTime<Utc>>,
        /// Its outcome's place in the order the parent's outcomes arrived (see the
        /// activity's); `None` while it is open.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arrival: Option<i64>,
    },
}

impl JournalEntry {
    /// The entry's position.
    pub fn seq(&self) -> i32 {
        match self {
            JournalEntry::Activity { seq, .. }
            | JournalEntry::Timer { seq, .. }
            | JournalEntry::Child { seq, .. } => *seq,
        }
    }

    /// The entry's place in the job's arrival order, if its outcome arrived and was
    /// numbered.
    pub fn arrival(&self) -> Option<i64> {
        match self {
            JournalEntry::Activity { arrival, .. }
            | JournalEntry::Timer { arrival, .. }
            | JournalEntry::Child { arrival, .. } => *arrival,
        }
    }
}

/// What a workflow task decided, applied by the engine in one transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkflowCommand {
    /// Schedule an activity at a new position (its first attempt at the first provider).
    ScheduleActivity {
        /// The position.
        seq: i32,
        /// The activity.
        activity: String,
        /// Its providers in order; the first is the primary.
        providers: Vec<String>,
        /// Its input.
        #[schema(value_type = Object)]
        input: Value,
        /// Its options; missing fields get their defaults.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        options: Option<ActivityOptionsBody>,
    },
    /// Start a durable timer at a new position.
    StartTimer {
        /// The position.
        seq: i32,
        /// How long from now it fires.
        duration_ms: u64,
    },
    /// The wait at a new position takes a signal (the first untaken one of its name).
    ConsumeSignal {
        /// The wait's position.
        seq: i32,
        /// The signal it takes (its `seq` among the job's signals).
        signal_seq: i64,
    },
    /// Start a child workflow job at a new position: a workflow job of the same owner with
    /// idempotency key `{parent_job_id}:child:{seq}`; its final status wakes the parent.
    StartChild {
        /// The position.
        seq: i32,
        /// The workflow the child runs.
        workflow: String,
        /// Its input.
        #[schema(value_type = Object)]
        input: Value,
        /// Its task queue; the parent's when `None`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_queue: Option<String>,
    },
    /// The workflow returned: the job succeeds with this result.
    CompleteJob {
        /// The workflow's output.
        #[schema(value_type = Object)]
        result: Value,
    },
    /// The workflow returned an error: the job fails with it.
    FailJob {
        /// The error.
        error: ErrorInfo,
    },
    /// The workflow's compensation bound (`ctx.compensate_within`): once the owner cancels
    /// the job, the workflow gets this long to compensate before the job ends `cancelled`
    /// regardless. At most 24 h (more parks the workflow); `0` declares none (a cancel
    /// closes the job at once). Sent only when it differs from the task's
    /// `compensation_ms`.
    DeclareCompensation {
        /// The bound, in milliseconds.
        within_ms: u64,
    },
    /// Record patch marker `id` for the job (`ctx.patched` reached at the frontier of the
    /// job's history, or `ctx.deprecate_patch`): from then on every replay of the job sees
    /// `ctx.patched(id)` true. Takes no position; recording a marker the job has is a
    /// no-op. An id is 1 to 200 characters (another parks the workflow).
    RecordPatch {
        /// The patch id (`change-id`).
        id: String,
        /// Recorded by `ctx.deprecate_patch` (the code no longer branches on it).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        deprecated: bool,
    },
    /// The workflow continued as new: the job (same id, key and signals) starts a fresh
    /// run with `input`, whose positions start at `first_seq`, with an empty journal.
    /// Activities still open in the run that ends are closed (code `continued_as_new`) and
    /// its unfired timers dropped; children it started run on, unseen by the new run.
    /// A job whose cancel was requested ends `cancelled` instead.
    ContinueAsNew {
        /// The new run's input.
        #[schema(value_type = Object)]
        input: Value,
        /// The new run's first position: past every position the ending run took.
        first_seq: i32,
    },
    /// The task could not be completed (e.g. `nondeterminism`): the job is parked, visibly,
    /// and no further workflow task is handed out for it.
    FailTask {
        /// Why.
        error: ErrorInfo,
    },
}

/// Body of `POST /v1/worker/workflow-tasks/{job_id}/complete`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CompleteWorkflowTaskRequest {
    /// The task's fencing token, as handed out (opaque: any other string holds nothing).
    #[serde(deserialize_with = "crate::api::opaque_lease_token")]
    #[schema(value_type = String)]
    pub lease_token: Uuid,
    /// The job version the task read.
    pub read_version: i64,
    /// What the workflow decided, in order.
    pub commands: Vec<WorkflowCommand>,
    /// Sticky execution: `Some(h)` says this worker keeps the workflow's replayed state,
    /// having seen every outcome up to place `h` in the job's arrival order, so the job's
    /// next task goes to it with only what arrives after `h`. `None`: the next task
    /// carries the whole history, to any worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticky_horizon: Option<i64>,
}

/// Body of `POST /v1/worker/workflow-tasks/{job_id}/history`: a worker that got a task
/// with only the new part of its history (`since_arrival`) but does not hold the
/// workflow's replayed state asks for the whole of it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkflowHistoryRequest {
    /// The task's fencing token, as handed out: only the task's holder reads its history.
    #[serde(deserialize_with = "crate::api::opaque_lease_token")]
    #[schema(value_type = String)]
    pub lease_token: Uuid,
}

/// Answer to a workflow-task completion.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CompleteWorkflowTaskResponse {
    /// `applied`, or `stale` when the job moved on since the task read it (nothing
    /// changed).
    pub outcome: String,
}
