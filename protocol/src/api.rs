//! The bodies of docs/api.md's requests and responses, shared by the server and the worker SDK
//! so that the two cannot disagree.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::model::{
    ActivityOptions, CompletionOutcome, Failover, JobEvent, JobView, RetryPolicy, StuckAttempt,
};

/// The body of `POST /v1/jobs` as sent: exactly one of `workflow` or `activity`; every
/// missing field gets docs/api.md's default when the engine resolves it.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
pub struct JobRequestBody {
    /// The workflow to run (a workflow job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The activity to run (an activity job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<String>,
    /// Providers of the activity, in the order they are tried; the first is the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub providers: Option<Vec<String>>,
    /// The job's input, any JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object)]
    pub input: Option<Value>,
    /// Defaults to `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_queue: Option<String>,
    /// Activity options; missing fields get their defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<ActivityOptionsBody>,
}

/// `options` of an activity job as sent; missing fields get their defaults.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, ToSchema)]
pub struct ActivityOptionsBody {
    /// Default 30; `null` for none.
    #[serde(default = "default_heartbeat", deserialize_with = "nullable")]
    pub heartbeat_timeout_s: Option<u64>,
    /// Default 300; `null` for none.
    #[serde(default = "default_start_to_close", deserialize_with = "nullable")]
    pub start_to_close_timeout_s: Option<u64>,
    /// Default `null` (none).
    #[serde(default, deserialize_with = "nullable")]
    pub schedule_to_start_timeout_s: Option<u64>,
    /// `auto` (default) or `manual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover: Option<Failover>,
    /// Retry budget and backoff per provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicyBody>,
}

impl From<ActivityOptions> for ActivityOptionsBody {
    /// Every field spelled out (a `None` timeout is sent as `null`: none).
    fn from(options: ActivityOptions) -> Self {
        ActivityOptionsBody {
            heartbeat_timeout_s: options.heartbeat_timeout_s,
            start_to_close_timeout_s: options.start_to_close_timeout_s,
            schedule_to_start_timeout_s: options.schedule_to_start_timeout_s,
            failover: Some(options.failover),
            retry: Some(RetryPolicyBody {
                max_attempts_per_provider: Some(options.retry.max_attempts_per_provider),
                initial_backoff_ms: Some(options.retry.initial_backoff_ms),
                max_backoff_ms: Some(options.retry.max_backoff_ms),
                multiplier: Some(options.retry.multiplier),
            }),
        }
    }
}

/// `options.retry` as sent; missing fields get their defaults.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default, ToSchema)]
pub struct RetryPolicyBody {
    /// Default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts_per_provider: Option<u32>,
    /// Default 200.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_backoff_ms: Option<u64>,
    /// Default 30000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_backoff_ms: Option<u64>,
    /// Default 2.0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<f64>,
}

/// `Some(value)` when present (including `Some(None)` for an explicit null).
fn nullable<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer)
}

fn default_heartbeat() -> Option<u64> {
    ActivityOptions::default().heartbeat_timeout_s
}

fn default_start_to_close() -> Option<u64> {
    ActivityOptions::default().start_to_close_timeout_s
}

impl Default for ActivityOptionsBody {
    fn default() -> Self {
        ActivityOptionsBody {
            heartbeat_timeout_s: default_heartbeat(),
            start_to_close_timeout_s: default_start_to_close(),
            schedule_to_start_timeout_s: None,
            failover: None,
            retry: None,
        }
    }
}

impl ActivityOptionsBody {
    /// These options with every missing field set to its default.
    pub fn resolve(self) -> ActivityOptions {
        let defaults = RetryPolicy::default();
        let retry = self.retry.unwrap_or_default();
        ActivityOptions {
            heartbeat_timeout_s: self.heartbeat_timeout_s,
            start_to_close_timeout_s: self.start_to_close_timeout_s,
            schedule_to_start_timeout_s: self.schedule_to_start_timeout_s,
            failover: self.failover.unwrap_or(Failover::Auto),
            retry: RetryPolicy {
                max_attempts_per_provider: retry
                    .max_attempts_per_provider
                    .unwrap_or(defaults.max_attempts_per_provider),
                initial_backoff_ms: retry
                    .initial_backoff_ms
                    .unwrap_or(defaults.initial_backoff_ms),
                max_backoff_ms: retry.max_backoff_ms.unwrap_or(defaults.max_backoff_ms),
                multiplier: retry.multiplier.unwrap_or(defaults.multiplier),
            },
        }
    }
}

/// The JSON error body of every error response.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// A snake_case code from docs/api.md (e.g. `attempt_in_flight`).
    pub code: String,
    /// For humans.
    pub message: String,
    /// More about the error; `{}` when there is nothing to add.
    #[schema(value_type = Object)]
    pub details: Value,
}

/// `{"jobs": [...], "next": cursor | null}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobList {
    /// Newest first.
    pub jobs: Vec<JobView>,
    /// Pass as `after` for the next page; `null` on the last page.
    pub next: Option<String>,
}

/// `{"events": [...]}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EventList {
    /// The job's history, oldest first: the page asked for.
    pub events: Vec<JobEvent>,
    /// Pass as `after_seq` for the next page (the last `seq` of this one); `null` on the
    /// last page.
    #[serde(default)]
    pub next: Option<i64>,
}

/// Body of the manual attempt: the provider to try.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ManualAttempt {
    /// One of the activity's providers.
    pub provider: String,
}

/// Body of `POST /v1/jobs/{id}/signals`: a named message for the workflow.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SignalRequestBody {
    /// What the workflow waits for (`ctx.wait_signal("approve")`): 1–255 visible ASCII.
    pub name: String,
    /// Anything JSON; `null` when left out.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
}

fn default_queue() -> String {
    "default".to_owned()
}

fn default_max_tasks() -> u32 {
    1
}

fn default_wait_ms() -> u64 {
    20_000
}

/// An (activity, provider) pair a worker can run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProviderPair {
    /// The activity's name.
    pub activity: String,
    /// The provider's name.
    pub provider: String,
}

/// Body of `POST /v1/worker/poll`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PollRequest {
    /// The worker's name, recorded on the attempts it takes.
    pub worker_id: String,
    /// Defaults to `default`.
    #[serde(default = "default_queue")]
    pub task_queue: String,
    /// Workflows the worker runs (workflow tasks arrive with issue 5).
    #[serde(default)]
    pub workflows: Vec<String>,
    /// The providers the worker has registered.
    #[serde(default)]
    pub providers: Vec<ProviderPair>,
    /// 1–100, default 1.
    #[serde(default = "default_max_tasks")]
    pub max_tasks: u32,
    /// How long to wait for a task, 0–60000, default 20000.
    #[serde(default = "default_wait_ms")]
    pub wait_ms: u64,
    /// Completions of attempts this worker finished, at most [`MAX_COMPLETIONS`]: each is
    /// judged exactly as `POST /v1/worker/completions` judges it, before tasks are
    /// handed out. A poll that carries completions answers at once, with the tasks there
    /// are (maybe none), so that their answers are not held up by the wait.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completions: Vec<AttemptCompletion>,
}

/// The longest a poll may wait.
pub const MAX_WAIT_MS: u64 = 60_000;

/// `{"tasks": [...]}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PollResponse {
    /// Tasks handed to this worker; empty when nothing came within `wait_ms`.
    pub tasks: Vec<crate::workflow::Task>,
    /// One answer per completion the poll carried, in order (absent when it carried none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completions: Vec<CompletionAnswer>,
}

/// Body of a heartbeat.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatRequest {
    /// The attempt's fencing token, as handed out (opaque: any other string holds nothing).
    #[serde(deserialize_with = "opaque_lease_token")]
    #[schema(value_type = String)]
    pub lease_token: Uuid,
    /// Progress details, kept on the attempt.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub details: Option<Value>,
}

/// Answer to a heartbeat.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatResponse {
    /// The attempt was cancelled: stop working on it.
    pub cancel_requested: bool,
}

/// An error reported by a worker.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkerError {
    /// For humans.
    pub message: String,
    /// Whether the same provider may try again.
    #[serde(default)]
    pub retryable: bool,
}

/// Body of a completion: exactly one of `result` or `error`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CompleteRequest {
    /// The attempt's fencing token, as handed out (opaque: any other string holds nothing).
    #[serde(deserialize_with = "opaque_lease_token")]
    #[schema(value_type = String)]
    pub lease_token: Uuid,
    /// The activity version read with the task (informational; the engine keeps its own).
    #[serde(default)]
    pub read_version: Option<i64>,
    /// The result.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    /// Or the error.
    #[serde(default)]
    pub error: Option<WorkerError>,
}

/// Answer to a completion.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CompleteResponse {
    /// `won`, `lost` or `recorded`.
    pub outcome: CompletionOutcome,
}

/// The most completions one `POST /v1/worker/completions` may carry.
pub const MAX_COMPLETIONS: usize = 100;

/// Body of `POST /v1/worker/completions`: several attempts' completions in one request,
/// each judged exactly as `POST /v1/worker/attempts/{id}/complete` judges it alone.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CompleteManyRequest {
    /// 1 to [`MAX_COMPLETIONS`] completions.
    pub completions: Vec<AttemptCompletion>,
}

/// One attempt's completion within a [`CompleteManyRequest`].
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AttemptCompletion {
    /// The attempt.
    pub attempt_id: Uuid,
    /// The attempt's fencing token, as handed out (opaque: any other string holds nothing).
    #[serde(deserialize_with = "opaque_lease_token")]
    #[schema(value_type = String)]
    pub lease_token: Uuid,
    /// The activity version read with the task (informational; the engine keeps its own).
    #[serde(default)]
    pub read_version: Option<i64>,
    /// The result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    /// Or the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<WorkerError>,
}

/// Answer to [`CompleteManyRequest`]: one entry per completion, in the order sent.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CompleteManyResponse {
    /// Each completion's answer.
    pub results: Vec<CompletionAnswer>,
}

/// How one completion of a [`CompleteManyRequest`] was answered: an `outcome`, or the
/// `status` and `error` the single-attempt endpoint would have answered (409 `lease_lost`,
/// 422 `contract_violation`, 404 `not_found`, 400 `invalid_request`, ...).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CompletionAnswer {
    /// The attempt.
    pub attempt_id: Uuid,
    /// `won`, `lost` or `recorded`, when the completion was accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<CompletionOutcome>,
    /// The HTTP status the single-attempt endpoint would have answered, with `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why the completion was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// Body of a contract registration.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ContractRequest {
    /// The activity.
    pub activity: String,
    /// A JSON Schema every result must satisfy: an object, or a boolean schema.
    #[schema(schema_with = json_schema)]
    pub output_schema: Value,
}

/// Answer to a contract registration.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ContractResponse {
    /// Names the schema; certifications refer to it.
    pub contract_hash: String,
}

/// Body of a certification report.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CertificationRequest {
    /// The activity.
    pub activity: String,
    /// The provider that was tested.
    pub provider: String,
    /// The contract it was tested against.
    pub contract_hash: String,
    /// Whether every case passed.
    pub passed: bool,
    /// What was run.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub report: Option<Value>,
}

/// `{"attempts": [...]}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StuckList {
    /// Oldest first.
    pub attempts: Vec<StuckAttempt>,
}

/// Body of an operator cancel.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CancelAttemptRequest {
    /// Why; recorded on the attempt and in the job's history.
    pub reason: String,
}

/// Body of a resume (`POST /v1/jobs/{id}/resume`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ResumeJobRequest {
    /// Why the job is resumed (required, not blank); recorded in the job's history.
    pub reason: String,
}

/// Body of a token request.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TokenRequest {
    /// The owner the token acts for (`*` for platform workers).
    pub owner: String,
    /// `client`, `worker`, `operator` or `admin`.
    pub role: String,
}

/// The body of `PUT /v1/schedules/{name}`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ScheduleRequestBody {
    /// With seconds: `sec min hour day-of-month month day-of-week [year]`, e.g.
    /// `0 */5 * * * *`; a 5-field expression (no seconds) fires at second 0.
    pub cron: String,
    /// An IANA time zone name; defaults to `UTC`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// The `POST /v1/jobs` body every tick submits.
    #[schema(value_type = JobRequestBody)]
    pub job: Value,
    /// Defaults to `skip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<crate::model::Overlap>,
    /// Defaults to 300; at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catchup_window_s: Option<u64>,
    /// Defaults to `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

/// `{"schedules": [...]}`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ScheduleList {
    /// By name.
    pub schedules: Vec<crate::model::ScheduleView>,
}

/// `{"events": [...]}` of a schedule.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ScheduleEventList {
    /// Newest last; at most the latest `limit` (default 100).
    pub events: Vec<crate::model::ScheduleEvent>,
}

/// `GET /v1/whoami`: who the bearer token acts for and what it may do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WhoAmI {
    /// The owner the token acts for (`*` for platform workers).
    pub owner: String,
    /// `client`, `worker`, `operator` or `admin`.
    pub role: crate::model::Role,
}

/// The latest certification run of one provider against one contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProviderCertification {
    /// The provider that ran the contract tests.
    pub provider: String,
    /// Whether it passed; failover to it needs a pass against the current contract.
    pub passed: bool,
    /// The test run's report, as the worker sent it.
    #[schema(value_type = Object)]
    pub report: Value,
    /// When it was recorded.
    pub recorded_at: chrono::DateTime<chrono::Utc>,
}

/// A registered output contract with each provider's latest certification for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ContractSummary {
    /// The owner the contract belongs to (`*`: every owner's jobs use it unless they have their own).
    pub owner: String,
    /// The activity whose results it constrains.
    pub activity: String,
    /// Names the schema; certifications refer to it.
    pub contract_hash: String,
    /// The JSON Schema every committed result must satisfy (an object, or a boolean
    /// schema).
    #[schema(schema_with = json_schema)]
    pub output_schema: Value,
    /// When the contract was (last) registered.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Whether it is the owner's current contract for the activity (the most recently
    /// registered); certifications of other contracts no longer count.
    pub current: bool,
    /// The latest certification of each provider against this contract, by provider name.
    pub certifications: Vec<ProviderCertification>,
}

/// `{"contracts": [...]}`: by owner and activity, the current contract first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ContractList {
    /// The contracts visible to the token.
    pub contracts: Vec<ContractSummary>,
}

/// Reads a lease token sent back by a client. A lease token is an opaque string to
/// clients: one that is not a token the engine could have handed out becomes the nil
/// UUID, which no attempt ever holds (tokens are random), so it is refused exactly as a
/// wrong token is (`lease_lost`), after the attempt's existence is checked (`not_found`).
pub fn opaque_lease_token<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Uuid, D::Error> {
    let text = String::deserialize(deserializer)?;
    Ok(Uuid::parse_str(&text).unwrap_or(Uuid::nil()))
}

/// The OpenAPI schema of a JSON Schema: an object, or a boolean schema (`true` accepts
/// every result, `false` none).
fn json_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
    Schema::OneOf(
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Object))
            .item(ObjectBuilder::new().schema_type(Type::Boolean))
            .description(Some("A JSON Schema: an object, or a boolean schema."))
            .build(),
    )
}
